"""The pooled ln τ of runs some of which never crossed: a normal likelihood with right-censoring (Tobit).

Run i gives y_i = ln τ_i if it crossed the threshold within its budget, or a censoring point c_i = ln(budget_i)
if it did not (then only ln τ_i > c_i is known). The model is ln τ ~ N(μ, s²) over runs; the log-likelihood is

    Σ_crossed  [ln φ((y_i − μ)/s) − ln s]  +  Σ_censored  ln(1 − Φ((c_i − μ)/s)).

μ is estimated by maximum likelihood and its interval is the profile-likelihood interval
{μ : 2[ℓ(μ̂, ŝ) − max_s ℓ(μ, s)] ≤ q} with q = n·ln(1 + t²_{n−1, 1−α/2}/(n − 1)): with no censoring this set
is exactly the t interval ȳ ± t·sd/√n (the profile statistic is a monotone function of t), so the method
reduces to the usual one where it applies and carries its small-sample calibration where runs are censored.
Its coverage at 3 and 9 runs with 10–25% censoring is measured by `coverage` (docs/definitions.md quotes it).
Where the likelihood does not bound μ from above (too many censored runs), the upper end is +inf: the
interval is then a lower bound, said as such. With every run censored there is no estimate (NaN), only the
statement that each run's τ exceeds its budget.
"""
import math

import numpy as np
from scipy import optimize, special, stats

from scoreprobe.errors import ConfigError

_SPAN = 50.0          # search for interval ends this many (profile) standard errors away at most


def censored_mean(y, censored, level=0.95):
    """Pooled mean of ln τ over runs with right-censoring.

    y: (n,) ln τ of each run (its crossing, or ln of its budget where `censored`); censored: (n,) bools.
    Returns dict(mean, lower, upper, sd, n, n_censored, method); `upper` = inf where the data bound μ from
    below only; every value NaN but n, n_censored where all runs are censored.
    """
    y, cens = _checked(y, censored, level)
    n, k = y.size, int(cens.sum())
    out = dict(n=n, n_censored=k, method="censored normal likelihood, profile interval (t-calibrated)")
    if k == n or n - k < 2:
        reason = "every run censored" if k == n else "fewer than 2 runs crossed"
        return {**out, "mean": math.nan, "lower": math.nan, "upper": math.nan, "sd": math.nan, "method": reason}
    q = n * math.log1p(stats.t.ppf(1 - (1 - level) / 2, n - 1) ** 2 / (n - 1))
    if k == 0:
        m, sd = float(y.mean()), float(y.std(ddof=1))
        half = math.sqrt(math.expm1(q / n) * (n - 1)) * sd / math.sqrt(n)
        return {**out, "mean": m, "lower": m - half, "upper": m + half, "sd": sd}
    mu, log_s, best = _fit(y, cens)

    def gap(m):   # 2 × the profile log-likelihood drop at μ = m, less q
        return 2 * (best - _profile(m, y, cens, log_s)[0]) - q
    scale = math.exp(log_s) / math.sqrt(n - k)
    lower, upper = _end(gap, mu, -scale), _end(gap, mu, +scale)
    return {**out, "mean": mu, "lower": lower, "upper": upper, "sd": math.exp(log_s)}


def censored_fit(x, y, censored, level=0.95):
    """Slope b of y = a + b·x over runs with right-censoring (e.g. ln τ_mem on ln N: τ_mem ∝ N^b).

    x: (n,) the covariate; y: (n,) ln τ of each run (its crossing, or ln of its budget where `censored`);
    censored: (n,) bools. The model is y ~ N(a + b·x, s²); (a, b, s) by maximum likelihood, b's interval the
    profile-likelihood set with q = n·ln(1 + t²_{n−2, 1−α/2}/(n − 2)): with no censoring exactly least squares
    and its t interval on the slope (n − 2 df), as `censored_mean` is for a mean. At a fixed b the profile is
    `censored_mean`'s likelihood of the residuals y − b·x (censored at c − b·x), maximized over (a, s).
    Returns dict(slope, lower, upper, intercept, sd, n, n_censored, method); NaN (method: the reason) with
    fewer than 3 crossed runs or fewer than 2 distinct x among them; an end ±inf where the data do not bound b.
    """
    x = np.asarray(x, dtype=float).reshape(-1)
    y, cens = _checked(y, censored, level)
    if x.size != y.size or not np.all(np.isfinite(x)):
        raise ConfigError(f"censored_fit: x must be finite and as long as y (got {x.size} for {y.size})")
    n, k = y.size, int(cens.sum())
    out = dict(n=n, n_censored=k, method="censored normal regression, profile interval (t-calibrated)")
    if n - k < 3 or np.unique(x[~cens]).size < 2:
        nan = dict.fromkeys(("slope", "lower", "upper", "intercept", "sd"), math.nan)
        return {**out, **nan, "method": "fewer than 3 runs crossed, or fewer than 2 distinct x among them"}
    q = n * math.log1p(stats.t.ppf(1 - (1 - level) / 2, n - 2) ** 2 / (n - 2))
    ols = stats.linregress(x[~cens], y[~cens])
    if k == 0:
        half = math.sqrt(math.expm1(q / n) * (n - 2)) * ols.stderr   # = t · se of the slope
        sd = math.sqrt(np.sum((y - ols.intercept - ols.slope * x) ** 2) / (n - 2))
        return {**out, "slope": ols.slope, "lower": ols.slope - half, "upper": ols.slope + half,
                "intercept": ols.intercept, "sd": sd}

    def profile(b):   # (max over a, ln s of the log-likelihood at slope b, a, ln s)
        a, log_s, value = _fit(y - b * x, cens)
        return value, a, log_s
    b_hat = optimize.minimize_scalar(lambda b: -profile(b)[0], bracket=(ols.slope - 0.1, ols.slope + 0.1)).x
    best, a_hat, log_s = profile(b_hat)

    def gap(b):
        return 2 * (best - profile(b)[0]) - q
    scale = max(float(ols.stderr), 1e-3)
    lower, upper = _end(gap, b_hat, -scale), _end(gap, b_hat, +scale)
    return {**out, "slope": float(b_hat), "lower": lower, "upper": upper, "intercept": a_hat, "sd": math.exp(log_s)}


# ---------------------------------------------------------------------------------------------
# The likelihood
# ---------------------------------------------------------------------------------------------

def _loglik(mu, log_s, y, cens):
    return _loglik_grad(np.array([mu, log_s]), y, cens)[0]


def _loglik_grad(p, y, cens):
    """(ℓ, (∂ℓ/∂μ, ∂ℓ/∂ln s)) at p = (μ, ln s): crossed runs ln φ(z) − ln s, censored ln(1 − Φ(z)), z = (y − μ)/s;
    a censored run's derivatives carry the inverse Mills ratio λ(z) = φ(z)/(1 − Φ(z))."""
    mu, log_s = float(p[0]), float(p[1])
    z = (y - mu) / math.exp(log_s)
    zo, zc = z[~cens], z[cens]
    log_sf = special.log_ndtr(-zc)
    lam = np.exp(stats.norm.logpdf(zc) - log_sf)
    value = float(np.sum(-0.5 * zo ** 2 - log_s) - zo.size * 0.5 * math.log(2 * math.pi) + np.sum(log_sf))
    grad = np.array([(zo.sum() + lam.sum()) / math.exp(log_s), float(np.sum(zo ** 2 - 1) + np.sum(lam * zc))])
    return value, grad


def _profile(mu, y, cens, start):
    """(max over ln s of the log-likelihood at μ, the maximizing ln s)."""
    res = optimize.minimize_scalar(lambda ls: -_loglik(mu, ls, y, cens), bracket=(start - 1, start + 1))
    return -float(res.fun), float(res.x)


def _fit(y, cens):
    """(μ̂, ln ŝ, ℓ max) from the crossed runs' mean and sd as the start."""
    obs = y[~cens]
    x0 = np.array([obs.mean(), math.log(max(obs.std(ddof=1), 1e-3))])
    res = optimize.minimize(lambda p: tuple(-v for v in _loglik_grad(p, y, cens)), x0, jac=True, method="BFGS",
                            options=dict(gtol=1e-9, maxiter=500))
    return float(res.x[0]), float(res.x[1]), -float(res.fun)


def _end(gap, center, step):
    """The interval's end on the side of `step`'s sign from `center` (where gap < 0): the root of gap; ±inf when
    gap stays below 0 within _SPAN steps (doubling)."""
    far = center
    for _ in range(int(math.log2(_SPAN)) + 1):
        far, near = far + step, far
        if gap(far) > 0:
            return float(optimize.brentq(gap, min(near, far), max(near, far), xtol=1e-10))
        step *= 2
    return math.inf if step > 0 else -math.inf


def _checked(y, censored, level):
    y = np.asarray(y, dtype=float).reshape(-1)
    cens = np.asarray(censored).reshape(-1)
    if cens.dtype != bool or cens.size != y.size or y.size == 0:
        raise ConfigError(f"censored_mean: y and censored must be non-empty, of one length, censored bool "
                          f"(got {y.size} values, {cens.size} {cens.dtype} flags)")
    if not np.all(np.isfinite(y)):
        raise ConfigError("censored_mean: every ln τ (or ln budget) must be finite: a run's value is undefined")
    if not 0 < float(level) < 1:
        raise ConfigError(f"censored_mean: level must lie in (0, 1), got {level!r}")
    return y, cens


# ---------------------------------------------------------------------------------------------
# Coverage by simulation at a design
# ---------------------------------------------------------------------------------------------

def coverage(n, censored_share, n_rep=2000, seed=0, level=0.95):
    """Share of `n_rep` simulated designs whose interval holds the true μ (μ = 0, s = 1, every run censored
    at the budget c with P(ln τ > c) = censored_share). Replicates with too few crossings to estimate count
    as misses in `coverage` and are left out of `coverage_defined` (there the report states bounds, not an
    interval); an interval with an infinite end counts when it holds μ.
    Returns dict(coverage, coverage_defined, defined) (`defined`: the share of replicates with an interval)."""
    rng = np.random.default_rng(seed)
    c = float(stats.norm.isf(censored_share)) if censored_share > 0 else math.inf
    hits = defined = 0
    for _ in range(n_rep):
        draw = rng.standard_normal(n)
        cens = draw > c
        r = censored_mean(np.where(cens, c, draw), cens, level=level)
        if not math.isnan(r["mean"]):
            defined += 1
            hits += r["lower"] <= 0 <= r["upper"]
    return dict(coverage=hits / n_rep, coverage_defined=hits / defined if defined else math.nan,
                defined=defined / n_rep)


def coverage_fit(x, censored_share, n_rep=1000, seed=0, level=0.95):
    """Share of `n_rep` simulated designs whose `censored_fit` interval holds the true slope, at the design x
    (n,) with run i censored with probability censored_share[i] (a scalar: the same for every run). The true
    line is y = 0 (a = b = 0, s = 1): the interval is equivariant under y → y + a + b·x and x → k·x, so the
    coverage depends only on the design's pattern and its censoring. Replicates with no estimate count as
    misses in `coverage` and are left out of `coverage_defined`. Returns dict(coverage, coverage_defined, defined)."""
    x = np.asarray(x, dtype=float).reshape(-1)
    share = np.broadcast_to(np.asarray(censored_share, dtype=float), x.shape)
    rng = np.random.default_rng(seed)
    c = np.where(share > 0, stats.norm.isf(np.clip(share, 1e-300, 1)), math.inf)
    hits = defined = 0
    for _ in range(n_rep):
        draw = rng.standard_normal(x.size)
        cens = draw > c
        r = censored_fit(x, np.where(cens, c, draw), cens, level=level)
        if not math.isnan(r["slope"]):
            defined += 1
            hits += r["lower"] <= 0 <= r["upper"]
    return dict(coverage=hits / n_rep, coverage_defined=hits / defined if defined else math.nan,
                defined=defined / n_rep)
