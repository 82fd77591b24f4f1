"""Half-change steps, bootstrap CIs over planes / items (stats.timing) and the paired DSM statistics
with their multiple-testing correction (stats.dsm_stats)."""
import math

import numpy as np
import pytest
import scipy.stats

from scoreprobe.errors import ConfigError
from scoreprobe.stats.dsm_stats import paired_gap_stats
from scoreprobe.stats.pvalues import adjust_pvalues
from scoreprobe.stats.timing import difference_ci, half_change, half_change_step, log10_spread, mean_ci


def test_half_change_step_is_linear_in_log_step():
    steps = [0, 99, 9999]
    assert half_change_step(steps, [0.0, 0.0, 1.0]) == pytest.approx(999.0)       # midway between log 100, 10^4
    assert half_change_step(steps, [1.0, 1.0, 0.0]) == pytest.approx(999.0)       # falling curves too
    assert half_change_step(steps, [0.0, 1.0, 0.0], to="extreme") == pytest.approx(9.0)   # up, then back
    assert math.isnan(half_change_step(steps, [0.0, 1.0, 0.0]))                    # no total change
    assert math.isnan(half_change_step(steps, [0.2, 0.2, 0.2]))
    assert math.isnan(half_change_step(steps, [0.0, np.nan, 1.0]))
    got = half_change_step(steps, np.array([[0.0, 0.0, 1.0], [0.0, 0.5, 1.0]]))
    np.testing.assert_allclose(got, [999.0, 99.0])
    with pytest.raises(ConfigError):
        half_change_step([5, 3], [0.0, 1.0])


def test_half_change_bootstrap_over_units_and_groups():
    rng = np.random.default_rng(0)
    steps = np.array([10, 100, 1000, 10000, 100000], float)
    mid = rng.normal(3.0, 0.3, size=60)                      # log10 of each unit's switch step
    y = 1 / (1 + np.exp(-4 * (np.log10(steps)[None] - mid[:, None])))        # (60, 5) logistic curves
    groups = np.repeat([0, 1, 2], 20)
    out = half_change(steps, y, groups, n_boot=300)
    assert out["ci"][0] <= out["step"] <= out["ci"][1] and out["reached"] == 1.0
    assert 300 < out["step"] < 3000 and set(out["by_group"]) == {"0", "1", "2"}
    assert 0 < out["change_ci"][0] <= out["change"] <= out["change_ci"][1]
    assert np.isfinite(log10_spread(out["by_group"]))
    wide = half_change(steps, y, groups, n_boot=300, resample_groups=True)
    assert wide["step"] == out["step"]
    flat = half_change(steps, np.zeros((5, 5)), n_boot=50)
    assert math.isnan(flat["step"]) and flat["ci"][1] == math.inf and flat["reached"] == 0.0
    assert flat["change_ci"] == [0.0, 0.0]


def test_mean_and_difference_cis_cover_and_split_by_group():
    rng = np.random.default_rng(1)
    a = rng.normal(1.0, 1.0, size=(400, 3))
    b = rng.normal(0.0, 1.0, size=(300, 3))
    m = mean_ci(a, np.arange(400) % 4, n_boot=400)
    se = a.std(0, ddof=1) / 20
    np.testing.assert_allclose(m["hi"] - m["lo"], 2 * 1.96 * se, rtol=0.2)      # as wide as the normal CI
    assert set(m["by_group"]) == {0, 1, 2, 3}
    d = difference_ci(a, b, n_boot=400)
    np.testing.assert_allclose(d["mean"], a.mean(0) - b.mean(0))
    assert (d["lo"] < d["mean"]).all() and (d["mean"] < d["hi"]).all() and (d["lo"] > 0.5).all()
    with_nan = a.copy()
    with_nan[:, 2] = np.nan
    assert np.isnan(mean_ci(with_nan, n_boot=10)["mean"][2])


def test_adjust_pvalues_holm_and_bh():
    p = np.array([0.01, 0.04, 0.03, np.nan])
    np.testing.assert_allclose(adjust_pvalues(p, "holm")[:3], [0.03, 0.06, 0.06])
    np.testing.assert_allclose(adjust_pvalues(p, "bh")[:3], [0.03, 0.04, 0.04])
    assert np.isnan(adjust_pvalues(p)[3])
    two = adjust_pvalues(np.stack([p, p[::-1]]))                           # each row its own family
    np.testing.assert_allclose(two[1, 1:], [0.06, 0.06, 0.03])
    with pytest.raises(ConfigError):
        adjust_pvalues(p, "bonferroni")


def test_paired_gap_stats_pair_by_position():
    rng = np.random.default_rng(2)
    n, sigmas = 40, np.array([0.1, 0.5, 1.0, 2.0])
    train = rng.normal(1.0, 0.5, size=(4, n))                               # (sigma, pair)
    held = train + rng.normal(0, 0.05, size=(4, n)) + np.array([0, 0, 0.2, 0.3])[:, None]
    order = rng.permutation(2 * n)                                          # items in any order
    loss = np.concatenate([train, held], axis=1)[:, order]
    split = np.array(["train"] * n + ["heldout"] * n)[order]
    pos = np.concatenate([np.arange(n), np.arange(n)])[order]
    loss[1, np.flatnonzero((split == "heldout") & (pos == 3))] = np.nan    # a non-finite pair is dropped
    out = paired_gap_stats(loss, split, pos, sigmas)
    d = held - train
    np.testing.assert_allclose(out["paired_gap"][[0, 2, 3]], d[[0, 2, 3]].mean(1))
    assert out["n_pairs"].tolist() == [n, n - 1, n, n]
    want = scipy.stats.ttest_rel(held[2], train[2], alternative="greater").pvalue
    assert out["p_value"][2] == pytest.approx(want, rel=1e-6)
    assert out["first_significant_sigma"] == 1.0 and out["method"] == "holm"
    none = paired_gap_stats(np.stack([train, train], -1).reshape(4, -1), np.tile(["train", "heldout"], n),
                            np.repeat(np.arange(n), 2), sigmas)
    assert math.isnan(none["first_significant_sigma"])
    with pytest.raises(ConfigError, match="share a noise position"):
        paired_gap_stats(loss[:, :3], np.array(["train"] * 3), np.arange(3), sigmas)
