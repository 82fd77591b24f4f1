"""The store's format on disk: attribute names, the config that identifies a store, reading,
verifying and repairing helpers. `StoreWriter` (`scoreprobe.store.writer`) and the one-call API
(`scoreprobe.store`) are built on these; see the package docstring for the design.
"""
import datetime
import json
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import xarray as xr
import zarr

from scoreprobe.store.versions import equivalent
from scoreprobe.store import check, commit
from scoreprobe.errors import StoreError, StoreRepairWarning, user_stacklevel
from scoreprobe.store.lock import cannot_create, holder


STEP_DIM = "step"
COMMIT_ATTR = "scoreprobe_steps_written"
CONFIG_ATTR = "scoreprobe_config"
RECORD_ATTR = "scoreprobe_record"

# ---------------------------------------------------------------------------------------------
# Config and attributes
# ---------------------------------------------------------------------------------------------


def normalize_config(config):
    """Return `config` as it reads back from JSON (tuples -> lists, numpy scalars -> python)."""
    def default(o):
        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, Path):
            return str(o)
        raise TypeError(f"config value {o!r} of type {type(o).__name__} is not JSON-serializable")
    try:
        out = json.loads(json.dumps(config if config is not None else {}, default=default, sort_keys=True))
    except TypeError as e:
        raise StoreError(f"analysis config cannot be stored as JSON: {e}") from e
    return _nan_to_none(out)


def _nan_to_none(obj):
    """Strict JSON has no NaN/inf: they are stored as null (open_store maps null attrs back to NaN)."""
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _nan_to_none(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_nan_to_none(v) for v in obj]
    return obj


def _flatten(d, prefix=""):
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def config_diff(old, new):
    """Dotted keys whose values differ between two (nested) config dicts, sorted."""
    a, b = _flatten(normalize_config(old)), _flatten(normalize_config(new))
    return sorted(k for k in set(a) | set(b) if a.get(k, "<missing>") != b.get(k, "<missing>"))


def config_json(config):
    """The config as stored in `scoreprobe_config` (sorted JSON)."""
    return json.dumps(normalize_config(config), sort_keys=True)


def history_line(command=None):
    """'<UTC time> scoreprobe <version>: <command>' (default command: sys.argv)."""
    from scoreprobe import __version__
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    command = command if command is not None else " ".join([Path(sys.argv[0]).name] + sys.argv[1:])
    return f"{stamp} scoreprobe {__version__}: {command}"


# ---------------------------------------------------------------------------------------------
# Paths and what is at them
# ---------------------------------------------------------------------------------------------


def resolve_path(path):
    """`path` as a Path, a symbolic link followed to its target; StoreError for a dangling link."""
    p = Path(path)
    if p.is_symlink():
        if not p.exists():
            raise StoreError(f"the store path {p} is a symbolic link to {os.readlink(p)}, which does not exist; "
                             "create its target or choose another out=")
        p = Path(os.path.realpath(p))
    return p


def committed(root):
    """Number of committed steps in a root metadata dict (0 without the marker)."""
    n = (root.get("attributes") or {}).get(COMMIT_ATTR)
    if n is None:
        return 0
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise StoreError(f"the store's commit marker {COMMIT_ATTR} is {n!r}, not a step count: the store is "
                         "damaged; write to another out= or pass overwrite=True to replace it")
    return n


def inspect(path, overwrite=False):
    """What is at `path`: ('absent' | 'empty' | 'partial' | 'store', root metadata or None).

    'empty' is an empty directory and 'partial' a scoreprobe store without committed steps (a
    write killed before its first step): both are replaced by the next write. With `overwrite`,
    a zarr store not written by scoreprobe counts as 'store' (it will be replaced). Raises
    StoreError for a file, a directory that is not a zarr store, or a foreign store."""
    path = Path(path)
    if not path.exists():
        return "absent", None
    if not path.is_dir():
        raise StoreError(f"{path} is a file, not a zarr store; choose another out=")
    if not (path / "zarr.json").is_file():
        if not any(path.iterdir()):
            return "empty", None
        raise StoreError(f"{path} exists and is not a zarr store (refusing to replace it); choose another out=")
    root = commit.read_json(path / "zarr.json")
    attrs = root.get("attributes") or {}
    if CONFIG_ATTR not in attrs:
        if overwrite:
            return "store", root
        if root.get("node_type") != "group" or any(True for _ in commit.disk_metas(path)):
            raise StoreError(f"{path} is a zarr store not written by scoreprobe; choose another out= "
                             "or pass overwrite=True")
        return "partial", root
    return ("store" if committed(root) > 0 else "partial"), root


def _root(path):
    path = resolve_path(path)
    return path, (commit.read_json(path / "zarr.json") if (path / "zarr.json").is_file() else None)


# ---------------------------------------------------------------------------------------------
# Reading and checking
# ---------------------------------------------------------------------------------------------


def written_steps(path):
    """Training steps committed to the store at `path`, in write order ([] when there is none)."""
    path, root = _root(path)
    if root is None or committed(root) == 0:
        return []
    record = (root.get("attributes") or {}).get(RECORD_ATTR)
    if record and record.get("steps") is not None:
        return [int(s) for s in record["steps"]]
    group = zarr.open_group(str(path), mode="r", zarr_format=3, use_consolidated=False)
    return [int(s) for s in np.asarray(group[STEP_DIM][:committed(root)])] if STEP_DIM in group else []


def stored_config(path):
    """The `scoreprobe_config` of the store at `path` as a dict (None when absent)."""
    path, root = _root(path)
    raw = (root or {}).get("attributes", {}).get(CONFIG_ATTR)
    return _parse_config(path, raw) if raw is not None else None


def _parse_config(path, raw):
    """The JSON `scoreprobe_config` text as a dict, or StoreError naming the damaged store."""
    try:
        config = json.loads(raw)
    except (TypeError, ValueError):
        config = None
    if not isinstance(config, dict):
        raise StoreError(f"store {path}: its {CONFIG_ATTR} attribute is not a JSON object (the store is "
                         "damaged); write to another out= or pass overwrite=True to replace it")
    return config


def check_config(path, root, config):
    """StoreError when the store's config differs from `config` (naming the differing keys)."""
    old = _parse_config(path, (root.get("attributes") or {}).get(CONFIG_ATTR) or "{}")
    diff = config_diff(old, config)
    if "definitions" in diff and equivalent(old.get("definitions"), old, (config or {}).get("definitions")):
        diff.remove("definitions")   # versions apart only in the engine, which this store did not use
    if diff:
        probes = (old.get("probe"), (config or {}).get("probe"))
        what = (f"{probes[0]}, not {probes[1]}" if "probe" in diff and all(probes)
                else f"config keys differ: {', '.join(_readable_diff(old, config or {}, diff))}")
        raise StoreError(f"store {path} holds a different analysis ({what}); "
                         "write to another out= or pass overwrite=True to replace it")


_SOURCE_KINDS = {"mapping": "a {step: denoiser} mapping", "denoiser": "one denoiser", "series": "a checkpoint series"}


def _readable_diff(old, new, diff):
    """The dotted keys of `diff` as a user reads them: a source of another type is one phrase (not
    the keys one kind of source records and the other does not, such as source.rule.* of a series
    next to a mapping), and a subtree present on one side only is named once."""
    a, b = _flatten(normalize_config(old)), _flatten(normalize_config(new))
    out = []
    src_old, src_new = ((c.get("source") or {}).get("type") if isinstance(c.get("source"), dict) else None
                        for c in (old, new))
    if src_old != src_new and any(k.startswith("source.") for k in diff):
        out.append(f"source (the store measured {_SOURCE_KINDS.get(src_old, src_old)}, this is "
                   f"{_SOURCE_KINDS.get(src_new, src_new)})")
        diff = [k for k in diff if not k.startswith("source.")]
    for key in diff:
        parts = key.split(".")
        for i in range(1, len(parts)):   # the shortest prefix that one side lacks entirely
            prefix = ".".join(parts[:i])
            if not any(k.startswith(prefix + ".") for k in a) or not any(k.startswith(prefix + ".") for k in b):
                key = prefix
                break
        if key not in out:
            out.append(key)
    return out


def verify(path, static=True):
    """{index: [arrays]} of committed steps whose chunks fail their checksums (steps written
    before checksums are not checked). StoreError when step-free data (coordinates) are damaged
    (not checked with `static=False`)."""
    path, root = _root(path)
    record = (root or {}).get("attributes", {}).get(RECORD_ATTR)
    if not record:
        return {}
    metas = commit.committed_metas(path, root)
    bad_static = check.damaged_static(path, record.get("static")) if static else []
    if bad_static:
        raise StoreError(f"store {path} has damaged step-independent data ({', '.join(bad_static)}); "
                         "rerun what wrote it with overwrite=True")
    step_arrays = [n for n, m in metas.items() if commit.step_axis(m) == 0]
    return check.damaged_steps(path, metas, step_arrays, record.get("digests") or [])


def open_store(path):
    """Open a store as an `xarray.Dataset` of lazily loaded numpy arrays (no dask), committed steps only.

    Steps are sorted ascending. Raises StoreError when `path` holds no store, when checksums show
    damaged data (rerunning the command that wrote it recomputes them) or when a store written
    before commit records has an interrupted write.
    """
    from scoreprobe.atomic import check_path_text
    try:
        path, root = _root(check_path_text(path, "open_store: path"))
    except OSError as e:          # a name too long, a loop of links, a folder that may not be read
        raise StoreError(f"cannot read the store {str(path)[:80]}: {e.strerror or e}") from None
    if root is None:
        raise StoreError(f"no zarr store at {path}; run the analysis with out={str(path)!r} first")
    bad = verify(path)
    if bad:
        steps = written_steps(path)
        raise StoreError(f"store {path} has damaged data at steps {sorted(steps[i] for i in bad)}; "
                         "rerun the command that wrote it to recompute them")
    consolidated = (root.get("consolidated_metadata") or {}).get("metadata") is not None
    n = committed(root)
    if not consolidated:
        group = zarr.open_group(str(path), mode="r", zarr_format=3, use_consolidated=False)
        lengths = _step_lengths(group)
        if len(set(lengths.values())) > 1:
            raise StoreError(f"store {path} has an interrupted write (lengths along step: {lengths}); "
                             "rerun the command that wrote it to repair it")
    ds = xr.open_zarr(str(path), chunks=None, consolidated=consolidated, zarr_format=3)
    ds.attrs = {k: (float("nan") if v is None else v) for k, v in ds.attrs.items() if k != RECORD_ATTR}
    if STEP_DIM in ds.dims:
        ds = ds.isel(step=slice(0, n))
        if n > 1 and not ds.indexes[STEP_DIM].is_monotonic_increasing:
            ds = ds.sortby(STEP_DIM)
    return ds


def _step_lengths(group):
    """{array name: length along `step`} for every array that has a `step` dimension."""
    out = {}
    for name, arr in group.arrays():
        dims = arr.metadata.dimension_names or ()
        if STEP_DIM in dims:
            out[name] = arr.shape[dims.index(STEP_DIM)]
    return out


def truncate(group, n):
    """Cut every step-dimensioned array back to the first `n` steps (stores without commit records)."""
    for name, arr in group.arrays():
        dims = arr.metadata.dimension_names or ()
        if STEP_DIM in dims:
            ax = dims.index(STEP_DIM)
            if arr.shape[ax] != n:
                warnings.warn(f"repairing {group.store}: an interrupted write left {name} with {arr.shape[ax]} "
                              f"steps; truncating it to the {n} committed ones", StoreRepairWarning,
                              stacklevel=user_stacklevel())
                arr.resize(arr.shape[:ax] + (n,) + arr.shape[ax + 1:])


def check_writable(path, config=None, overwrite=False):
    """Cheap check, before computing, that an analysis can be written to `path`; changes nothing.

    Raises StoreError when another process is writing the store, `path` is a dangling symlink, a
    file, a non-store directory, a foreign store (without `overwrite`), a store holding another
    config (without `overwrite`; only checked when `config` is given), or not writable.

    Returns
    -------
    list of int: the steps a run would skip ([] with `overwrite` or for a new store).
    """
    path = resolve_path(path)
    who = holder(path)
    if who:
        raise StoreError(f"store {path} is being written by {who}; wait for that run to finish (one writer per store)")
    parent = next((p for p in [path.parent, *path.parent.parents] if p.exists()), Path("/"))
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise StoreError(f"cannot create {path}: {parent} is not a writable directory")
    why = cannot_create(parent)
    if why:
        raise StoreError(f"cannot create {path}: {parent} does not take new files ({why}); choose another out=")
    state, root = inspect(path, overwrite=overwrite)
    if state != "store" or overwrite:
        return []
    if config is not None:
        check_config(path, root, normalize_config(config))
    return written_steps(path)


# ---------------------------------------------------------------------------------------------
# Writing helpers and the one-call API (a sweep holds one StoreWriter instead)
# ---------------------------------------------------------------------------------------------


def encoding(ds):
    """One chunk per step along `step`, the full extent elsewhere; NaN fill for floats."""
    enc = {}
    for name, var in ds.variables.items():
        e = {"chunks": tuple(1 if d == STEP_DIM else max(int(s), 1) for d, s in zip(var.dims, var.shape))}
        if np.issubdtype(var.dtype, np.floating):
            e["_FillValue"] = np.nan
        enc[name] = e
    return enc


def plain(ds):
    """A numpy-backed copy of `ds` with encodings cleared and JSON-safe attrs; StoreError when a
    step-dependent variable does not have `step` first."""
    ds = ds.copy(deep=False).load()
    for name, var in list(ds.variables.items()):
        if STEP_DIM in var.dims and var.dims[0] != STEP_DIM:
            raise StoreError(f"variable {name} has dims {var.dims}; `step` must come first")
        if var.dtype.kind == "U":  # fixed-width unicode has no zarr v3 spec; variable-length UTF-8 does
            ds[name] = var.astype(object)
    for var in ds.variables.values():
        var.encoding = {}
        var.attrs = normalize_config(dict(var.attrs))
    ds.attrs = normalize_config(dict(ds.attrs))
    return ds


def check_compatible(path, group, ds):
    """Same variables and the same non-step coordinates as the store (xarray does not check)."""
    have = set(group.array_keys())
    want = set(ds.variables)
    if have != want:
        raise StoreError(f"cannot append to {path}: variables differ (store only: {sorted(have - want)}, "
                         f"new only: {sorted(want - have)}); write to another out= or pass overwrite=True")
    for name, var in ds.variables.items():
        dims = group[name].metadata.dimension_names or ()
        if tuple(dims) != tuple(var.dims):
            raise StoreError(f"cannot append to {path}: {name} has dims {var.dims}, store has {tuple(dims)}")
        if STEP_DIM not in var.dims and name in ds.coords:
            if not np.array_equal(np.asarray(group[name][...]), var.values):
                raise StoreError(f"cannot append to {path}: coordinate {name} differs from the stored one")
