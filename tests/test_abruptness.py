"""probes/abruptness.py: the steepest rise of logit(y) per decade, against analytic curves and by hand."""
import math

import numpy as np
import pytest
import xarray as xr

from scoreprobe.data.datasets import STATE_CODES
from scoreprobe.errors import ConfigError
from scoreprobe.probes.abruptness import abruptness
from scoreprobe.probes.seeds import pool_seeds, tau_draws

STEPS = np.array([0, 30, 100, 300, 1000, 3000, 10000, 30000])


def curve(y, n, steps=STEPS):
    return xr.Dataset({"mem_ratio": ("step", np.asarray(y, float))}, coords={"step": steps},
                      attrs={"n_samples": n})


def test_logistic_in_log10_step_has_its_slope_as_abruptness():
    """logit y = k (log10(s + 1) − c) is linear: every segment has slope k; with n = 1e12 the
    (k + 0.5)/(n + 1) shrinkage and the rounding of counts move it by < 1e-6."""
    k, c = 2.7, 3.0
    y = 1 / (1 + np.exp(-k * (np.log10(STEPS + 1) - c)))
    a = abruptness(curve(y, 10 ** 12), n_boot=200)
    assert a["abruptness"] == pytest.approx(k, rel=1e-6)
    assert a["ci"] == pytest.approx([k, k], rel=1e-4)   # binomial noise at n = 1e12: ~1e-5


def test_steepest_segment_and_its_midpoint():
    """logit y piecewise linear in log10(s + 1): slope 1 up to step 999, then 6: abruptness 6, at the
    geometric midpoint of the first steep segment."""
    v = np.log10(STEPS + 1)
    z = np.where(v <= 3, -4 + (v - 0), -4 + 3 + 6 * (v - 3))
    y = 1 / (1 + np.exp(-np.clip(z, -30, 30)))
    a = abruptness(curve(y, 10 ** 12), n_boot=0)
    assert a["abruptness"] == pytest.approx(6.0, rel=1e-5)
    assert a["at_step"] == pytest.approx(math.sqrt(1001 * 3001) - 1)
    assert all(math.isnan(x) for x in a["ci"])


def test_counts_from_state_and_the_shrinkage_by_hand():
    n = 50
    k = np.array([0, 1, 5, 30, 49])
    steps = np.array([10, 100, 1000, 10000, 100000])
    state = np.full((5, n), STATE_CODES["rule_violating"], np.int8)
    for i, ki in enumerate(k):
        state[i, :ki] = STATE_CODES["valid_memorized"]
    ds = xr.Dataset({"state": (("step", "sample"), state)}, coords={"step": steps})
    ds["mem_ratio"] = (ds.state == STATE_CODES["valid_memorized"]).mean("sample")
    z = np.log((k + 0.5) / (n + 1 - k - 0.5))
    slopes = np.diff(z) / np.diff(np.log10(steps + 1))
    a = abruptness(ds, n_boot=400, seed=3)
    assert a["abruptness"] == pytest.approx(slopes.max())
    point, draws = tau_draws(ds, "abruptness", n_boot=400, seed=3)
    assert point == a["abruptness"] and np.array_equal(draws, a["draws"])
    assert [np.percentile(draws, 2.5, method="lower"), np.percentile(draws, 97.5, method="higher")] == a["ci"]
    pooled = pool_seeds([point, point + 1], [draws, draws + 1], log=False)
    assert pooled["pooled"] == pytest.approx(point + 0.5)


def test_bad_input():
    with pytest.raises(ConfigError, match="two distinct"):
        abruptness(curve([0.1], 100, steps=np.array([5])))
    with pytest.raises(ConfigError, match="no variable"):
        abruptness(curve([0.1, 0.2], 100, steps=np.array([5, 6])), var="rule_acc")
