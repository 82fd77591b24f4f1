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
from scoreprobe.limits import MAX_LOG_VALUE

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
    censored: (n,) bools. `censored_coef` with the design [1, x] and the coefficient of x: with no censoring
    exactly least squares and its t interval on the slope (n − 2 df), as `censored_mean` is for a mean.
    Returns dict(slope, lower, upper, intercept, sd, n, n_censored, method); NaN (method: the reason) with
    fewer than 3 crossed runs or fewer than 2 distinct x among them; an end ±inf where the data do not bound b.
    """
    x = np.asarray(x, dtype=float).reshape(-1)
    y, cens = _checked(y, censored, level)
    if x.size != y.size or not np.all(np.isfinite(x)):
        raise ConfigError(f"censored_fit: x must be finite and as long as y (got {x.size} for {y.size})")
    r = censored_coef(np.column_stack([np.ones_like(x), x]), y, cens, 1, level=level)   # NaN: < 3 crossed or 1 x
    return {"slope": r["coef"], "lower": r["lower"], "upper": r["upper"], "intercept": r["beta"][0],
            "sd": r["sd"], "n": r["n"], "n_censored": r["n_censored"],
            "method": r["method"] if math.isfinite(r["coef"]) else
            "fewer than 3 runs crossed, or fewer than 2 distinct x among them"}


def censored_coef(X, y, censored, j, level=0.95):
    """Coefficient j of y = X·β over runs with right-censoring (a slope, or a difference of slopes as the
    interaction of a group term with the covariate).

    X: (n, p) the design (full column rank over the crossed runs); y: (n,) ln τ of each run (its crossing, or ln
    of its budget where `censored`); censored: (n,) bools. The model is y ~ N(X·β, s²); (β, s) by maximum
    likelihood, β_j's interval the profile-likelihood set {b : 2[ℓ̂ − max_{β_−j, s} ℓ(β_j = b)] ≤ q} with
    q = n·ln(1 + t²_{n−p, 1−α/2}/(n − p)): with no censoring exactly least squares and its t interval (n − p df),
    the profile statistic being n·ln(1 + t²/(n − p)).
    Returns dict(coef, lower, upper, beta (p,), sd, n, n_censored, df, method); NaN (method: the reason) where
    the crossed runs do not identify β with a residual degree of freedom; an end ±inf where the data do not bound β_j.
    """
    X = np.asarray(X, dtype=float)
    y, cens = _checked(y, censored, level)
    if X.ndim != 2 or X.shape[0] != y.size or not np.all(np.isfinite(X)) or not 0 <= j < X.shape[1]:
        raise ConfigError(f"censored_coef: X must be a finite (n, p) design with n = {y.size} and 0 <= j < p "
                          f"(got shape {X.shape}, j = {j})")
    _check_log_scale(X, "the design (ln x)")
    (n, p), k = X.shape, int(cens.sum())
    out = dict(n=n, n_censored=k, df=n - p, method="censored normal regression, profile interval (t-calibrated)")
    obs = X[~cens]
    if n - k <= p or np.linalg.matrix_rank(obs) < p:
        return {**out, "coef": math.nan, "lower": math.nan, "upper": math.nan, "beta": [math.nan] * p,
                "sd": math.nan, "method": "the crossed runs do not identify the model with a residual degree of freedom"}
    q = n * math.log1p(stats.t.ppf(1 - (1 - level) / 2, n - p) ** 2 / (n - p))
    ols, *_ = np.linalg.lstsq(obs, y[~cens], rcond=None)
    rss = float(np.sum((y[~cens] - obs @ ols) ** 2))
    se = math.sqrt(rss / (n - k - p) * np.linalg.inv(obs.T @ obs)[j, j])
    if k == 0:
        half = math.sqrt(math.expm1(q / n) * (n - p)) * se   # = t · se of β_j
        return {**out, "coef": float(ols[j]), "lower": float(ols[j] - half), "upper": float(ols[j] + half),
                "beta": ols.tolist(), "sd": math.sqrt(rss / (n - p))}
    rest = np.delete(X, j, axis=1)

    def profile(b):   # (max over β_−j, ln s of the log-likelihood at β_j = b, β_−j, ln s)
        beta, log_s, value = _fit(y - b * X[:, j], cens, rest)
        return value, beta, log_s
    b_hat = optimize.minimize_scalar(lambda b: -profile(b)[0], bracket=(ols[j] - 0.1, ols[j] + 0.1)).x
    best, beta, log_s = profile(b_hat)

    def gap(b):
        return 2 * (best - profile(b)[0]) - q
    scale = max(se, 1e-3)
    lower, upper = _end(gap, b_hat, -scale), _end(gap, b_hat, +scale)
    return {**out, "coef": float(b_hat), "lower": lower, "upper": upper,
            "beta": np.insert(beta, j, b_hat).tolist(), "sd": math.exp(log_s)}


# ---------------------------------------------------------------------------------------------
# The likelihood
# ---------------------------------------------------------------------------------------------

def _loglik(mu, log_s, y, cens):
    return _loglik_grad(np.array([mu, log_s]), y, cens, np.ones((y.size, 1)))[0]


def _loglik_grad(p, y, cens, X):
    """(ℓ, (∂ℓ/∂β, ∂ℓ/∂ln s)) at p = (β, ln s) with the mean X·β (X (n, q)): crossed runs ln φ(z) − ln s, censored
    ln(1 − Φ(z)), z = (y − X·β)/s; a censored run's derivatives carry the inverse Mills ratio λ(z) = φ(z)/(1 − Φ(z))."""
    beta, log_s = np.asarray(p[:-1], dtype=float), float(p[-1])
    z = (y - X @ beta) / math.exp(log_s)
    zo, zc = z[~cens], z[cens]
    log_sf = special.log_ndtr(-zc)
    lam = np.exp(stats.norm.logpdf(zc) - log_sf)
    value = float(np.sum(-0.5 * zo ** 2 - log_s) - zo.size * 0.5 * math.log(2 * math.pi) + np.sum(log_sf))
    r = z.copy()
    r[cens] = lam
    grad = np.append(X.T @ r / math.exp(log_s), float(np.sum(zo ** 2 - 1) + np.sum(lam * zc)))
    return value, grad


def _profile(mu, y, cens, start):
    """(max over ln s of the log-likelihood at μ, the maximizing ln s)."""
    res = optimize.minimize_scalar(lambda ls: -_loglik(mu, ls, y, cens), bracket=(start - 1, start + 1))
    return -float(res.fun), float(res.x)


def _fit(y, cens, X=None):
    """(β̂, ln ŝ, ℓ max) of the mean X·β (X (n, q); None: a constant, β̂ then the scalar μ̂), from the crossed
    runs' least squares and residual sd as the start."""
    const = X is None
    X = np.ones((y.size, 1)) if const else X
    beta0, *_ = np.linalg.lstsq(X[~cens], y[~cens], rcond=None)
    resid = y[~cens] - X[~cens] @ beta0
    sd0 = math.sqrt(float(resid @ resid) / max(resid.size - 1, 1))
    x0 = np.append(beta0, math.log(max(sd0, 1e-3)))
    res = optimize.minimize(lambda p: tuple(-v for v in _loglik_grad(p, y, cens, X)), x0, jac=True, method="BFGS",
                            options=dict(gtol=1e-9, maxiter=500))
    beta = float(res.x[0]) if const else res.x[:-1]
    return beta, float(res.x[-1]), -float(res.fun)


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


def _check_log_scale(values, what):
    """ConfigError past ±MAX_LOG_VALUE: these are logarithms (ln τ ≤ ln MAX_STEP ≈ 27.6); a raw τ passed by mistake,
    or values whose squares overflow (three 1e308 gave a mean of inf), are refused, not averaged into inf."""
    big = float(np.abs(values).max()) if np.size(values) else 0.0
    if big > MAX_LOG_VALUE:
        raise ConfigError(f"censored_mean: {what} must lie within ±{MAX_LOG_VALUE:g} (natural logarithms: pass ln τ, "
                          f"not τ; scoreprobe.limits.MAX_LOG_VALUE), got {big:.3g}")


def _checked(y, censored, level):
    y = np.asarray(y, dtype=float).reshape(-1)
    cens = np.asarray(censored).reshape(-1)
    if cens.dtype != bool or cens.size != y.size or y.size == 0:
        raise ConfigError(f"censored_mean: y and censored must be non-empty, of one length, censored bool "
                          f"(got {y.size} values, {cens.size} {cens.dtype} flags)")
    if not np.all(np.isfinite(y)):
        raise ConfigError("censored_mean: every ln τ (or ln budget) must be finite: a run's value is undefined")
    _check_log_scale(y, "every ln τ (or ln budget)")
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


def coverage_fit(x, censored_share, n_rep=1000, seed=0, level=0.95, design=None, j=1):
    """Share of `n_rep` simulated designs whose `censored_fit` interval holds the true slope, at the design x
    (n,) with run i censored with probability censored_share[i] (a scalar: the same for every run); with `design`
    (n, p) the `censored_coef` interval of its coefficient j instead (x then unused but for its length). The true
    mean is 0 (β = 0, s = 1): the interval is equivariant under y → y + X·β and a rescaled column, so the
    coverage depends only on the design's pattern and its censoring. Replicates with no estimate count as
    misses in `coverage` and are left out of `coverage_defined`. Returns dict(coverage, coverage_defined, defined)."""
    x = np.asarray(x, dtype=float).reshape(-1)
    share = np.broadcast_to(np.asarray(censored_share, dtype=float), x.shape)
    rng = np.random.default_rng(seed)
    c = np.where(share > 0, stats.norm.isf(np.clip(share, 1e-300, 1)), math.inf)
    X, j = (np.column_stack([np.ones_like(x), x]), 1) if design is None else (design, j)   # censored_fit's design
    hits = defined = 0
    for _ in range(n_rep):
        draw = rng.standard_normal(x.size)
        cens = draw > c
        r = censored_coef(X, np.where(cens, c, draw), cens, j, level=level)
        if not math.isnan(r["coef"]):
            defined += 1
            hits += r["lower"] <= 0 <= r["upper"]
    return dict(coverage=hits / n_rep, coverage_defined=hits / defined if defined else math.nan,
                defined=defined / n_rep)
