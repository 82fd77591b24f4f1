"""A line's misfit where each x has replicate runs (ln τ on ln N: a power law): the pure-error lack-of-fit test and
the slope with the per-x means as the units (issue 73 item 8).

Runs at K distinct x, n_x runs at x (n in all). Least squares over every run treats the n runs as independent
around the line; where each x carries its own deviation from the line (curvature, or an x-specific effect: a
random per-x effect δ_x ~ N(0, ρ·σ²) beside the run scatter σ²), its interval is too narrow. Two readings fix that:

- **Lack of fit** (pure error): F = [Σ_x n_x (ȳ_x − ŷ_x)² / (K − 2)] / [Σ (y − ȳ_x)² / (n − K)] on (K − 2, n − K)
  df, ŷ the line fitted to every run; the misfit ratio ρ̂ = max(0, F − 1)·K/n (σ²_δ / σ², the moment estimate
  at n/K runs per x). With censored runs (right-censored at their budget, `scoreprobe.stats.censored`) the
  same F is read from the likelihood ratio of the line against one mean per x (both normal with one s, ML):
  F = (exp(LR/n) − 1)(n − K)/(K − 2), which is the pure-error F exactly where nothing is censored.
- **Per-x means as units**: the slope of the K means ȳ_x (censored: the per-x ML means, one s) on x, with its t
  interval on K − 2 df. With a random per-x effect and equal n_x this interval is exact whatever ρ; at ρ = 0 it
  is wider than the runs' interval (K − 2 df, not n − 2). It needs K ≥ 3 and every x with a crossed run.

`coverage` simulates both intervals at a study's design (its x and runs per x, censored shares per x) over
misfit ratios.
"""
import math

import numpy as np
from scipy import stats

from scoreprobe.errors import ConfigError
from scoreprobe.limits import check_flags
from scoreprobe.stats import censored as Cs
from scoreprobe.stats.intervals import slope_interval


def _groups(x):
    """(unique x (K,), index of each run's x (n,))."""
    ux, idx = np.unique(np.asarray(x, dtype=float), return_inverse=True)
    return ux, idx


def _checked(x, y, censored):
    x, y = np.asarray(x, dtype=float).reshape(-1), np.asarray(y, dtype=float).reshape(-1)
    cens = np.zeros(y.size, bool) if censored is None else check_flags(censored, "misfit: censored")
    if x.size != y.size or cens.size != y.size or not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ConfigError(f"misfit: x, y and censored must be finite and of one length (got {x.size}, {y.size}, "
                          f"{cens.size})")
    return x, y, cens


def cell_means(x, y, censored=None):
    """(unique x (K,), per-x mean (K,), n_x (K,), log-likelihood of the per-x means model, of the line model).

    Without censoring the means and least squares (their log-likelihoods at the ML s); with censoring the ML fits
    (one s). NaN means (and likelihoods) where an x has no crossed run: its mean is not identified."""
    x, y, cens = _checked(x, y, censored)
    ux, idx = _groups(x)
    n_x = np.bincount(idx, minlength=ux.size)
    crossed = np.bincount(idx[~cens], minlength=ux.size)
    if np.any(crossed == 0):
        return ux, np.full(ux.size, math.nan), n_x, math.nan, math.nan
    cells = (idx[:, None] == np.arange(ux.size)[None]).astype(float)
    line = np.column_stack([np.ones_like(x), x])
    if not cens.any():
        means = np.bincount(idx, weights=y) / n_x
        rss_cell = float(np.sum((y - means[idx]) ** 2))
        beta, *_ = np.linalg.lstsq(line, y, rcond=None)
        rss_line = float(np.sum((y - line @ beta) ** 2))
        ll = lambda rss: -0.5 * y.size * (math.log(2 * math.pi * max(rss, 1e-300) / y.size) + 1)   # noqa: E731
        return ux, means, n_x, ll(rss_cell), ll(rss_line)
    means, _, ll_cell = Cs._fit(y, cens, cells)
    _, _, ll_line = Cs._fit(y, cens, line)
    return ux, np.asarray(means, dtype=float), n_x, ll_cell, ll_line


def lack_of_fit(x, y, censored=None):
    """The pure-error lack-of-fit test of the line y = a + b·x over runs with replicates per x (module docstring).

    x, y: (n,) runs (y = ln τ, or ln of the budget where `censored`); censored: (n,) bools or None.
    Returns dict F, df (K − 2, n − K), p, ratio (ρ̂), K, n, how; NaN with `why` where it cannot be read (K < 3,
    no replicate, an x with every run censored)."""
    x, y, cens = _checked(x, y, censored)
    ux, means, n_x, ll_cell, ll_line = cell_means(x, y, cens)
    K, n = ux.size, y.size
    out = {"K": int(K), "n": int(n), "df": [int(K - 2), int(n - K)],
           "how": "pure-error F" if not cens.any() else "likelihood ratio against one mean per x, read as F"}
    why = ("fewer than 3 distinct x" if K < 3 else "no replicate runs at any x" if n - K < 1 else
           "an x with every run censored: its mean is not identified" if math.isnan(ll_cell) else "")
    if why:
        return {**out, "F": math.nan, "p": math.nan, "ratio": math.nan, "why": why}
    lr = max(2.0 * (ll_cell - ll_line), 0.0)
    F = math.expm1(lr / n) * (n - K) / (K - 2)
    return {**out, "F": float(F), "p": float(stats.f.sf(F, K - 2, n - K)), "ratio": float(max(F - 1, 0) * K / n),
            "why": ""}


def means_slope(x, y, censored=None, level=0.95):
    """The slope of the per-x means on x with its t interval on K − 2 df (per-x means as units).

    Returns dict slope, lower, upper, intercept, K, df, why ("" when defined; NaN values otherwise)."""
    x, y, cens = _checked(x, y, censored)
    ux, means, _, _, _ = cell_means(x, y, cens)
    K = ux.size
    nan = {"slope": math.nan, "lower": math.nan, "upper": math.nan, "intercept": math.nan, "K": int(K),
           "df": int(K - 2)}
    if K < 3:
        return {**nan, "why": f"fewer than 3 distinct x ({K}): no degree of freedom for the per-x means"}
    if np.any(np.isnan(means)):
        return {**nan, "why": "an x with every run censored: its mean is not identified"}
    fit = slope_interval(ux, means, level)                               # the K means as units, K − 2 df
    return {"slope": fit["slope"], "lower": fit["slope_ci"][0], "upper": fit["slope_ci"][1],
            "intercept": fit["intercept"], "K": int(K), "df": int(K - 2), "why": ""}


def means_difference(a, b, level=0.95):
    """b's slope minus a's with the per-(group, x) means as units: each group's per-x means (`cell_means`), then
    least squares over the K_a + K_b means with a group term and a group × x term, its t interval on
    K_a + K_b − 4 df (one residual variance over the means).

    a, b: (x, y, censored) of each group's runs ((n_g,) each; censored may be None).
    Returns dict value, lower, upper, p (two-sided, difference 0), df, K (K_a, K_b), why ("" when defined; NaN
    values otherwise: a group with fewer than 3 distinct x, or an x with every run censored)."""
    cells = [cell_means(*g) for g in (a, b)]
    K = [int(c[0].size) for c in cells]
    nan = {"value": math.nan, "lower": math.nan, "upper": math.nan, "p": math.nan, "df": sum(K) - 4, "K": K}
    if min(K) < 3:
        return {**nan, "why": f"a group with fewer than 3 distinct x ({min(K)}): no degree of freedom for its means"}
    if any(np.any(np.isnan(c[1])) for c in cells):
        return {**nan, "why": "an x with every run censored: its mean is not identified"}
    x = np.concatenate([c[0] for c in cells])
    y = np.concatenate([c[1] for c in cells])
    g = np.repeat([0.0, 1.0], K)
    X = np.column_stack([np.ones_like(x), x, g, g * x])
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    df = x.size - 4
    se = math.sqrt(float(np.sum((y - X @ beta) ** 2)) / df * np.linalg.inv(X.T @ X)[3, 3])
    half = stats.t.ppf(1 - (1 - level) / 2, df) * se
    p = float(2 * stats.t.sf(abs(beta[3]) / se, df)) if se > 0 else math.nan
    return {"value": float(beta[3]), "lower": float(beta[3] - half), "upper": float(beta[3] + half), "p": p,
            "df": int(df), "K": K, "why": ""}


def _draw(rng, ux, idx, share, rho):
    """One simulated design: y (n,) = a per-x effect N(0, rho) + N(0, 1) per run, censored above each run's cut
    (its x's marginal law at its censored share), and the censored flags."""
    c = np.where(share > 0, stats.norm.isf(np.clip(share, 1e-300, 1)) * math.sqrt(1 + rho), math.inf)
    y = rng.normal(0, math.sqrt(rho), ux.size)[idx] + rng.standard_normal(idx.size)
    cens = y > c
    return np.where(cens, c, y), cens


def difference_coverage(x_a, x_b, share_a=0.0, share_b=0.0, ratios=(0,), n_rep=400, seed=0, level=0.95):
    """Coverage of `means_difference`'s interval at a two-group design (x_a (n_a,), x_b (n_b,), censored shares
    per run) with a random per-(group, x) effect of variance ratio·σ² per ratio, true difference 0.

    Returns {ratio: dict means (coverage; a replicate without an interval counts as a miss), means_defined,
    defined, n_rep}."""
    xs = [np.asarray(v, dtype=float).reshape(-1) for v in (x_a, x_b)]
    shares = [np.broadcast_to(np.asarray(s, dtype=float), x.shape) for s, x in zip((share_a, share_b), xs)]
    groups = [_groups(x) for x in xs]
    rng = np.random.default_rng(seed)
    out = {}
    for rho in ratios:
        hits = defined = 0
        for _ in range(n_rep):
            sims = [_draw(rng, ux, idx, sh, rho) for (ux, idx), sh in zip(groups, shares)]
            d = means_difference(*[(x, y, c) for x, (y, c) in zip(xs, sims)], level=level)
            hits += d["lower"] <= 0 <= d["upper"]
            defined += not d["why"]
        out[float(rho)] = {"means": hits / n_rep, "means_defined": hits / defined if defined else math.nan,
                           "defined": defined / n_rep, "n_rep": int(n_rep)}
    return out


def coverage(x, ratios, censored_share=0.0, n_rep=400, seed=0, level=0.95, runs=True):
    """Coverage of the runs' interval (least squares / `censored_fit` over every run) and of the per-x means'
    interval at the design x (n,) (its x and runs per x) with a random per-x effect of variance ratio·σ² per
    ratio of `ratios`, run i censored with probability censored_share[i] under its x's marginal law.

    Returns {ratio: dict runs (NaN without `runs`: the censored runs' profile fit is slow), means (coverage; a
    replicate without an interval counts as a miss), means_defined (coverage among the replicates with one),
    flagged (share with the lack-of-fit p < 0.05), defined (share with a means interval)}."""
    x = np.asarray(x, dtype=float).reshape(-1)
    share = np.broadcast_to(np.asarray(censored_share, dtype=float), x.shape)
    ux, idx = _groups(x)
    rng = np.random.default_rng(seed)
    out = {}
    for rho in ratios:
        hits = np.zeros(2)
        flagged = defined = 0
        for _ in range(n_rep):
            y, cens = _draw(rng, ux, idx, share, rho)
            r = Cs.censored_fit(x, y, cens, level=level) if runs else {"lower": math.nan, "upper": math.nan}
            m = means_slope(x, y, cens, level=level)
            hits += [r["lower"] <= 0 <= r["upper"], m["lower"] <= 0 <= m["upper"]]
            defined += not m["why"]
            flagged += lack_of_fit(x, y, cens)["p"] < 0.05
        out[float(rho)] = {"runs": float(hits[0] / n_rep) if runs else math.nan, "means": float(hits[1] / n_rep),
                           "means_defined": float(hits[1] / defined) if defined else math.nan,
                           "flagged": flagged / n_rep, "defined": defined / n_rep, "n_rep": int(n_rep)}
    return out
