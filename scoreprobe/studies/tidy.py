"""A Grid's exports as one tidy Dataset, and the pooled values and exponents read from it.

    ds = collect(grid)                      # dims: the grid's axes, rule_threshold, mem_threshold
    p = pool(ds, over="seed")               # geometric mean of τ over training seeds, t interval on ln τ
    f = fit_exponent(ds, x="N", over="seed")    # b of τ ∝ N^b, least squares over every seed's ln τ

`collect` reads each cell's export (<out>/exports/<name>.npz, `export.load_exports`: only an export of the
cell's own TrainConfig counts) and its τ at every threshold with `scoreprobe.stats.curves.run_curves`
(τ_rule at RULE_THRESHOLDS, τ_mem at MEM_THRESHOLDS, docs/definitions.md). Undefined stays undefined:
a τ a run did not reach is NaN with `rule_reached` / `mem_reached` False (its budget, the last checkpoint, in
`budget`); a cell not exported yet is NaN everywhere with `exported` False, and named in attrs["missing"].

Units. τ in training steps (optimizer steps of the cell's batch size). `pool` pools over training seeds
(the units of its interval are the seeds of the axis `over`; every other axis, the data seed included
unless it is an axis, is held fixed), with `scoreprobe.stats.seeds.pool_seeds`: the geometric mean and a t
interval on ln τ with S − 1 df; where some seed did not reach the threshold the value is NaN and
`<key>_lower_bound` holds the bound at the budget (unreached seeds at their last step); where some seed
crossed before its first checkpoint after 0 nothing is read (`<key>_under_resolved`).
`fit_exponent` fits ln τ = ln a + b ln x (`seed_fit`: every seed's ln τ a point, t interval on b with
n − 2 df); an x with a censored seed is left out (counted in `x_left_out`), never fitted as a number.
"""
import json
import math

import numpy as np
import xarray as xr

from scoreprobe.errors import ConfigError
from scoreprobe.stats.curves import run_curves
from scoreprobe.stats.seeds import pool_seeds, seed_fit
from scoreprobe.stats.thresholds import MEM_THRESHOLDS, RULE_THRESHOLDS
from scoreprobe.studies.divergence import never_started
from scoreprobe.studies.export import load_exports

KEYS = {"tau_rule": ("rule_threshold", "rule_reached"), "tau_mem": ("mem_threshold", "mem_reached")}
STEPS = "training steps"


def _cell_values(info):
    """{var: value} of one export: τ curves (NaN where unreached), reached, budget, params, peaks."""
    ds, c = info["ds"], run_curves(info["ds"])
    out = {"budget": float(ds.step.values[-1]), "resolved_from": float(c["resolved_from"][0]),
           "params": float(info["params"]), "peak_rule_acc": float(ds.rule_acc.max()),
           "final_mem": float(ds.mem_ratio[-1]), "train_start": _train_start(info["meta"]),
           "never_started": never_started(info["meta"]),
           "loss_spikes": float(len(info["meta"].get("loss_spikes", [])))}
    for key, (_, reached) in KEYS.items():
        tau = np.asarray(c[key], dtype=np.float64)
        out[key], out[reached] = np.where(np.isfinite(tau), tau, np.nan), np.isfinite(tau)
    return out


def _train_start(meta):
    """The step training started (export meta, `scoreprobe.studies.divergence`); NaN when not recorded or never."""
    start = meta.get("train_start")
    return math.nan if start is None else float(start)


def collect(grid):
    """One Dataset of the grid's exports.

    Returns
    -------
    xarray.Dataset with dims = grid.axes (coords: the values; rule specs by label), rule_threshold (T_r,),
    mem_threshold (T_m,): tau_rule (axes..., rule_threshold), tau_mem (axes..., mem_threshold) in steps (NaN:
    not reached or not exported); rule_reached, mem_reached (bool, same dims); exported (axes) bool; budget
    (axes) the last checkpoint step; resolved_from (axes) the first checkpoint after step 0; params (axes);
    peak_rule_acc (axes) the largest rule accuracy of any checkpoint; final_mem (axes) the memorized share at
    the last checkpoint; train_start (axes) the first logged step with loss below 0.5 (NaN: not recorded, or
    never); never_started (axes) bool, True where the log shows the loss never fell below 0.5; loss_spikes (axes)
    how many loss spikes training recovered from. attrs: grid, axes (JSON), base_config (JSON), missing (JSON
    {run: why}), units.
    """
    shape = tuple(grid.sizes.values())
    T = {"tau_rule": len(RULE_THRESHOLDS), "tau_mem": len(MEM_THRESHOLDS)}
    arrays = {k: np.full(shape + (T[k],), np.nan) for k in KEYS}
    arrays.update({r: np.zeros(shape + (T[k],), bool) for k, (_, r) in KEYS.items()})
    scalars = ("budget", "resolved_from", "params", "peak_rule_acc", "final_mem", "train_start", "loss_spikes")
    arrays.update({k: np.full(shape, np.nan) for k in scalars})
    exported, arrays["never_started"] = np.zeros(shape, bool), np.zeros(shape, bool)
    done, missing = load_exports(grid.runs, grid.exports)
    for idx, run in zip(np.ndindex(*shape), grid.runs):
        if run.name in done:
            exported[idx] = True
            for k, v in _cell_values(done[run.name]).items():
                arrays[k][idx] = v
    axes = list(grid.sizes)
    data = {k: (axes + [KEYS[k][0]], arrays[k]) for k in KEYS}
    data.update({r: (axes + [t], arrays[r]) for t, r in KEYS.values()})
    data.update({k: (axes, arrays[k]) for k in scalars})
    data["exported"], data["never_started"] = (axes, exported), (axes, arrays["never_started"])
    coords = {**grid.coords(), "rule_threshold": list(RULE_THRESHOLDS), "mem_threshold": list(MEM_THRESHOLDS)}
    ds = xr.Dataset(data, coords=coords)
    _describe(ds)
    ds.attrs.update(grid=grid.name, axes=json.dumps(grid.axes, default=str), base_config=json.dumps(
        grid.base.to_dict(), sort_keys=True, default=str), missing=json.dumps(missing), n_runs=len(grid),
        n_exported=int(exported.sum()))
    return ds


def _describe(ds):
    for k in KEYS:
        ds[k].attrs.update(units=STEPS, long_name=f"{k} at each threshold (NaN: not reached or not exported)")
    ds["budget"].attrs.update(units=STEPS, long_name="last checkpoint (the budget of an unreached τ)")
    ds["resolved_from"].attrs.update(units=STEPS, long_name="first checkpoint after step 0")
    ds["params"].attrs.update(units="parameters", long_name="trainable parameters of the network")
    ds["peak_rule_acc"].attrs.update(units="1", long_name="largest rule accuracy over the checkpoints")
    ds["final_mem"].attrs.update(units="1", long_name="share of samples equal to a training item, last checkpoint")
    ds["train_start"].attrs.update(units=STEPS, long_name="first logged step with loss below 0.5 (NaN: never, or "
                                   "not recorded)")
    ds["loss_spikes"].attrs.update(units="1", long_name="loss spikes training recovered from")
    ds["never_started"].attrs.update(long_name="the training log shows no loss below 0.5 (an untrained network)")


def _check_dims(ds, *dims):
    for d in dims:
        if not isinstance(d, str) or d not in ds.dims:
            raise ConfigError(f"{d!r} is not an axis of this grid's Dataset (axes: {', '.join(map(str, ds.dims))})")


def _seed_values(ds, key, over, keep):
    """(values, reached, exported, budget, first) with `over` last, other dims in `keep` order: (..., S)."""
    reached_name = KEYS[key][1]
    order = keep + [over]
    return (ds[key].transpose(*order).values, ds[reached_name].transpose(*order).values,
            ds["exported"].broadcast_like(ds[key]).transpose(*order).values,
            ds["budget"].broadcast_like(ds[key]).transpose(*order).values,
            ds["resolved_from"].broadcast_like(ds[key]).transpose(*order).values)


def _pool_cell(tau, reached, exported, budget, first, ci):
    """[value, lo, hi, lower_bound, n_seeds, n_reached, under_resolved] of one cell's seeds (S,)."""
    ok = exported
    if not ok.any():
        return [math.nan] * 4 + [0, 0, False]
    pts = np.where(reached[ok], tau[ok], np.inf)
    if np.any(pts < first[ok]):   # crossed before the first checkpoint after 0: only τ ≤ it is known
        return [math.nan] * 4 + [int(ok.sum()), int(reached[ok].sum()), True]
    p = pool_seeds(pts, last_steps=budget[ok], ci=ci)
    value = math.nan if p["lower_bound"] else p["pooled"]
    return [value, *p["ci"], p["pooled"] if p["lower_bound"] else math.nan, p["n_seeds"], p["n_reached"], False]


def pool(ds, over="seed", keys=("tau_rule", "tau_mem"), ci=0.95):
    """τ pooled over the training seeds of axis `over` (units: training seeds; every other axis held fixed).

    Returns
    -------
    Dataset with the dims of `ds` less `over`: per key, <key> (geometric mean, steps; NaN where a seed is
    censored or under-resolved), <key>_lo / <key>_hi (t interval on ln τ, S − 1 df; one seed: NaN),
    <key>_lower_bound (where censored: the geometric mean with unreached seeds at their budget), <key>_n_reached,
    <key>_under_resolved (bool); n_seeds (exported seeds per cell).
    """
    _check_dims(ds, over)
    out = {}
    for key in keys:
        keep = [d for d in ds[key].dims if d != over]
        vals = _seed_values(ds, key, over, keep)
        shape = vals[0].shape[:-1]
        cells = np.array([_pool_cell(*(v[i] for v in vals), ci) for i in np.ndindex(*shape)], dtype=object)
        cells = cells.reshape(shape + (7,))
        for j, suffix in enumerate(("", "_lo", "_hi", "_lower_bound")):
            out[key + suffix] = (keep, cells[..., j].astype(np.float64), {"units": STEPS})
        out[key + "_n_reached"] = (keep, cells[..., 5].astype(np.int64))
        out[key + "_under_resolved"] = (keep, cells[..., 6].astype(bool))
        out["n_seeds"] = (keep, cells[..., 4].astype(np.int64))
    used = {d for v in out.values() for d in v[0]}
    res = xr.Dataset({k: xr.Variable(*v) for k, v in out.items()},
                     coords={k: v for k, v in ds.coords.items() if set(v.dims) <= used})
    res["n_seeds"] = res["n_seeds"].isel({d: 0 for d in res["n_seeds"].dims if d.endswith("_threshold")}, drop=True)
    res.attrs.update(pooled_over=over, units=f"τ in {STEPS}; interval units: the training seeds of axis '{over}' "
                     "(every other axis fixed, the data seed too unless it is an axis)",
                     method=f"geometric mean; {ci:.0%} t interval on ln τ with S − 1 df (scoreprobe.stats.seeds."
                     "pool_seeds); censored seeds: a lower bound at the budget, no value")
    return res


def _fit_cell(xs, tau, reached, exported, budget, first, kind, ci):
    """[b, lo, hi, a, n_points, n_x, x_left_out] of one cell: xs (K,), the rest (K, S)."""
    use = [k for k in range(len(xs)) if exported[k].any()]
    pts = [np.where(reached[k][exported[k]], tau[k][exported[k]], np.inf) for k in use]
    if any(np.any(p < first[k][exported[k]]) for p, k in zip(pts, use)):
        return [math.nan] * 4 + [0, 0, 0]
    f = seed_fit([float(xs[k]) for k in use], pts, kind=kind, ci=ci,
                 last_steps=[budget[k][exported[k]] for k in use])
    b, lo_hi, a = (f["b"], f["b_ci"], f["a"]) if kind == "power" else (f["factor"], f["factor_ci"], f["c"])
    return [b, lo_hi[0], lo_hi[1], a, f["n_points"], len(f["xs"]), len(f["left_out"])]


def fit_exponent(ds, x="N", over="seed", key="tau_mem", kind="power", ci=0.95):
    """b of τ ∝ x^b (kind="power"; kind="exp": the factor f of τ ∝ f^x) across axis `x`, seeds of `over` pooled.

    Returns
    -------
    Dataset with the dims of ds[key] less x and over: b, b_lo, b_hi (t interval with n − 2 df over every seed's
    ln τ), a (prefactor; exp: the intercept c), n_points (seeds fitted), n_x (x values used), x_left_out (x
    values with a censored seed: never fitted as numbers). NaN b where fewer than two x are usable or some seed
    crossed before its first checkpoint.
    """
    _check_dims(ds, x, over)
    if x == over:
        raise ConfigError(f"fit_exponent: x and over must be two different axes, got {x!r} for both")
    if key not in KEYS:
        raise ConfigError(f"fit_exponent: key must be one of {', '.join(KEYS)}, got {key!r}")
    if not np.issubdtype(ds[x].dtype, np.number):
        raise ConfigError(f"fit_exponent: axis {x!r} must hold numbers, got {ds[x].values.tolist()}")
    keep = [d for d in ds[key].dims if d not in (x, over)]
    vals = [v.transpose(*keep, x, over).values for v in _as_arrays(ds, key)]
    xs = ds[x].values
    shape = vals[0].shape[:-2]
    cells = np.array([_fit_cell(xs, *(v[i] for v in vals), kind, ci) for i in np.ndindex(*shape)], dtype=np.float64)
    cells = cells.reshape(shape + (7,))
    names = ("b", "b_lo", "b_hi", "a", "n_points", "n_x", "x_left_out")
    res = xr.Dataset({n: (keep, cells[..., j] if j < 4 else cells[..., j].astype(np.int64))
                      for j, n in enumerate(names)},
                     coords={k: v for k, v in ds.coords.items() if set(v.dims) <= set(keep)})
    res.attrs.update(key=key, x=x, pooled_over=over, kind=kind, units=f"b: dimensionless exponent of τ ({STEPS}) in "
                     f"{x}; interval units: the training seeds of axis '{over}', every seed's ln τ a point",
                     method=f"least squares of ln τ on ln {x}; {ci:.0%} t interval with n − 2 df "
                     "(scoreprobe.stats.seeds.seed_fit); an x with a censored seed is left out")
    return res


def _as_arrays(ds, key):
    """ds[key], reached, exported, budget, resolved_from as DataArrays broadcast to ds[key]'s dims."""
    like = ds[key]
    return [like, ds[KEYS[key][1]]] + [ds[v].broadcast_like(like) for v in ("exported", "budget", "resolved_from")]


def cells(pooled, key="tau_mem", digits=0):
    """The pooled `key` of `pool` as text per cell (a DataArray of str, dims of pooled[key]): "value [lo, hi]";
    "> bound (k of S reached)" where some seed is censored; "under-resolved" where a seed crossed before its
    first checkpoint; "no seeds" where none is exported. `cells(p).to_pandas()` is a table of a 2-D grid."""
    def one(v, lo, hi, bound, n_reached, under, n_seeds):
        if n_seeds == 0:
            return "no seeds"
        if under:
            return "under-resolved"
        if math.isnan(v):
            return f"> {bound:.{digits}f} ({n_reached} of {n_seeds} reached)"
        if math.isnan(lo) or math.isnan(hi):   # one seed: a value, no interval (never a made-up one)
            return f"{v:.{digits}f} (no interval: {n_seeds} seed)"
        return f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"
    parts = [pooled[key + s] for s in ("", "_lo", "_hi", "_lower_bound", "_n_reached", "_under_resolved")]
    parts.append(pooled["n_seeds"].broadcast_like(pooled[key]))
    return xr.apply_ufunc(np.vectorize(one, otypes=[object]), *parts).rename(key)


def exponent_text(fit, digits=2):
    """The exponent of `fit_exponent` as text per cell (a DataArray of str, dims of fit.b): "b = 1.30 [1.20, 1.40]
    over 4 N"; where it is undefined, why ("undefined: 1 N usable, 1 left out (a seed censored); a slope needs
    2"), never a number; a fit without an interval says so."""
    x = fit.attrs.get("x", "x")

    def one(b, lo, hi, n_x, left_out):
        out = f", {left_out} left out (a seed censored)" if left_out else ""
        if math.isnan(b):
            return f"undefined: {n_x} {x} usable{out}; a slope needs 2"
        ci = "(no interval)" if math.isnan(lo) or math.isnan(hi) else f"[{lo:.{digits}f}, {hi:.{digits}f}]"
        return f"b = {b:.{digits}f} {ci} over {n_x} {x}{out}"
    parts = [fit[k] for k in ("b", "b_lo", "b_hi", "n_x", "x_left_out")]
    return xr.apply_ufunc(np.vectorize(one, otypes=[object]), *parts).rename("b")
