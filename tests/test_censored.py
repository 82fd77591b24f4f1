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

from scoreprobe.stats.censored import censored_fit, censored_mean, coverage, coverage_fit


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


def test_slope_coverage_at_the_capacity_design_with_its_censoring():
    # two of three N = 240 runs censored, as for the 0.51M DiT (scaling study); 300 replicates: 0.95 reads ≥ 0.92
    # with probability ≈ 0.99 (docs/definitions.md quotes 2000)
    c = coverage_fit(X, [0.0] * 9 + [0.67] * 3, n_rep=300, seed=2)
    assert c["defined"] == 1.0 and c["coverage"] >= 0.92
