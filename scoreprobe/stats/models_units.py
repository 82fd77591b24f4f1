"""Trained models × units: per series, the (trained models × units) table
of every quantity, its units aligned across the models (every model of a series is measured on the same
planes, items and DSM pairs), and intervals with models and units as the units of resampling
(scoreprobe.stats.crossed; docs/definitions.md, "Trained models and units"):

- a mean over models and units at a step: `crossed_mean` (two-way ANOVA, Satterthwaite t), with the
  variance split between models, units and their interaction;
- a statistic computed per model (a half-change step, its ratio to the model's own τ at each threshold,
  a ratio of means, a difference between two sets of units): the spread over the models plus a bootstrap
  of the units shared by them (`models_and_units`).
Symmetric planes that share a (training, held-out) pair are averaged into one unit first; a unit with a
non-finite value in some model is left out of that quantity.
"""
import math

import numpy as np

from scoreprobe.stats.curves import run_curves, thresholds_of
from scoreprobe.stats.crossed import crossed_mean, models_and_units, two_level_bootstrap
from scoreprobe.stats.intervals import tost
from scoreprobe.stats.timing import fit_log_sigmoid

DSM_BAND = (0.2, 2.0)
LN2 = math.log(2.0)


def _lists(d):
    return {k: np.asarray(v).tolist() for k, v in d.items()}


# ---------------------------------------------------------------------------------------------
# (models × units × steps) tables
# ---------------------------------------------------------------------------------------------

def _share(b, q):
    s = b["shares"]
    if q == "valid":
        return s["training"] + s["heldout"] + s["novel"]
    if q == "asymmetry":                           # the plane's first anchor (t) minus its second (h)
        return s["anchor0"] - s["anchor1"]
    return s[q]


def basin_table(models, kinds, extent, sigma, q):
    """(Y (M, clusters, S), n planes) of quantity `q` over the planes of `kinds` every model has (their
    order: the first model's), planes of one cluster averaged; None when there is none."""
    blocks, n_planes = [], 0
    for kind in kinds:
        name = f"{kind}/{extent}@{sigma:g}"
        if not all(name in m["basins"] for m in models):
            continue
        sets = [m["basins"][name] for m in models]
        keys = [k for k in sets[0]["keys"] if all(k in s["keys"] for s in sets[1:])]
        if not keys:
            continue
        rows = [[s["keys"].index(k) for k in keys] for s in sets]
        vals = np.stack([_share(s, q)[r] for s, r in zip(sets, rows)])            # (M, P, S)
        clusters = [sets[0]["clusters"][i] for i in rows[0]]
        ids = list(dict.fromkeys(clusters))
        blocks.append(np.stack([vals[:, [c == i for c in clusters]].mean(axis=1) for i in ids], axis=1))
        n_planes += len(keys)
    return (np.concatenate(blocks, axis=1), n_planes) if blocks else (None, 0)


def retention_table(models, split, sigma, outcome):
    """Y (M, items, S) of a retention outcome over the items every model has with finite values; None if none."""
    sets = [m["retention"].get((split, float(sigma))) for m in models]
    if any(s is None or outcome not in s["values"] for s in sets):
        return None
    keys = [k for k in sets[0]["keys"] if all(k in s["keys"] for s in sets[1:])]
    Y = np.stack([s["values"][outcome][[s["keys"].index(k) for k in keys]] for s in sets])
    keep = np.isfinite(Y).all(axis=(0, 2))
    return Y[:, keep] if keep.sum() >= 2 else None


def dsm_table(models, band=DSM_BAND):
    """(Y (M, pairs, S, σ) paired gaps, σ grid, band mask) over the pairs every model has; None if none."""
    if any(m["dsm"] is None for m in models):
        return None
    keys = [k for k in models[0]["dsm"]["keys"] if all(k in m["dsm"]["keys"] for m in models[1:])]
    Y = np.stack([m["dsm"]["gap"][[m["dsm"]["keys"].index(k) for k in keys]] for m in models])
    sig = np.asarray(models[0]["dsm"]["sigma"], dtype=np.float64)
    return Y, sig, (sig >= band[0]) & (sig <= band[1])


# ---------------------------------------------------------------------------------------------
# Per-step curves
# ---------------------------------------------------------------------------------------------

def curve(Y):
    """crossed_mean at every step of Y (M, U, S): dict of (S,) lists, per_model (M, S), n_units."""
    r = crossed_mean(np.moveaxis(Y, -1, 0))
    return {**_lists(r), "per_model": Y.mean(axis=1).tolist(), "n_units": int(Y.shape[1])}


def per_model_curve(theta, stat, values, n_boot, seed, strata=None):
    """models_and_units at every step of a per-model statistic: theta (M, S), stat(drawn) -> (b, M, S) on
    values (M, U, S, ...); the unit replicates pool the models by their mean."""
    boot = two_level_bootstrap(values, lambda d: stat(d).mean(axis=1), n_boot, seed, resample_models=False,
                               strata=strata)
    r = models_and_units(theta, boot, values.shape[1])
    return {**_lists(r), "per_model": np.asarray(theta).tolist(), "n_units": int(values.shape[1])}


def difference_curve(Ya, Yb, n_boot, seed):
    """mean(Ya) − mean(Yb) per model (two sets of units, e.g. training and held-out items), pooled over the
    models; the units bootstrap resamples each set apart."""
    Ua = Ya.shape[1]
    stat = lambda d: d[:, :, :Ua].mean(axis=2) - d[:, :, Ua:].mean(axis=2)      # noqa: E731
    vals = np.concatenate([Ya, Yb], axis=1)
    strata = np.r_[np.zeros(Ua, int), np.ones(Yb.shape[1], int)]
    return per_model_curve(stat(vals[None])[0], stat, vals, n_boot, seed, strata)


def sum_ratio_curve(Ynum, Yden, n_boot, seed):
    """Σ num / Σ den over the units of each model (e.g. captured nearer its own item / captured), pooled over
    the models; NaN at a step where some model has no denominator. A ratio of sums over units, not the ratio of
    two configurations' τ (`scoreprobe.stats.seeds.ratio_curve`)."""
    def stat(d):
        with np.errstate(invalid="ignore", divide="ignore"):
            return d[..., 0].sum(axis=2) / d[..., 1].sum(axis=2)
    vals = np.stack([Ynum, Yden], axis=-1)                                         # (M, U, S, 2)
    return per_model_curve(stat(vals[None])[0], stat, vals, n_boot, seed)


# ---------------------------------------------------------------------------------------------
# Half-change steps per model, pooled; their ratio to each model's τ over thresholds
# ---------------------------------------------------------------------------------------------

def _ln_midpoints(st, curves, end):
    """ln of the fitted logistic midpoints of curves (N, S') over st[:end]: −inf before the first fitted
    step, +inf after the last (censored), NaN when fewer than 4 points."""
    if end < 4:
        return np.full(len(curves), np.nan)
    m = fit_log_sigmoid(st[:end], curves[:, :end])["m"]
    lo, hi = math.log(st[0]), math.log(st[end - 1])
    return np.where(m < lo, -np.inf, np.where(m > hi, np.inf, m))


def half_change(Y, steps, n_boot, seed=0):
    """Half-change step of each model (the midpoint of a logistic in ln step fitted to its mean curve over
    the positive steps up to that curve's extreme, as timing.sigmoid_half_change) and pooled: the mean of
    ln step over the models with the models-and-units interval. Returns a JSON-able dict: per_model
    (steps; None where censored), censored ("before"/"after"/"too few"/None per model), per_model_ci
    (units only: the one-model intervals), ln_step (models_and_units dict, or None when some model is
    censored), step, ci, units_replicates (ln step, pooled), n_units."""
    pos = np.asarray(steps) > 0
    st, Y = np.asarray(steps, np.float64)[pos], Y[..., pos]
    C = Y.mean(axis=1)                                                            # (M, S')
    ends = [int(np.argmax(np.abs(c - c[0]))) + 1 for c in C]    # a NaN knot is np.argmax's pick: its fit is NaN
    ln = np.array([_ln_midpoints(st, C[i:i + 1], e)[0] for i, e in enumerate(ends)])

    def stat(d):                                                                  # (b, M, U, S') -> (b, M)
        curves = d.mean(axis=2)
        return np.stack([_ln_midpoints(st, curves[:, i], e) for i, e in enumerate(ends)], axis=1)
    boot = two_level_bootstrap(Y, stat, n_boot, seed, resample_models=False)      # (B, M)
    with np.errstate(invalid="ignore"):
        pooled = boot.mean(axis=1)
        b = np.where(np.isnan(boot), np.inf, boot)                                # ±inf: censored
        q = np.stack([np.percentile(b, 2.5, axis=0, method="lower"), np.percentile(b, 97.5, axis=0, method="higher")])
    censored = [None if np.isfinite(v) else "too few" if np.isnan(v) else "before" if v < 0 else "after" for v in ln]
    out = {"per_model": [float(np.exp(v)) if np.isfinite(v) else None for v in ln], "censored": censored,
           "per_model_ci": np.exp(q).T.tolist(), "fit_ends": [float(st[e - 1]) for e in ends],
           "fit_first": float(st[0]),
           "n_units": int(Y.shape[1]), "units_replicates": pooled, "ln": ln, "ln_step": None,
           "step": math.nan, "ci": [math.nan, math.nan]}
    if np.isfinite(ln).all() and len(ln) >= 2:
        r = models_and_units(ln, pooled, Y.shape[1])
        out.update(ln_step={k: float(v) for k, v in r.items()}, step=math.exp(r["mean"]),
                   ci=[math.exp(r["lo"]), math.exp(r["hi"])])
    return out


def tau_curves(models, key):
    """(M, T) τ of every model at each threshold of `key` (tau_rule or tau_mem; inf: not reached; NaN: crossed
    before the first checkpoint after step 0, not resolved)."""
    curves = [run_curves(m["clocks"]) for m in models]
    return np.stack([np.where(c[key] < c["resolved_from"][0], np.nan, c[key]) for c in curves])


def tau_ratio(hc, taus, key):
    """Half-change / τ at each threshold of `key`: per threshold {threshold, value, ci, censored, p_below,
    p_above (one-sided, ratio < 1 / > 1), p_within2 (TOST of 1/2 < ratio < 2), se, df}; censored where a
    model's half-change or τ is not a number."""
    ln_tau = np.log(taus)                                                         # (M, T)
    rows = []
    for j, t in enumerate(thresholds_of(key)):
        row = {"threshold": float(t), "censored": True, "value": math.nan, "ci": [math.nan, math.nan]}
        if hc["ln_step"] is not None and np.isfinite(ln_tau[:, j]).all():
            theta = hc["ln"] - ln_tau[:, j]
            r = models_and_units(theta, hc["units_replicates"] - ln_tau[:, j].mean(), hc["n_units"])
            row.update(censored=False, value=math.exp(r["mean"]), ci=[math.exp(r["lo"]), math.exp(r["hi"])],
                       p_below=float(r["p_below"]), p_above=float(r["p_above"]), se=float(r["se"]), df=float(r["df"]),
                       p_within2=tost(float(r["mean"]), float(r["se"]), float(r["df"]), LN2))
        rows.append(row)
    return rows


def paired_p(gap):
    """One-sided p of a mean paired gap > 0 over the pairs of ONE model: gap (P, ...) -> (...) (t, P − 1 df)."""
    import scipy.stats
    n = gap.shape[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        t = gap.mean(axis=0) / (gap.std(axis=0, ddof=1) / math.sqrt(n))
    return np.where(np.isfinite(t), scipy.stats.t.sf(t, n - 1), np.where(gap.mean(axis=0) > 0, 0.0, 1.0))
