"""Tidy clocks results: τ, their CIs and the window as data variables, and a one-row summary table.

`clocks` reports τ_rule, τ_novel, τ_mem and the innovation window in the Dataset's attrs (JSON, one
run). Attrs do not survive `xr.concat` over runs, so `with_taus(ds)` also puts them in data
variables (docs/definitions.md, "Tidy results"):

- `tau_rule`, `tau_novel`, `tau_mem` () float64 in training steps (NaN: not reached), each with
  `<name>_ci` (bound,) [lo, hi] (hi +inf: not reached in more than (1 − ci)/2 of the resamples)
  and `<name>_reached` () the share of resamples that reach it;
- `window_open` () bool, `window_lo`, `window_hi` () steps (NaN when closed), `window_log10_width`
  () with `_ci` (bound,), `window_open_share`, `window_hi_censored`, `log10_ratio`;
- the thresholds `rule_threshold`, `mem_threshold`, `novel_threshold` ().

A name the Dataset already has (a variable or a coordinate, e.g. τ along a threshold dimension
written by `taus` itself) is left as it is. `summary(ds)` is a pandas DataFrame with one row per
run: these values (a variable with further dimensions gives one column per coordinate value,
`name[value]`) and the curve's landmarks (steps measured, peak rule_acc, final values).
"""
import json
import math
import numbers

import numpy as np
import xarray as xr

from scoreprobe.errors import ConfigError, DataError, StoreError

BOUND = "bound"
_STEPS = "training steps"
TAU_VARIABLES = {   # name: (long_name, units)
    "tau_rule": ("first step where the interpolated rule_acc reaches rule_threshold (NaN: not reached)", _STEPS),
    "tau_novel": ("first step where the interpolated novel_valid reaches novel_threshold (NaN: not reached)",
                  _STEPS),
    "tau_mem": ("first step where the interpolated mem_ratio reaches mem_threshold (NaN: not reached)", _STEPS),
    "window_lo": ("first step of the innovation window (NaN: closed)", _STEPS),
    "window_hi": ("last step of the innovation window (NaN: closed)", _STEPS),
    "window_log10_width": ("log10 width of the innovation window (0: closed)", "log10(step)"),
    "window_open_share": ("share of bootstrap resamples in which the window is open", "1"),
    "log10_ratio": ("log10(tau_mem / tau_rule) (NaN unless both reached)", "1"),
    "rule_threshold": ("threshold of rule_acc for tau_rule and the window", "1"),
    "mem_threshold": ("threshold of mem_ratio for tau_mem and the window", "1"),
    "novel_threshold": ("threshold of novel_valid for tau_novel", "1"),
}
FLAGS = {"window_open": "the innovation window is non-empty",
         "window_hi_censored": "the window still holds at the last checkpoint"}
CI_OF = ("tau_rule", "tau_novel", "tau_mem", "window_lo", "window_hi", "window_log10_width")
REACHED_OF = ("tau_rule", "tau_novel", "tau_mem")


def _num(value, name):
    """A JSON attr value as float64: None (JSON null) -> NaN; DataError naming the attribute for anything that is
    not a number (a string, a bool, a list: a store edited by hand or written by something else)."""
    if value is None:
        return np.float64(math.nan)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise DataError(f"attribute {name!r} holds {str(value)[:40]!r} ({type(value).__name__}), not a number")
    return np.float64(value)


def tau_variables(attrs):
    """{name: xarray.Variable} of the τ and window values found in `attrs` (a tau_summary() result or a
    clocks Dataset's attrs); names absent from attrs are left out."""
    out = {}
    for name, (long_name, units) in TAU_VARIABLES.items():
        if name in attrs:
            out[name] = xr.Variable((), _num(attrs[name], name), {"long_name": long_name, "units": units})
    for name, long_name in FLAGS.items():
        if name in attrs and attrs[name] is not None:
            out[name] = xr.Variable((), np.bool_(attrs[name]), {"long_name": long_name})
    level = _num(attrs.get("ci", 0.95), "ci")
    if not 0 < level < 1:
        raise DataError(f"attribute 'ci' is {level}: an interval level lies in (0, 1)")
    for name in CI_OF:
        ci = attrs.get(name + "_ci")
        if ci is not None:
            if isinstance(ci, str) or not hasattr(ci, "__len__") or len(ci) != 2:
                raise DataError(f"attribute {name + '_ci'!r} holds {str(ci)[:40]!r}: an interval is two numbers")
            units = TAU_VARIABLES[name][1]
            lo, hi = (_num(v, name + "_ci") for v in ci)
            if name in REACHED_OF and ci[1] is None and np.isfinite(lo):
                hi = np.float64(np.inf)   # JSON has no inf: a stored "not reached" upper end reads back as null
            out[name + "_ci"] = xr.Variable((BOUND,), np.array([lo, hi]), {
                "long_name": f"{round(100 * level)}% bootstrap interval of {name} (samples resampled per checkpoint)",
                "units": units})
    for name in REACHED_OF:
        if name + "_reached" in attrs:
            out[name + "_reached"] = xr.Variable((), _num(attrs[name + "_reached"], name + "_reached"), {
                "long_name": f"share of bootstrap resamples in which {name} is reached", "units": "1"})
    return out


def with_taus(ds, attrs=None):
    """ds with the τ and window values of `attrs` (default: ds.attrs) as data variables as well (see
    the module docstring); attrs are kept. Names ds already holds are not replaced."""
    variables = {k: v for k, v in tau_variables(ds.attrs if attrs is None else attrs).items()
                 if k not in ds.variables}
    if not variables:
        return ds
    ds = ds.assign(variables)
    if BOUND in ds.dims and BOUND not in ds.coords:
        ds = ds.assign_coords({BOUND: (BOUND, np.array(["lo", "hi"]), {"long_name": "interval end"})})
    return ds


def ensure_taus(ds, **taus_kw):
    """with_taus(ds), computing `taus(ds, **taus_kw)` first when ds carries none (a minimal clocks
    Dataset: `state`, `rule_acc`, `mem_ratio` per step)."""
    if "tau_rule" in ds.variables or "tau_rule" in ds.attrs:
        return with_taus(ds)
    from scoreprobe.stats.taus import tau_summary
    attrs = tau_summary(ds, **{"warn": False, **taus_kw})
    ds = ds.copy()
    ds.attrs.update(attrs)
    return with_taus(ds)


# ---------------------------------------------------------------------------------------------
# summary
# ---------------------------------------------------------------------------------------------

def _ordered_names():
    """Every name `tau_variables` can give, in the order of the summary's columns."""
    names = []
    for name in (*REACHED_OF, "window_open", "window_lo", "window_hi", "window_log10_width", "window_open_share",
                 "window_hi_censored", "log10_ratio", "rule_threshold", "mem_threshold", "novel_threshold"):
        names += [name] + [name + s for s in ("_ci", "_reached") if name in (CI_OF if s == "_ci" else REACHED_OF)]
    return names


SUMMARY_NAMES = _ordered_names()


def _columns(var):
    """{column: python scalar} of one variable of one run: a scalar, `<name>_lo/_hi` along `bound`,
    `<name>[value]` along any other dimension (e.g. a threshold)."""
    out = {}
    others = [d for d in var.dims if d != BOUND]
    if not others:
        return _bound_columns(var.name, var)
    stacked = var.stack(_cell=others)
    for i in range(stacked.sizes["_cell"]):
        cell = stacked.isel(_cell=i)
        key = ",".join(str(np.asarray(cell[d].values).item()) for d in others)
        out.update(_bound_columns(f"{var.name}[{key}]", cell.drop_vars(["_cell", *others], errors="ignore")))
    return out


def _bound_columns(name, var):
    values = np.asarray(var.values)
    if BOUND in var.dims:
        lo, hi = values.tolist()
        base = name.removesuffix("_ci")
        base = base if "[" not in name else name.replace("_ci[", "[", 1)
        return {f"{base}_lo": lo, f"{base}_hi": hi}
    return {name: values.item()}


def _landmarks(ds):
    """Curve landmarks of one run: steps measured, last step, samples, peak and final values."""
    out = {}
    if "step" in ds.dims and "rule_acc" in ds:
        measured = ds["rule_acc"].notnull()
        steps = ds["step"].values[np.asarray(measured)]
        out["n_checkpoints"] = int(steps.size)
        out["last_step"] = int(steps.max()) if steps.size else None
        out["peak_rule_acc"] = float(ds["rule_acc"].max(skipna=True))   # over the measured checkpoints (as taus)
        for name in ("rule_acc", "mem_ratio"):
            if name in ds and steps.size:
                out[f"final_{name}"] = float(ds[name].sel(step=steps.max()))
    n = ds.sizes.get("sample") or ds.attrs.get("n_samples")
    if n is not None:
        out["n_samples"] = int(n)
    return out


def _row(ds):
    ds = ensure_taus(ds)
    row = _landmarks(ds)
    names = [n for n in SUMMARY_NAMES if n in ds.variables]
    for name in names:
        row.update(_columns(ds[name]))
    if "window_status" in ds.attrs:
        row["window_status"] = ds.attrs["window_status"]
    return row


def run_name(ds, default="run"):
    """A run's name: its `run` coordinate, else the series named in the clocks config, else `default`."""
    if "run" in ds.coords and ds["run"].ndim == 0:
        return str(ds["run"].values)
    try:
        source = json.loads(ds.attrs.get("scoreprobe_config", "{}")).get("source") or {}
    except (TypeError, ValueError):
        source = {}
    return str(source.get("name") or default)


def summary(ds):
    """A pandas DataFrame of the τ, their CIs, the window and the curve landmarks of a clocks Dataset:
    one row (index: the run's name), or one per run for a Dataset with a `run` dimension
    (`scoreprobe.stats.compare.compare`). A Dataset without τ has them computed by `taus` (default
    settings). `ds` may also be the path of a clocks store: one `scoreprobe clocks` or `sp.Monitor` wrote."""
    import pandas as pd
    ds = _clocks_of(ds)
    if "run" in ds.dims:
        rows = [_row(_one_run(ds, i)) for i in range(ds.sizes["run"])]
        return pd.DataFrame(rows, index=pd.Index([str(r) for r in ds["run"].values], name="run"))
    return pd.DataFrame([_row(ds)], index=pd.Index([run_name(ds)], name="run"))


def _clocks_of(item):
    """The clocks Dataset of `item`: itself, or the store at a path (a clocks store; StoreError otherwise)."""
    import os
    if isinstance(item, xr.Dataset):
        return item
    if not isinstance(item, (str, os.PathLike)):
        raise ConfigError(f"summary: expected a clocks Dataset or the path of a clocks store, got "
                          f"{type(item).__name__}")
    from scoreprobe.store import open_store
    ds = open_store(item)
    try:
        probe = json.loads(ds.attrs.get("scoreprobe_config") or "{}").get("probe")
    except (TypeError, ValueError, AttributeError):
        probe = None
    if probe != "clocks":
        raise StoreError(f"summary: {item} holds a {probe!r} analysis, not clocks (a `scoreprobe clocks` or "
                         "Monitor store)")
    return ds.load()


def _one_run(ds, i):
    """Run i of a compare Dataset, without the steps it did not measure (where `measured` is false)."""
    one = ds.isel(run=i)
    if "measured" in one and "step" in one.dims:
        one = one.isel(step=np.flatnonzero(one["measured"].values))
    return one
