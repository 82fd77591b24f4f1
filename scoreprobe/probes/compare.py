"""Several runs side by side: their clocks on one step axis, their τ table, and differences with CIs.

    ds = sp.compare(["runs/g2-n120", "clocks-g3.zarr", clocks_ds], names=["G2", "G3", "mine"])
    sp.summary(ds)          # one row per run

Each item is a clocks Dataset, the path of a clocks store (`scoreprobe clocks --out`), a run
directory (its clocks are measured here, with `n_samples` and `seed`) or the compact export of a
scaling run (`analyses/scaling_export.py`, format "scoreprobe-scaling-run/1": steps and per-sample
states). Definitions: docs/definitions.md, "Comparing runs". In short:

- τ and the window of every run are those of its own checkpoints (`taus`, the run's own
  attrs when it carries them, else computed with the default thresholds and `n_boot`);
- the curves share one `step` axis: when the runs' steps differ it is the union of their steps and
  each run's curves are interpolated linearly in log(step + 1) within its own range (NaN outside;
  `measured` marks the real checkpoints; per-sample variables are then left out); attrs["step_axis"]
  says which;
- differences are against the first run: d_log10_tau_X = log10((τ_X + 1) / (τ_X,first + 1)) and
  d_window_log10_width, with a bootstrap CI: per checkpoint, samples are resampled with
  replacement; runs drawn with the same sampling seed, sample count and number of checkpoints as
  the first share its resampled indices (at the k-th checkpoint of each) (a paired bootstrap: sample i started from the same noise in both), the
  others are resampled independently (`paired`). A run on other training data than the first has
  `same_data` false: its difference compares models *and* data.
"""
import json
import math
import os
from pathlib import Path

import numpy as np
import xarray as xr

from scoreprobe.data.datasets import STATE_CODES
from scoreprobe.defaults import MEM_THRESHOLD, RULE_THRESHOLD
from scoreprobe.errors import ConfigError, DataError, StoreError
from scoreprobe.probes import taus as taus_mod
from scoreprobe.probes.tidy import BOUND, SUMMARY_NAMES, ensure_taus, tau_variables

EXPORT_FORMAT = "scoreprobe-scaling-run/1"
DIFF_KEYS = ("tau_rule", "tau_novel", "tau_mem")
STEP_AXIS_SAME = "the runs' own steps (all runs measured the same steps)"
STEP_AXIS_UNION = ("union of the runs' steps; each run's curves interpolated linearly in log(step + 1) within its "
                   "own range, NaN outside; `measured` marks its checkpoints; per-sample variables left out")

# ---------------------------------------------------------------------------------------------
# Items
# ---------------------------------------------------------------------------------------------


def _kind(item):
    """'dataset', 'store', 'run', 'export' for an item (checked before any work); ConfigError otherwise."""
    if isinstance(item, xr.Dataset):
        if "rule_acc" not in item or "mem_ratio" not in item or "step" not in item.dims:
            raise ConfigError("compare: a Dataset item must be a clocks Dataset (rule_acc, mem_ratio along step)")
        return "dataset"
    if not isinstance(item, (str, os.PathLike)):
        raise ConfigError(f"compare: expected clocks Datasets, stores, run directories or exports, got "
                          f"{type(item).__name__}")
    path = Path(item)
    if path.is_dir() and (path / "run.json").is_file():
        return "run"
    if path.is_dir() and (path / "zarr.json").is_file():
        return "store"
    if path.is_file() and path.suffix == ".npz":
        return "export"
    if not path.exists():
        raise ConfigError(f"compare: nothing at {path}")
    raise ConfigError(f"compare: {path} is neither a run directory, a clocks store (zarr) nor a scaling export (.npz)")


def read_export(path):
    """The minimal clocks Dataset (state, rule_acc, mem_ratio, novel_valid per step; attrs novel_oracle,
    n_samples, scoreprobe_config) of a scaling export ("scoreprobe-scaling-run/1"), every field checked
    (scoreprobe.loading.npz) before it is trusted: one DataError naming the file and the field otherwise."""
    from scoreprobe.loading.npz import check_clocks, field, read_npz
    arrays = read_npz(path)
    if "format" not in arrays or str(arrays["format"]) != EXPORT_FORMAT:
        raise DataError(f"{path}: not a {EXPORT_FORMAT} file")
    step, state, oracle = check_clocks(path, arrays)                                      # (S,), (S, n)
    config = str(field(path, arrays, "clocks_config", "text"))
    share = {name: (state == code).mean(axis=1) for name, code in STATE_CODES.items()}
    novel = share["valid_novel"] + share["valid_heldout"]
    return xr.Dataset({"state": (("step", "sample"), state), "rule_acc": ("step", novel + share["valid_memorized"]),
                       "mem_ratio": ("step", share["valid_memorized"]), "novel_valid": ("step", novel)},
                      coords={"step": step}, attrs={"novel_oracle": oracle, "n_samples": int(state.shape[1]),
                                                    "scoreprobe_config": config})


def load_item(item, kind, n_samples=1000, seed=0, device=None, progress=None):
    """The clocks Dataset of one item (see the module docstring)."""
    if kind == "dataset":
        return item
    if kind == "export":
        return read_export(item)
    if kind == "store":
        from scoreprobe.store import open_store
        ds = open_store(item)
        probe = _config(ds).get("probe")
        if probe != "clocks":
            raise StoreError(f"compare: {item} holds a {probe!r} analysis, not clocks")
        return ds.load()
    from scoreprobe.loading.series import load_series
    from scoreprobe.probes.clocks import clocks
    return clocks(load_series(item), n_samples=n_samples, seed=seed, device=device, progress=progress)


def _config(ds):
    try:
        return json.loads(ds.attrs.get("scoreprobe_config") or "{}")
    except (TypeError, ValueError):
        return {}


def _names(items, names, kinds):
    if names is None:
        names = [Path(i).name.removesuffix(".npz") if k != "dataset" else None for i, k in zip(items, kinds)]
    names = [str(n) if n is not None else f"run{i}" for i, n in enumerate(names)]
    if len(names) != len(items):
        raise ConfigError(f"compare: {len(names)} names for {len(items)} runs")
    if len(set(names)) != len(names):
        raise ConfigError(f"compare: run names must differ, got {names}")
    return names


# ---------------------------------------------------------------------------------------------
# compare
# ---------------------------------------------------------------------------------------------


def compare(items, names=None, n_samples=1000, seed=0, n_boot=1000, ci=0.95, rule_threshold=RULE_THRESHOLD,
            mem_threshold=MEM_THRESHOLD, device=None, progress=None):
    """Several runs in one Dataset with a `run` dimension.

    Parameters
    ----------
    items : clocks Datasets, clocks store paths, run directories or scaling exports (.npz), at least one.
    names : one name per run (default: the folder or file name; "run<i>" for a Dataset).
    n_samples, seed, device, progress : the clocks of a run directory (measured here).
    n_boot, ci : bootstrap resamples and level of the τ of runs without them and of the differences.
    rule_threshold, mem_threshold : thresholds of τ computed here (a run's own τ are kept as they are).

    Returns
    -------
    xarray.Dataset, dims (run, step[, sample], bound): the curves (run, step) every run has
    (rule_acc, novel_valid, mem_ratio, ...), `measured` (run, step), [`state` (run, step, sample)
    when every run measured the same steps with the same sample count], the τ variables of
    `scoreprobe.probes.tidy` along `run`, `config` (run,) JSON, the differences to the first run
    d_log10_tau_rule / _novel / _mem and d_window_log10_width (run,) with `_ci` (run, bound),
    `paired` and `same_data` (run,); attrs `step_axis`, `reference` (the first run), `n_boot`, `ci`.
    """
    from scoreprobe.limits import MAX_BOOT, check_int, check_real
    check_int(n_boot, "n_boot", 1, MAX_BOOT)     # every difference and τ carries its interval: 0 would leave none
    check_real(ci, "ci", 0.5, 0.9999)
    items = list(items)
    if not items:
        raise ConfigError("compare needs at least one run")
    kinds = [_kind(i) for i in items]
    names = _names(items, names, kinds)
    th = {"rule_threshold": rule_threshold, "mem_threshold": mem_threshold, "n_boot": n_boot, "ci": ci}
    runs = [ensure_taus(load_item(i, k, n_samples, seed, device, progress), **th) for i, k in zip(items, kinds)]
    runs = [r.sortby("step") for r in runs]
    same_steps = all(np.array_equal(r["step"].values, runs[0]["step"].values) for r in runs)
    out = _curves(runs, names, same_steps)
    out = out.assign(_tau_table(runs, names))
    extra = {d: runs[0][d] for d in out.dims if d not in out.coords and d in runs[0].coords}
    out = out.assign_coords(extra)   # e.g. a threshold dimension of the τ
    out = out.assign(_differences(runs, names, n_boot, ci, rule_threshold, mem_threshold))
    out = out.assign_coords({BOUND: (BOUND, np.array(["lo", "hi"]), {"long_name": "interval end"})})
    out.attrs = {"step_axis": STEP_AXIS_SAME if same_steps else STEP_AXIS_UNION, "reference": names[0],
                 "n_boot": int(n_boot), "ci": float(ci), "rule_threshold": rule_threshold,
                 "mem_threshold": mem_threshold, "difference": "log10((tau + 1) / (tau_reference + 1))"}
    return out


CURVES = ("rule_acc", "novel_valid", "novel_ratio", "heldout_hit", "mem_ratio", "violating_ratio", "invalid_ratio",
          "off_vertex", "group_acc", "group_mem")


def _curves(runs, names, same_steps):
    """The curves every run has, on a common step axis, and `measured`, [`state`]."""
    curves = [c for c in CURVES if all(c in r and r[c].dims == ("step",) for r in runs)]
    steps = np.unique(np.concatenate([r["step"].values for r in runs])).astype(np.int64)
    u = np.log1p(steps.astype(np.float64))
    data = {c: np.full((len(runs), len(steps)), np.nan) for c in curves}
    measured = np.zeros((len(runs), len(steps)), dtype=bool)
    for i, r in enumerate(runs):
        ru = np.log1p(r["step"].values.astype(np.float64))
        inside = (u >= ru.min()) & (u <= ru.max())
        measured[i] = np.isin(steps, r["step"].values)
        for c in curves:
            data[c][i, inside] = np.interp(u[inside], ru, r[c].values.astype(np.float64))
    out = xr.Dataset({c: (("run", "step"), data[c], dict(runs[0][c].attrs)) for c in curves},
                     coords={"run": ("run", np.array(names), {"long_name": "run"}),
                             "step": ("step", steps, {"long_name": "training step", "units": "1"})})
    out["measured"] = (("run", "step"), measured, {"long_name": "the run has a checkpoint at this step"})
    n = {r.sizes.get("sample") for r in runs}
    if same_steps and len(n) == 1 and None not in n and all("state" in r for r in runs):
        out["state"] = xr.concat([r["state"].drop_vars(
            [c for c in r["state"].coords if c not in ("step", "sample")]) for r in runs], dim="run")
        out["state"].attrs = dict(runs[0]["state"].attrs)
    return out


def _tau_table(runs, names):
    """{name: (run, ...) Variable} of the τ variables every run has, and `config` (run,)."""
    per_run = [tau_variables(r.attrs) | {k: r[k].variable for k in SUMMARY_NAMES if k in r.data_vars}
               for r in runs]   # a data variable (e.g. along a threshold dimension) wins over the attrs
    common = [k for k in per_run[0] if all(k in p for p in per_run)]
    out = {}
    for k in common:
        v = per_run[0][k]
        stacked = np.stack([np.asarray(p[k].values) for p in per_run])
        out[k] = xr.Variable(("run",) + v.dims, stacked, dict(v.attrs))
    configs = [r.attrs.get("scoreprobe_config", "{}") for r in runs]
    out["config"] = xr.Variable(("run",), np.array([str(c) for c in configs]),
                                {"long_name": "the clocks config of the run (JSON)"})
    return out


# ---------------------------------------------------------------------------------------------
# Differences to the first run
# ---------------------------------------------------------------------------------------------


def _sampling(ds):
    """(sampling seed, n samples, number of checkpoints) of a run: what a paired bootstrap needs to share."""
    return _config(ds).get("seed"), ds.sizes.get("sample"), ds.sizes["step"]


def _same_data(ds, ref):
    a, b = ((_config(x).get("data") or {}).get("train_sha1") for x in (ds, ref))
    return a is not None and a == b


def resampled(ds, rng_seed, n_boot, rule_threshold=RULE_THRESHOLD, mem_threshold=MEM_THRESHOLD):
    """Point values and (n_boot,) bootstrap draws of τ (in u = log(step + 1); NaN: not reached) and the
    window's log10 width, from `state` (step, sample): at each checkpoint n sample indices are drawn
    with replacement from `default_rng(rng_seed)`; the same rng_seed and sample count draw the same
    indices (paired runs)."""
    ds, _, u, n, th = taus_mod.setup(ds, rule_threshold, mem_threshold)
    state = np.asarray(ds["state"].values)                                      # (S, n)
    memorized = state == STATE_CODES["valid_memorized"]
    valid = memorized | np.isin(state, [STATE_CODES["valid_novel"], STATE_CODES["valid_heldout"]])
    rng = np.random.default_rng(rng_seed)
    rule, mem = np.empty((n_boot, len(u))), np.empty((n_boot, len(u)))        # (B, S)
    for s in range(len(u)):
        idx = rng.integers(0, n, size=(n_boot, n))                              # (B, n)
        rule[:, s], mem[:, s] = valid[s][idx].mean(axis=1), memorized[s][idx].mean(axis=1)
    point = taus_mod.point_values(ds, u, n, th)
    boot = taus_mod._evaluate(u, rule, mem, n, th)
    keys = DIFF_KEYS + ("window_log10_width",)
    return {k: float(point[k][0]) for k in keys}, {k: np.asarray(boot[k], dtype=np.float64) for k in keys}


def _interval(draws, ci):
    """Percentile interval of (B,) differences (±inf allowed, NaN left out); NaN when half are NaN."""
    keep = draws[~np.isnan(draws)]
    if keep.size < draws.size / 2:
        return [math.nan, math.nan]
    q = [(1 - ci) / 2 * 100, (1 + ci) / 2 * 100]
    return [float(np.percentile(keep, q[0], method="lower")), float(np.percentile(keep, q[1], method="higher"))]


def _difference(a, b, key):
    """b − a of one statistic: τ in u units → log10 ratio of (τ + 1), unreached = +inf, both unreached NaN."""
    if key == "window_log10_width":
        return b - a
    a, b = np.where(np.isnan(a), np.inf, a), np.where(np.isnan(b), np.inf, b)
    with np.errstate(invalid="ignore"):
        return np.where(np.isinf(a) & np.isinf(b), np.nan, (b - a) / math.log(10))


def _differences(runs, names, n_boot, ci, rule_threshold, mem_threshold, base_seed=0):
    """{name: Variable} d_log10_tau_* and d_window_log10_width (run,) with `_ci` (run, bound), `paired`,
    `same_data` (run,). The point difference is NaN when either τ is not reached."""
    keys = DIFF_KEYS + ("window_log10_width",)
    out = {f"d_{_dname(k)}": np.full(len(runs), np.nan) for k in keys}
    out.update({f"d_{_dname(k)}_ci": np.full((len(runs), 2), np.nan) for k in keys})
    paired = np.zeros(len(runs), dtype=bool)
    same = np.array([_same_data(r, runs[0]) for r in runs])
    ref = runs[0]
    if n_boot and all("state" in r for r in runs):
        ref_point, ref_draws = resampled(ref, base_seed, n_boot, rule_threshold, mem_threshold)
        for i, r in enumerate(runs):
            paired[i] = i == 0 or (_sampling(r) == _sampling(ref) and _sampling(r)[0] is not None)
            point, draws = resampled(r, base_seed if paired[i] else base_seed + 1 + i, n_boot, rule_threshold,
                                     mem_threshold)
            for k in keys:
                d = _difference(np.array([ref_point[k]]), np.array([point[k]]), k)[0]
                out[f"d_{_dname(k)}"][i] = d if np.isfinite(d) else np.nan
                out[f"d_{_dname(k)}_ci"][i] = _interval(_difference(ref_draws[k], draws[k], k), ci)
    variables = {}
    for k in keys:
        what = f"{_dname(k)} of the run minus that of {names[0]}" if k == "window_log10_width" else \
            f"log10((tau + 1) / (tau_{names[0]} + 1)) of {k} (NaN when either is not reached)"
        variables[f"d_{_dname(k)}"] = xr.Variable(("run",), out[f"d_{_dname(k)}"], {"long_name": what, "units": "1"})
        variables[f"d_{_dname(k)}_ci"] = xr.Variable(("run", BOUND), out[f"d_{_dname(k)}_ci"], {
            "long_name": f"{round(100 * ci)}% bootstrap interval of d_{_dname(k)} (paired where `paired`)",
            "units": "1"})
    variables["paired"] = xr.Variable(("run",), paired, {
        "long_name": f"resampled with the same sample indices as {names[0]} (same sampling seed, samples and "
                     "number of checkpoints)"})
    variables["same_data"] = xr.Variable(("run",), same, {
        "long_name": f"trained on the same training set as {names[0]} (false: other or unknown data)"})
    return variables


def _dname(key):
    return "log10_" + key if key.startswith("tau_") else key


# ---------------------------------------------------------------------------------------------
# The τ table as text (`scoreprobe compare` prints it, its --report page shows it)
# ---------------------------------------------------------------------------------------------


def _tau_text(v):
    return "—" if v is None or not math.isfinite(v) else f"{v:.0f}"


def _tau_ci_text(ds, i, key):
    if key not in ds:
        return ""
    text = _tau_text(float(ds[key].values[i]))
    if key + "_ci" in ds:
        lo, hi = (float(v) for v in ds[key + "_ci"].values[i])
        text += f" [{_tau_text(lo)}, {'not reached' if math.isinf(hi) else _tau_text(hi)}]"
    return text


def _window_text(ds, i):
    if "window_open" not in ds:
        return ""
    if not bool(ds["window_open"].values[i]):
        return "closed"
    return f"open, log10 width {float(ds['window_log10_width'].values[i]):.2f}"


def table_rows(ds):
    """(head, rows) of the τ table of a compare Dataset, as text: run, checkpoints, τ_rule, τ_novel,
    τ_mem with their CIs (rounded to steps; "—" not reached) and the window, one row per run."""
    level = round(100 * ds.attrs.get("ci", 0.95))
    head = ("run", "checkpoints", f"τ_rule [{level}% CI]", f"τ_novel [{level}% CI]", f"τ_mem [{level}% CI]",
            "window")
    rows = []
    for i, name in enumerate(ds["run"].values):
        n = int(ds["measured"].values[i].sum()) if "measured" in ds else ds.sizes["step"]
        rows.append((str(name), str(n), _tau_ci_text(ds, i, "tau_rule"), _tau_ci_text(ds, i, "tau_novel"),
                     _tau_ci_text(ds, i, "tau_mem"), _window_text(ds, i)))
    return head, rows


DIFFERENCES = (("d_log10_tau_rule", "τ_rule"), ("d_log10_tau_mem", "τ_mem"), ("d_window_log10_width", "window width"))


def difference_rows(ds):
    """[(run, reference, how, data, [(label, text)])] of each run after the first: its differences to
    the first (d_log10_tau_rule, d_log10_tau_mem, d_window_log10_width) with their CIs, as text;
    how: "paired" / "independent" bootstrap; data: "same data" / "other or unknown data"."""
    ref = ds.attrs.get("reference", str(ds["run"].values[0]))
    out = []
    for i, name in enumerate(ds["run"].values[1:], start=1):
        parts = []
        for key, label in DIFFERENCES:
            if key not in ds:
                continue
            d, (lo, hi) = float(ds[key].values[i]), (float(v) for v in ds[key + "_ci"].values[i])
            point = "—" if not math.isfinite(d) else f"{d:+.3f}"
            parts.append((label, f"{point} [{lo:+.3f}, {hi:+.3f}]"))
        out.append((str(name), ref, "paired" if bool(ds["paired"].values[i]) else "independent",
                    "same data" if bool(ds["same_data"].values[i]) else "other or unknown data", parts))
    return out
