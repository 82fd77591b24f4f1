"""Counter-based per-sample noise (scoreprobe.noise) against a pure-Python reference of its formulas."""
import math

import numpy as np
import pytest
import torch

from scoreprobe.errors import ConfigError
from scoreprobe.noise import BLOCK, _mix64, randn_per_sample

M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def mix64_ref(z):
    """SplitMix64's finalizer on a Python int (Steele, Lea & Flood 2014; Vigna's splitmix64.c)."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def row_ref(seed, index, d):
    """Row `index` written out from the module's formulas with Python ints and math."""
    key = mix64_ref(seed & M64) ^ mix64_ref((index + GAMMA) & M64)
    key = mix64_ref(key)
    h = (d + 1) // 2
    u = [(mix64_ref((key + k * GAMMA) & M64) >> 11) * 2.0 ** -53 for k in range(1, 2 * h + 1)]
    r = [math.sqrt(-2.0 * math.log1p(-v)) for v in u[:h]]
    return [r[k] * math.cos(2 * math.pi * u[h + k]) for k in range(h)] + \
           [r[k] * math.sin(2 * math.pi * u[h + k]) for k in range(d - h)]


def test_mix64_gives_splitmix64s_published_outputs():
    """SplitMix64 seeded with 0 outputs mix64(k·γ) for k = 1, 2, 3: the reference values."""
    z = np.array([GAMMA, (2 * GAMMA) & M64, (3 * GAMMA) & M64], dtype=np.uint64)
    assert [int(v) for v in _mix64(z)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]


@pytest.mark.parametrize("d", [1, 7, 36])
def test_rows_equal_the_reference_formulas(d):
    seed, index = 2**63 + 5, [0, 1, 17, 2**40 + 3]
    got = randn_per_sample(seed, index, d, dtype=torch.float64).numpy()            # (4, d)
    want = np.array([row_ref(seed, i, d) for i in index])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)   # libm vs numpy transcendental ulps


def test_identical_for_every_chunking_order_and_dtype():
    index = np.random.default_rng(0).permutation(3 * BLOCK + 11)
    full = randn_per_sample(3, index, 36, dtype=torch.float64)                     # (M, 36)
    cuts = [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK + 5, len(index)]
    parts = [randn_per_sample(3, index[a:b], 36, dtype=torch.float64) for a, b in zip(cuts, cuts[1:])]
    assert torch.equal(torch.cat(parts), full)
    order = np.argsort(index)
    assert torch.equal(randn_per_sample(3, index[order], 36, dtype=torch.float64), full[order])
    assert torch.equal(randn_per_sample(3, index, 36), full.float())              # float32 = cast of float64
    assert not torch.equal(randn_per_sample(4, index, 36, dtype=torch.float64), full)


def test_values_are_standard_normal_and_independent():
    x = randn_per_sample(0, np.arange(20000), 36, dtype=torch.float64).numpy()    # 720 000 values
    flat = x.ravel()
    se = 1 / math.sqrt(flat.size)
    assert abs(flat.mean()) < 5 * se and abs(flat.var() - 1) < 5 * math.sqrt(2) * se
    assert abs((flat ** 4).mean() - 3) < 5 * math.sqrt(96) * se                    # kurtosis of N(0, 1)
    for p, z in ((0.5, 0.0), (0.975, 1.959964), (0.999, 3.090232)):                 # quantiles of N(0, 1)
        assert abs(np.mean(flat < z) - p) < 5 * math.sqrt(p * (1 - p)) * se
    c = np.corrcoef(x[:, :18].ravel(), x[:, 18:].ravel())[0, 1]                     # a cos value vs its sin partner
    assert abs(c) < 5 * math.sqrt(2) / math.sqrt(x.size / 2)
    rows = np.corrcoef(x[:-1].ravel(), x[1:].ravel())[0, 1]                         # neighbouring samples
    assert abs(rows) < 5 / math.sqrt(x.size)


def test_bad_arguments_are_refused():
    with pytest.raises(ConfigError, match="non-negative"):
        randn_per_sample(0, [-1], 4)
    with pytest.raises(ConfigError, match="positive integer"):
        randn_per_sample(0, [1], 0)
    assert randn_per_sample(0, [], 5).shape == (0, 5)
