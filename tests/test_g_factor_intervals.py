"""scoreprobe/stats/crossed_arms.py (issue 54 item 2): the difference of two crossed arms (data seeds × training
seeds) with both variance components, against scipy where it reduces to Welch and by simulation at the G factor's
design (3 × 3 per arm), where the two shortcuts it replaces under-cover; the power of the component F test after
Holm against a simulation of the test itself; MOVER on planted intervals."""
import math

import numpy as np
import pytest
import scipy.stats

from scoreprobe.errors import ConfigError
from scoreprobe.stats.intervals import two_level
from scoreprobe.stats import crossed_arms as X


def test_the_shortcuts_are_welch_as_scipy_computes_it():
    rng = np.random.default_rng(1)
    a, b = rng.normal(0, 1, (3, 3)), rng.normal(1, 2, (3, 3))
    d, lo, hi, _ = X.runs_interval(a, b)
    ref = scipy.stats.ttest_ind(b.ravel(), a.ravel(), equal_var=False).confidence_interval(0.95)
    assert (lo, hi) == pytest.approx((ref.low, ref.high), rel=1e-10) and d == pytest.approx(b.mean() - a.mean())
    d, lo, hi, _ = X.data_interval(a, b)
    ref = scipy.stats.ttest_ind(b.mean(axis=1), a.mean(axis=1), equal_var=False).confidence_interval(0.95)
    assert (lo, hi) == pytest.approx((ref.low, ref.high), rel=1e-10)


def test_the_crossed_difference_adds_both_arms_mean_squares():
    rng = np.random.default_rng(2)
    a, b = rng.normal(0, 1, (3, 3)), rng.normal(0, 1, (3, 4))
    r = X.crossed_difference(a, b)
    terms = []
    for v in (a, b):
        D, I = v.shape
        ms_d = I * v.mean(axis=1).var(ddof=1)
        ms_i = D * v.mean(axis=0).var(ddof=1)
        terms += [(ms_d / (D * I), D - 1), (ms_i / (D * I), I - 1)]
    var = sum(t for t, _ in terms)
    df = var ** 2 / sum(t ** 2 / k for t, k in terms)
    half = scipy.stats.t.ppf(0.975, df) * math.sqrt(var)
    assert r["diff"] == pytest.approx(b.mean() - a.mean()) and r["df"] == pytest.approx(df)
    assert (r["lo"], r["hi"]) == pytest.approx((r["diff"] - half, r["diff"] + half))


@pytest.mark.parametrize("components", [(1, .09, .09), (.09, 1, .09), (.04, .04, 1), (0, 0, 1), (1, 1, 1),
                                        (.005, .002, .02)],
                         ids=["data", "init", "residual", "residual-only", "equal", "g2-at-0.7"])
def test_both_components_cover_at_the_g_factor_design(components):
    """At 3 × 3 per arm the interval with both components holds ≥ 0.95 in every regime (it counts the residual
    twice); each shortcut fails where the component it ignores is large."""
    cov = X.coverage(components, components, 3, 3, n_rep=40000, seed=7)
    assert cov["two-level"] >= 0.95 and cov["zero_width"] == 0.0, cov
    if components[0] >= 1:                       # a data effect: runs as units too narrow
        assert cov["runs as units"] < 0.8, cov
    if components[1] >= 1 > components[0]:       # a training-seed effect shared by the data seeds
        assert cov["runs as units"] < 0.8 and cov["data seeds as units"] < 0.8, cov


def test_one_arm_alone_would_under_cover():
    """The coverage check can fail: an interval that ignores one arm's variance is far below 0.95."""
    rng = np.random.default_rng(3)
    a, b = X.simulate(rng, 20000, 3, 3, (1, .1, .1)), X.simulate(rng, 20000, 3, 3, (1, .1, .1))
    both = X.crossed_difference(a, b)
    only_b = X.crossed_difference(np.zeros_like(a), b)                     # a's variance left out, b's df
    half_b = only_b["hi"] - only_b["diff"]
    one = (np.abs(both["diff"]) <= half_b)
    assert np.mean(one) < 0.92 < 0.95 <= np.mean((both["lo"] <= 0) & (0 <= both["hi"]))
    assert X.arm_coverage((.3, .3, .3), 3, 3, n_rep=20000) >= 0.95


@pytest.mark.parametrize("family", [1, 9])
def test_f_power_is_the_simulated_rejection_rate(family):
    rng = np.random.default_rng(11)
    v = rng.normal(0, 1, (40000, 3, 3)) + rng.normal(0, 2, (40000, 3, 1))   # σ_data = 2 σ_residual
    simulated = np.mean(two_level(v)["p_data"] < 0.05 / family)
    assert X.f_power(3, 3, 4.0, 0.05, family) == pytest.approx(simulated, abs=0.01)
    assert X.f_power(3, 3, 0.0, 0.05, family) == pytest.approx(0.05 / family)
    with pytest.raises(ConfigError):
        X.f_power(1, 3, 4.0)


def test_mover_recovers_each_sides_interval():
    d, lo, hi = X.mover(5.0, (4.0, 7.0), 1.0, (0.5, 1.5))
    assert d == 4.0 and lo == pytest.approx(4 - math.hypot(1, 0.5)) and hi == pytest.approx(4 + math.hypot(2, 0.5))
    assert X.mover(5.0, (4.0, math.inf), 1.0, (0.5, 1.5))[2] == math.inf
    assert all(math.isnan(x) for x in X.mover(math.nan, (1, 2), 1.0, (0.5, 1.5)))


def test_censored_coverage_reports_its_design():
    r = X.censored_coverage((.01, .01, .05), 0.0, 0.25, (.01, .01, .02), 3, 3, n_rep=60, seed=1)
    assert 0.05 < r["censored_share"] < 0.3 and r["n_rep"] == 60 and 0 < r["defined"] <= 1
    assert 0.6 <= r["mean"] <= 1 and 0.6 <= r["difference"] <= 1
    with pytest.raises(ConfigError):
        X.simulate(np.random.default_rng(0), 2, 3, 3, (-1, 0, 1))
