"""Seed-level intervals (stats/intervals.py, seeds.pool_seeds / pool_ratio / seed_fit / pool_windows): their
coverage measured by simulation with a known truth at S = 3 and 5, both variance components of a data seed ×
init seed design recovered from planted ones, and censored values never entering a mean, ratio or fit."""
import math

import numpy as np
import pytest

from scoreprobe.stats.intervals import t_interval, two_level, welch_interval
from scoreprobe.stats.seeds import hierarchical_replicates, pool_ratio, pool_seeds, pool_windows, seed_fit

REPLICATES = 40000   # coverage SE at 0.95: 0.0011, so the 0.93–0.97 band is decisive


def simulated_seeds(rng, R, S, mu=np.log(3000.0), sd_seed=0.25):
    """(R, S) ln τ of S training seeds: a seed effect plus each seed's own sampling error, whose SD differs
    between seeds (heteroscedastic, as the sample-level bootstrap SDs of the shipped runs do: 0.03–0.2)."""
    within = rng.uniform(0.03, 0.2, size=(R, S))
    return mu + rng.normal(0, sd_seed, (R, S)) + rng.normal(0, 1, (R, S)) * within


@pytest.mark.parametrize("S", [3, 5])
def test_t_interval_on_log_tau_covers_95_percent(S):
    rng = np.random.default_rng(S)
    mu = np.log(3000.0)
    _, lo, hi = t_interval(simulated_seeds(rng, REPLICATES, S, mu))
    coverage = np.mean((lo <= mu) & (mu <= hi))
    assert 0.93 <= coverage <= 0.97, coverage


def test_pool_seeds_is_that_interval():
    values = np.exp(simulated_seeds(np.random.default_rng(0), 1, 3)[0])
    _, lo, hi = t_interval(np.log(values))
    assert pool_seeds(values)["ci"] == pytest.approx([math.exp(lo), math.exp(hi)], rel=1e-12)


@pytest.mark.parametrize("S", [3, 5])
def test_welch_ratio_covers_95_percent(S):
    rng = np.random.default_rng(10 + S)
    a = simulated_seeds(rng, REPLICATES, S, np.log(2000.0), 0.15)
    b = simulated_seeds(rng, REPLICATES, S, np.log(10000.0), 0.3)
    _, lo, hi, _ = welch_interval(a, b)
    truth = np.log(5.0)
    coverage = np.mean((lo <= truth) & (truth <= hi))
    assert 0.93 <= coverage <= 0.97, coverage
    r = pool_ratio(np.exp(a[0]), np.exp(b[0]))
    assert r["ci"] == pytest.approx([math.exp(lo[0]), math.exp(hi[0])], rel=1e-12)


def test_the_hierarchical_bootstrap_under_covers_at_three_seeds():
    """The earlier method, measured the same way: at S = 3 it is in effect [min seed, max seed]."""
    rng = np.random.default_rng(3)
    mu, hits, trials = np.log(3000.0), 0, 600
    for k, z in enumerate(simulated_seeds(rng, trials, 3, mu)):
        draws = [np.exp(v + rng.normal(0, 0.1, 200)) for v in z]
        reps = np.log(hierarchical_replicates(draws, 400, k))
        hits += np.percentile(reps, 2.5) <= mu <= np.percentile(reps, 97.5)
    assert hits / trials < 0.9, hits / trials


def test_two_levels_recover_planted_variance_components():
    rng = np.random.default_rng(4)
    R, D, I = 20000, 6, 5
    var_data, var_init, var_res = 0.09, 0.0225, 0.0025
    v = (rng.normal(0, math.sqrt(var_data), (R, D, 1)) + rng.normal(0, math.sqrt(var_init), (R, 1, I))
         + rng.normal(0, math.sqrt(var_res), (R, D, I)))
    r = two_level(v)
    assert np.mean(r["var_data"]) == pytest.approx(var_data, rel=0.05)
    assert np.mean(r["var_init"]) == pytest.approx(var_init, rel=0.05)
    assert np.mean(r["var_residual"]) == pytest.approx(var_res, rel=0.05)
    coverage = np.mean((r["lo"] <= 0) & (0 <= r["hi"]))
    assert 0.93 <= coverage <= 0.97, coverage
    p = pool_seeds(np.exp(3 + v[0]))                       # (D, I) points: both components reported
    assert p["var_data"] == pytest.approx(r["var_data"][0]) and p["var_init"] == pytest.approx(r["var_init"][0])
    assert p["method"].startswith("two-way") and p["n_seeds"] == D * I


@pytest.mark.parametrize("D,I", [(3, 2), (3, 3)])
@pytest.mark.parametrize("sd", [(1, .3, .3), (.3, 1, .3), (.2, .2, 1), (0, 0, 1), (1, 1, 1)],
                         ids=["data", "init", "residual", "residual-only", "equal"])
def test_two_levels_cover_at_the_seed_counts_analyses_use(D, I, sd):
    """data_draws pools 3 data seeds × 2 or 3 training seeds, where the residual dominates: the interval
    must keep ≈ 95% there and never collapse to zero width (the unbiased ANOVA variance of the mean,
    clipped at 0, covered 0.71–0.77 and was zero-width in a quarter of residual-dominated draws)."""
    rng = np.random.default_rng(D * 10 + I)
    R = 20000
    v = (rng.normal(0, sd[0], (R, D, 1)) + rng.normal(0, sd[1], (R, 1, I)) + rng.normal(0, sd[2], (R, D, I)))
    r = two_level(v)
    coverage = np.mean((r["lo"] <= 0) & (0 <= r["hi"]))
    assert 0.92 <= coverage <= 0.995, coverage
    assert np.all(r["hi"] > r["lo"])


def test_two_level_f_tests_hold_their_size_and_find_a_planted_component():
    """p_data / p_init: exact F tests of each component = 0; under the null 5% of 3 × 3 draws reject at
    0.05, and a data effect twice the residual SD is found in most draws."""
    rng = np.random.default_rng(9)
    R, D, I = 20000, 3, 3
    null = rng.normal(0, 1, (R, D, I))
    r = two_level(null)
    assert np.mean(r["p_data"] < 0.05) == pytest.approx(0.05, abs=0.006)
    assert np.mean(r["p_init"] < 0.05) == pytest.approx(0.05, abs=0.006)
    planted = null + rng.normal(0, 2, (R, D, 1))
    r = two_level(planted)
    assert np.mean(r["p_data"] < 0.05) > 0.6 and np.mean(r["p_init"] < 0.05) == pytest.approx(0.05, abs=0.006)
    assert np.isnan(two_level(np.ones((3, 3)))["p_data"])


# ---------------------------------------------------------------------------------------------
# Censoring: a value not reached is a bound at its budget, never a number in a mean, ratio or fit
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("stand_in", [math.inf, math.nan])
def test_a_censored_seed_gives_a_bound_at_its_budget_and_no_interval(stand_in):
    outs = [pool_seeds([1000.0, 2000.0, stand_in], last_steps=[9000, 9000, budget]) for budget in (5000, 50000)]
    for out, budget in zip(outs, (5000, 50000)):
        assert out["lower_bound"] and out["budget"] == budget and all(math.isnan(v) for v in out["ci"])
        assert out["pooled"] == pytest.approx((1000 * 2000 * budget) ** (1 / 3))   # the bound moves with the budget
    assert math.isinf(pool_seeds([1000.0, 2000.0, stand_in])["pooled"])           # no budget given: no finite bound


def test_a_censored_seed_never_enters_a_ratio():
    r = pool_ratio([1000.0, 1100.0, 900.0], [5000.0, math.inf, 6000.0])
    assert r["censored"] and math.isnan(r["value"]) and all(math.isnan(v) for v in r["ci"])
    assert not pool_ratio([1000.0, 1100.0, 900.0], [5000.0, 5500.0, 6000.0])["censored"]


def test_a_censored_x_is_left_out_of_the_fit():
    xs, pts = [30, 60, 120], [[100.0, 110.0, 95.0], [250.0, 230.0, 260.0], [600.0, math.inf, 640.0]]
    fit = seed_fit(xs, pts, last_steps=[[1000] * 3, [1000] * 3, [700] * 3])
    alone = seed_fit(xs[:2], pts[:2])
    assert fit["b"] == alone["b"] and fit["b_ci"] == alone["b_ci"] and fit["xs"] == [30.0, 60.0]
    assert fit["left_out"] == [{"x": 120.0, "pooled": pytest.approx((600 * 700 * 640) ** (1 / 3)),
                                "lower_bound": True, "budget": 700.0}]


def test_closed_windows_are_not_widths_of_zero():
    w = pool_windows([True, False, True], [0.4, 0.0, 0.6], [False, False, True])
    assert w["n_open"] == 2 and w["median_open"] == pytest.approx(0.5) and w["widths_open"] == [0.4, 0.6]
    assert pool_windows([True, False, True], [0.4, 123.0, 0.6], [False, False, True])["median_open"] == w["median_open"]
    assert w["median_is_bound"] is False                           # the censored width (0.6) is above the median
    assert math.isnan(pool_windows([False] * 3, [0.0] * 3, [False] * 3)["median_open"])
