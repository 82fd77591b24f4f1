"""What a store must hold before the report shows it, checked by type, with StoreError naming the
store and the first thing wrong (never a KeyError or TypeError half-way through a page):

    check_meta_size(path)            its zarr.json within limits.MAX_STORE_META_BYTES (checked before it is read)
    check_record(path)               its commit record's shape: steps integers (not bools, not floats), none
                                     twice; digests and models one object per step
    check_dataset(section, ds, path) the variables of its section with their dimensions and numeric
                                     kinds, integer unique steps, and for clocks the attributes the τ
                                     table and the page read (`CLOCK_ATTRS`) of the expected types

The report runs them on given and cached stores before anything is computed (plan.make_plan) and
again on every Dataset before the page is made (payload.section_payloads).
"""
import math
import numbers
from pathlib import Path

import numpy as np

from scoreprobe.errors import StoreError
from scoreprobe.limits import MAX_STEP, MAX_STORE_META_BYTES

# section: {variable: its dimensions}; every one numeric (bool, int, uint or float)
REQUIRED = {
    "clocks": {"rule_acc": ("step",), "novel_valid": ("step",), "mem_ratio": ("step",)},
    "basins": {"endpoint_state": ("step", "sigma_start", "v", "u"), "fraction": ("step", "sigma_start", "state"),
               "endpoint_off_vertex": ("step", "sigma_start", "v", "u")},
    "field": {"score_u": ("step", "sigma", "v", "u"), "score_v": ("step", "sigma", "v", "u"),
              "score_off_norm": ("step", "sigma", "v", "u")},
    "retention": {"retained": ("step", "sigma", "sample"), "captured": ("step", "sigma", "sample")},
    "dsm": {"loss": ("step", "sigma", "sample")},
}
NUMERIC_COORDS = {"basins": ("u", "v", "sigma_start"), "field": ("u", "v", "sigma"), "retention": ("sigma",),
                  "dsm": ("sigma",)}
TEXT_COORDS = {"basins": ("state",), "retention": ("split",), "dsm": ("split",)}


def _number(v):
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


def _opt_number(v):
    return v is None or _number(v)


def _bool(v):
    return isinstance(v, (bool, np.bool_))


def _pair(v):
    return isinstance(v, (list, tuple)) and len(v) == 2 and all(_opt_number(x) for x in v)


def _ci(v):
    return v is None or (isinstance(v, (list, tuple)) and len(v) in (0, 2) and all(_opt_number(x) for x in v))


def _intervals(v):
    return isinstance(v, (list, tuple)) and all(_pair(x) and None not in x for x in v)


def _texts(v):
    return isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v)


def _count(v):
    return isinstance(v, numbers.Integral) and not _bool(v) and v >= 0


def _level(v):
    return _number(v) and 0 < v < 1


# attribute: (check, what it must be). Every attribute a clocks payload or the τ table reads.
CLOCK_ATTRS = {
    **{k: (_opt_number, "a number or null") for k in (
        "tau_rule", "tau_novel", "tau_mem", "tau_rule_reached", "tau_novel_reached", "tau_mem_reached",
        "mem_threshold", "novel_threshold", "novel_oracle", "window_log10_width", "window_open_share")},
    "rule_threshold": (_level, "a number between 0 and 1"),   # the window's status is worded with it
    **{k: (_ci, "a list of two numbers or nulls") for k in (
        "tau_rule_ci", "tau_novel_ci", "tau_mem_ci", "window_log10_width_ci")},
    "window_open": (_bool, "true or false"), "window_hi_censored": (lambda v: v is None or _bool(v), "true or false"),
    "window_intervals": (lambda v: v is None or _intervals(v), "a list of [lo, hi] step pairs"),
    "under_resolved": (lambda v: v is None or _texts(v), "a list of names"),
    "n_boot": (lambda v: v is None or _count(v), "a non-negative integer"),
    "ci": (lambda v: v is None or _level(v), "a number between 0 and 1"),
    "window_status": (lambda v: isinstance(v, str), "a text"),
}
CLOCK_REQUIRED = ("tau_rule", "tau_novel", "tau_mem", "window_open")   # what window_status and the table need


def _short(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_meta_size(path):
    """StoreError when the store's zarr.json (its attributes and commit record) is larger than
    MAX_STORE_META_BYTES: refused before it is read."""
    meta = Path(path) / "zarr.json"
    try:
        size = meta.stat().st_size
    except OSError:
        return   # no metadata: the store checks name it
    if size > MAX_STORE_META_BYTES:
        raise StoreError(f"store {path}: its zarr.json holds {size / 2**20:.1f} MiB of attributes, more than the "
                         f"{MAX_STORE_META_BYTES >> 20} MiB a report reads (scoreprobe.limits.MAX_STORE_META_BYTES)")


def check_record(path):
    """StoreError unless the store's commit record (if any) has the shape the store code and the
    provenance read: an object whose steps are distinct integers in [0, MAX_STEP], whose digests
    and models are lists as long as the steps (entries objects or null), whose static is an object.
    Reads the root zarr.json only (after check_meta_size)."""
    from scoreprobe.store import RECORD_ATTR, commit
    meta = Path(path) / "zarr.json"
    if not meta.is_file():
        return
    root = commit.read_json(meta)
    attrs = root.get("attributes") if isinstance(root, dict) else None
    record = attrs.get(RECORD_ATTR) if isinstance(attrs, dict) else None
    if record is None:
        return
    if not isinstance(record, dict):
        raise StoreError(f"store {path}: its commit record is {_short(record)}, not an object (the store is damaged)")
    steps = record.get("steps")
    if steps is not None:
        if not isinstance(steps, list):
            raise StoreError(f"store {path}: its record's steps are {_short(steps)}, not a list of integers")
        _check_steps(path, steps, "its record's steps")
    for key in ("digests", "models"):
        value = record.get(key)
        if value is not None and not (isinstance(value, list) and len(value) == len(steps or [])
                                      and all(v is None or isinstance(v, dict) for v in value)):
            raise StoreError(f"store {path}: its record's {key} are {_short(value)}, not one object per step "
                             "(the store is damaged)")
    if not isinstance(record.get("static") or {}, dict):
        raise StoreError(f"store {path}: its record's static checksums are not an object (the store is damaged)")


def _check_steps(path, steps, what):
    bad = [s for s in steps if not (isinstance(s, numbers.Integral) and not _bool(s) and 0 <= s <= MAX_STEP)]
    if bad:
        raise StoreError(f"store {path}: {what} must be integers in [0, {MAX_STEP}], got {_short(bad[0])}")
    seen = set()
    twice = [s for s in steps if s in seen or seen.add(s)]
    if twice:
        raise StoreError(f"store {path}: {what} hold step {twice[0]} twice")


def _check_variables(section, ds, path):
    for name, dims in REQUIRED[section].items():
        if name not in ds:
            raise StoreError(f"store {path}: no variable {name!r}, which a {section} store holds (is it a "
                             f"{section} store?)")
        have = ds[name]
        if set(have.dims) != set(dims) or have.dtype.kind not in "biuf":
            raise StoreError(f"store {path}: variable {name!r} has dimensions {tuple(have.dims)} and dtype "
                             f"{have.dtype}; a {section} store has {dims}, numeric")
    for name in NUMERIC_COORDS.get(section, ()):
        if name not in ds.coords or ds[name].dtype.kind not in "iuf":
            raise StoreError(f"store {path}: no numeric coordinate {name!r}, which a {section} store holds")
    for name in TEXT_COORDS.get(section, ()):
        if name not in ds.coords or ds[name].dtype.kind not in "OUT":
            raise StoreError(f"store {path}: no text coordinate {name!r}, which a {section} store holds")
    if "anchor_label" in ds and ds["anchor_label"].dtype.kind not in "OUT":
        raise StoreError(f"store {path}: anchor_label is not text")


def check_clock_attrs(attrs, path, required=True):
    """StoreError when a clocks attribute the page reads has the wrong type (or, `required`, is missing)."""
    for name, (ok, what) in CLOCK_ATTRS.items():
        if name not in attrs:
            if required and name in CLOCK_REQUIRED:
                raise StoreError(f"store {path}: no attribute {name!r} (a clocks store records τ; rerun clocks)")
            continue
        value = None if isinstance(attrs[name], float) and math.isnan(attrs[name]) else attrs[name]   # null, as read
        if not ok(value):
            raise StoreError(f"store {path}: attribute {name} must be {what}, got {_short(attrs[name])} "
                             "(the store was edited or damaged; rerun the command that wrote it)")


def check_dataset(section, ds, path, required=True):
    """StoreError unless `ds` holds what the page reads from a `section` store (see the module text).
    `required`: the clocks attributes τ must be there (False: unless τ_rule is, since a store without
    τ gets them computed when it is read, reports.gather)."""
    if "step" not in ds.coords or ds["step"].dtype.kind not in "iu":
        raise StoreError(f"store {path}: its steps are not integers (dtype "
                         f"{ds['step'].dtype if 'step' in ds.coords else 'missing'})")
    _check_steps(path, [int(s) for s in np.atleast_1d(ds["step"].values)], "its steps")
    _check_variables(section, ds, path)
    if section == "clocks":
        if "sample" not in ds.sizes:
            raise StoreError(f"store {path}: no sample dimension, which a clocks store has")
        check_clock_attrs(ds.attrs, path, required=required or "tau_rule" in ds.attrs)
