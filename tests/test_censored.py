"""The censored estimators (scoreprobe/stats/censored.py, issue 54 items 3 and 6): the pooled ln τ and the slope of
ln τ on a covariate (b of τ_mem ∝ N^b). The t intervals where nothing is censored, the truth recovered where a naive
mean of the crossed runs is biased, the slope equal to a direct three-parameter maximum likelihood, and coverage
measured by simulation at the studies' designs."""
import math

import numpy as np
import pytest
from scipy import stats

from scoreprobe.errors import ConfigError
from scipy import optimize

from scoreprobe.stats.censored import censored_coef, censored_fit, censored_mean, coverage, coverage_fit


def test_without_censoring_it_is_the_t_interval():
    y = np.array([7.1, 8.4, 7.9, 8.8, 7.5])
    r = censored_mean(y, np.zeros(5, bool))
    half = stats.t.ppf(0.975, 4) * y.std(ddof=1) / math.sqrt(5)
    assert r["mean"] == pytest.approx(y.mean()) and r["n_censored"] == 0
    assert (r["lower"], r["upper"]) == pytest.approx((y.mean() - half, y.mean() + half), rel=1e-12)


def test_an_uninformative_censored_run_leaves_the_maximum_likelihood_fit_of_the_others():
    # "ln τ > −40" is true of every run: the fit is the crossed runs' mean and ML standard deviation
    y = np.array([7.1, 8.4, 7.9, 8.8, 7.5])
    r = censored_mean(np.append(y, -40.0), np.array([0, 0, 0, 0, 0, 1], bool))
    assert r["mean"] == pytest.approx(y.mean(), abs=1e-5)
    assert r["sd"] == pytest.approx(y.std(ddof=0), rel=1e-4)


def test_a_large_censored_sample_recovers_the_truth_where_the_crossed_mean_is_biased():
    rng = np.random.default_rng(3)
    true = rng.normal(9.0, 0.5, 2000)
    budget = 9.3                                     # ≈ 27% of runs never cross
    cens = true > budget
    r = censored_mean(np.where(cens, budget, true), cens)
    assert 0.2 < cens.mean() < 0.35
    assert r["lower"] <= 9.0 <= r["upper"] and abs(r["mean"] - 9.0) < 0.04 and abs(r["sd"] - 0.5) < 0.04
    assert true[~cens].mean() < 8.9                  # the crossed runs alone: biased low by more than 0.1


def test_too_many_censored_runs_give_no_estimate():
    r = censored_mean([8.0, 9.0, 9.0], np.array([False, True, True]))
    assert math.isnan(r["mean"]) and r["method"] == "fewer than 2 runs crossed"
    r = censored_mean([9.0, 9.0], np.array([True, True]))
    assert math.isnan(r["mean"]) and r["method"] == "every run censored"
    # two crossings and four runs censored just above them: estimated, above the crossed runs' mean
    r = censored_mean([7, 9, 7.5, 7.5, 7.5, 7.5], np.array([0, 0, 1, 1, 1, 1], bool))
    assert 8.0 < r["mean"] < r["upper"] < math.inf and r["lower"] < 8.0


@pytest.mark.parametrize("y, cens, match", [
    ([1.0, math.nan, 2.0], [False] * 3, "finite"),
    ([1.0, 2.0], [0, 1], "bool"),
    ([1.0, 2.0], [False], "one length"),
    ([], [], "non-empty"),
])
def test_bad_input_is_refused(y, cens, match):
    with pytest.raises(ConfigError, match=match):
        censored_mean(y, np.asarray(cens) if cens else np.array([], bool))


@pytest.mark.parametrize("n, share", [(3, 0.10), (9, 0.25)])
@pytest.mark.slow   # a coverage simulation: 300 censored means per design
def test_coverage_at_the_studies_designs(n, share):
    # 300 replicates: a coverage of 0.95 reads ≥ 0.92 with probability ≈ 0.99; docs/definitions.md quotes
    # 1000 replicates per cell (3 and 9 runs, 0 / 10 / 25% censored)
    c = coverage(n, share, n_rep=300, seed=1)
    assert c["coverage_defined"] >= 0.92
    if n == 9:
        assert c["defined"] == 1.0 and c["coverage"] >= 0.92


# ---------------------------------------------------------------------------------------------
# The slope: censored_fit
# ---------------------------------------------------------------------------------------------

X = np.log(np.repeat([30.0, 60.0, 120.0, 240.0], 3))   # the capacity study's design: 4 N × 3 seeds


def test_slope_without_censoring_is_least_squares_with_its_t_interval():
    rng = np.random.default_rng(1)
    y = 1.3 * X + 3 + 0.1 * rng.standard_normal(X.size)
    r = censored_fit(X, y, np.zeros(X.size, bool))
    ols = stats.linregress(X, y)
    half = stats.t.ppf(0.975, X.size - 2) * ols.stderr
    assert (r["slope"], r["intercept"]) == pytest.approx((ols.slope, ols.intercept), rel=1e-12)
    assert (r["lower"], r["upper"]) == pytest.approx((ols.slope - half, ols.slope + half), rel=1e-12)


def _direct_mle(x, y, cens):
    """(a, b, s) maximizing the censored normal likelihood over all three at once, from two optimizers."""
    def nll(p):
        z = (y - p[0] - p[1] * x) / np.exp(p[2])
        return -(np.sum(stats.norm.logpdf(z[~cens]) - p[2]) + np.sum(stats.norm.logsf(z[cens])))
    fits = [optimize.minimize(nll, [3.0, 1.3, -2.5], method=m, options=o) for m, o in
            [("Nelder-Mead", dict(xatol=1e-12, fatol=1e-14, maxiter=20000)), ("BFGS", {})]]
    best = min(fits, key=lambda f: f.fun)
    return best.x[0], best.x[1], np.exp(best.x[2])


@pytest.mark.slow   # a brute-force likelihood grid against the fit
def test_censored_slope_is_the_maximum_likelihood_one_and_moves_where_censoring_says_so():
    rng = np.random.default_rng(1)
    y = 1.3 * X + 3 + 0.1 * rng.standard_normal(X.size)
    budget = np.sort(y)[-3:-1].mean()               # between the 3rd and 2nd latest runs: two censored
    cens = y > budget
    assert cens.sum() == 2 and cens[-3:].sum() == 2   # both at N = 240
    r = censored_fit(X, np.where(cens, budget, y), cens)
    a, b, s = _direct_mle(X, np.where(cens, budget, y), cens)
    assert (r["intercept"], r["slope"], r["sd"]) == pytest.approx((a, b, s), rel=1e-6)
    assert r["lower"] < r["slope"] < r["upper"] < math.inf and r["n_censored"] == 2
    dropped = censored_fit(X[~cens], y[~cens], np.zeros((~cens).sum(), bool))
    assert r["slope"] > dropped["slope"]             # leaving the censored (late) runs out biases b low


def test_slope_is_undefined_without_enough_crossed_runs():
    cens = np.array([0, 0, 0] + [1] * 9, bool)       # every crossed run at one N: no slope
    r = censored_fit(X, np.where(cens, 12.0, X), cens)
    assert math.isnan(r["slope"]) and math.isnan(r["lower"]) and "distinct x" in r["method"]
    with pytest.raises(ConfigError, match="x must be finite"):
        censored_fit(X[:-1], X, np.zeros(X.size, bool))


@pytest.mark.slow   # a coverage simulation: 300 censored fits at the capacity design
def test_slope_coverage_at_the_capacity_design_with_its_censoring():
    # two of three N = 240 runs censored, as for the 0.51M DiT (scaling study); 300 replicates: 0.95 reads ≥ 0.92
    # with probability ≈ 0.99 (docs/definitions.md quotes 2000)
    c = coverage_fit(X, [0.0] * 9 + [0.67] * 3, n_rep=300, seed=2)
    assert c["defined"] == 1.0 and c["coverage"] >= 0.92


# ---------------------------------------------------------------------------------------------
# A coefficient of a design: censored_coef (the difference of two sizes' b as an interaction)
# ---------------------------------------------------------------------------------------------

XX = np.tile(X, 2)                                    # two sizes, each over the capacity design
GG = np.repeat([0.0, 1.0], X.size)
DESIGN = np.column_stack([np.ones_like(XX), XX, GG, GG * XX])


def _nll(p, D, y, cens):
    z = (y - D @ p[:-1]) / np.exp(p[-1])
    return -(np.sum(stats.norm.logpdf(z[~cens]) - p[-1]) + np.sum(stats.norm.logsf(z[cens])))


def _direct(D, y, cens, fixed=None):
    """max log-likelihood over (β, ln s) (with β_3 = fixed[1] held where given), by Nelder-Mead and BFGS
    from the crossed runs' least squares: (ℓ, β, s)."""
    free = [i for i in range(D.shape[1] + 1) if fixed is None or i != fixed[0]]
    start = np.append(np.linalg.lstsq(D[~cens], y[~cens], rcond=None)[0], -2.0)
    if fixed is not None:
        start[fixed[0]] = fixed[1]

    def full(q):
        p = start.copy()
        p[free] = q
        return p
    fits = [optimize.minimize(lambda q: _nll(full(q), D, y, cens), start[free], method=m, options=o) for m, o in
            [("Nelder-Mead", dict(xatol=1e-11, fatol=1e-13, maxiter=40000, maxfev=40000)), ("BFGS", {})]]
    best = min(fits, key=lambda f: f.fun)
    p = full(best.x)
    return -best.fun, p[:-1], np.exp(p[-1])


def _two_sizes(seed=3):
    rng = np.random.default_rng(seed)
    y = np.where(GG == 0, 1.3 * XX + 3, 1.5 * XX + 2.5) + 0.1 * rng.standard_normal(XX.size)
    budget = np.where(GG == 0, 1.3, 1.5) * XX.max() + np.where(GG == 0, 3, 2.5)   # ≈ half the N = 240 runs censored
    cens = y > budget
    return np.where(cens, budget, y), cens


def test_a_coefficient_without_censoring_is_least_squares_with_its_t_interval():
    y, _ = _two_sizes()
    r = censored_coef(DESIGN, y, np.zeros(y.size, bool), 3)
    beta, rss, *_ = np.linalg.lstsq(DESIGN, y, rcond=None)
    se = math.sqrt(rss[0] / (y.size - 4) * np.linalg.inv(DESIGN.T @ DESIGN)[3, 3])
    half = stats.t.ppf(0.975, y.size - 4) * se
    assert r["coef"] == pytest.approx(beta[3], rel=1e-10) and r["df"] == y.size - 4
    assert (r["lower"], r["upper"]) == pytest.approx((beta[3] - half, beta[3] + half), rel=1e-10)


def test_a_censored_coefficient_is_the_maximum_likelihood_one_with_its_profile_interval():
    y, cens = _two_sizes()
    assert 2 <= cens.sum() <= 5 and not cens[GG == 0][:9].any()
    r = censored_coef(DESIGN, y, cens, 3)
    best, beta, s = _direct(DESIGN, y, cens)
    assert r["beta"] == pytest.approx(beta, rel=1e-5, abs=1e-6) and r["sd"] == pytest.approx(s, rel=1e-5)
    n = y.size
    q = n * math.log1p(stats.t.ppf(0.975, n - 4) ** 2 / (n - 4))
    for end in (r["lower"], r["upper"]):            # each end: the likelihood ratio at that β_3 is the t-calibrated q
        assert 2 * (best - _direct(DESIGN, y, cens, fixed=(3, end))[0]) == pytest.approx(q, rel=1e-4)


def test_a_coefficient_the_crossed_runs_do_not_identify_is_undefined():
    y, _ = _two_sizes()
    cens = GG == 1                                     # every run of the second size censored
    r = censored_coef(DESIGN, y, cens, 3)
    assert math.isnan(r["coef"]) and "identify" in r["method"]
    with pytest.raises(ConfigError, match="design"):
        censored_coef(DESIGN[:, :2], y, cens, 3)


@pytest.mark.slow   # a coverage simulation: 150 censored two-size fits
def test_difference_coverage_at_the_capacity_design_with_its_censoring():
    # two sizes over 4 N × 3 seeds, two of three N = 240 runs censored in each; 150 replicates: 0.95 reads ≥ 0.90
    # with probability ≈ 0.997 (analyses/capacity_exponent quotes its own design's, 2000 replicates)
    c = coverage_fit(XX, ([0.0] * 9 + [0.67] * 3) * 2, n_rep=150, seed=4, design=DESIGN, j=3)
    assert c["defined"] == 1.0 and c["coverage"] >= 0.90
