"""Zarr (format 3) stores for analyses that grow one training step at a time.

A store holds one analysis of one series: every variable that depends on the training step has
`step` as its first dimension and is chunked one step per chunk, so each append writes exactly
one chunk per variable. Arrays are written from numpy (no dask), floats with an explicit
`_FillValue` of NaN.

Crash safety and readers (`store.commit`). Every append writes all arrays, then publishes the step
by atomically rewriting the root metadata (consolidated metadata, the step count
`scoreprobe_steps_written` and the commit record `scoreprobe_record`: steps and per-step, per-array
checksums). Plain `xr.open_zarr` readers therefore only ever see complete steps, also while a
writer runs or after it was killed; the next writer undoes any uncommitted tail. New and replacing
stores are written beside `path` and renamed into place (`--overwrite` never removes the old store
before the new one is complete). One writer per store (`store.lock`). Damaged chunks are found by
checksum (`store.check`): `open_store` refuses them, a resumed write recomputes them with a warning.
The package: `format` (attribute names, config identity, reading, verifying), `writer`
(`StoreWriter`), `commit`, `lock`, `check`; this module re-exports the format's functions and
holds the one-call API (`check_writable`, `prepare_store`, `append_step`, `update_attrs`).

Identity. The JSON attribute `scoreprobe_config` records what was computed (probe, arguments,
series). Writing with a different config to an existing store raises StoreError listing the
keys that differ, so results of different analyses never mix silently. The commit record also
holds, per step, the identity of the model measured (`scoreprobe.sweep.identity`), which a resume
compares step by step (`StoreWriter.check_models`).

Attributes are kept strict JSON: NaN/inf global attributes are written as null and read back by
`open_store` as NaN.
"""
from scoreprobe.errors import StoreError
from scoreprobe.store.format import (  # noqa: F401  (re-exported: the store's public functions)
    normalize_config, config_diff, config_json, history_line, resolve_path, committed, inspect,
    written_steps, stored_config, check_config, verify, open_store, truncate, check_writable,
    encoding, plain, check_compatible, STEP_DIM, COMMIT_ATTR, CONFIG_ATTR, RECORD_ATTR)
from scoreprobe.store.format import _root
from scoreprobe.store.writer import StoreWriter, request_overwrite


def prepare_store(path, config, overwrite=False):
    """Check and repair the store at `path` before writing an analysis with `config` (one-call API).

    Takes the writer lock for the duration of the call: cleans leftovers of crashed runs, undoes an
    interrupted write, verifies checksums (damaged steps are left out of the result, with a
    StoreDamageWarning, so they are recomputed). With `overwrite`, nothing is removed: the next
    writer of `path` in this process (a sweep or `append_step`) builds the new store beside the old
    one and swaps it in when complete.

    Returns
    -------
    list of int: the steps already written (to be skipped).
    """
    if overwrite:
        check_writable(path, overwrite=True)
        request_overwrite(path)
        return []
    with StoreWriter(path, config) as w:
        return w.done


def append_step(path, ds, config=None, history=None):
    """Append the step(s) of `ds` (dims step, ...) to the store at `path` (one-call API).

    The first write creates the store with global attrs `Conventions`, `history` and the config;
    later writes must carry the same variables and coordinates; steps already in the store are
    refused. Each call takes the writer lock, and commits the step atomically.
    """
    if STEP_DIM not in ds.dims:
        raise StoreError("append_step needs a Dataset with a 'step' dimension")
    with StoreWriter(path, None, history=history) as w:
        if w.attrs is None:
            w.config = normalize_config(config)
        w.write(ds)
        w.finish()


def update_attrs(path, attrs):
    """Merge JSON-safe `attrs` into the global attributes of the store at `path`."""
    if _root(path)[1] is None:
        raise StoreError(f"no zarr store at {path}")
    with StoreWriter(path) as w:
        w.update_attrs(attrs)


def note_history(path, command=None):
    """Append a line (timestamp, version, command) to the store's CF `history` attribute."""
    with StoreWriter(path) as w:
        w.note_history(command)
