"""stats/taus.py: τ and the window on synthetic curves (checked against a dense evaluation of the
interpolant), bootstrap CIs (coverage, subset invariance), resolution warnings."""
import warnings

import numpy as np
import pytest
import xarray as xr

from scoreprobe.data.datasets import STATE_CODES
from scoreprobe.errors import ResolutionWarning
from scoreprobe.stats.taus import tau_summary

STEPS = np.array([0, 10, 30, 100, 300, 1000, 3000, 10000])


def curves(steps, rule_acc, mem_ratio, **attrs):
    steps = np.asarray(steps, dtype=np.int64)
    return xr.Dataset({"rule_acc": ("step", np.asarray(rule_acc, float)),
                       "mem_ratio": ("step", np.asarray(mem_ratio, float))}, coords={"step": steps}, attrs=attrs)


def logistic(steps, at, slope):
    """A curve whose logit is linear in log(step + 1), equal to 0.5 at step `at`."""
    return 1 / (1 + np.exp(-slope * (np.log1p(steps) - np.log1p(at))))


def logit(p):
    return np.log(p / (1 - p))


def dense(steps, rule_acc, mem_ratio, rt=0.9, mt=0.1, points=200001):
    """Reference: the interpolant (linear in log(step+1), logit y) evaluated on a dense grid."""
    u = np.log1p(np.asarray(steps, float))
    grid = np.linspace(u[0], u[-1], points)
    r = np.interp(grid, u, logit(np.clip(rule_acc, 5e-7, 1 - 5e-7)))
    m = np.interp(grid, u, logit(np.clip(mem_ratio, 5e-7, 1 - 5e-7)))
    ok = (r >= logit(rt)) & (m < logit(mt))
    return np.expm1(grid), ok, np.expm1(grid[np.argmax(r >= logit(rt))]), np.expm1(grid[np.argmax(m >= logit(mt))])


def test_crossings_of_logistic_curves_are_exact():
    rule_acc, mem = logistic(STEPS, 50, 1.5), logistic(STEPS, 4000, 2.0)
    t = tau_summary(curves(STEPS, rule_acc, mem))
    expect_rule = np.expm1(np.log1p(50) + logit(0.9) / 1.5)
    expect_mem = np.expm1(np.log1p(4000) + logit(0.1) / 2.0)
    assert t["tau_rule"] == pytest.approx(expect_rule, rel=1e-9)
    assert t["tau_mem"] == pytest.approx(expect_mem, rel=1e-9)
    assert t["window_open"] and t["window_intervals"] == [[pytest.approx(expect_rule), pytest.approx(expect_mem)]]
    assert t["window_log10_width"] == pytest.approx(np.log10((expect_mem + 1) / (expect_rule + 1)))
    assert t["log10_ratio"] == pytest.approx(np.log10(expect_mem / expect_rule))
    # the order of the checkpoints does not matter, and a subset of them gives the same τ (exact interpolant)
    order = np.random.default_rng(0).permutation(len(STEPS))
    assert tau_summary(curves(STEPS[order], rule_acc[order], mem[order]))["tau_rule"] == pytest.approx(expect_rule)
    assert tau_summary(curves(STEPS[::2], rule_acc[::2], mem[::2]), warn=False)["tau_mem"] == pytest.approx(expect_mem)


def test_a_dip_below_threshold_splits_the_window():
    steps = np.array([0, 100, 300, 1000, 2000, 4000, 8000, 16000, 30000])
    rule_acc = [0.1, 0.85, 0.95, 0.95, 0.8, 0.95, 0.95, 0.9, 0.9]   # dips around 2000
    mem = [0.0, 0.0, 0.0, 0.01, 0.02, 0.04, 0.08, 0.2, 0.5]          # crosses 0.1 between 8000 and 16000
    t = tau_summary(curves(steps, rule_acc, mem), warn=False)
    grid, ok, first_rule, first_mem = dense(steps, rule_acc, mem)
    assert t["tau_rule"] == pytest.approx(first_rule, rel=1e-3) and t["tau_mem"] == pytest.approx(first_mem, rel=1e-3)
    assert len(t["window_intervals"]) == 2  # the dip is visible
    edges = np.flatnonzero(np.diff(ok.astype(int)))  # where the dense condition switches
    expect = [[grid[edges[0] + 1], grid[edges[1]]], [grid[edges[2] + 1], grid[edges[3]]]]
    np.testing.assert_allclose(t["window_intervals"], expect, rtol=1e-3)
    width = sum(np.log10((hi + 1) / (lo + 1)) for lo, hi in expect)
    assert t["window_log10_width"] == pytest.approx(width, rel=1e-3)
    assert t["window_lo"] == t["window_intervals"][0][0] and t["window_hi"] == t["window_intervals"][-1][1]


def test_never_reached_closed_and_first_checkpoint():
    t = tau_summary(curves(STEPS, np.full(8, 0.5), np.zeros(8)))
    assert np.isnan(t["tau_rule"]) and np.isnan(t["tau_mem"]) and np.isnan(t["log10_ratio"])
    assert t["window_open"] is False and t["window_intervals"] == [] and t["window_log10_width"] == 0
    first = tau_summary(curves(STEPS, np.ones(8), np.zeros(8)))
    assert first["tau_rule"] == 0 and first["window_open"] and first["window_hi_censored"]
    rule_acc, mem = [0, 0, 0, 0, 0.5, 0.95, 0.97, 0.99], [0, 0.05, 0.2, 0.5, 0.8, 0.9, 0.9, 0.9]
    late_mem = tau_summary(curves(STEPS, rule_acc, mem), warn=False)
    assert late_mem["tau_mem"] < late_mem["tau_rule"] and late_mem["window_open"] is False


def test_tau_novel_uses_the_oracle_threshold():
    rule_acc, mem = logistic(STEPS, 50, 1.5), logistic(STEPS, 300, 2.0)
    t = tau_summary(curves(STEPS, rule_acc, mem, novel_oracle=0.5), warn=False, definition="first_crossing")
    assert t["novel_threshold"] == pytest.approx(0.45)
    _, _, expect, _ = dense(STEPS, rule_acc - mem, np.zeros(8), rt=0.45)
    assert t["tau_novel"] == pytest.approx(expect, rel=1e-3)
    # novel_valid is above 0.45 at one checkpoint only (step 100): not reliably exceeded
    assert np.isnan(tau_summary(curves(STEPS, rule_acc, mem, novel_oracle=0.5), warn=False)["tau_novel"])


def test_sparse_checkpoints_warn():
    steps = np.array([0, 100, 1000, 10000])
    with pytest.warns(ResolutionWarning, match=r"tau_rule = \d+ \(between checkpoints 100 and 1000\)"):
        tau_summary(curves(steps, logistic(steps, 200, 3.0), np.zeros(4)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dense_steps = np.unique(np.round(np.geomspace(1, 10000, 40)))
        tau_summary(curves(dense_steps, logistic(dense_steps, 200, 3.0), np.zeros(dense_steps.size)))


# ---------------------------------------------------------------------------------------------
# Bootstrap from per-sample states
# ---------------------------------------------------------------------------------------------

STEPS24 = np.unique(np.round(np.geomspace(100, 40000, 24)).astype(int))
TRUE_RULE, TRUE_MEM = 2000.0, 9000.0  # where the true curves cross 0.9 and 0.1


def true_curves(steps):
    rule = 1 / (1 + np.exp(-(logit(0.9) + 2.5 * (np.log1p(steps) - np.log1p(TRUE_RULE)))))
    mem = 1 / (1 + np.exp(-(logit(0.1) + 2.0 * (np.log1p(steps) - np.log1p(TRUE_MEM)))))
    return rule, np.minimum(mem, rule)


def sampled(rng, steps, n=1000):
    """A clocks-like Dataset: per-sample states drawn from the true curves at each step."""
    rule, mem = true_curves(steps)
    u = rng.random((len(steps), n))
    state = np.where(u < mem[:, None], STATE_CODES["valid_memorized"],
                     np.where(u < rule[:, None], STATE_CODES["valid_novel"], STATE_CODES["rule_violating"]))
    ds = xr.Dataset({"state": (("step", "sample"), state.astype(np.int8))}, coords={"step": steps})
    ds["rule_acc"] = (ds.state >= STATE_CODES["valid_novel"]).mean("sample")
    ds["mem_ratio"] = (ds.state == STATE_CODES["valid_memorized"]).mean("sample")
    return ds


def test_bootstrap_intervals_cover_the_truth():
    rng = np.random.default_rng(0)
    trials, hits = 60, {"tau_rule": 0, "tau_mem": 0}
    for i in range(trials):
        t = tau_summary(sampled(rng, STEPS24), n_boot=400, seed=i, warn=False)
        for key, truth in (("tau_rule", TRUE_RULE), ("tau_mem", TRUE_MEM)):
            hits[key] += t[key + "_ci"][0] <= truth <= t[key + "_ci"][1]
    # nominal 95%: with 60 trials, fewer than 50 hits would be a badly miscalibrated interval
    assert hits["tau_rule"] >= 50 and hits["tau_mem"] >= 50, hits


def test_every_third_checkpoint_gives_the_same_taus_within_ci():
    ds = sampled(np.random.default_rng(1), STEPS24)
    full = tau_summary(ds, warn=False)
    sub = tau_summary(ds.isel(step=slice(None, None, 3)), warn=False)
    for key in ("tau_rule", "tau_mem", "window_lo", "window_hi"):
        assert full[key + "_ci"][0] <= sub[key] <= full[key + "_ci"][1], (key, full[key + "_ci"], sub[key])
        assert sub[key + "_ci"][0] <= full[key] <= sub[key + "_ci"][1], (key, sub[key + "_ci"], full[key])
    assert 0 < full["tau_rule_ci"][0] < full["tau_rule"] < full["tau_rule_ci"][1]
    assert full["tau_rule_reached"] == 1.0 and full["window_open_share"] == 1.0


def test_bootstrap_is_a_multinomial_resample_of_each_checkpoint():
    """A checkpoint whose samples are all alike has no sampling noise: its crossing CI collapses."""
    steps = np.array([0, 1000])
    state = np.stack([np.full(50, STATE_CODES["rule_violating"]), np.full(50, STATE_CODES["valid_novel"])])
    ds = xr.Dataset({"state": (("step", "sample"), state.astype(np.int8))}, coords={"step": steps})
    ds["rule_acc"] = ("step", [0.0, 1.0])
    ds["mem_ratio"] = ("step", [0.0, 0.0])
    t = tau_summary(ds, n_boot=200, warn=False)
    assert t["tau_rule_ci"][0] == t["tau_rule_ci"][1] == pytest.approx(t["tau_rule"])
