"""One writer per store: an advisory lock file beside the store, `<name>.scoreprobe-lock`.

The lock is a `fcntl.flock` on that file, so the kernel drops it when its owner dies (even by
SIGKILL): a lock file left by a crash is stale by construction and the next writer simply takes
it over. The file records the owner's pid, host and start time for the refusal message. The lock
is taken before anything is created, so it covers store creation too; a second writer gets a
one-line StoreError and touches nothing.
"""
import datetime
import fcntl
import json
import os
import socket
from pathlib import Path

from scoreprobe.errors import StoreError


def lock_path(path):
    """The lock file of the store at `path` (a sibling, so it exists before the store does)."""
    path = Path(path)
    return path.parent / f"{path.name}.scoreprobe-lock"


def _owner_text(fd):
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        info = json.loads(os.read(fd, 4096).decode() or "{}")
        return f"pid {info.get('pid')} on {info.get('host')} since {info.get('since')}"
    except (OSError, ValueError):
        return "another process"


class StoreLock:
    """Exclusive, non-blocking writer lock of a store; use as a context manager."""

    def __init__(self, path):
        self.path = lock_path(path)
        self.fd = None

    def acquire(self):
        """Take the lock or raise StoreError naming its holder (pid, host)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                who = _owner_text(fd)
                os.close(fd)
                raise StoreError(f"store {self.path.name[:-len('.scoreprobe-lock')]} is being written by {who}; "
                                 "wait for that run to finish (one writer per store)") from None
            try:  # the holder may have removed the file between our open and flock: retry on the new one
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": stamp}).encode())
        self.fd = fd
        return self

    def release(self):
        """Remove the lock file and drop the lock (idempotent)."""
        if self.fd is None:
            return
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def holder(path):
    """Who holds the lock of the store at `path` ('pid P on H since T'), or None when it is free."""
    lp = lock_path(path)
    try:
        fd = os.open(lp, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None
    except BlockingIOError:
        return _owner_text(fd)
    finally:
        os.close(fd)
