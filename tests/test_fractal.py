"""probes.fractal: the dense fallback of boundary refinement fires on fractal boundaries, not on smooth ones.

Planted label maps, their rows looked up instead of integrated (`refine.refined_maps` uses nothing but the rows'
labels): smooth boundaries between 2, 3 and 5 basins with triple junctions and stripes 1–2 points wide (no
fallback, refined exactly), and fractal ones: basins of Newton's method for z³ − 1 (the Julia set of the Newton
map, a Wada boundary), a Weierstrass graph y < W(x) (H 0.1: dimension 1.9 in the limit), random label fields
(fallback, dense). Below 64² the estimate is undefined and the test does not run."""
import math

import numpy as np
import pytest

from scoreprobe.errors import ConfigError
from scoreprobe.probes.fractal import (MAX_DIMENSION, boundary_dimension, boundary_entropy, scales,
                                       uncertain_fraction)
from scoreprobe.probes.refine import OUTCOMES, RefineSettings, refined_maps
from scoreprobe.probes.warm import seed_of, warm_maps


def grid(res):
    return np.mgrid[:res, :res].astype(float) / res                      # (2, res, res): i / res, j / res


def circle(res):                                                          # 2 basins
    i, j = grid(res)
    return ((i - 0.4) ** 2 + (j - 0.55) ** 2 < 0.09).astype(np.int64)


def junction(res):                                                        # 3 basins meeting at a point
    i, j = grid(res)
    return (np.floor((np.arctan2(i - 0.5, j - 0.45) + np.pi) / (2 * np.pi / 3)) % 3).astype(np.int64)


def stripes(res):
    """The junction crossed by a 1-point and a 2-point stripe of the other basins."""
    lab = junction(res)
    lab[:, res // 6] = 2
    lab[res * 5 // 8:res * 5 // 8 + 2] = 1
    return lab


def sandwich(res):
    """Basins 0 | 2 | 1 split by a sine curve, basin 2 a stripe one point wide between them, and a 2-point stripe
    of basin 3: three or more basins in most boundary boxes (S_bb > ln 2), as on the shipped series."""
    i, j = np.mgrid[:res, :res]
    edge = np.round(res / 2 + res / 6 * np.sin(2 * np.pi * 1.5 * j / res)).astype(int)
    lab = (i > edge).astype(np.int64)
    lab[i == edge] = 2
    lab[(j >= res // 4) & (j < res // 4 + 2) & (i > edge)] = 3
    return lab


def voronoi(res):                                                         # 5 basins, with two stripes
    p = np.array([[0.1, 0.2], [0.7, 0.15], [0.45, 0.6], [0.9, 0.8], [0.2, 0.85]])
    i, j = grid(res)
    lab = ((i[..., None] - p[:, 0]) ** 2 + (j[..., None] - p[:, 1]) ** 2).argmin(-1)
    lab[:, res * 15 // 32] = 4
    lab[res * 5 // 16:res * 5 // 16 + 2] = 2
    return lab


def newton(res, it=50):
    """Root of z³ − 1 that Newton's method reaches from each point of [-2, 2]²."""
    x = (np.arange(res) + 0.5) / res * 4 - 2
    z = x[None, :] + 1j * x[:, None]
    for _ in range(it):
        z = z - (z ** 3 - 1) / (3 * z ** 2)
    return np.abs(z[..., None] - np.exp(2j * np.pi * np.arange(3) / 3)).argmin(-1)


def weierstrass(res, h=0.1):
    """Below / above the graph of W(x) = Σ_k 2^(-k h) cos(2^k 2π x + k), scaled into the map."""
    x = np.arange(res) / res
    w = sum(2.0 ** (-k * h) * np.cos(2.0 ** k * 2 * np.pi * x + k) for k in range(30))
    w = 0.1 + 0.8 * (w - w.min()) / (w.max() - w.min())
    return (np.arange(res)[:, None] / res < w[None, :]).astype(np.int64)


def random_field(res, k):
    return np.random.default_rng(k).integers(0, k, size=(res, res))


SMOOTH = {"circle": circle, "junction": junction, "stripes": stripes, "sandwich": sandwich, "voronoi": voronoi}
FRACTAL = [("newton", newton, 64), ("newton", newton, 128), ("weierstrass", weierstrass, 64),
           ("weierstrass", weierstrass, 128), ("random 3", lambda r: random_field(r, 3), 64),
           ("random 2", lambda r: random_field(r, 2), 64)]


def refine_planted(lab, settings=RefineSettings(), seed=None, step=None):
    """The refined map of planted labels (res, res) int: rows looked up (bits = the label in binary)."""
    res = lab.shape[0]
    flat = lab.ravel()
    bits = ((flat[:, None] >> np.arange(8)) & 1).astype(np.uint8)       # (res*res, 8)

    def rows_of(idx):
        n = len(idx)
        return [{"bits": bits[idx], "off_vertex": np.zeros(n, bool), "status": np.zeros(n, np.int8),
                 "state": np.ones(n, np.int8), "nfe": np.ones(n, np.int64)}]
    if seed is None:
        return refined_maps(rows_of, res, 1, settings)[0]
    return warm_maps(rows_of, res, 1, settings, 0, [(seed, step)])[0]


def label_of(m):
    return (m["bits"].astype(np.int64) << np.arange(8)).sum(-1)


@pytest.mark.parametrize("res", [32, 64, pytest.param(128, marks=pytest.mark.slow)])   # 128²: ~1 s each, -m slow
@pytest.mark.parametrize("name", sorted(SMOOTH))
def test_smooth_boundaries_refine_exactly(name, res):
    lab = SMOOTH[name](res)
    d = boundary_dimension(lab.ravel(), res)
    assert 0.99 < d < MAX_DIMENSION if res >= 64 else np.isnan(d), d    # 32²: too small, no verdict
    m = refine_planted(lab)
    assert OUTCOMES[int(m["outcome"])] == "refined" and m["integrated_fraction"] < 0.8
    np.testing.assert_array_equal(label_of(m), lab)
    np.testing.assert_equal(m["boundary_dimension"], d)                  # the finished map is the planted one


@pytest.mark.parametrize("name,make,res", FRACTAL, ids=[f"{n}-{r}" for n, _, r in FRACTAL])
def test_fractal_boundaries_fall_back_to_dense(name, make, res):
    lab = make(res)
    m = refine_planted(lab)
    assert OUTCOMES[int(m["outcome"])] == "dense_fractal" and m["integrated_fraction"] == 1.0
    assert np.isnan(m["audit_bound"]) and m["boundary_dimension"] > MAX_DIMENSION
    np.testing.assert_array_equal(label_of(m), lab)


def test_the_entropy_criterion_misfires_and_misses_where_the_dimension_does_not():
    """ln 2 bounds S_bb on two-basin maps, however fractal; three basins along a 1-point stripe pass it."""
    smooth, fractal = sandwich(64), weierstrass(64)
    assert boundary_entropy(smooth.ravel(), 64, 4) > math.log(2) > boundary_entropy(fractal.ravel(), 64, 4)
    assert boundary_dimension(smooth.ravel(), 64) < MAX_DIMENSION < boundary_dimension(fractal.ravel(), 64)
    old = RefineSettings(max_dimension=None, max_entropy=math.log(2))    # the criterion before max_dimension
    assert OUTCOMES[int(refine_planted(smooth, old)["outcome"])] == "dense_entropy"
    assert OUTCOMES[int(refine_planted(fractal, old)["outcome"])] == "refined"
    assert OUTCOMES[int(refine_planted(smooth)["outcome"])] == "refined"


def test_warm_start_falls_back_on_a_fractal_map():
    first = refine_planted(circle(64))
    m = refine_planted(newton(64), seed=seed_of(0, first), step=1)
    assert OUTCOMES[int(m["outcome"])] == "dense_fractal" and int(m["warm_start"]) > 0
    np.testing.assert_array_equal(label_of(m), newton(64))


def test_the_estimate_on_closed_forms_and_where_it_is_undefined():
    res = 64
    j = np.arange(res)[None, :].repeat(res, 0)
    half = (j >= 20).astype(np.int64)                                     # one straight boundary: f = 2ε / res
    assert [uncertain_fraction(half, e) for e in (1, 2, 4)] == [2 / res, 4 / res, 8 / res]
    assert boundary_dimension(half.ravel(), res) == pytest.approx(1.0)
    stripe = (j == 20).astype(np.int64)                                   # f = (2ε + 1) / res: slope of ln(2ε + 1)
    eps = np.array(scales(res))
    assert boundary_dimension(stripe.ravel(), res) == pytest.approx(2 - np.polyfit(np.log(eps), np.log(2 * eps + 1), 1)[0])
    assert scales(64) == [1, 2, 4, 8] and scales(128) == [1, 2, 4, 8, 16] and scales(63) == []
    assert np.isnan(boundary_dimension(random_field(32, 3).ravel(), 32))  # too small: no verdict
    assert np.isnan(boundary_dimension(np.zeros(res * res, np.int64), res))  # one basin: no boundary
    small = refine_planted(random_field(32, 3))                           # no fallback: split down to every pixel
    assert OUTCOMES[int(small["outcome"])] == "refined" and np.isnan(small["boundary_dimension"])
    assert small["integrated_fraction"] == 1.0 and np.isnan(small["audit_bound"])


def test_settings():
    assert RefineSettings().max_dimension == MAX_DIMENSION and RefineSettings().max_entropy is None
    for bad in ({"max_dimension": 0.5}, {"max_dimension": 2.5}, {"max_dimension": float("nan")},
                {"max_dimension": "1.4"}, {"max_entropy": 0}, {"max_entropy": -1.0}, {"max_entropy": True}):
        with pytest.raises(ConfigError):
            RefineSettings(**bad)
    assert RefineSettings(max_dimension=None, max_entropy=0.7).spec()["max_entropy"] == 0.7
