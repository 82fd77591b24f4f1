"""Which oracle describes the network, called only where an interval says so; mixture weights with intervals.

Per cell of a `decompose` result (a step, σ and split), from the per-point statistics (resampled by
`scoreprobe.stats.decompose_boot`: paired over points, two-level over trained models):

- `mixture_weights`: the primary attribution. The best mixture Σ w_k D_k (w ≥ 0, Σ w = 1) of the
  oracles, with percentile intervals: a network that is part memorizer and part rule shows both.
- `best_oracle` / `decompose_summary`: a call names the oracle with the highest r² only where all of
    1. the cell is defined (every oracle's r² finite; NaN or constant network output: "undefined");
    2. the network is not a linear shrinkage of its input: r² of the best c·x < SHRINK_R2 = 0.999
       ("shrinkage"; the untrained adaLN-Zero network is exactly x/(1+σ²), nearest to whichever oracle
       is nearest that shrinkage — no reading);
    3. the top two oracles can be told apart in this cell: ‖D_best − D_runner‖² / ‖D − mean D‖² ≥
       DISTINCT = 0.01 ("indistinguishable": e.g. every oracle returns the item at small σ on training
       points; then |r²_best − r²_runner| ≤ 2·√0.01·√(1 − r²) whatever the network does);
    4. the lead r²_best − r²_runner has its interval above `margin` (default 0: a tie is excluded), and
       the best oracle beats the shrinkage baseline, r²_best − r²_shrink, with its interval above 0;
  otherwise "undecided". Only the first label found is given, in that order.
- `best_patch`: per local family (local, local_equivariant, local_boundary) the patch size with the
  highest r² per cell (Kamb & Ganguli calibrate p per σ the same way).
"""
import numpy as np
import xarray as xr

from scoreprobe.errors import ConfigError
from scoreprobe.probes import decompose_fit as fit
from scoreprobe.stats.decompose_boot import (
    as_list,
    cell_layout,
    check_boot,
    estimate,
    flat_stats,
    interval,
    replicates,
)

SHRINK_R2 = 0.999      # r² of the best c·x at or above this: the network is a linear shrinkage ("shrinkage")
DISTINCT = 0.01        # ‖D_best − D_runner‖² / ‖D − mean‖² below this: "indistinguishable"
UNDEFINED, UNDECIDED, INDISTINGUISHABLE, SHRINKAGE = "undefined", "undecided", "indistinguishable", "shrinkage"
LABELS = (UNDECIDED, INDISTINGUISHABLE, SHRINKAGE, UNDEFINED)
TIE = UNDECIDED        # the former name of "no call" (kept for callers that import it)


def _r2_fn(pooled, cells, model):
    """(cells, n, K + 1): each oracle's r² and, last, the shrinkage baseline's."""
    ss = fit.ss_total(pooled)
    return np.concatenate([fit.r2_alone(pooled, ss), fit.r2_shrink(pooled, ss)[..., None]], axis=-1)


def _dist_fn(pooled, cells, model):
    return fit.distance(pooled, fit.ss_total(pooled))


def _check_margin(margin):
    if isinstance(margin, bool) or not isinstance(margin, (int, float, np.floating, np.integer)) \
            or not np.isfinite(margin) or margin < 0:
        raise ConfigError(f"margin must be a finite number >= 0, got {margin!r}")
    return float(margin)


def _calls(ds_or_list, var, level, n_boot, seed, margin):
    """Flat per-cell arrays of the call (module docstring) and the layout to shape them."""
    if var != "r2":
        raise ConfigError(f"best_oracle / decompose_summary call oracles by var='r2' (the oracle alone); got "
                          f"{var!r}. Mixture weights with intervals: mixture_weights()")
    margin = _check_margin(margin)
    check_boot(level, n_boot, seed)
    items = as_list(ds_or_list, "best_oracle / decompose_summary")
    names = np.asarray([str(n) for n in items[0].oracle.values], dtype=object)
    k = len(names)
    stats = [flat_stats(d) for d in items]
    est = estimate(stats, _r2_fn, (k + 1,))                                         # (C, K + 1)
    dist = estimate(stats, _dist_fn, (k, k))                                       # (C, K, K)
    undefined = ~np.isfinite(est).all(-1)
    order = np.argsort(-np.where(np.isfinite(est[:, :k]), est[:, :k], -np.inf), axis=-1, kind="stable")
    best, runner = order[:, 0], order[:, min(1, k - 1)]
    rows = np.arange(len(est))
    reps = replicates(stats, _r2_fn, (k + 1,), n_boot, seed)                      # (C, B, K + 1)
    lead_lo, lead_hi = interval(reps[rows, :, best] - reps[rows, :, runner], level)
    over_lo, over_hi = interval(reps[rows, :, best] - reps[:, :, k], level)
    out = {"leader": names[best], "runner_up": names[runner] if k > 1 else np.full(len(est), "", object),
           "best_value": est[rows, best], "r2_shrink": est[:, k],
           "lead": est[rows, best] - est[rows, runner], "lead_lower": lead_lo, "lead_upper": lead_hi,
           "over_shrink": est[rows, best] - est[:, k], "over_shrink_lower": over_lo, "over_shrink_upper": over_hi,
           "discriminability": dist[rows, best, runner], "n_undefined_oracles": (~np.isfinite(est[:, :k])).sum(-1)}
    if k < 2:
        for v in ("lead", "lead_lower", "lead_upper", "discriminability"):
            out[v] = np.full(len(est), np.nan)
    label = np.where(lead_lo > margin, names[best], UNDECIDED).astype(object)
    label[~(over_lo > 0)] = UNDECIDED
    if k < 2:
        label[:] = UNDECIDED                                                    # no runner-up to lead
    label[out["discriminability"] < DISTINCT] = INDISTINGUISHABLE
    label[est[:, k] >= SHRINK_R2] = SHRINKAGE
    label[undefined] = UNDEFINED
    for v, a in list(out.items()):
        if a.dtype.kind == "f":
            out[v] = np.where(undefined, np.nan, a)
    out["leader"] = np.where(undefined, "", out["leader"]).astype(object)
    out["runner_up"] = np.where(undefined, "", out["runner_up"]).astype(object)
    out["best_oracle"] = label
    return out, names, items


def best_oracle(ds_or_list, var="r2", level=0.95, n_boot=1000, seed=0, margin=0.0):
    """The oracle that describes the network, called per cell only where an interval says so.

    Parameters
    ----------
    ds_or_list : Dataset from `decompose` (dims ([step,] sigma, split, point, oracle, …)) or a selection
        that keeps `oracle` and `point`; or a list of them, one per trained model (same cells): then the
        bootstrap is two-level, models then points (`scoreprobe.stats.decompose_boot`).
    var : "r2" (the oracle alone; mixtures: `mixture_weights`).
    level, n_boot, seed : the percentile interval's level, resamples, and the resampling seed.
    margin : practical equivalence: a call needs the lead's lower bound above `margin` (default 0: the
        interval excludes a tie).

    Returns
    -------
    DataArray of str over the cell dims (e.g. (step, sigma, split)): the oracle's name where called, else
    "undecided", "indistinguishable", "shrinkage" or "undefined" (module docstring, in that precedence).
    `decompose_summary` gives each cell's lead with its interval and the rest.
    """
    return decompose_summary(ds_or_list, var, level, n_boot, seed, margin).best_oracle


def decompose_summary(ds_or_list, var="r2", level=0.95, n_boot=1000, seed=0, margin=0.0):
    """Per cell: the call (`best_oracle`) and what it rests on.

    Returns an xarray.Dataset over the cell dims with best_oracle (str); leader, runner_up (str: the two
    highest r² point estimates, which the call compares — not a call; "" where undefined); best_value,
    r2_shrink; lead, lead_lower, lead_upper; over_shrink (r²_best − r²_shrink) with _lower/_upper;
    discriminability (‖D_best − D_runner‖²/‖D − mean‖²); n_undefined_oracles. Estimates are means over
    models when several are given. attrs: level, n_boot, seed, margin, n_models, thresholds, `sentence`.
    """
    out, names, items = _calls(ds_or_list, var, level, n_boot, seed, margin)
    dims, coords, shape = cell_layout(items[0])
    longs = {"best_oracle": "the call: an oracle's name, or " + ", ".join(LABELS),
             "leader": "oracle with the highest r² (point estimate; not a call)",
             "runner_up": "oracle with the second highest r² (point estimate)",
             "best_value": "highest r² over the oracles", "r2_shrink": "r² of the best linear shrinkage c·x",
             "lead": "leader's r² minus the runner-up's", "lead_lower": f"lower bound of the lead ({level:g})",
             "lead_upper": f"upper bound of the lead ({level:g})", "over_shrink": "leader's r² minus r2_shrink",
             "over_shrink_lower": "lower bound of over_shrink", "over_shrink_upper": "upper bound of over_shrink",
             "discriminability": "‖D_leader − D_runner‖² / ‖D − mean D‖²",
             "n_undefined_oracles": "oracles whose r² is NaN or infinite"}
    data = {v: (dims, np.asarray(out[v]).reshape(shape), {"long_name": longs[v]}) for v in longs}
    lab = out["best_oracle"]
    counts = {x: int((lab == x).sum()) for x in LABELS}
    n = lab.size
    sentence = (f"{n - sum(counts.values())} of {n} cells call one oracle (the lead's {level:.0%} interval "
                f"above {margin:g} and the oracle beats the best shrinkage c·x); {counts[UNDECIDED]} {UNDECIDED}, "
                f"{counts[INDISTINGUISHABLE]} {INDISTINGUISHABLE} (top two within {DISTINCT} of the network's "
                f"variance), {counts[SHRINKAGE]} {SHRINKAGE} (r² of c·x ≥ {SHRINK_R2}), {counts[UNDEFINED]} "
                f"{UNDEFINED}; over {len(items)} model(s), {n_boot} resamples")
    attrs = {"var": var, "level": float(level), "n_boot": int(n_boot), "seed": int(seed), "margin": float(margin),
             "n_models": len(items), "shrink_r2": SHRINK_R2, "distinct": DISTINCT, "sentence": sentence}
    ds = xr.Dataset(data, coords=coords, attrs=attrs)
    ds["best_oracle"].attrs["flag_meanings"] = " ".join([*names, *LABELS])
    return ds


def mixture_weights(ds_or_list, level=0.95, n_boot=1000, seed=0, oracles=None):
    """The best mixture of oracles per cell, with bootstrap intervals: the primary attribution.

    Parameters
    ----------
    ds_or_list : as for `best_oracle` (one Dataset, or a list: one per trained model).
    level, n_boot, seed : as for `best_oracle`. oracles : the oracles to mix (default all in the Dataset;
        near-collinear oracles share weight unidentifiably, which their intervals show).

    Returns
    -------
    xarray.Dataset over (cell dims, oracle): weight (w ≥ 0, Σ w = 1; the mean over models), lower, upper;
    and over the cell dims r2_simplex with r2_simplex_lower/_upper (the mixture's r²), r2_shrink and
    `shrinkage` (True where the network is a linear shrinkage: the weights there are no reading of the
    network, only of which oracles are nearest a shrinkage). NaN where undefined.
    """
    check_boot(level, n_boot, seed)
    items = as_list(ds_or_list, "mixture_weights")
    if oracles is not None:
        oracles = [str(o) for o in oracles]
        unknown = sorted(set(oracles) - {str(o) for o in items[0].oracle.values})
        if unknown or not oracles or len(set(oracles)) != len(oracles):
            raise ConfigError(f"oracles must be distinct names in the Dataset; unknown: {unknown}")
    names = oracles or [str(o) for o in items[0].oracle.values]
    k = len(names)
    stats = [flat_stats(d, oracles) for d in items]
    starts = [_mixture_of(s) for s in stats]                                       # per model (C, K + 1)

    est = np.mean(starts, axis=0)
    shrink = estimate(stats, lambda pooled, cells, j: fit.r2_shrink(pooled, fit.ss_total(pooled))[..., None],
                      (1,))[:, 0]
    reps = replicates(stats, lambda pooled, cells, j: _mixture_fn(pooled, starts[j][cells, :k]), (k + 1,),
                      n_boot, seed)                                                # (C, B, K + 1)
    lo, hi = interval(reps, level)
    dims, coords, shape = cell_layout(items[0])
    cdims = (*dims, "oracle")
    oc = {**coords, "oracle": ("oracle", np.array(names, dtype=object))}
    data = {"weight": (cdims, est[:, :k].reshape(*shape, k), {"long_name": "mixture weight (≥ 0, Σ = 1)"}),
            "lower": (cdims, lo[:, :k].reshape(*shape, k), {"long_name": f"lower bound ({level:g})"}),
            "upper": (cdims, hi[:, :k].reshape(*shape, k), {"long_name": f"upper bound ({level:g})"}),
            "r2_simplex": (dims, est[:, k].reshape(shape), {"long_name": "r² of the mixture"}),
            "r2_simplex_lower": (dims, lo[:, k].reshape(shape), {"long_name": f"lower bound ({level:g})"}),
            "r2_simplex_upper": (dims, hi[:, k].reshape(shape), {"long_name": f"upper bound ({level:g})"}),
            "r2_shrink": (dims, shrink.reshape(shape), {"long_name": "r² of the best linear shrinkage c·x"}),
            "shrinkage": (dims, (shrink >= SHRINK_R2).reshape(shape),
                          {"long_name": f"the network is a linear shrinkage (r2_shrink ≥ {SHRINK_R2}): weights not "
                                        "a reading"})}
    return xr.Dataset(data, coords=oc, attrs={"level": float(level), "n_boot": int(n_boot), "seed": int(seed),
                                              "n_models": len(items)})


def _mixture_of(stats):
    """Full-sample mixture per cell for one model: (C, K + 1) = weights and r²."""
    c, k = len(stats["yty"]), stats["gram"].shape[-1]
    out = np.full((c, k + 1), np.nan)
    real = (stats["n_rows"] > 0).astype(np.float64)                                  # (C, P)
    pooled = {n: np.einsum("cp,cp...->c...", real, v) for n, v in stats.items()}
    ss = fit.ss_total(pooled)
    for i in range(c):
        if not (np.isfinite(pooled["gram"][i]).all() and ss[i] > 0):
            continue
        w = fit.simplex_fit(pooled["gram"][i], pooled["xty"][i])
        out[i, :k] = w
        out[i, k] = 1 - fit.fit_error(pooled["gram"][i], pooled["xty"][i], pooled["yty"][i], w) / ss[i]
    return out


def _mixture_fn(pooled, w0):
    """(cells, n, K + 1): the mixture's weights and r² on each resample, warm-started at w0 (cells, K)."""
    g, b = pooled["gram"], pooled["xty"]
    c, n, k = b.shape
    out = np.full((c, n, k + 1), np.nan)
    ss = fit.ss_total(pooled)
    for i in range(c):
        if not np.isfinite(w0[i]).all():
            continue
        w = fit.simplex_batch(g[i], b[i], w0[i])
        out[i, :, :k] = w
        out[i, :, k] = 1 - fit.fit_error(g[i], b[i], pooled["yty"][i], w) / ss[i]
    return out


def best_patch(ds, var="r2"):
    """Per cell and local family, the patch size whose oracle has the highest `var` (point estimate).

    ds : a decompose Dataset whose oracle dim carries `family` and `patch` coordinates (decompose with
    patch=(3, 5, …)). Returns a Dataset over (cell dims, family): best_patch (int; -1 where undefined)
    and value (the best `var`)."""
    if var not in ds or "family" not in ds.coords or "patch" not in ds.coords:
        raise ConfigError(f"best_patch needs a decompose Dataset with {var!r} and the oracle coordinates "
                          "'family' and 'patch'")
    fam = np.asarray(ds.family.values, dtype=object)
    local = sorted({f for f, p in zip(fam, ds.patch.values) if int(p) > 0})
    if not local:
        raise ConfigError("best_patch: no local oracle in the Dataset")
    bests, values = [], []
    for f in local:
        sub = ds[var].isel(oracle=np.flatnonzero(fam == f))
        arr = sub.transpose(..., "oracle").values
        ok = np.isfinite(arr).all(-1)
        idx = np.argmax(np.where(np.isfinite(arr), arr, -np.inf), axis=-1)
        p = np.asarray(sub.patch.values)[idx]
        bests.append(np.where(ok, p, -1))
        values.append(np.where(ok, np.take_along_axis(arr, idx[..., None], -1)[..., 0], np.nan))
    dims = tuple(d for d in ds[var].dims if d != "oracle")
    coords = {k: v for k, v in ds[var].coords.items() if "oracle" not in v.dims}
    coords["family"] = ("family", np.array(local, dtype=object))
    return xr.Dataset({"best_patch": ((*dims, "family"), np.stack(bests, -1)),
                       "value": ((*dims, "family"), np.stack(values, -1))}, coords=coords, attrs={"var": var})
