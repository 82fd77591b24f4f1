"""Means over units (trained models, replicate pairs, data seeds, points) with their intervals, in the two forms
the study reports read: arrays with the models on the first axis (`t_summary`, with a one-sample t test of 0), and
JSON-ready [mean, lo, hi] triples with None for what is undefined (`t_triple`, `mean_interval`, `wilson_triple`),
and shares over models with an interval inside [0, 1] (`cluster_share`).

A t interval has n − 1 degrees of freedom; with fewer than 2 units there is a mean and no interval, and a unit
whose value is undefined (NaN) leaves the mean undefined too: a mean of "never" is no number.
"""
import numpy as np
from scipy import stats

from scoreprobe.probes.wilson import wilson_interval
from scoreprobe.stats.intervals import t_interval

CI = 0.95


def t_summary(values, ci=CI):
    """values (M, ...) over models -> mean, lo, hi, p (two-sided one-sample t test of mean 0), each (...);
    NaN wherever a model's value is NaN, or fewer than 2 models."""
    v = np.asarray(values, np.float64)
    m = v.shape[0]
    mean, lo, hi = t_interval(np.moveaxis(v, 0, -1), ci)                         # models (first axis) as units
    if m < 2:
        return mean, lo, hi, np.full(mean.shape, np.nan)
    se = v.std(0, ddof=1) / np.sqrt(m)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = 2 * stats.t.sf(np.abs(mean / se), m - 1)
    p = np.where(se > 0, p, np.where(mean != 0, 0.0, 1.0))
    p = np.where(np.isfinite(mean), p, np.nan)
    return mean, lo, hi, p


def clipped_summary(values, lo_end=0.0, hi_end=1.0, ci=CI):
    """mean, lo, hi (each (...)) of values (M, ...) over models, the interval clipped to [lo_end, hi_end] (where
    shares and distances / D live); NaN stays NaN."""
    m, lo, hi = t_interval(np.moveaxis(np.asarray(values, float), 0, -1), ci)
    return m, np.clip(lo, lo_end, hi_end), np.clip(hi, lo_end, hi_end)


def cluster_share(shares, counts, ci=CI):
    """mean, lo, hi (each (...)) of a share over models (the mean of the per-model shares) with an interval inside
    [0, 1] that carries the spread between models: Korn & Graubard's (1998) Clopper–Pearson interval at the
    effective number of trials n* = p̄(1 − p̄)/v̂ (v̂ = s²/M, the between-model variance of the mean; the pooled
    count Σ n_m where the models agree exactly, and never more), scaled by (z/t_{M−1})² for the M − 1 df of v̂,
    with p̄·n* successes. shares, counts (M, ...): per model its share and the trials it is a share of. NaN where
    a model's share is NaN, a count is 0, or fewer than 2 models."""
    p, n = np.asarray(shares, np.float64), np.asarray(counts, np.float64)
    m = p.shape[0]
    mean = p.mean(0)
    if m < 2:
        nan = np.full(mean.shape, np.nan)
        return mean, nan, nan
    v = p.var(0, ddof=1) / m
    total = n.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        n_eff = np.where(v > 0, np.minimum(mean * (1 - mean) / v, total), total)
    n_eff = n_eff * (stats.norm.ppf(0.5 + ci / 2) / stats.t.ppf(0.5 + ci / 2, m - 1)) ** 2
    x, a = mean * n_eff, (1 - ci) / 2
    with np.errstate(invalid="ignore"):
        lo = np.where(mean > 0, stats.beta.ppf(a, x, n_eff - x + 1), 0.0)
        hi = np.where(mean < 1, stats.beta.ppf(1 - a, x + 1, n_eff - x), 1.0)
    bad = ~np.isfinite(mean) | np.any(n <= 0, axis=0)
    return np.where(bad, np.nan, mean), np.where(bad, np.nan, lo), np.where(bad, np.nan, hi)


def why_undefined(reasons, names):
    """reasons (M, ...) per model ("" defined) -> (...) object: "" or e.g. "s1: mixed sign; s2: below floor"."""
    r = np.asarray(reasons, dtype=object)
    out = np.full(r.shape[1:], "", dtype=object)
    for idx in np.ndindex(r.shape[1:]):
        parts = [f"{n}: {r[(i,) + idx]}" for i, n in enumerate(names) if r[(i,) + idx]]
        out[idx] = "; ".join(parts)
    return out


def t_triple(values, ci=CI):
    """[mean, lo, hi] of values over units (t, n − 1 df); lo, hi None with fewer than 2 units; all None when a
    value is undefined or there is none."""
    v = np.asarray(values, np.float64)
    if not np.isfinite(v).all() or len(v) == 0:
        return [None, None, None]
    if len(v) < 2:
        return [float(v.mean()), None, None]
    return [float(x) for x in t_interval(v, ci)]


def mean_interval(mean, sd, n, ci=CI):
    """[mean, lo, hi] of a mean of n points with standard deviation sd (t, n − 1 df)."""
    if mean is None or not np.isfinite(mean) or n < 2 or not np.isfinite(sd):
        return [None if mean is None or not np.isfinite(mean) else float(mean), None, None]
    half = stats.t.ppf(0.5 + ci / 2, n - 1) * sd / np.sqrt(n)
    return [float(mean), float(mean - half), float(mean + half)]


def wilson_triple(share, n, ci=CI):
    """[share, lo, hi]: Wilson interval of a share of n trials (None when undefined: NaN share or n = 0)."""
    if share is None or n <= 0 or not np.isfinite(share):
        return [None, None, None]
    lo, hi = wilson_interval(share, n, stats.norm.ppf(0.5 + ci / 2))
    return [float(share), float(lo), float(hi)]
