"""Several runs side by side: their clocks on one step axis, their τ table, and differences with CIs.

    ds = sp.compare(["runs/g2-n120", "clocks-g3.zarr", clocks_ds], names=["G2", "G3", "mine"])
    sp.summary(ds)          # one row per run

Each item is a clocks Dataset, the path of a clocks store (`scoreprobe clocks --out`), a run
directory (its clocks are measured here, with `n_samples` and `seed`) or the compact export of a
study's run (`scoreprobe.studies.export`, format "scoreprobe-scaling-run/1": steps and per-sample
states). Definitions: docs/definitions.md, "Comparing runs". In short:

- τ and the window of every run are those of its own checkpoints (`taus`, the run's own
  attrs when it carries them, else computed with the default thresholds and `n_boot`);
- the curves share one `step` axis: when the runs' steps differ it is the union of their steps and
  each run's curves are interpolated linearly in log(step + 1) within its own range (NaN outside;
  `measured` marks the real checkpoints; per-sample variables are then left out); attrs["step_axis"]
  says which;
- differences are against the first run: d_log10_tau_X = log10((τ_X + 1) / (τ_X,first + 1)) and
  d_window_log10_width, with a bootstrap CI: per checkpoint, samples are resampled with
  replacement; runs whose samples pair with the first's (`PAIRING`: the same sampling seed and
  noise, sample count and number of checkpoints, the same kind of model and the same rule: sample
  i started from the same noise in both) share its resampled indices (at the k-th checkpoint of
  each), a paired bootstrap; the others (a GPT against a DiT, another rule) are resampled
  independently (`paired` false; `unpaired_because` says why). A difference whose τ is not reached
  by one of the runs is NaN and so is its interval (`difference_rows` names the run). A run on other
  training data than the first has `same_data` false: its difference compares models *and* data.
- a run directory's clocks are stored with `store_dir=` (the CLI: `<run>.clocks.zarr` here, or the
  run's RUN/clocks.zarr: `scoreprobe.sweep.outputs`) and resumed from there, so comparing it again measures
  nothing new.
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
from scoreprobe.sweep.outputs import clocks_store_of
from scoreprobe.stats import taus as taus_mod
from scoreprobe.stats.tidy import BOUND, SUMMARY_NAMES, ensure_taus, tau_variables

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


def load_item(item, kind, n_samples=1000, seed=0, device=None, progress=None, store=None):
    """The clocks Dataset of one item (see the module docstring); a run directory's are measured into
    (and resumed from) the clocks store `store` when given."""
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
    from scoreprobe.stats.clocks import clocks
    series = load_series(item)
    if store is None:
        return clocks(series, n_samples=n_samples, seed=seed, device=device, progress=progress)
    _check_run_store(store, item, n_samples, seed)   # (compare checks every run's before measuring any)
    try:
        return clocks(series, n_samples=n_samples, seed=seed, device=device, progress=progress, out=store)
    except StoreError as e:
        raise ConfigError(f"compare: the clocks of {item} cannot be kept in {store} ({str(e).split('; ')[0]}); "
                          "compare that store itself as an item, or move it away to measure the run anew") from None


def _check_run_store(store, run_dir, n_samples, seed):
    """ConfigError before any work when the store a run's clocks go to holds another run's or other settings'."""
    from scoreprobe.sweep.outputs import measured_run
    from scoreprobe.store import stored_config
    if not (Path(store) / "zarr.json").is_file():
        return
    why = measured_run(store, run_dir)
    if why:
        raise ConfigError(f"compare: {store}, where the clocks of {run_dir} are kept, is not this run's ({why}); "
                          "compare it as an item, or move it away to measure the run anew")
    old = stored_config(store) or {}
    if (old.get("n_samples"), old.get("seed")) != (n_samples, seed):
        raise ConfigError(f"compare: {store} holds the clocks of {run_dir} with {old.get('n_samples')} samples and "
                          f"seed {old.get('seed')}, not {n_samples} and {seed}: pass n_samples={old.get('n_samples')} and "
                          f"seed={old.get('seed')} to reuse it, or compare that store itself")


def _run_stores(items, kinds, store_dir, n_samples, seed):
    """The clocks store of each run directory among `items` (None for the others, and for all without
    `store_dir`), every one checked (`_check_run_store`) before any run is measured."""
    stores = [None if k != "run" or store_dir is None else clocks_store_of(i, store_dir) for i, k in zip(items, kinds)]
    for item, store in zip(items, stores):
        if store is not None:
            _check_run_store(store, item, n_samples, seed)
    return stores


def _config(ds):
    try:
        return json.loads(ds.attrs.get("scoreprobe_config") or "{}")
    except (TypeError, ValueError):
        return {}


def _default_name(item, kind):
    """A run's name: a run directory's name, the run a store measured (`outputs.store_label`), an export's
    file name without .npz; None for a Dataset."""
    from scoreprobe.sweep.outputs import store_label
    if kind == "dataset":
        return None
    if kind == "store":
        return store_label(item)
    return Path(item).resolve().name if kind == "run" else Path(item).name.removesuffix(".npz")


def _names(items, names, kinds):
    if names is None:
        names = [_default_name(i, k) for i, k in zip(items, kinds)]
        if len(set(names)) != len(names):   # e.g. two stores of one run: their file names
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
            mem_threshold=MEM_THRESHOLD, device=None, progress=None, store_dir=None):
    """Several runs in one Dataset with a `run` dimension.

    Parameters
    ----------
    items : clocks Datasets, clocks store paths, run directories or scaling exports (.npz), at least one.
    names : one name per run (default: the folder or file name; "run<i>" for a Dataset).
    n_samples, seed, device, progress : the clocks of a run directory (measured here).
    store_dir : a folder where a run directory's clocks are stored as `<run>.clocks.zarr` and resumed from
        (or the run's own RUN/clocks.zarr when that holds them: `scoreprobe.sweep.outputs.clocks_store_of`; the CLI
        passes "."); None: measured and not stored.
    n_boot, ci : bootstrap resamples and level of the τ of runs without them and of the differences.
    rule_threshold, mem_threshold : thresholds of τ computed here (a run's own τ are kept as they are).

    Returns
    -------
    xarray.Dataset, dims (run, step[, sample], bound): the curves (run, step) every run has
    (rule_acc, novel_valid, mem_ratio, ...), `measured` (run, step), [`state` (run, step, sample)
    when every run measured the same steps with the same sample count], the τ variables of
    `scoreprobe.stats.tidy` along `run`, `config` (run,) JSON, the differences to the first run
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
    stores = _run_stores(items, kinds, store_dir, n_samples, seed)
    runs = [ensure_taus(load_item(i, k, n_samples, seed, device, progress, store), **th)
            for i, k, store in zip(items, kinds, stores)]
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


PAIRING = ("sampling seed", "noise", "sample count", "number of checkpoints", "model kind", "rule")


def _pairing(ds):
    """{PAIRING key: value} of a run: what two runs share when sample i of one pairs with sample i of
    the other (the same starting noise, drawn the same way, of the same kind of model, under the same rule)."""
    c = _config(ds)
    source = c.get("source") if isinstance(c.get("source"), dict) else {}
    data = c.get("data") if isinstance(c.get("data"), dict) else {}
    values = (c.get("seed"), c.get("noise"), ds.sizes.get("sample"), ds.sizes["step"], source.get("kind"),
              data.get("rule", source.get("rule")))
    return dict(zip(PAIRING, values))


def unpaired_because(ds, ref):
    """The PAIRING keys in which run `ds` differs from the reference `ref` ([] when paired; a run without a
    recorded sampling seed never pairs)."""
    a, b = _pairing(ds), _pairing(ref)
    if a["sampling seed"] is None or b["sampling seed"] is None:
        return ["sampling seed (not recorded)"]
    return [k for k in PAIRING if a[k] != b[k]]


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
    ref = runs[0]
    why = [[] if i == 0 else unpaired_because(r, ref) for i, r in enumerate(runs)]
    paired = np.array([not w for w in why])
    same = np.array([_same_data(r, runs[0]) for r in runs])
    if n_boot and all("state" in r for r in runs):
        ref_point, ref_draws = resampled(ref, base_seed, n_boot, rule_threshold, mem_threshold)
        for i, r in enumerate(runs):
            point, draws = resampled(r, base_seed if paired[i] else base_seed + 1 + i, n_boot, rule_threshold,
                                     mem_threshold)
            for k in keys:
                d = _difference(np.array([ref_point[k]]), np.array([point[k]]), k)[0]
                if np.isfinite(d):   # undefined (a τ not reached, a window closed): NaN, and so is its interval
                    out[f"d_{_dname(k)}"][i] = d
                    out[f"d_{_dname(k)}_ci"][i] = _interval(_difference(ref_draws[k], draws[k], k), ci)
    variables = {}
    for k in keys:
        what = f"{_dname(k)} of the run minus that of {names[0]}" if k == "window_log10_width" else \
            f"log10((tau + 1) / (tau_{names[0]} + 1)) of {k} (NaN when either is not reached)"
        variables[f"d_{_dname(k)}"] = xr.Variable(("run",), out[f"d_{_dname(k)}"], {"long_name": what, "units": "1"})
        variables[f"d_{_dname(k)}_ci"] = xr.Variable(("run", BOUND), out[f"d_{_dname(k)}_ci"], {
            "long_name": f"{round(100 * ci)}% bootstrap interval of d_{_dname(k)} (paired where `paired`; NaN where "
                         "the difference is)", "units": "1"})
    variables["paired"] = xr.Variable(("run",), paired, {
        "long_name": f"resampled with the same sample indices as {names[0]} (the same {', '.join(PAIRING)})"})
    variables["unpaired_because"] = xr.Variable(("run",), np.array([", ".join(w) for w in why], dtype=str), {
        "long_name": f"what differs from {names[0]} so that the run is resampled independently ('' when paired)"})
    variables["same_data"] = xr.Variable(("run",), same, {
        "long_name": f"trained on the same training set as {names[0]} (false: other or unknown data)"})
    return variables


def _dname(key):
    return "log10_" + key if key.startswith("tau_") else key


# The τ table as text (`scoreprobe compare` prints it, its --report page shows it): compare_text
from scoreprobe.stats.compare_text import DIFFERENCES, difference_rows, difference_text, table_rows  # noqa: E402,F401
