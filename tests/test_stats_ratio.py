"""scoreprobe.inside.ratio: pooled ratios are undefined for mixed-sign or tiny contrasts."""
import warnings

import numpy as np
import pytest

from scoreprobe.inside.ratio import MIXED, SMALL, pooled_ratio, unit_ratio, warn_undefined


def test_same_sign_pools_to_the_ratio_of_sums():
    r, why = pooled_ratio([1.0, 2.0, 3.0], [2.0, 2.0, 2.0])
    assert r == pytest.approx(1.0) and why == ""


def test_mixed_sign_is_undefined_even_when_the_sum_looks_fine():
    # the example: +3.56 / −2.11 / +1.33 pooled to "+0.93"
    r, why = pooled_ratio([3.56 * 0.5, -2.11 * 0.4, 1.33 * 0.6], [0.5, -0.4, 0.6])
    assert np.isnan(r) and why == MIXED


def test_tiny_contrast_is_undefined():
    r, why = pooled_ratio([0.01, 0.0], [-0.004, -0.010], floor=0.01)
    assert np.isnan(r) and why == SMALL


def test_axis_and_nan_units():
    num = np.array([[1.0, np.nan, 1.0], [1.0, -1.0, 1.0]])
    den = np.array([[1.0, 1.0, 1.0], [1.0, -1.0, 1.0]])
    r, why = pooled_ratio(num, den, axis=1)
    assert r[0] == pytest.approx(1.0) and why[0] == ""      # the NaN unit is left out of both sums
    assert np.isnan(r[1]) and why[1] == MIXED


def test_unit_ratio_and_warning():
    r, why = unit_ratio([1.0, 1.0], [0.5, 0.001])
    assert r[0] == 2.0 and np.isnan(r[1]) and list(why) == ["", SMALL]
    with pytest.warns(UserWarning, match="1 of 2 left undefined"):
        warn_undefined(why)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_undefined(np.array(["", ""], dtype=object))
