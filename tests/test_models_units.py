"""stats/models_units (trained models × units tables, kept in the library: the battery's readings over several
models): per-model statistics against hand computation on planted tables, a half-change step recovered from
planted logistic curves, an undefined ratio left undefined, and the one-model paired p against scipy."""
import math

import numpy as np
import pytest
from scipy import stats

from scoreprobe.stats.models_units import difference_curve, half_change, paired_p, sum_ratio_curve


def _table(M=3, U=6, S=4, seed=0):
    return np.random.default_rng(seed).uniform(0.1, 1.0, size=(M, U, S))


def test_difference_curve_is_the_per_model_difference_of_unit_means():
    Ya, Yb = _table(seed=1), _table(U=5, seed=2)
    r = difference_curve(Ya, Yb, n_boot=50, seed=0)
    per = Ya.mean(axis=1) - Yb.mean(axis=1)                                        # (M, S)
    np.testing.assert_allclose(r["per_model"], per, rtol=1e-12)
    np.testing.assert_allclose(r["mean"], per.mean(axis=0), rtol=1e-12)
    assert r["n_units"] == 11 and all(lo < m < hi for lo, m, hi in zip(r["lo"], r["mean"], r["hi"]))


def test_sum_ratio_curve_is_a_ratio_of_sums_and_undefined_without_a_denominator():
    num, den = _table(seed=3), _table(seed=4) + 1.0
    den[1, :, 2] = 0.0                                          # model 1 has nothing to divide by at step 2
    num[1, :, 2] = 0.0
    r = sum_ratio_curve(num, den, n_boot=50, seed=0)
    per = np.array(r["per_model"])
    ok = [0, 1, 3]
    np.testing.assert_allclose(per[:, ok], num.sum(1)[:, ok] / den.sum(1)[:, ok], rtol=1e-12)
    assert math.isnan(per[1, 2]) and math.isnan(r["mean"][2])                    # never a zero or a label


def test_half_change_recovers_planted_midpoints():
    steps = np.array([0, 10, 30, 100, 300, 1000, 3000, 10000, 30000], float)
    mids = np.array([200.0, 400.0, 800.0])                                         # one per model
    x = np.log(steps[1:])
    curves = 1 / (1 + np.exp(-2.0 * (x[None, :] - np.log(mids)[:, None])))          # (M, S')
    rng = np.random.default_rng(5)
    Y = np.concatenate([np.zeros((3, 1)), curves], axis=1)[:, None, :] + rng.normal(0, 1e-4, (3, 8, len(steps)))
    hc = half_change(Y, steps, n_boot=40, seed=0)
    np.testing.assert_allclose(hc["per_model"], mids, rtol=0.02)
    assert hc["censored"] == [None, None, None]
    assert hc["step"] == pytest.approx(math.exp(np.log(mids).mean()), rel=0.02) and hc["ci"][0] < hc["step"] < hc["ci"][1]


def test_paired_p_is_the_one_sided_t_test():
    gap = np.random.default_rng(6).normal(0.2, 1.0, size=(12, 3))
    want = stats.ttest_1samp(gap, 0.0, axis=0, alternative="greater").pvalue
    np.testing.assert_allclose(paired_p(gap), want, rtol=1e-10)
    const = np.full((5, 2), 0.5) * np.array([1.0, -1.0])                           # zero spread: the sign decides
    assert paired_p(const).tolist() == [0.0, 1.0]
