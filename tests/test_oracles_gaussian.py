"""GaussianDenoiser (the Wiener baseline oracles) against closed forms and brute force.

The rule moments are checked against an enumeration written here (every bit vector filtered by the
rule's own validity check, or every Latin square built from permutations), independent of the
package's enumerate(); the Wiener filter against a direct float64 solve; the least-squares (best
affine) property on a noise design whose moments are exact, so no Monte Carlo tolerance is needed."""
import itertools
import math

import numpy as np
import pytest
import torch

from scoreprobe.data.rules import ExactK, LatinSquare, Parity, RowK, Sudoku
from scoreprobe.errors import ConfigError, DataError
from scoreprobe.oracles import GaussianDenoiser
from scoreprobe.oracles.gaussian import rule_moments

F64 = torch.float64


def all_valid_bits(rule):
    """Every valid image by brute force over {0,1}^D, filtered by rule.is_valid. -> (n_valid, D)."""
    grid = np.array(list(itertools.product((0, 1), repeat=rule.n_bits)), dtype=np.uint8)
    return grid[rule.is_valid(grid)]


def latin_bits(n):
    """Every n×n Latin square from rows that are permutations, as one-hot (symbol, row, col) bits."""
    out = []
    for rows in itertools.product(itertools.permutations(range(n)), repeat=n):
        if all(len({r[c] for r in rows}) == n for c in range(n)):
            b = np.zeros((n, n, n), np.uint8)
            for i, r in enumerate(rows):
                for j, s in enumerate(r):
                    b[s, i, j] = 1
            out.append(b.ravel())
    return np.array(out)


def moments(bits):
    v = bits.astype(np.float64) * 2 - 1
    m = v.mean(0)
    return m, (v - m).T @ (v - m) / len(v)


def wiener(mean, cov, x, sigma):
    """μ + Σ (Σ + σ²I)⁻¹ (x − μ) by a direct solve, row by row. x: (B, D), sigma: (B,)."""
    d = len(mean)
    return np.stack([mean + cov @ np.linalg.solve(cov + s * s * np.eye(d), xi - mean) for xi, s in zip(x, sigma)])


RULES = [Parity(2, (2, 4)), Parity(3, (2, 3)), Parity(2, (3, 4), layout="random", seed=3), Parity(1, (2, 2)),
         Parity(4, (2, 4), layout="offset"), ExactK(3, (3, 3)), ExactK(0, (2, 2)), RowK(2, (3, 4)), RowK(1, (2, 5))]


@pytest.mark.parametrize("rule", RULES, ids=repr)
def test_rule_moments_against_enumeration(rule):
    bits = all_valid_bits(rule)
    assert len(bits) == rule.n_valid
    m, c = moments(bits)
    mean, cov = rule_moments(rule)
    assert np.abs(mean - m).max() < 1e-12 and np.abs(cov - c).max() < 1e-12
    x = np.random.default_rng(1).normal(size=(4, rule.n_bits)) * 1.5
    sig = np.array([0.05, 0.5, 1.0, 5.0])
    got = GaussianDenoiser.from_rule(rule)(torch.from_numpy(x), torch.from_numpy(sig)).numpy()
    assert np.abs(got - wiener(m, c, x, sig)).max() < 1e-11


def test_latin3_moments_against_permutations():
    bits = latin_bits(3)
    assert len(bits) == 12
    m, c = moments(bits)
    mean, cov = rule_moments(LatinSquare(3))
    assert np.abs(mean - m).max() < 1e-12 and np.abs(cov - c).max() < 1e-12
    assert np.allclose(mean, 2 / 3 - 1)                       # each symbol in a cell with probability 1/n
    assert GaussianDenoiser.from_rule(LatinSquare(3)).rank == 8   # (n − 1)³: the Latin polytope's dimension


@pytest.mark.parametrize("rule", [Parity(2, (2, 4)), ExactK(2, (2, 3)), RowK(2, (2, 4)), Sudoku(4)], ids=repr)
def test_from_bits_of_the_valid_set_is_from_rule(rule):
    """Planted: a training set holding every valid image (twice, shuffled) has the rule's exact moments."""
    bits = np.concatenate([rule.enumerate()] * 2)[np.random.default_rng(0).permutation(2 * rule.n_valid)]
    a, b = GaussianDenoiser.from_bits(bits), GaussianDenoiser.from_rule(rule)
    assert (a.source, b.source) == ("bits", "rule")
    assert float((a.mean - b.mean).abs().max()) < 1e-12 and float((a.cov - b.cov).abs().max()) < 1e-12
    x = torch.randn(6, rule.n_bits, dtype=F64, generator=torch.Generator().manual_seed(0))
    sig = torch.tensor([0.0, 0.1, 0.35, 1.0, 3.0, 80.0], dtype=F64)
    assert float((a(x, sig) - b(x, sig)).abs().max()) < 1e-11


def random_psd(d, rank, seed):
    g = np.random.default_rng(seed).normal(size=(d, rank))
    return g @ g.T / rank


@pytest.mark.parametrize("rank", [6, 3, 0])
def test_wiener_against_direct_solve(rank):
    rng = np.random.default_rng(rank)
    mean, cov = rng.normal(size=6), random_psd(6, rank, seed=rank) if rank else np.zeros((6, 6))
    g = GaussianDenoiser(mean, cov)
    assert g.rank == rank
    x = rng.normal(size=(5, 6)) * 2
    sig = np.array([0.05, 0.2, 1.0, 3.0, 40.0])
    got = g(torch.from_numpy(x), torch.from_numpy(sig)).numpy()
    assert np.abs(got - wiener(mean, cov, x, sig)).max() < 1e-10
    one = g(torch.from_numpy(x[:1]), 0.2).numpy()                # scalar σ broadcast to the rows
    assert np.abs(one - wiener(mean, cov, x[:1], [0.2])).max() < 1e-12


def test_sigma_limits():
    rng = np.random.default_rng(5)
    mean, x = rng.normal(size=5), torch.from_numpy(rng.normal(size=(3, 5)))
    full = GaussianDenoiser(mean, random_psd(5, 5, seed=1))
    assert float((full(x, 0.0) - x).abs().max()) < 1e-12                          # σ → 0: D = x
    assert float((full(x, 1e8) - torch.from_numpy(mean)).abs().max()) < 1e-12      # σ → ∞: D = μ
    cov = random_psd(5, 2, seed=2)
    low = GaussianDenoiser(mean, cov)
    proj = cov @ np.linalg.pinv(cov)                                               # onto range(Σ)
    limit = mean + (x.numpy() - mean) @ proj.T
    assert np.abs(low(x, 0.0).numpy() - limit).max() < 1e-10                       # σ = 0 is the limit
    assert np.abs(low(x, 1e-6).numpy() - limit).max() < 1e-8
    with pytest.raises(DataError, match="sigma must be >= 0"):
        low(x, -0.1)


def test_best_affine_denoiser_of_the_training_set():
    """With noise from a design of exact mean 0 and covariance σ²I (±σ√D along each axis, the same for
    every item), the least-squares affine map from x to the clean item is exactly the Wiener filter of the
    training set's moments: the Gaussian baseline is the best linear denoiser of ANY data with them."""
    rng = np.random.default_rng(7)
    bits = (rng.random((20, 5)) < 0.3).astype(np.uint8)
    v = bits * 2.0 - 1
    d, sigma = 5, 0.7
    design = np.concatenate([np.eye(d), -np.eye(d)]) * sigma * math.sqrt(d)        # (2D, D)
    x = (v[:, None, :] + design[None]).reshape(-1, d)                               # (N·2D, D)
    target = np.repeat(v, 2 * d, axis=0)
    coef, *_ = np.linalg.lstsq(np.c_[x, np.ones(len(x))], target, rcond=None)
    fresh = rng.normal(size=(8, d)) * 2
    g = GaussianDenoiser.from_bits(bits)
    for pts in (x, fresh):
        got = g(torch.from_numpy(pts), sigma).numpy()
        assert np.abs(got - np.c_[pts, np.ones(len(pts))] @ coef).max() < 1e-10


def test_mmse_on_a_gaussian_cloud():
    """For a Gaussian prior the Wiener filter is the MMSE denoiser: least squares on samples recovers its
    matrix (standard error ≈ 0.002 at this n; tolerance 0.02) and no affine fit beats its error."""
    gen = np.random.default_rng(3)
    mean, cov, sigma, n = np.array([0.5, -1.0, 0.0]), random_psd(3, 3, seed=4), 0.8, 200_000
    v = gen.multivariate_normal(mean, cov, size=n)
    x = v + sigma * gen.normal(size=v.shape)
    coef, *_ = np.linalg.lstsq(np.c_[x, np.ones(n)], v, rcond=None)
    a = cov @ np.linalg.inv(cov + sigma ** 2 * np.eye(3))
    assert np.abs(coef[:3].T - a).max() < 0.02 and np.abs(coef[3] - (mean - a @ mean)).max() < 0.02
    d = GaussianDenoiser(mean, cov)(torch.from_numpy(x), sigma).numpy()
    fit_err = ((np.c_[x, np.ones(n)] @ coef - v) ** 2).mean()
    assert ((d - v) ** 2).mean() <= fit_err * 1.001


def test_parity_groups_of_three_or_more_give_the_shrinkage():
    """Every proper subset of a parity group is uniform: mean 0, covariance I, D = x/(1 + σ²) — exactly the
    untrained adaLN-Zero network, so a cell read as rule_gaussian there is a shrinkage."""
    g = GaussianDenoiser.from_rule(Parity(3, (6, 6)))
    assert g.rank == 36 and float(g.mean.abs().max()) == 0.0
    x = torch.randn(4, 36, dtype=F64)
    sig = torch.tensor([0.1, 0.7, 1.4, 5.0], dtype=F64)
    assert float((g(x, sig) - x / (1 + sig[:, None] ** 2)).abs().max()) < 1e-14


def test_log_density_and_score():
    rng = np.random.default_rng(11)
    mean, cov = rng.normal(size=4), random_psd(4, 2, seed=6)
    g = GaussianDenoiser(mean, cov)
    x = torch.from_numpy(rng.normal(size=(3, 4))).requires_grad_(True)
    sig = torch.tensor([0.3, 1.0, 2.5], dtype=F64)
    logp = g.log_density(x, sig)
    for xi, s, lp in zip(x.detach().numpy(), sig.numpy(), logp.detach().numpy()):
        c = cov + s * s * np.eye(4)
        r = xi - mean
        ref = -0.5 * (r @ np.linalg.solve(c, r) + np.linalg.slogdet(c)[1] + 4 * math.log(2 * math.pi))
        assert abs(lp - ref) < 1e-12
    (score,) = torch.autograd.grad(logp.sum(), x)
    tweedie = (g(x.detach(), sig) - x.detach()) / sig[:, None] ** 2
    assert float((score - tweedie).abs().max()) < 1e-10
    with pytest.raises(DataError, match="singular"):
        g.log_density(x.detach(), 0.0)
    full = GaussianDenoiser(mean, random_psd(4, 4, seed=8))
    assert torch.isfinite(full.log_density(x.detach(), 0.0)).all()


def test_dtype_batches_and_bad_input():
    g = GaussianDenoiser.from_rule(ExactK(3, (3, 3)))
    x = torch.randn(5, 9)
    sig = torch.tensor([0.1, 0.5, 1.0, 2.0, 4.0])
    out = g(x, sig)
    assert out.dtype == torch.float32 and out.shape == (5, 9)
    rows = torch.cat([g(x[i:i + 1], sig[i]) for i in range(5)])
    assert torch.equal(out, rows)
    assert g.log_density(x, sig).dtype == torch.float32
    assert torch.isnan(g(torch.full((1, 9), float("nan")), 1.0)).all()
    with pytest.raises(DataError, match=r"\(B, 9\)"):
        g(torch.randn(2, 8), 1.0)
    with pytest.raises(DataError, match="one noise level per row"):
        g(torch.randn(2, 9), torch.ones(3))
    for mean, cov, msg in [(np.zeros(3), np.eye(2), "shape"), (np.zeros(2), np.array([[1, 0.5], [0, 1]]), "symmetric"),
                           (np.zeros(2), -np.eye(2), "semi-definite"), (np.array([0, np.nan]), np.eye(2), "finite")]:
        with pytest.raises(DataError, match=msg):
            GaussianDenoiser(mean, cov)
    with pytest.raises(DataError, match="0/1"):
        GaussianDenoiser.from_bits(np.array([[0, 2]]))


@pytest.mark.parametrize("rule", [LatinSquare(6), Sudoku(9), object()], ids=["latin6", "sudoku9", "object"])
def test_no_exact_moments_is_a_config_error(rule):
    with pytest.raises(ConfigError, match="no exact mean and covariance"):
        GaussianDenoiser.from_rule(rule)


def test_public_name():
    from scoreprobe import oracles
    assert "GaussianDenoiser" in oracles.__all__
    assert repr(GaussianDenoiser.from_rule(Parity(2, (2, 2)))) == "GaussianDenoiser(D=4, rank=2, source='rule')"
