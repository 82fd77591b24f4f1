"""The commit record of a store: its root `zarr.json`, rewritten atomically after every step.

A store's published state is its root metadata: the global attributes (config, history, the
number of committed steps, the checksums) and zarr's consolidated metadata (every array's shape
at the last commit). Appending a step first resizes and writes every array, then replaces the
root `zarr.json` in one `os.replace`. Plain readers (`xr.open_zarr`) use the consolidated
metadata, so until the replace they keep seeing the previous, consistent store; a writer killed
anywhere leaves the last commit intact, and `restore_arrays` puts the arrays' own metadata back
to it before the next write.

Whole stores are replaced the same way: a new store is written beside the old one as
`<name>.scoreprobe-new` and swapped into place when complete (an atomic directory exchange on
Linux, else two renames through `<name>.scoreprobe-old`). `clean_leftovers` finishes or discards
what a crash left of either (after an exchange, `-new` holds the old store: removing it is right).
"""
import ctypes
import errno
import json
import os
import shutil
from pathlib import Path

from scoreprobe.atomic import atomic_write_text
from scoreprobe.errors import StoreError

STEP_DIM = "step"


def sibling(path, tag):
    """`<path>.scoreprobe-<tag>`: the new store ('new'), the old one during a swap ('old')."""
    path = Path(path)
    return path.parent / f"{path.name}.scoreprobe-{tag}"


def write_text_atomic(file, text):
    """Write `text` (UTF-8) to `file` through scoreprobe.atomic (a fresh `.<name>.<random>.tmp` beside it, fsync,
    `os.replace`): never half-written; a failure (a full disk: an OSError naming `file`) leaves `file` as it was
    and no temporary file."""
    atomic_write_text(file, text)


def write_json_atomic(file, obj):
    """Write JSON to `file` atomically (see `write_text_atomic`)."""
    write_text_atomic(file, json.dumps(obj, indent=2, allow_nan=False))


def read_json(file):
    """Parsed JSON of `file`; StoreError when it is unreadable."""
    try:
        with open(file) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise StoreError(f"{file} is unreadable ({type(e).__name__}: {e}); "
                         "choose another out= or pass overwrite=True") from e


def disk_metas(path):
    """{name: array metadata} as the arrays' own zarr.json files say now."""
    out = {}
    for d in sorted(Path(path).iterdir()):
        meta_file = d / "zarr.json"
        if d.is_dir() and meta_file.is_file():
            meta = read_json(meta_file)
            if meta.get("node_type") == "array":
                out[d.name] = meta
    return out


def committed_metas(path, root):
    """{name: array metadata} of the last commit (consolidated), else of the arrays on disk (stores
    written before consolidation)."""
    cons = root.get("consolidated_metadata") or {}
    if cons.get("metadata") is not None:
        return cons["metadata"]
    return disk_metas(path)


def step_axis(meta):
    """Index of `step` in the array's dimension names, or None."""
    dims = meta.get("dimension_names") or ()
    return list(dims).index(STEP_DIM) if STEP_DIM in dims else None


def commit(path, attrs, metas):
    """Publish arrays with metadata `metas` (as on disk now) and global `attrs`: one atomic root rewrite."""
    root = {"zarr_format": 3, "node_type": "group", "attributes": attrs,
            "consolidated_metadata": {"kind": "inline", "must_understand": False, "metadata": metas}}
    write_json_atomic(Path(path) / "zarr.json", root)


def _is_stray(file):
    """A temporary file of a killed write: ours (scoreprobe.atomic's .<name>.<random>.tmp, or .<name>.<pid>.tmp of
    stores written before it) or zarr's (*.partial)."""
    name = file.name
    return file.is_file() and (name.endswith(".partial") or (name.startswith(".") and name.endswith(".tmp")))


def missing_arrays(path, metas):
    """Names of committed arrays whose metadata file is gone (their folder deleted by hand, say)."""
    return [name for name in metas if not (Path(path) / name / "zarr.json").is_file()]


def restore_arrays(path, metas):
    """Put every array's zarr.json back to the committed `metas` (recreating the folder of an array
    that was deleted: its chunks are then missing, which the checksums report), delete chunk files
    of steps beyond the commit and temporary files (what a killed write left). Returns the names
    repaired."""
    fixed = [f.name for f in Path(path).rglob("*") if _is_stray(f)]
    for f in Path(path).rglob("*"):
        if _is_stray(f):
            f.unlink()
    for name, meta in metas.items():
        file = Path(path) / name / "zarr.json"
        file.parent.mkdir(exist_ok=True)
        try:
            current = json.loads(file.read_text())
        except (OSError, ValueError):
            current = None
        if current != meta:
            write_json_atomic(file, meta)
            fixed.append(name)
        if step_axis(meta) == 0:
            chunks = Path(path) / name / "c"
            for c in (chunks.iterdir() if chunks.is_dir() else ()):
                if c.name.isdigit() and int(c.name) >= meta["shape"][0]:
                    shutil.rmtree(c) if c.is_dir() else c.unlink()
                    fixed.append(name)
    return sorted(set(fixed))


def _exchange(a, b):
    """Atomically exchange two directories (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.ENOTSUP):  # e.g. a file system without it
        return False
    raise OSError(err, f"cannot swap {a} and {b}: {os.strerror(err)}")


def swap_in(new, path):
    """Move the complete store `new` to `path`, replacing what is there (an old store or an empty
    or partial directory). Where possible the two are exchanged atomically (readers never find
    `path` missing) and the old one, now at `new`, is removed; otherwise the old one is moved to
    `<name>.scoreprobe-old` first and removed once the new one is in place."""
    path = Path(path)
    if path.exists() and _exchange(new, path):
        shutil.rmtree(new)
        return
    old = sibling(path, "old")
    if path.exists():
        os.rename(path, old)
    os.rename(new, path)
    if old.exists():
        shutil.rmtree(old)


def clean_leftovers(path, keep_new=False):
    """Finish an interrupted swap, or remove the unfinished new store of a crashed run (unless
    `keep_new`: the caller decides whether to resume it).

    Returns a description of what was done (None when there was nothing)."""
    path = Path(path)
    new, old = sibling(path, "new"), sibling(path, "old")
    if old.exists() and not path.exists() and new.exists():  # killed between the two renames
        os.rename(new, path)
        shutil.rmtree(old)
        return f"finished replacing {path} (interrupted swap)"
    if old.exists() and not path.exists():  # never lose the only complete copy
        os.rename(old, path)
        return f"restored {path} from {old.name}"
    if old.exists():
        shutil.rmtree(old)
        return f"removed {old.name} left by an interrupted swap"
    if new.exists() and not keep_new:
        shutil.rmtree(new)
        return f"removed {new.name}, the unfinished store of an interrupted run"
    return None
