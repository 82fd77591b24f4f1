"""A simulated full disk for tests: `full_disk(root, budget)` makes every file opened for writing under `root`
take at most `budget` bytes in all, then raise OSError(ENOSPC) (what a file system does when it fills
mid-write: the first bytes land); `intact(root, call)` runs `call` on it and tells whether the folder was left
as it was; `cli_on_full_disk` runs the CLI in-process on it (tests/abuse53_writes.py uses them)."""
import builtins
import contextlib
import errno
import os
from pathlib import Path

import abuse_issue53

LOCK = ".scoreprobe-train-lock"   # a run's lock file: empty by design, there only while a trainer holds it


class _FullFile:
    """A file object whose writes share one byte budget; past it, the bytes that fit land and ENOSPC is raised."""

    def __init__(self, f, budget):
        self._f, self._budget = f, budget

    def write(self, data):
        room = self._budget[0]
        if len(data) > room:
            if room:
                self._f.write(data[:room])
                self._f.flush()
            self._budget[0] = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._budget[0] -= len(data)
        return self._f.write(data)

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __iter__(self):
        return iter(self._f)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


@contextlib.contextmanager
def full_disk(root, budget=0, code=errno.ENOSPC):
    """Within: files opened for writing (builtins.open: Python, matplotlib, Pillow, torch.save through a
    file object) under `root` share `budget` bytes, then raise OSError(`code`)."""
    real, root, left = builtins.open, Path(root).resolve(), [budget]

    def fake(file, mode="r", *args, **kw):
        f = real(file, mode, *args, **kw)
        writing = any(c in mode for c in "wax+")
        if writing and isinstance(file, (str, bytes, os.PathLike)) and \
                Path(os.fsdecode(file)).resolve().is_relative_to(root):
            f = _FullFile(f, left)
            if code != errno.ENOSPC:
                f.write = _raising(code)
        return f
    builtins.open = fake
    try:
        yield
    finally:
        builtins.open = real


def _raising(code):
    def write(data):
        raise OSError(code, os.strerror(code))
    return write


def snapshot(root):
    """{relative path: bytes} of every file under `root` (a run's lock file left out)."""
    root = Path(root)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != LOCK}


class DamagedFiles(str):
    """What `intact` returns when a failed write damaged the folder (classified as a silent wrong result)."""


def damage(root, before, appended=()):
    """'' when every file of `before` is as it was (the files named in `appended` may have grown, their old
    bytes first) and no file appeared; else what differs."""
    after = snapshot(root)
    lost = [k for k, v in before.items() if after.get(k) != v
            and not (k in appended and after.get(k, b"").startswith(v))]
    new = sorted(set(after) - set(before))
    return "; ".join(x for x in (f"changed or lost: {lost}" if lost else "", f"appeared: {new}" if new else "") if x)


def intact(root, call, budget=0, appended=(), code=errno.ENOSPC):
    """Run `call()` on a full disk under `root` (budget None: not full): its error re-raised when `root` is as
    it was, else DamagedFiles."""
    before = snapshot(root)
    try:
        with full_disk(root, budget, code) if budget is not None else contextlib.nullcontext():
            result = call()
    except Exception:
        what = damage(root, before, appended)
        if what:
            return DamagedFiles(what)
        raise
    return result


def cli_on_full_disk(root, argv, budget=0):
    """(exit code, stdout, stderr, damage) of `scoreprobe -q ARGV` run on a full disk under `root`."""
    before = snapshot(root)
    with full_disk(root, budget):
        code, out, err = abuse_issue53.cli(argv)
    return code, out, err, damage(root, before)


def one_clean_line(what):
    """An `answer` check: the CLI ended in exit 2 with one `error:` line matching `what`, nothing damaged."""
    def check(work, result):
        code, _, err, hurt = result
        assert abuse_issue53._one_error_line(code, err), f"exit {code}: {err}"
        assert what in err, err
        assert not hurt, hurt
    return check
