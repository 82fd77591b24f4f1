"""τ over thresholds (sp.taus -> Dataset), the "reliable" τ definition against hand-built curves, and the
sample-level bootstrap resampling sample indices jointly across checkpoints."""
import numpy as np
import pytest
import xarray as xr

import scoreprobe as sp
from scoreprobe.data.datasets import STATE_CODES
from scoreprobe.errors import ConfigError
from scoreprobe.probes.wilson import wilson_lower
from scoreprobe.stats.taus import resampled_curves, tau_summary
from scoreprobe.stats.thresholds import threshold_draws
from tests.test_taus import STEPS24, curves, sampled

STEPS = np.array([0, 100, 200, 400, 800, 1600, 3200])


def test_wilson_lower_bound_by_hand():
    y, n, z = 0.918, 1000, 1.959963984540054
    centre = (y + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(y * (1 - y) / n + z * z / (4 * n * n))
    assert wilson_lower(y, n) == pytest.approx(centre - half)
    assert wilson_lower(y, n) < 0.9 < y          # the lone G = 3 peak of the scaling study is not confident


def test_one_lucky_checkpoint_is_not_reliable():
    rule = [0.2, 0.5, 0.95, 0.8, 0.85, 0.97, 0.98]          # a spike at 200, then above from 1600 on
    ds = curves(STEPS, rule, np.zeros(7), n_samples=1000)
    first = tau_summary(ds, n_boot=0, warn=False, definition="first_crossing")["tau_rule"]
    reliable = tau_summary(ds, n_boot=0, warn=False)["tau_rule"]
    assert 100 < first < 200                                # the spike
    u, z = np.log1p(STEPS), np.log(np.array(rule) / (1 - np.array(rule)))
    f = (np.log(9) - z[4]) / (z[5] - z[4])                  # the crossing into the stretch 1600, 3200
    assert reliable == pytest.approx(np.expm1(u[4] + f * (u[5] - u[4])))
    only_spike = curves(STEPS, [0.2, 0.5, 0.95, 0.8, 0.85, 0.8, 0.8], np.zeros(7), n_samples=1000)
    assert np.isnan(tau_summary(only_spike, n_boot=0, warn=False)["tau_rule"])
    assert tau_summary(only_spike, n_boot=0, warn=False)["window_status"] == \
        "closed: rule accuracy never reliably exceeds 0.9 (peak 0.95)"


def test_above_but_not_confident_is_not_reliable_and_the_last_checkpoint_suffices():
    hover = curves(STEPS, [0.2, 0.5, 0.905, 0.91, 0.905, 0.91, 0.905], np.zeros(7), n_samples=1000)
    assert np.isnan(tau_summary(hover, n_boot=0, warn=False)["tau_rule"])     # above 0.9, Wilson bound below
    assert tau_summary(hover, n_boot=0, warn=False, definition="first_crossing")["tau_rule"] < 200
    late = curves(STEPS, [0.2, 0.5, 0.6, 0.7, 0.8, 0.85, 0.99], np.zeros(7), n_samples=1000)
    assert 1600 < tau_summary(late, n_boot=0, warn=False)["tau_rule"] < 3200


def test_a_steady_rise_reads_the_same_under_both_definitions():
    ds = sampled(np.random.default_rng(2), STEPS24)
    a, b = (tau_summary(ds, n_boot=0, warn=False, definition=d) for d in ("reliable", "first_crossing"))
    assert a["tau_rule"] == b["tau_rule"] and a["tau_mem"] == b["tau_mem"]
    with pytest.raises(ConfigError, match="unknown τ definition"):
        tau_summary(ds, definition="sometimes")


def test_resamples_keep_samples_paired_across_checkpoints():
    """Sample i is valid from checkpoint i // 10 on: every resampled curve must be non-decreasing (independent
    per-checkpoint resampling breaks that in most replicates)."""
    n, S = 200, 8
    first_valid = np.arange(n) % S
    state = np.where(np.arange(S)[:, None] >= first_valid[None], STATE_CODES["valid_novel"],
                     STATE_CODES["rule_violating"]).astype(np.int8)
    ds = xr.Dataset({"state": (("step", "sample"), state)}, coords={"step": np.arange(S) * 100})
    rule, mem, _ = resampled_curves(ds, 500, 0)
    assert np.all(np.diff(rule, axis=1) >= 0) and np.all(mem == 0)
    counts = (state >= STATE_CODES["valid_novel"]).sum(axis=1)       # the measured curve is the mean of resamples
    assert rule.mean(axis=0) == pytest.approx(counts / n, abs=0.02)


def test_taus_dataset_over_thresholds():
    ds = sampled(np.random.default_rng(5), STEPS24)
    out = sp.taus(ds, n_boot=200, seed=3)
    assert isinstance(out, xr.Dataset) and set(out.dims) == {"rule_threshold", "mem_threshold"}
    assert 0.9 in out.rule_threshold.values and 0.1 in out.mem_threshold.values
    head = tau_summary(ds, n_boot=200, seed=3, warn=False)
    assert float(out.tau_rule.sel(rule_threshold=0.9)) == pytest.approx(head["tau_rule"])
    assert float(out.tau_mem.sel(mem_threshold=0.1)) == pytest.approx(head["tau_mem"])
    assert [float(out.tau_mem_lo.sel(mem_threshold=0.1)), float(out.tau_mem_hi.sel(mem_threshold=0.1))] == \
        pytest.approx(head["tau_mem_ci"])
    assert np.all(np.diff(out.tau_rule.values) > 0) and np.all(np.diff(out.tau_mem.values) > 0)   # rising curves
    assert bool(out.window_open.sel(rule_threshold=0.9, mem_threshold=0.1)) == head["window_open"]
    assert "jointly" in out.attrs["ci_method"]
    point, draws = threshold_draws(ds, "tau_mem", out.mem_threshold.values, n_boot=200, seed=3)
    assert point == pytest.approx(out.tau_mem.values) and draws.shape == (200, out.sizes["mem_threshold"])
    with pytest.raises(ConfigError, match="strictly between 0 and 1"):
        sp.taus(ds, rule_thresholds=[0.5, 1.2])


def test_pool_taus_over_seeds_threshold_by_threshold():
    runs = [sampled(np.random.default_rng(s), STEPS24) for s in range(3)]
    each = [sp.taus(ds, n_boot=0) for ds in runs]
    pooled = sp.pool_taus(each, last_steps=[40000] * 3)
    j = list(pooled.rule_threshold.values).index(0.9)
    vals = np.array([float(e.tau_rule[j]) for e in each])
    by_hand = sp.pool_seeds(vals)
    assert float(pooled.tau_rule[j]) == pytest.approx(by_hand["pooled"])
    assert [float(pooled.tau_rule_lo[j]), float(pooled.tau_rule_hi[j])] == pytest.approx(by_hand["ci"])
    assert pooled.attrs["method"].startswith("t interval") and not bool(pooled.tau_rule_bound[j])
    high = sp.taus(runs[0], rule_thresholds=[0.9, 0.999], n_boot=0)        # 0.999 is never reached: censored
    two = sp.pool_taus([high, high], last_steps=[40000, 40000])
    assert bool(two.tau_rule_bound[1]) and float(two.tau_rule[1]) == pytest.approx(40000)
    assert np.isnan(float(two.tau_rule_lo[1]))
