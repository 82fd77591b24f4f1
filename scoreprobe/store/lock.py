"""One writer per store: an advisory lock file beside the store, `<name>.scoreprobe-lock`.

The lock is a `fcntl.flock` on that file, so the kernel drops it when its owner dies (even by
SIGKILL): a lock file left by a crash is stale by construction and the next writer simply takes
it over. The file records the owner's pid, host and start time for the refusal message. The lock
is taken before anything is created, so it covers store creation too; a second writer gets a
one-line StoreError and touches nothing.
"""
import datetime
import errno
import fcntl
import json
import os
import socket
import tempfile
from pathlib import Path

from scoreprobe.errors import StoreError

_HINTS = {errno.ENOSPC: "the disk is full: free some space and rerun, it resumes from the steps committed so far",
          errno.EDQUOT: "the disk quota is exceeded: free some space and rerun, it resumes",
          errno.EROFS: "the file system is read-only: choose another out=",
          errno.EACCES: "permission denied: choose another out=",
          errno.EPERM: "permission denied: choose another out="}


def file_system_hint(e, default):
    """What to do about the OSError `e` of a store write (a full disk, a read-only mount...)."""
    return _HINTS.get(e.errno, default)


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


class FileLock:
    """Exclusive, non-blocking advisory lock of the file `path` (fcntl.flock), which exists only while
    held and records its holder (pid, host, start) for the refusal message; a context manager.
    Subclasses say what a busy lock and an unwritable place mean (`busy`, `cannot_open`)."""

    def __init__(self, path):
        self.path = Path(path)
        self.fd = None

    def busy(self, who):
        """The exception raised when another process (`who`) holds the lock."""
        return StoreError(f"{self.path} is locked by {who}")

    def cannot_open(self, e):
        """The exception raised when the lock file cannot be made (OSError `e`)."""
        return StoreError(f"cannot make the lock file {self.path} ({e.strerror or e})")

    def acquire(self):
        """Take the lock or raise `busy(holder)`."""
        while True:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                who = _owner_text(fd)
                os.close(fd)
                raise self.busy(who) from None
            try:  # the holder may have removed the file between our open and flock: retry on the new one
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.fd = fd
        try:   # who holds it, for the refusal message only: a full disk leaves it empty ("another process")
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": stamp}).encode())
        except OSError:
            pass
        return self

    def _open(self):
        """The lock file, created with its folder if need be; `cannot_open` where the system will not
        (/proc, a read-only mount, a full disk)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise self.cannot_open(e) from e

    def release(self):
        """Remove the lock file and drop the lock (idempotent)."""
        if self.fd is None:
            return
        try:
            os.unlink(self.path)
        except OSError:   # gone already, or a file system turned read-only: the lock still drops below
            pass
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


class StoreLock(FileLock):
    """Exclusive, non-blocking writer lock of a store; use as a context manager."""

    def __init__(self, path):
        super().__init__(lock_path(path))

    def _store(self):
        return self.path.name[:-len('.scoreprobe-lock')]

    def busy(self, who):
        return StoreError(f"store {self._store()} is being written by {who}; "
                          "wait for that run to finish (one writer per store)")

    def cannot_open(self, e):
        return StoreError(f"cannot write the store {self._store()} in {self.path.parent}: its lock file cannot "
                          f"be made there ({e.strerror or e}); {file_system_hint(e, 'choose another out=')}")


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


def cannot_create(directory):
    """Why no file can be created in the existing `directory` (an OSError's text, say for /proc, a
    read-only mount or a full disk), or None when it can: a temporary file is made and removed
    (permission bits alone do not tell, for root or on a read-only mount)."""
    try:
        fd, name = tempfile.mkstemp(prefix=".scoreprobe-probe-", dir=directory)
    except OSError as e:
        return e.strerror or str(e)
    os.close(fd)
    os.unlink(name)
    return None
