"""Replacing a file atomically: every file scoreprobe writes whole (checkpoints, run.json, figures, GIFs, MP4s,
HTML pages, TensorBoard event files) goes through here.

The protocol: write a temporary file in the same folder (a fresh name, created exclusively, so concurrent
writers never share one), flush and fsync it, then `os.replace` it over the target and fsync the folder.
A kill at any moment leaves the old file or the new one, whole; a failure (a full disk, a write error in a
plotting library) removes the temporary file and leaves the target exactly as it was: never truncated,
never a 0-byte file. A full disk (ENOSPC, EDQUOT) is re-raised as OSError naming the target file.

A leaf module (the standard library and scoreprobe.errors only): stores, training, viz and reports all import it.
"""
import contextlib
import errno
import os
import secrets
from pathlib import Path

from scoreprobe.errors import ConfigError

FULL_DISK = (errno.ENOSPC, errno.EDQUOT)


def check_path_text(path, what="out"):
    """The Path of `path`; ConfigError (naming `what`) for one no OS call takes: not a path, empty, a NUL byte."""
    try:
        text = os.fspath(path)
    except TypeError:
        raise ConfigError(f"{what} must be a path, got {type(path).__name__}") from None
    raw = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    if not raw:
        raise ConfigError(f"{what} is an empty path")
    if b"\0" in raw:
        raise ConfigError(f"{what} {os.fsdecode(text)[:60]!r} contains a NUL byte")
    return Path(os.fsdecode(text))


def check_out_path(path, what="out"):
    """The Path of an output file `path`; ConfigError (naming `what`) for one the OS cannot take: not a path,
    empty, with a NUL byte, an existing folder, or below a file. Call it before any work."""
    p = check_path_text(path, what)
    if p.is_dir():
        raise ConfigError(f"{what} {p} is a folder, not a file")
    above = p.absolute().parent
    while not above.exists() and above.parent != above:
        above = above.parent
    if not above.is_dir():
        raise ConfigError(f"{what} {p}: {above} is not a folder")
    return p


def fsync_dir(folder):
    """fsync a folder (a rename in it is durable); a file system that refuses is left as it is."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _temp_file(path, keep_suffix):
    """(fd, Path) of a new, empty, exclusively created file beside `path`, named `.<name>.<random>.tmp` (what
    a run directory's and a store's clean-up of a killed write removes), `keep_suffix`: with the target's
    suffix after it (for a writer, ffmpeg, that takes the format from the name)."""
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp{path.suffix if keep_suffix else ''}")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp   # the umask applies
        except FileExistsError:
            continue


def full_disk_error(e, path):
    """For a full-disk OSError `e`: one naming `path` (its own filename may be a temporary one, or none), to
    raise from it; None for any other error (raise it as it is)."""
    if isinstance(e, OSError) and e.errno in FULL_DISK:
        return OSError(e.errno, os.strerror(e.errno), os.fspath(path))
    return None


@contextlib.contextmanager
def atomic_path(path, keep_suffix=False):
    """Context giving a temporary path beside `path` to write by name (savefig and Pillow with the format
    given, ffmpeg with `keep_suffix`); on a clean exit it is fsynced and replaces `path`, on an error it is
    removed and `path` left as it was."""
    path = Path(path)
    fd, tmp = _temp_file(path, keep_suffix)
    os.close(fd)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        named = full_disk_error(e, path)
        if named is not None:
            raise named from e
        raise
    fsync_dir(path.parent)


def atomic_write(path, write, mode="wb"):
    """Replace `path` by what `write(f)` writes to a file object opened with `mode` ("wb", or "w": UTF-8 text)
    through the protocol above; returns the Path."""
    path = Path(path)
    with atomic_path(path) as tmp:
        with open(tmp, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            write(f)                  # closed (flushed) here; atomic_path fsyncs the file before the rename
    return path


def atomic_write_text(path, text):
    """Replace `path` by `text` (UTF-8) atomically; returns the Path."""
    return atomic_write(path, lambda f: f.write(text), "w")


def atomic_write_bytes(path, data):
    """Replace `path` by the bytes `data` atomically; returns the Path."""
    return atomic_write(path, lambda f: f.write(data))
