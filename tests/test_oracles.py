"""Oracle denoisers against brute-force posterior means over valid sets enumerated in the test.

The valid sets are built here directly (itertools over all bit vectors, validity written out),
never through rule.enumerate() or rule.is_valid(), so the ground truth is independent of the
code under test.
"""
import itertools

import numpy as np
import pytest
import torch
from scipy.special import logsumexp

from scoreprobe.errors import ConfigError, DataError
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.data.rules import ExactK, LatinSquare, Parity, RowK, Sudoku

SIGMAS = (0.05, 0.3, 1.0, 3.0, 20.0)
F64 = torch.float64


# ---------------------------------------------------------------------------------------------
# Ground truth built in the test
# ---------------------------------------------------------------------------------------------

def all_bits(d):
    return np.array(list(itertools.product((0, 1), repeat=d)), dtype=np.uint8)     # (2^d, d)


def parity_valid(d, groups):
    bits = all_bits(d)
    ok = np.ones(len(bits), bool)
    for g in groups:
        ok &= bits[:, list(g)].sum(1) % 2 == 0
    return bits[ok]


def exactk_valid(d, k):
    bits = all_bits(d)
    return bits[bits.sum(1) == k]


def rowk_valid(rows, cols, k):
    bits = all_bits(rows * cols)
    return bits[(bits.reshape(-1, rows, cols).sum(2) == k).all(1)]


def grid_valid(n, boxes):
    """All n x n Latin squares (Sudoku if boxes), one-hot at bit c*n*n + row*n + col."""
    b = int(round(n ** 0.5))

    def ok(grid):                        # columns (and boxes) of the rows placed so far
        g = np.array(grid)
        if any(len(set(g[:, c])) < len(g) for c in range(n)):
            return False
        if boxes:
            full = len(g) - len(g) % b   # check completed bands only
            return all(len(set(g[r:r + b, c:c + b].ravel())) == n
                       for r in range(0, full, b) for c in range(0, n, b))
        return True

    grids = [[]]
    for _ in range(n):                   # add one row at a time, keeping consistent partial grids
        grids = [g + [p] for g in grids for p in itertools.permutations(range(n)) if ok(g + [p])]
    out = np.zeros((len(grids), n ** 3), np.uint8)
    for i, g in enumerate(grids):
        for r, c in itertools.product(range(n), range(n)):
            out[i, g[r][c] * n * n + r * n + c] = 1
    return out


def contiguous(d, g):
    return [range(i, i + g) for i in range(0, d, g)]


def _random_layout_case():
    rule = Parity(3, (3, 4), layout="random", seed=1)
    groups = [list(g) for g in np.asarray(rule.groups)]
    assert sorted(itertools.chain(*groups)) == list(range(12))                   # a partition
    return rule, parity_valid(12, groups)


CASES = {
    "parity_g1": lambda: (Parity(1, (2, 3)), parity_valid(6, contiguous(6, 1))),
    "parity_g2": lambda: (Parity(2, (2, 4)), parity_valid(8, contiguous(8, 2))),
    "parity_g3": lambda: (Parity(3, (3, 3)), parity_valid(9, contiguous(9, 3))),
    "parity_g4": lambda: (Parity(4, (4, 4)), parity_valid(16, contiguous(16, 4))),
    "parity_g_eq_d": lambda: (Parity(8, (2, 4)), parity_valid(8, contiguous(8, 8))),
    "parity_random": _random_layout_case,
    "exactk_4": lambda: (ExactK(4, (3, 3)), exactk_valid(9, 4)),
    "exactk_0": lambda: (ExactK(0, (2, 3)), exactk_valid(6, 0)),
    "exactk_full": lambda: (ExactK(6, (2, 3)), exactk_valid(6, 6)),
    "rowk_2": lambda: (RowK(2, (3, 4)), rowk_valid(3, 4, 2)),
    "rowk_full": lambda: (RowK(3, (2, 3)), rowk_valid(2, 3, 3)),
    "latin4": lambda: (LatinSquare(4), grid_valid(4, boxes=False)),
    "sudoku4": lambda: (Sudoku(4), grid_valid(4, boxes=True)),
}
_cache = {}


def case(name):
    if name not in _cache:
        _cache[name] = CASES[name]()
    return _cache[name]


def signed(bits):
    return bits.astype(np.float64) * 2 - 1


def brute_mean(valid, x, sigma):
    """Posterior mean over the valid set, straight from the definition. x: (B, D) numpy."""
    v = signed(valid)                                                           # (V, D)
    logw = -((x[:, None, :] - v[None]) ** 2).sum(-1) / (2 * sigma ** 2)          # (B, V)
    w = np.exp(logw - logsumexp(logw, axis=1, keepdims=True))
    return w @ v


def brute_log_density(valid, x, sigma):
    """log (1/|V| Σ_v N(x; v, σ²I)), straight from the definition. -> (B,)"""
    v = signed(valid)
    d = x.shape[1]
    log_n = (-((x[:, None, :] - v[None]) ** 2).sum(-1) / (2 * sigma ** 2)
             - d / 2 * np.log(2 * np.pi * sigma ** 2))                          # (B, V)
    return logsumexp(log_n, axis=1) - np.log(len(v))


def probe_points(valid, d, seed=0):
    """Random points, points near valid vertices and near arbitrary vertices. (24, D) float64."""
    rng = np.random.default_rng(seed)
    near_valid = signed(valid[rng.integers(len(valid), size=8)]) + 0.3 * rng.standard_normal((8, d))
    near_any = rng.choice([-1.0, 1.0], size=(8, d)) + 0.3 * rng.standard_normal((8, d))
    return np.concatenate([1.2 * rng.standard_normal((8, d)), near_valid, near_any])


def call(D, x, sigma, dtype=F64):
    xt = torch.as_tensor(x, dtype=dtype)
    return D(xt, torch.full((len(xt),), sigma, dtype=dtype))


# ---------------------------------------------------------------------------------------------
# RuleDenoiser
# ---------------------------------------------------------------------------------------------

def test_ground_truth_sizes():
    assert len(case("latin4")[1]) == 576 and len(case("sudoku4")[1]) == 288
    assert len(case("parity_g4")[1]) == 2 ** 12 and len(case("rowk_2")[1]) == 6 ** 3


@pytest.mark.parametrize("name", list(CASES))
def test_rule_denoiser_matches_brute_force(name):
    rule, valid = case(name)
    D = RuleDenoiser(rule)
    assert D.dim == rule.n_bits
    x = probe_points(valid, rule.n_bits)
    for sigma in SIGMAS:
        got = call(D, x, sigma)
        assert got.dtype == F64 and got.shape == x.shape
        np.testing.assert_allclose(got.numpy(), brute_mean(valid, x, sigma), rtol=0, atol=1e-8,
                                   err_msg=f"{name} sigma={sigma}")
        ld = D.log_density(torch.as_tensor(x), torch.full((len(x),), sigma, dtype=F64))
        np.testing.assert_allclose(ld.numpy(), brute_log_density(valid, x, sigma), rtol=1e-11,
                                   atol=1e-8, err_msg=f"{name} sigma={sigma}")


@pytest.mark.parametrize("name", ["parity_g3", "parity_random", "exactk_4", "rowk_2", "sudoku4"])
def test_sigma_limits(name):
    rule, valid = case(name)
    D = RuleDenoiser(rule)
    x = probe_points(valid, rule.n_bits, seed=1)
    # σ -> 0: the nearest valid vertex (checked on points whose nearest vertex is unique)
    dist = ((x[:, None, :] - signed(valid)[None]) ** 2).sum(-1)                  # (B, V)
    order = np.sort(dist, axis=1)
    clear = order[:, 1] - order[:, 0] > 0.05
    assert clear.sum() >= 12
    nearest = signed(valid[dist.argmin(1)])[clear]
    for dtype, tol in ((F64, 1e-12), (torch.float32, 1e-6)):
        got = call(D, x[clear], 0.002, dtype).double().numpy()
        np.testing.assert_allclose(got, nearest, rtol=0, atol=tol)
    # σ -> ∞: the mean of the valid set
    np.testing.assert_allclose(call(D, x, 1e4).numpy(), np.broadcast_to(signed(valid).mean(0), x.shape),
                               rtol=0, atol=1e-6)


def hard_points(d, seed=0):
    """Zeros, exact vertices, half-way ties, large |x| up to 5. (40, D) float64."""
    rng = np.random.default_rng(seed)
    vert = rng.choice([-1.0, 1.0], size=(16, d))
    ties = vert[:8].copy()
    ties[:, :3] = 0.0
    big = rng.uniform(-5, 5, size=(14, d))
    return np.concatenate([np.zeros((2, d)), vert, ties, big])


@pytest.mark.parametrize("rule", [Parity(2), Parity(3), Parity(9), Parity(36), ExactK(18), ExactK(0),
                                  RowK(3), Parity(3, layout="random", seed=4), Sudoku(4)], ids=repr)
@pytest.mark.parametrize("dtype", [torch.float32, F64], ids=str)
def test_finite_at_extreme_sigmas(rule, dtype):
    D = RuleDenoiser(rule)
    x = hard_points(rule.n_bits)
    for sigma in (0.002, 0.01, 80.0):
        out = call(D, x, sigma, dtype)
        assert out.dtype == dtype
        assert torch.isfinite(out).all() and out.abs().max() <= 1
        ld = D.log_density(torch.as_tensor(x, dtype=dtype), torch.full((len(x),), sigma, dtype=dtype))
        assert torch.isfinite(ld).all()


@pytest.mark.parametrize("name", ["parity_g3", "parity_random", "exactk_4", "rowk_2", "latin4"])
def test_score_is_gradient_of_log_density(name):
    rule, valid = case(name)
    D = RuleDenoiser(rule)
    x = torch.as_tensor(probe_points(valid, rule.n_bits, seed=2))
    for sigma in SIGMAS:
        s = torch.full((len(x),), sigma, dtype=F64)
        xg = x.clone().requires_grad_()
        grad, = torch.autograd.grad(D.log_density(xg, s).sum(), xg)
        score = (D(x, s) - x) / sigma ** 2
        assert (grad - score).abs().max() <= 1e-6 * max(1.0, score.abs().max().item())


def test_rule_denoiser_errors_and_inputs():
    with pytest.raises(ConfigError, match="no exact oracle"):
        RuleDenoiser(Sudoku(9))
    with pytest.raises(ConfigError, match="no exact oracle"):
        RuleDenoiser(LatinSquare(7))
    D = RuleDenoiser(Parity(3))
    with pytest.raises(DataError):
        D(torch.zeros(4, 35), torch.ones(4))
    with pytest.raises(DataError):
        D(torch.zeros(4, 36), torch.ones(3))
    # a scalar σ broadcasts; float32 in, float32 out
    out = D(torch.zeros(4, 36), torch.tensor(0.5))
    assert out.shape == (4, 36) and out.dtype == torch.float32


# ---------------------------------------------------------------------------------------------
# EmpiricalDenoiser
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def items():
    return np.random.default_rng(3).integers(0, 2, size=(50, 20)).astype(np.uint8)


def test_empirical_matches_direct_softmax(items):
    x = np.random.default_rng(4).normal(size=(30, 20)) * 1.5
    for chunk_size in (None, 1, 7, 50, 1000):
        D = EmpiricalDenoiser(items, chunk_size=chunk_size)
        assert D.dim == 20
        for sigma in (0.002,) + SIGMAS + (80.0,):
            got = call(D, x, sigma).numpy()
            np.testing.assert_allclose(got, brute_mean(items, x, sigma), rtol=0, atol=1e-10)
            ld = D.log_density(torch.as_tensor(x), torch.full((30,), sigma, dtype=F64)).numpy()
            np.testing.assert_allclose(ld, brute_log_density(items, x, sigma), rtol=1e-11, atol=1e-8)


def test_empirical_limits_and_float32(items):
    D = EmpiricalDenoiser(items, chunk_size=16)
    x = hard_points(20)
    for sigma in (0.002, 80.0):
        for dtype in (torch.float32, F64):
            out = call(D, x, sigma, dtype)
            assert out.dtype == dtype and torch.isfinite(out).all() and out.abs().max() <= 1
    # tiny σ: one-hot on the nearest item (points with a unique nearest item)
    y = signed(items[:10]) + 0.2 * np.random.default_rng(5).standard_normal((10, 20))
    for dtype, tol in ((F64, 1e-12), (torch.float32, 1e-6)):
        np.testing.assert_allclose(call(D, y, 0.002, dtype).double().numpy(), signed(items[:10]),
                                   rtol=0, atol=tol)
    # huge σ: the mean of the items
    np.testing.assert_allclose(call(D, y, 1e4).numpy(), np.broadcast_to(signed(items).mean(0), y.shape),
                               atol=1e-6)


def test_empirical_score_and_errors(items):
    D = EmpiricalDenoiser(items, chunk_size=8)
    x = torch.randn(6, 20, dtype=F64, generator=torch.Generator().manual_seed(0))
    s = torch.full((6,), 0.7, dtype=F64)
    xg = x.clone().requires_grad_()
    grad, = torch.autograd.grad(D.log_density(xg, s).sum(), xg)
    torch.testing.assert_close(grad, (D(x, s) - x) / 0.49, rtol=1e-6, atol=1e-9)
    with pytest.raises(DataError, match="0/1"):
        EmpiricalDenoiser(signed(items))
    with pytest.raises(DataError):
        D(torch.zeros(2, 21), torch.ones(2))


@pytest.mark.gpu
def test_oracles_on_cuda(items):
    for D, d in ((EmpiricalDenoiser(items), 20), (RuleDenoiser(Parity(3)), 36), (RuleDenoiser(RowK(2)), 36)):
        x = torch.randn(64, d, dtype=F64)
        for sigma in (0.002, 0.3, 80.0):
            ref = call(D, x, sigma)
            for dtype, tol in ((F64, 1e-10), (torch.float32, 1e-4)):
                got = D(x.to("cuda", dtype), torch.full((64,), sigma, dtype=dtype, device="cuda"))
                assert got.device.type == "cuda" and got.dtype == dtype
                torch.testing.assert_close(got.cpu().double(), ref, rtol=0, atol=tol)
