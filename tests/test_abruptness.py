"""stats/abruptness.py: the slope of logit(y) per decade through the transition band, against analytic
curves and by hand."""
import math

import numpy as np
import pytest
import xarray as xr

from scoreprobe.data.datasets import STATE_CODES
from scoreprobe.errors import ConfigError
from scoreprobe.stats.abruptness import abruptness
from scoreprobe.stats.seeds import pool_seeds, tau_draws

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


def test_the_band_leaves_out_the_count_noise_at_either_end():
    """n = 1000: counts 0, 1, 3 (below 20) and 990 (10 left) are outside the band; inside it the
    counts lie on logit = 2 (log10(s + 1) − 3) + 0.3 (noise-free), so the slope is 2 up to rounding."""
    n = 1000
    v = np.log10(STEPS + 1)
    k = np.rint(n / (1 + np.exp(-(2 * (v - 3) + 0.3)))).astype(int)
    k[:3] = [0, 1, 3]
    k[-1] = 990
    a = abruptness(curve(k / n, n), n_boot=0)
    inside = (k >= 20) & (n - k >= 20)
    z = np.log((k[inside] + 0.5) / (n + 1 - k[inside] - 0.5))
    assert a["n_band"] == inside.sum() >= 3
    assert a["abruptness"] == pytest.approx(np.polyfit(v[inside], z, 1)[0])
    assert a["abruptness"] == pytest.approx(2.0, abs=0.05)
    assert a["band"] == [float(STEPS[inside][0]), float(STEPS[inside][-1])]
    assert a["at_step"] == pytest.approx(math.sqrt((a["band"][0] + 1) * (a["band"][1] + 1)) - 1)
    assert all(math.isnan(x) for x in a["ci"])
    # a jump from 1 to 2 copies (a segment of slope ≈ 5 per decade from one count) does not count
    noisy = k.copy()
    noisy[1] = 2
    assert abruptness(curve(noisy / n, n), n_boot=0)["abruptness"] == a["abruptness"]


def test_fewer_than_two_checkpoints_in_the_band_is_not_resolved():
    n = 1000
    y = np.array([0, 0, 0, 0.001, 0.5, 0.999, 1, 1])        # one checkpoint in the band
    a = abruptness(curve(y, n), n_boot=50)
    assert a["n_band"] == 1 and math.isnan(a["abruptness"]) and all(math.isnan(x) for x in a["ci"])


def test_counts_from_state_and_the_shrinkage_by_hand():
    n = 100
    k = np.array([0, 1, 25, 50, 70, 99])
    steps = np.array([10, 100, 1000, 3000, 10000, 100000])
    state = np.full((len(k), n), STATE_CODES["rule_violating"], np.int8)
    for i, ki in enumerate(k):
        state[i, :ki] = STATE_CODES["valid_memorized"]
    ds = xr.Dataset({"state": (("step", "sample"), state)}, coords={"step": steps})
    ds["mem_ratio"] = (ds.state == STATE_CODES["valid_memorized"]).mean("sample")
    band = slice(2, 5)                                       # 25, 50, 70: at least 20 on each side
    z = np.log((k[band] + 0.5) / (n + 1 - k[band] - 0.5))
    a = abruptness(ds, n_boot=400, seed=3)
    assert a["abruptness"] == pytest.approx(np.polyfit(np.log10(steps[band] + 1), z, 1)[0])
    point, draws = tau_draws(ds, "abruptness", n_boot=400, seed=3)
    assert point == a["abruptness"] and np.array_equal(draws, a["draws"])
    assert [np.percentile(draws, 2.5, method="lower"), np.percentile(draws, 97.5, method="higher")] == a["ci"]
    assert a["ci"][0] < a["abruptness"] < a["ci"][1]
    pooled = pool_seeds([point, point + 1], [draws, draws + 1], log=False)
    assert pooled["pooled"] == pytest.approx(point + 0.5)


def test_bad_input():
    with pytest.raises(ConfigError, match="two distinct"):
        abruptness(curve([0.1], 100, steps=np.array([5])))
    with pytest.raises(ConfigError, match="no variable"):
        abruptness(curve([0.1, 0.2], 100, steps=np.array([5, 6])), var="rule_acc")


def test_a_common_band_reads_the_same_share_range_of_every_curve():
    """A curve with slope 3 per decade below 20% and slope 1 above: over the band (0.02, 0.2) the
    abruptness is 3 whether the curve rises on to 0.95 or stops at 0.3; the per-run band (20 samples
    on each side) mixes both slopes for the first and differs between them."""
    n = 10 ** 9
    steps = np.round(np.geomspace(10, 10 ** 5, 40)).astype(np.int64)
    v = np.log10(steps + 1)
    logit_020 = math.log(0.2 / 0.8)
    c = 3.0                                                   # log10 step at which y = 0.2
    z = np.where(v <= c, logit_020 + 3 * (v - c), logit_020 + 1 * (v - c))
    high = 1 / (1 + np.exp(-z))
    low = np.minimum(high, 0.3)
    band = (0.02, 0.2)
    a, b = (abruptness(curve(y, n, steps), n_boot=0, band=band) for y in (high, low))
    inside = (high >= 0.02) & (high <= 0.2)
    assert a["n_band"] == b["n_band"] == inside.sum() >= 2
    assert a["abruptness"] == pytest.approx(3.0, rel=1e-6) and b["abruptness"] == pytest.approx(3.0, rel=1e-6)
    assert abruptness(curve(high, n, steps), n_boot=0)["abruptness"] < 2.9   # the per-run band mixes the slopes
    with pytest.raises(ConfigError, match="band"):
        abruptness(curve(high, n, steps), band=(0.3, 0.2))
