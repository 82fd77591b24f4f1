"""Which oracle describes the network, called only where tests over the right unit say so; mixture weights.

Per cell of a `decompose` result (a step, σ and split), from the per-point statistics:

- `mixture_weights`: the primary attribution. The best mixture Σ w_k D_k (w ≥ 0, Σ w = 1) of the OFFERED
  oracles (named in attrs: another set gives other weights), with intervals: one model, a percentile
  bootstrap over its points (`scoreprobe.stats.decompose_boot`); several trained models, a t interval over
  the models' own weights (m − 1 df: the model is the unit).
- `best_oracle` / `decompose_summary`: per cell one label, the first that applies in this order:
    1. "undefined": an oracle's or the shrinkage's r² is not finite (NaN or constant network output);
    2. "indistinguishable": every reasonable denoiser is ≈ x here — the best shrinkage c·x AND the best
       oracle both explain r² ≥ SHRINK_R2 = 0.999 (tiny σ: a perfect oracle is not a "shrinkage");
    3. "shrinkage": r² of the best c·x ≥ SHRINK_R2 while no oracle reaches it (the untrained adaLN-Zero
       network is exactly x/(1+σ²), nearest to whichever oracle is nearest that shrinkage — no reading);
    4. "none": neither the best oracle nor the network's own affine fit explains r² ≥ `min_r2` (MIN_R2 =
       0.8) of the network's variation (`best_value`, `r2_affine`, `r2_mixture` keep what fits best);
    5. "linear": the network's own affine map A·x + b, fitted on one half of the points and scored on the
       other (`r2_affine`), explains ≥ `min_r2` and no oracle beats it (r²_best − r²_affine is not above 0 at
       p ≤ 1 − level, unadjusted): the network is its linear part, whatever oracle is nearest. `r2_affine` is
       NaN where a half holds fewer rows (points × draws) than D + 1: then no "linear" and no "memorizer"
       call (copying is claimed only against the linear baseline); the other calls go on without it;
    6. "indistinguishable": the top two oracles cannot be told apart: ‖D_best − D_runner‖² / ‖D − mean D‖²
       < DISTINCT = 0.01 (then |r²_best − r²_runner| ≤ 2·√0.01·√(1 − r²) whatever the network does);
    7. the oracle's name where its call holds: r²_best beats the runner-up by more than `margin`, the
       shrinkage c·x and the held-out affine fit, and — for "memorizer" (copying) — the training-set
       Gaussian when it is offered; each comparison tested over points (sign flips) and, with m ≥ 2
       trained models, over models (t, m − 1 df) (`scoreprobe.stats.decompose_infer`); the call's p-value
       is the largest of them, adjusted (Holm or BH, `adjust`) over the family FAMILY; called where the
       adjusted p ≤ 1 − level; otherwise "undecided".
- `best_patch`: per local family (local, local_equivariant, local_boundary) the patch size with the
  highest r² per cell (Kamb & Ganguli calibrate p per σ the same way).
"""
import numpy as np
import xarray as xr

from scoreprobe.errors import ConfigError
from scoreprobe.probes import decompose_fit as fit
from scoreprobe.stats.decompose_boot import (
    STATS,
    as_list,
    cell_layout,
    check_boot,
    estimate,
    flat_stats,
    interval,
    replicates,
)
from scoreprobe.stats.decompose_infer import compare, r2_columns, residuals, t_over_models
from scoreprobe.stats.pvalues import adjust_family

SHRINK_R2 = 0.999      # r² of the best c·x at or above this: the network is a linear shrinkage ("shrinkage")
DISTINCT = 0.01        # ‖D_best − D_runner‖² / ‖D − mean‖² below this: "indistinguishable"
MIN_R2 = 0.8           # a call needs the called oracle (or the network's affine fit) to explain this share
ADJUST = ("holm", "bh")
UNDEFINED, UNDECIDED, INDISTINGUISHABLE, SHRINKAGE = "undefined", "undecided", "indistinguishable", "shrinkage"
NONE, LINEAR = "none", "linear"
LABELS = (UNDECIDED, INDISTINGUISHABLE, SHRINKAGE, NONE, LINEAR, UNDEFINED)
TIE = UNDECIDED        # the former name of "no call" (kept for callers that import it)
FAMILY = "every cell of the result given (split × step × σ) that reaches the oracle test (step 7)"


def _dist_fn(pooled, cells, model):
    return fit.distance(pooled, fit.ss_total(pooled))


def _check(var, level, margin, min_r2, adjust):
    if var != "r2":
        raise ConfigError(f"best_oracle / decompose_summary call oracles by var='r2' (the oracle alone); got "
                          f"{var!r}. Mixture weights with intervals: mixture_weights()")
    for name, v, ok in (("margin", margin, lambda v: v >= 0), ("min_r2", min_r2, lambda v: 0 <= v <= 1)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not np.isfinite(v) \
                or not ok(v):
            raise ConfigError(f"{name} must be a finite number {'>= 0' if name == 'margin' else 'in [0, 1]'}, "
                              f"got {v!r}")
    if adjust not in ADJUST:
        raise ConfigError(f"adjust must be one of {', '.join(ADJUST)}, got {adjust!r}")
    check_boot(level, 1000, 0)


def _tests(model_res, names, best, runner, level, margin):
    """The comparisons an oracle call needs, each {diff, p, lower, upper} (`decompose_infer.compare`): the lead over
    the runner-up (beyond `margin`), over the shrinkage c·x, over the held-out affine fit and, for the memorizer,
    over the training-set Gaussian (copying is claimed only where it beats both linear fits)."""
    k, c = len(names), len(best)
    out = {"lead": compare(model_res, best, runner, level, margin),
           "over_shrink": compare(model_res, best, np.full(c, k), level),
           "over_affine": compare(model_res, best, np.full(c, k + 1), level)}
    if "gaussian" in names and "memorizer" in names:
        g = compare(model_res, best, np.full(c, list(names).index("gaussian")), level)
        mem = names[best] == "memorizer"
        out["over_gaussian"] = {v: np.where(mem, a, np.nan) for v, a in g.items()}
    return out


def _label(r2, best, dist, tests, names, level, min_r2, adjust):
    """The label per cell (module docstring, in its precedence) and the adjusted p-values (NaN off the family)."""
    k, rows = len(names), np.arange(len(best))
    r2_best, r2_shrink, r2_aff = r2[rows, best], r2[:, k], r2[:, k + 1]
    undefined = ~np.isfinite(r2[:, :k + 1]).all(-1)
    no_affine = ~np.isfinite(r2_aff)                           # too few points to fit A·x + b on a half
    label = np.full(len(best), UNDECIDED, object)
    at_x = (r2_shrink >= SHRINK_R2) & (r2_best >= SHRINK_R2)
    shrink = (r2_shrink >= SHRINK_R2) & ~at_x
    none = np.fmax(r2_best, np.nan_to_num(r2_aff, nan=-np.inf)) < min_r2
    beats_affine = (tests["over_affine"]["diff"] > 0) & (tests["over_affine"]["p"] <= 1 - level)
    linear = (r2_aff >= min_r2) & ~beats_affine
    close = dist < DISTINCT if k > 1 else np.ones(len(best), bool)
    tested = ~(undefined | at_x | shrink | none | linear | close | (no_affine & (names[best] == "memorizer")))
    diffs = [tests["lead"]["diff"] - tests["lead"]["margin"]] + [t["diff"] for n, t in tests.items() if n != "lead"]
    with np.errstate(invalid="ignore"):
        worse = np.any([~(np.nan_to_num(d, nan=1.0) > 0) for d in diffs], axis=0)   # a comparison the wrong way
        p = np.where(worse, 1.0, _raw_p(tests))
    p_adj = np.full(len(best), np.nan)
    p_adj[tested] = adjust_family(p[tested], adjust) if tested.any() else p_adj[tested]
    called = tested & (p_adj <= 1 - level)
    label[called] = names[best][called]
    for mask, name in ((close & (k > 1), INDISTINGUISHABLE), (linear, LINEAR), (none, NONE), (shrink, SHRINKAGE),
                       (at_x, INDISTINGUISHABLE), (undefined, UNDEFINED)):
        label[mask] = name                                           # the last assignment has precedence
    if k < 2:
        label[~(undefined | at_x | shrink | none | linear)] = UNDECIDED
    return label, p_adj


def _calls(ds_or_list, var, level, margin, min_r2, adjust):
    """Flat per-cell arrays of the call (module docstring) and the layout to shape them."""
    _check(var, level, margin, min_r2, adjust)
    items = as_list(ds_or_list, "best_oracle / decompose_summary", need=(*STATS, "affine"))
    names = np.asarray([str(n) for n in items[0].oracle.values], dtype=object)
    k = len(names)
    stats = [flat_stats(d) for d in items]
    model_res = [residuals(s) for s in stats]
    r2 = r2_columns(model_res)                                                   # (C, K + 2)
    dist = estimate(stats, _dist_fn, (k, k))                                     # (C, K, K)
    undefined = ~np.isfinite(r2[:, :k + 1]).all(-1)
    order = np.argsort(-np.where(np.isfinite(r2[:, :k]), r2[:, :k], -np.inf), axis=-1, kind="stable")
    best, runner = order[:, 0], order[:, min(1, k - 1)]
    rows = np.arange(len(r2))
    tests = _tests(model_res, names, best, runner, level, margin)
    tests["lead"]["margin"] = margin
    label, p_adj = _label(r2, best, dist[rows, best, runner], tests, names, level, min_r2, adjust)
    out = {"leader": names[best], "runner_up": names[runner] if k > 1 else np.full(len(r2), "", object),
           "best_value": r2[rows, best], "r2_shrink": r2[:, k], "r2_affine": r2[:, k + 1],
           "r2_mixture": np.mean([_mixture_of(s)[:, k] for s in stats], axis=0),
           "discriminability": dist[rows, best, runner], "n_undefined_oracles": (~np.isfinite(r2[:, :k])).sum(-1),
           "p_value": np.where(np.isfinite(p_adj), _raw_p(tests), np.nan), "p_adjusted": p_adj}
    nan = np.full(len(r2), np.nan)
    for name in ("lead", "over_shrink", "over_affine", "over_gaussian"):
        t = tests.get(name, {"diff": nan, "lower": nan, "upper": nan})
        out.update({name: t["diff"], f"{name}_lower": t["lower"], f"{name}_upper": t["upper"]})
    if k < 2:
        for v in ("lead", "lead_lower", "lead_upper", "discriminability"):
            out[v] = np.full(len(r2), np.nan)
    for v, a in list(out.items()):
        if a.dtype.kind == "f" and v not in ("r2_mixture",):
            out[v] = np.where(undefined, np.nan, a)
    out["leader"] = np.where(undefined, "", out["leader"]).astype(object)
    out["runner_up"] = np.where(undefined, "", out["runner_up"]).astype(object)
    out["best_oracle"] = label
    return out, names, items


def _raw_p(tests):
    """The call's unadjusted p-value: the largest of its comparisons' (intersection–union). A NaN p is a
    comparison that does not apply to the cell (over_gaussian beside a leader other than the memorizer,
    over_affine where the affine fit is undefined: such a memorizer is never tested, see _label) and is
    skipped; every tested cell has the lead's p, so the maximum is over at least one."""
    ps = np.array([t["p"] for t in tests.values()])
    return np.nanmax(np.where(np.isnan(ps), -np.inf, ps), axis=0)


def best_oracle(ds_or_list, var="r2", level=0.95, margin=0.0, min_r2=MIN_R2, adjust="holm"):
    """The oracle that describes the network, called per cell only where the tests say so.

    Parameters
    ----------
    ds_or_list : Dataset from `decompose` (dims ([step,] sigma, split, point, oracle, …)) or a selection
        that keeps `oracle` and `point`; or a list of them, one per trained model (same cells): then the model
        is the unit of inference (a t test over models, m − 1 df) as well as the points
        (`scoreprobe.stats.decompose_infer`).
    var : "r2" (the oracle alone; mixtures: `mixture_weights`).
    level : 1 − the family's error rate (Holm: family-wise; BH: false discoveries) and the intervals' level.
    margin : practical equivalence: a call needs the lead over the runner-up above `margin` (default 0).
    min_r2 : the share of the network's variation the called oracle (or the affine fit) must explain.
    adjust : "holm" or "bh", over the family of tested cells (`FAMILY`).

    Returns
    -------
    DataArray of str over the cell dims (e.g. (step, sigma, split)): the oracle's name where called, else one of
    LABELS (module docstring). `decompose_summary` gives each cell's r², leads, intervals and p-values.
    """
    return decompose_summary(ds_or_list, var, level, margin, min_r2, adjust).best_oracle


_LONGS = {"best_oracle": "the call: an oracle's name, or " + ", ".join(LABELS),
          "leader": "oracle with the highest r² (point estimate; not a call)",
          "runner_up": "oracle with the second highest r² (point estimate)",
          "best_value": "highest r² over the oracles (mean over models)",
          "r2_shrink": "r² of the best linear shrinkage c·x",
          "r2_affine": "held-out r² of the network's own affine fit",
          "r2_mixture": "r² of the best mixture of the offered oracles (mean over models)",
          "lead": "leader's r² minus the runner-up's", "over_shrink": "leader's r² minus r2_shrink",
          "over_affine": "leader's r² minus r2_affine",
          "over_gaussian": "memorizer's r² minus the training-set Gaussian's (memorizer leads only)",
          "discriminability": "‖D_leader − D_runner‖² / ‖D − mean D‖²",
          "n_undefined_oracles": "oracles whose r² is NaN or infinite",
          "p_value": "the call's p-value: the largest of its comparisons' (tested cells only)",
          "p_adjusted": "p_value adjusted over the family of tested cells"}


def _long(v, level):
    base, _, end = v.rpartition("_")
    if end in ("lower", "upper"):
        return f"{end} bound of {base} ({level:g}, unadjusted)"
    return _LONGS[v]


def decompose_summary(ds_or_list, var="r2", level=0.95, margin=0.0, min_r2=MIN_R2, adjust="holm"):
    """Per cell: the call (`best_oracle`) and what it rests on.

    Returns an xarray.Dataset over the cell dims with best_oracle (str); leader, runner_up (str: the two highest
    r² point estimates, which the call compares — not a call; "" where undefined); best_value, r2_shrink,
    r2_affine, r2_mixture; lead, over_shrink, over_affine, over_gaussian, each with _lower/_upper (the interval
    at `level` over the unit of inference: models when several, else points; unadjusted); discriminability;
    n_undefined_oracles; p_value, p_adjusted. Estimates are means over models when several are given. attrs:
    level, margin, min_r2, adjust, family, n_family, unit, n_models, oracles (the offered set), thresholds,
    `sentence`.
    """
    out, names, items = _calls(ds_or_list, var, level, margin, min_r2, adjust)
    dims, coords, shape = cell_layout(items[0])
    data = {v: (dims, np.asarray(out[v]).reshape(shape), {"long_name": _long(v, level)})
            for v in ["best_oracle", *[v for v in out if v != "best_oracle"]]}
    lab = out["best_oracle"]
    counts = {x: int((lab == x).sum()) for x in LABELS}
    n, n_family = lab.size, int(np.isfinite(out["p_adjusted"]).sum())
    unit = ("models (t, m − 1 df) and points (sign flips)" if len(items) > 1 else "points (sign flips)") \
        + "; intervals: t over " + ("models" if len(items) > 1 else "points")
    sentence = (f"{n - sum(counts.values())} of {n} cells call one oracle ({adjust} over the {n_family} tested "
                f"cells at {1 - level:.0%}; the oracle explains r² ≥ {min_r2:g} and beats the runner-up, c·x and "
                f"the network's held-out affine fit); " + ", ".join(f"{counts[x]} {x}" for x in LABELS)
                + f"; over {len(items)} model(s); oracles offered: {', '.join(names)}")
    attrs = {"var": var, "level": float(level), "margin": float(margin), "min_r2": float(min_r2), "adjust": adjust,
             "family": FAMILY, "n_family": n_family, "unit": unit, "n_models": len(items),
             "oracles": " ".join(names), "shrink_r2": SHRINK_R2, "distinct": DISTINCT, "sentence": sentence}
    ds = xr.Dataset(data, coords=coords, attrs=attrs)
    ds["best_oracle"].attrs["flag_meanings"] = " ".join([*names, *LABELS])
    return ds


def mixture_weights(ds_or_list, level=0.95, n_boot=1000, seed=0, oracles=None, min_r2=MIN_R2):
    """The best mixture of oracles per cell, with intervals: the primary attribution, conditional on the set.

    Parameters
    ----------
    ds_or_list : as for `best_oracle` (one Dataset, or a list: one per trained model: then the interval is a t
        interval over the models' own weights, m − 1 df; one model: a percentile bootstrap over its points).
    level : the intervals' level; n_boot, seed : the one-model bootstrap's resamples and seed.
    oracles : the oracles to mix (default all in the Dataset; near-collinear oracles share weight
        unidentifiably, which their intervals show). The weights answer "which mixture of THESE oracles":
        another set gives other weights (attrs `oracles`, `conditional_on`).
    min_r2 : `fits` is True where the mixture explains r² ≥ min_r2.

    Returns
    -------
    xarray.Dataset over (cell dims, oracle): weight (w ≥ 0, Σ w = 1; the mean over models), lower, upper;
    and over the cell dims r2_simplex with r2_simplex_lower/_upper (the mixture's r²), r2_shrink and
    `shrinkage` (True where the network is a linear shrinkage: the weights there are no reading of the
    network, only of which oracles are nearest a shrinkage), `fits`. NaN where undefined. attrs: level, n_boot,
    seed, n_models, unit, min_r2, oracles (the offered set), conditional_on.
    """
    check_boot(level, n_boot, seed)
    if isinstance(min_r2, bool) or not isinstance(min_r2, (int, float, np.floating)) or not 0 <= min_r2 <= 1:
        raise ConfigError(f"min_r2 must be a number in [0, 1], got {min_r2!r}")
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
    if len(items) > 1:                                                             # the model is the unit
        est, lo, hi = t_over_models(starts, level)
    else:
        reps = replicates(stats, lambda pooled, cells, j: _mixture_fn(pooled, starts[j][cells, :k]), (k + 1,),
                          n_boot, seed)                                            # (C, B, K + 1)
        lo, hi = interval(reps, level)
    return _mixture_dataset(items[0], names, (est, lo, hi, shrink), level, min_r2).assign_attrs(
        n_boot=int(n_boot), seed=int(seed), n_models=len(items),
        unit=("models: t over the models' own weights, m − 1 df" if len(items) > 1 else
              "points: percentile bootstrap over the points"))


def _mixture_dataset(ref, names, values, level, min_r2):
    """mixture_weights' Dataset from (est, lower, upper) (C, K + 1) and r2_shrink (C,) over `ref`'s cells."""
    est, lo, hi, shrink = values
    k = len(names)
    dims, coords, shape = cell_layout(ref)
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
    data["fits"] = (dims, (est[:, k] >= min_r2).reshape(shape),
                    {"long_name": f"the mixture explains r² ≥ {min_r2:g} of the network's variation"})
    return xr.Dataset(data, coords=oc, attrs={"level": float(level), "min_r2": float(min_r2),
                                              "oracles": " ".join(names),
                                              "conditional_on": "the weights are those of the best mixture of "
                                                                "exactly these oracles; another set gives others"})


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
