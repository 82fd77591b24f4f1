"""Zarr (format 3) stores for analyses that grow one training step at a time.

A store holds one analysis of one series: every variable that depends on the training step has
`step` as its first dimension and is chunked one step per chunk, so each append writes exactly
one chunk per variable. Arrays are written from numpy (no dask), `consolidated=False`, floats
with an explicit `_FillValue` of NaN.

Crash safety. xarray appends variable by variable, so a crash can leave some arrays one step
longer than others. The global attribute `scoreprobe_steps_written` is a commit marker: it is
raised only after every variable of a step is on disk. Readers see only the committed prefix,
and `prepare_store` (called before every write) truncates any uncommitted tail, so a rerun
continues exactly where the last complete step ended.

Identity. The JSON attribute `scoreprobe_config` records what was computed (probe, arguments,
series). Writing with a different config to an existing store raises StoreError listing the
keys that differ, so results of different analyses never mix silently.

Attributes are kept strict JSON: NaN/inf global attributes are written as null and read back by
`open_store` as NaN.
"""
import datetime
import json
import logging
import shutil
import sys
from pathlib import Path

import numpy as np
import xarray as xr
import zarr

from scoreprobe.errors import StoreError

logger = logging.getLogger(__name__)

STEP_DIM = "step"
COMMIT_ATTR = "scoreprobe_steps_written"
CONFIG_ATTR = "scoreprobe_config"

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


def _history_line(command=None):
    from scoreprobe import __version__
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    command = command if command is not None else " ".join([Path(sys.argv[0]).name] + sys.argv[1:])
    return f"{stamp} scoreprobe {__version__}: {command}"


# ---------------------------------------------------------------------------------------------
# Reading and repairing
# ---------------------------------------------------------------------------------------------


def _is_store(path):
    return (Path(path) / "zarr.json").is_file()


def _open_group(path, mode="r"):
    try:
        return zarr.open_group(str(path), mode=mode, zarr_format=3)
    except Exception as e:  # zarr raises several types for unreadable stores
        raise StoreError(f"{path} is not a readable zarr format 3 store ({type(e).__name__}: {e}); "
                         "choose another --out or pass --overwrite") from e


def _step_lengths(group):
    """{array name: length along `step`} for every array that has a `step` dimension."""
    out = {}
    for name, arr in group.arrays():
        dims = arr.metadata.dimension_names or ()
        if STEP_DIM in dims:
            out[name] = arr.shape[dims.index(STEP_DIM)]
    return out


def _committed(group):
    """Number of committed steps (0 when the marker is missing, e.g. a crashed first write)."""
    n = group.attrs.get(COMMIT_ATTR)
    return int(n) if n is not None else 0


def written_steps(path):
    """Training steps already committed to the store at `path` ([] when there is no store).

    Returns
    -------
    list of int, in the order they were written.
    """
    if not _is_store(path):
        return []
    group = _open_group(path)
    n = _committed(group)
    if n == 0 or STEP_DIM not in group:
        return []
    return [int(s) for s in np.asarray(group[STEP_DIM][:n])]


def stored_config(path):
    """The `scoreprobe_config` of the store at `path` as a dict (None when absent)."""
    if not _is_store(path):
        return None
    raw = _open_group(path).attrs.get(CONFIG_ATTR)
    return json.loads(raw) if raw is not None else None


def open_store(path):
    """Open a store as an `xarray.Dataset` of lazily loaded numpy arrays (no dask), committed steps only.

    Steps are sorted ascending. Raises StoreError when `path` holds no store or when an
    interrupted write left it inconsistent (rerunning the command that wrote it repairs it).
    """
    if not _is_store(path):
        raise StoreError(f"no zarr store at {path}; run the analysis with --out {path} first")
    group = _open_group(path)
    n = _committed(group)
    lengths = _step_lengths(group)
    if len(set(lengths.values())) > 1:
        raise StoreError(f"store {path} has an interrupted write (lengths along step: {lengths}); "
                         "rerun the command that wrote it to repair it")
    ds = xr.open_zarr(str(path), chunks=None, consolidated=False, zarr_format=3)
    ds.attrs = {k: (float("nan") if v is None else v) for k, v in ds.attrs.items()}
    if STEP_DIM in ds.dims:
        ds = ds.isel(step=slice(0, n))
        if n > 1 and not ds.indexes[STEP_DIM].is_monotonic_increasing:
            ds = ds.sortby(STEP_DIM)
    return ds


def _truncate(group, n):
    """Cut every step-dimensioned array back to the first `n` steps."""
    for name, arr in group.arrays():
        dims = arr.metadata.dimension_names or ()
        if STEP_DIM in dims:
            ax = dims.index(STEP_DIM)
            if arr.shape[ax] != n:
                logger.warning("repairing %s: truncating %s from %d to %d steps", group.store, name, arr.shape[ax], n)
                arr.resize(arr.shape[:ax] + (n,) + arr.shape[ax + 1:])


def prepare_store(path, config, overwrite=False):
    """Check (or clear) the store at `path` before writing an analysis with `config`.

    Removes it when `overwrite`; refuses a store written with another config or a non-scoreprobe
    directory; truncates the uncommitted tail of an interrupted write.

    Returns
    -------
    list of int: the steps already written (to be skipped).
    """
    path = Path(path)
    if overwrite and path.exists():
        if not _is_store(path):
            raise StoreError(f"refusing to overwrite {path}: it exists but is not a zarr store")
        shutil.rmtree(path)
    if not path.exists():
        return []
    if not _is_store(path):
        raise StoreError(f"{path} exists and is not a zarr store; choose another --out")
    group = _open_group(path, mode="r+")
    n = _committed(group)
    old = group.attrs.get(CONFIG_ATTR)
    if old is None and (n > 0 or any(True for _ in group.array_keys())):
        raise StoreError(f"{path} is a zarr store not written by scoreprobe; choose another --out or pass --overwrite")
    if n > 0:
        old = json.loads(old)
        diff = config_diff(old, config)
        if diff:
            probes = (old.get("probe"), (config or {}).get("probe"))
            what = (f"{probes[0]}, not {probes[1]}" if "probe" in diff and all(probes)
                    else f"config keys differ: {', '.join(diff)}")
            raise StoreError(f"store {path} holds a different analysis ({what}); "
                             "write to another --out or pass --overwrite to replace it")
        _truncate(group, n)
    return written_steps(path)


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


def _encoding(ds):
    """One chunk per step along `step`, the full extent elsewhere; NaN fill for floats."""
    enc = {}
    for name, var in ds.variables.items():
        e = {"chunks": tuple(1 if d == STEP_DIM else max(int(s), 1) for d, s in zip(var.dims, var.shape))}
        if np.issubdtype(var.dtype, np.floating):
            e["_FillValue"] = np.nan
        enc[name] = e
    return enc


def _plain(ds):
    """A numpy-backed copy of `ds` with encodings cleared and JSON-safe attrs."""
    ds = ds.copy(deep=False).load()
    for name, var in list(ds.variables.items()):
        if var.dtype.kind == "U":  # fixed-width unicode has no zarr v3 spec; variable-length UTF-8 does
            ds[name] = var.astype(object)
    for var in ds.variables.values():
        var.encoding = {}
        var.attrs = normalize_config(dict(var.attrs))
    ds.attrs = normalize_config(dict(ds.attrs))
    return ds


def _check_compatible(path, group, ds):
    """Same variables and the same non-step coordinates as the store (xarray does not check)."""
    have = set(group.array_keys())
    want = set(ds.variables)
    if have != want:
        raise StoreError(f"cannot append to {path}: variables differ (store only: {sorted(have - want)}, "
                         f"new only: {sorted(want - have)}); write to another --out or pass --overwrite")
    for name, var in ds.variables.items():
        dims = group[name].metadata.dimension_names or ()
        if tuple(dims) != tuple(var.dims):
            raise StoreError(f"cannot append to {path}: {name} has dims {var.dims}, store has {tuple(dims)}")
        if STEP_DIM not in var.dims and name in ds.coords:
            if not np.array_equal(np.asarray(group[name][...]), var.values):
                raise StoreError(f"cannot append to {path}: coordinate {name} differs from the stored one")


def append_step(path, ds, config=None, history=None):
    """Append the step(s) of `ds` (a Dataset with a `step` dimension) to the store at `path`.

    The first write creates the store with global attrs `Conventions`, `history` and the
    config; later writes must carry the same variables and coordinates. Steps already in the
    store are refused. Call `prepare_store` first to check the config and repair crashes.

    Parameters
    ----------
    path : str or Path
    ds : xarray.Dataset with dims (step, ...); every step-dependent variable has `step` first.
    config : dict, the analysis config stored as JSON in `scoreprobe_config`.
    history : str, command recorded in `history` (default: sys.argv).
    """
    if STEP_DIM not in ds.dims:
        raise StoreError("append_step needs a Dataset with a 'step' dimension")
    path = Path(path)
    ds = _plain(ds)
    k = ds.sizes[STEP_DIM]
    new = [int(s) for s in ds[STEP_DIM].values]
    if _is_store(path) and _committed(_open_group(path)) > 0:
        group = _open_group(path, mode="r+")
        n = _committed(group)
        dup = sorted(set(new) & set(written_steps(path)))
        if dup:
            raise StoreError(f"steps {dup} are already in {path}; refusing to write them twice")
        _check_compatible(path, group, ds)
        # to_zarr replaces global attrs: keep the stored ones ("coordinates" is xarray's own bookkeeping)
        ds.attrs = {k: v for k, v in group.attrs.items() if k != "coordinates"}
        try:
            ds.to_zarr(str(path), mode="a-", append_dim=STEP_DIM, consolidated=False, write_empty_chunks=True)
        except ValueError as e:
            raise StoreError(f"cannot append to {path}: {e}") from e
    else:
        n = 0
        ds.attrs.update({"Conventions": "CF-1.11", "history": _history_line(history),
                         CONFIG_ATTR: json.dumps(normalize_config(config), sort_keys=True), COMMIT_ATTR: 0})
        # A store without committed steps is a crashed first write (prepare_store vetted it).
        mode = "w" if path.exists() else "w-"
        ds.to_zarr(str(path), mode=mode, encoding=_encoding(ds), consolidated=False, zarr_format=3,
                   write_empty_chunks=True)
    _open_group(path, mode="r+").attrs.update({COMMIT_ATTR: n + k})  # commit


def update_attrs(path, attrs):
    """Merge JSON-safe `attrs` into the global attributes of the store at `path`."""
    if not _is_store(path):
        raise StoreError(f"no zarr store at {path}")
    _open_group(path, mode="r+").attrs.update(normalize_config(dict(attrs)))


def note_history(path, command=None):
    """Append a line (timestamp, version, command) to the store's CF `history` attribute."""
    group = _open_group(path, mode="r+")
    old = group.attrs.get("history", "")
    group.attrs.update({"history": (old + "\n" if old else "") + _history_line(command)})
