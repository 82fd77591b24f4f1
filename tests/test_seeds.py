"""stats/seeds.py: sample-level draws (the ones tau_summary() summarizes), the t interval over seeds (the
default) and the hierarchical bootstrap kept by name (against hand computations in its two limits),
censored seeds as bounds with their budget, and fits across an axis with seed variance."""
import math

import numpy as np
import pytest

from scoreprobe.errors import ConfigError
from scoreprobe.stats.seeds import hierarchical_replicates, pool_seeds, seed_fit, tau_draws
from scoreprobe.stats.taus import tau_summary
from tests.test_taus import STEPS24, sampled


@pytest.fixture(scope="module")
def runs():
    return [sampled(np.random.default_rng(s), STEPS24, n=400) for s in range(3)]


@pytest.mark.parametrize("key", ["tau_rule", "tau_mem", "tau_novel"])
def test_draws_percentiles_are_the_ci_of_taus(runs, key):
    ds = runs[0]
    t = tau_summary(ds, n_boot=300, seed=7, warn=False)
    point, draws = tau_draws(ds, key, n_boot=300, seed=7)
    assert point == pytest.approx(t[key], rel=1e-12)
    lo, hi = np.percentile(draws, [2.5, 97.5], method="lower")[0], np.percentile(draws, 97.5, method="higher")
    assert [lo, hi] == pytest.approx(t[key + "_ci"], rel=1e-12)
    assert np.mean(np.isfinite(draws)) == t[key + "_reached"]


def test_window_width_draws_are_zero_when_closed(runs):
    ds = runs[0]
    t = tau_summary(ds, n_boot=200, seed=1, warn=False)
    point, draws = tau_draws(ds, "window_log10_width", n_boot=200, seed=1)
    assert point == pytest.approx(t["window_log10_width"])
    assert np.all(np.isfinite(draws)) and np.all(draws >= 0)
    assert [np.percentile(draws, 2.5, method="lower"), np.percentile(draws, 97.5, method="higher")] == \
        pytest.approx(t["window_log10_width_ci"])
    with pytest.raises(ConfigError, match="unknown key"):
        tau_draws(ds, "tau_nothing")


def test_one_seed_gives_the_sample_level_ci(runs):
    t = tau_summary(runs[0], n_boot=500, seed=3, warn=False)
    point, draws = tau_draws(runs[0], "tau_mem", n_boot=500, seed=3)
    pooled = pool_seeds([point], [draws], n_boot=500, seed=11)
    assert pooled["pooled"] == pytest.approx(t["tau_mem"], rel=1e-12)
    assert pooled["ci"] == pytest.approx(t["tau_mem_ci"], rel=1e-12)
    assert pooled["n_seeds"] == 1 and not pooled["lower_bound"]


def test_zero_within_seed_variance_is_a_bootstrap_over_seed_values():
    values = np.array([1000.0, 1500.0, 4000.0, 2500.0])
    draws = [np.full(50, v) for v in values]             # a seed's draws all equal its value (n -> inf)
    got = pool_seeds(list(values), draws, n_boot=4000, seed=5, method="hierarchical")
    picks = np.random.default_rng(5).integers(0, 4, size=(4000, 4))           # by hand: seeds resampled
    reps = np.exp(np.log(values[picks]).mean(axis=1))
    expected = [np.percentile(reps, 2.5, method="lower"), np.percentile(reps, 97.5, method="higher")]
    assert got["ci"] == pytest.approx(expected, rel=1e-12)
    assert got["pooled"] == pytest.approx(math.exp(np.log(values).mean()))
    arith = pool_seeds(list(values), draws, n_boot=4000, seed=5, log=False, method="hierarchical")
    assert arith["pooled"] == pytest.approx(values.mean())
    assert arith["ci"] == pytest.approx([np.percentile(values[picks].mean(axis=1), 2.5, method="lower"),
                                         np.percentile(values[picks].mean(axis=1), 97.5, method="higher")])


def test_seed_variance_widens_the_ci(runs):
    """Three seeds whose τ_mem differ by factors of 2: the pooled CI is far wider than one seed's."""
    points, draws = zip(*(tau_draws(ds, "tau_mem", n_boot=300, seed=0) for ds in runs))
    spread = [p * f for p, f in zip(points, (0.5, 1.0, 2.0))]
    wide = pool_seeds(spread, [d * f for d, f in zip(draws, (0.5, 1.0, 2.0))], n_boot=2000)
    narrow = pool_seeds(list(points), list(draws), n_boot=2000)
    assert wide["ci"][1] / wide["ci"][0] > 2 * narrow["ci"][1] / narrow["ci"][0]
    assert wide["ci"][0] < wide["pooled"] < wide["ci"][1]


def test_t_interval_on_log_tau_by_hand():
    values = np.array([1000.0, 1500.0, 4000.0])
    out = pool_seeds(values, [np.full(10, v) for v in values])
    z = np.log(values)
    half = 4.302652729911275 * z.std(ddof=1) / math.sqrt(3)        # t_{0.975, 2}
    assert out["ci"] == pytest.approx([math.exp(z.mean() - half), math.exp(z.mean() + half)], rel=1e-9)
    assert out["method"].startswith("t interval") and out["seed_var"] == pytest.approx(z.var(ddof=1))
    assert pool_seeds(values)["ci"] == out["ci"]                   # draws are optional for the t interval


def test_unreached_seeds_give_a_lower_bound_at_their_budget():
    draws = [np.full(100, 1000.0), np.full(100, 2000.0), np.full(100, np.inf)]
    out = pool_seeds([1000.0, 2000.0, math.inf], draws, n_boot=1000, last_steps=[5000, 5000, 4000])
    assert out["lower_bound"] and out["n_reached"] == 2 and out["budget"] == 4000
    assert out["pooled"] == pytest.approx((1000 * 2000 * 4000) ** (1 / 3))
    assert all(math.isnan(v) for v in out["ci"]) and out["method"].startswith("lower bound")
    out = pool_seeds([1000.0, 2000.0, math.inf], draws, n_boot=1000, last_steps=[5000, 5000, 4000],
                     method="hierarchical")
    assert out["ci"][1] == math.inf                     # 1 - (2/3)^3 = 70% of replicates pick the unreached seed
    assert out["unreached_share"] == pytest.approx(1 - (2 / 3) ** 3, abs=0.05)
    some = [np.full(100, 1000.0), np.where(np.arange(100) < 1, np.inf, 2000.0)]
    assert pool_seeds([1000.0, 2000.0], some, n_boot=1000, method="hierarchical")["ci"][1] < math.inf   # 1% < 2.5%


def test_replicates_use_distinct_draws_of_a_seed():
    d = np.arange(10.0) + 1
    reps = hierarchical_replicates([d], n_boot=10, seed=0, log=False)
    assert sorted(reps) == list(d)


def test_power_fit_recovers_b_and_its_seed_spread():
    """τ = 3 N^0.8 times a seed factor, no sampling noise: b exact; b's CI is the refit spread."""
    xs, b = [30, 60, 120, 240], 0.8
    rng = np.random.default_rng(0)
    factors = np.exp(rng.normal(0, 0.1, size=(4, 3)))           # (x, seed)
    points = [[3 * x ** b * f for f in fk] for x, fk in zip(xs, factors)]
    draws = [[np.full(20, p) for p in pk] for pk in points]
    fit = seed_fit(xs, points, draws, kind="power", n_boot=3000, seed=2, method="hierarchical")
    pooled = [math.exp(np.mean(np.log(p))) for p in points]
    ref = np.polyfit(np.log(xs), np.log(pooled), 1)
    assert fit["b"] == pytest.approx(ref[0]) and fit["a"] == pytest.approx(math.exp(ref[1]))
    reps = np.stack([hierarchical_replicates([np.full(20, p) for p in pk], 3000, 2 + k)
                     for k, pk in enumerate(points)], axis=1)
    slopes = np.polyfit(np.log(xs), np.log(reps.T), 1)[0]
    assert fit["b_ci"] == pytest.approx([np.percentile(slopes, 2.5, method="lower"),
                                         np.percentile(slopes, 97.5, method="higher")], rel=1e-9)
    assert fit["b_ci"][0] < b < fit["b_ci"][1] and fit["left_out"] == []
    t_fit = seed_fit(xs, points, kind="power")            # least squares over all 12 seed values, t on the slope
    X, Y = np.repeat(np.log(xs), 3), np.log(np.concatenate(points))
    slope, icpt = np.polyfit(X, Y, 1)
    resid = Y - (icpt + slope * X)
    se = math.sqrt(resid @ resid / 10 / np.sum((X - X.mean()) ** 2))
    assert t_fit["b_runs"] == pytest.approx(slope) and t_fit["n_points"] == 12
    assert t_fit["b_ci_runs"] == pytest.approx([slope - 2.2281388519649385 * se, slope + 2.2281388519649385 * se])
    # the reading: the 4 per-N means as units, t on 2 df (issue 73 item 8); equal seeds per N: the same slope
    means = [np.mean(np.log(p)) for p in points]
    m_slope, m_icpt = np.polyfit(np.log(xs), means, 1)
    m_res = np.asarray(means) - (m_icpt + m_slope * np.log(xs))
    m_se = math.sqrt(m_res @ m_res / 2 / np.sum((np.log(xs) - np.log(xs).mean()) ** 2))
    assert t_fit["b"] == pytest.approx(slope) == pytest.approx(m_slope)
    assert t_fit["b_ci"] == pytest.approx([m_slope - 4.302652729911275 * m_se, m_slope + 4.302652729911275 * m_se])


def test_exp_fit_gives_the_per_unit_factor_and_leaves_out_unreached():
    xs = [2, 3, 4]
    points = [[100.0 * 5 ** g] * 3 for g in xs[:2]] + [[math.inf, 30000.0, math.inf]]
    draws = [[np.full(10, p) for p in pk] for pk in points]
    fit = seed_fit(xs, points, draws, kind="exp", last_steps=[None, None, [40000, 40000, 40000]])
    assert fit["factor"] == pytest.approx(5.0) and fit["factor_ci"] == pytest.approx([5.0, 5.0])
    assert fit["xs"] == [2.0, 3.0] and fit["left_out"][0]["x"] == 4.0
    assert fit["left_out"][0]["pooled"] == pytest.approx((40000 * 30000 * 40000) ** (1 / 3))
    few = seed_fit(xs[:1], points[:1], draws[:1], kind="exp")
    assert math.isnan(few["factor"]) and "fewer than two" in few["note"]


def test_a_partly_censored_configuration_gets_the_censored_normal_estimate_beside_its_bound():
    import math
    from scoreprobe.stats.censored import censored_mean
    p = pool_seeds([1712.0, 1976.0, 2400.0, math.inf], last_steps=[15000.0] * 4)
    ref = censored_mean(np.log([1712.0, 1976.0, 2400.0, 15000.0]), np.array([0, 0, 0, 1], bool))
    est = p["censored_estimate"]
    assert p["lower_bound"] and est["n_censored"] == 1
    assert est["value"] == pytest.approx(math.exp(ref["mean"])) and est["ci"][0] == pytest.approx(math.exp(ref["lower"]))
    assert est["value"] > math.exp(np.log([1712.0, 1976.0, 2400.0]).mean())   # above the crossed runs' mean
    # every seed censored, one seed crossed, or no budgets: no estimate (a bound only)
    assert pool_seeds([math.inf, math.inf], last_steps=[1.0, 1.0])["censored_estimate"] is None
    assert pool_seeds([5.0, math.inf], last_steps=[9.0, 9.0])["censored_estimate"] is None
    assert "censored_estimate" in pool_seeds([5.0, math.inf]) and pool_seeds([5.0, math.inf])["censored_estimate"] is None
