"""Gaussian baseline oracles: the Wiener denoiser of a mean and a covariance.

The exact posterior mean of a Gaussian prior v ~ N(μ, Σ) observed as x = v + σε, ε ~ N(0, I):

    D(x, σ) = μ + Σ (Σ + σ² I)⁻¹ (x − μ) = μ + U diag(λ / (λ + σ²)) Uᵀ (x − μ),   Σ = U diag(λ) Uᵀ,

the Wiener filter. It is also the best AFFINE denoiser (least squares over v and ε) of ANY distribution
with that mean and covariance: `GaussianDenoiser.from_bits(train)` is the best affine denoiser of the
training set, which knows its first two moments and cannot copy an item; `from_rule(rule)` the same for
the rule's exact distribution. Two baselines follow for the readings of a network:

- a network whose outputs match `from_bits` has learned the training set's mean and covariance (at large
  σ the memorizer and this baseline nearly coincide: both return about the mean);
- for parity with groups of G ≥ 3 the valid images have mean 0 and covariance I (every proper subset of a
  group is uniform), so `from_rule` is exactly x/(1 + σ²), the untrained adaLN-Zero network.

Computed in float64 via the eigendecomposition of Σ (Σ may be singular: e.g. parity G = 2 pairs, exact-K
images whose bit sum is fixed), so D is finite for every σ ≥ 0; at σ = 0 it is the limit σ → 0: x
projected onto μ + range(Σ). Unlike the vertex oracles D is not clamped to [−1, 1]: it is linear in x.
"""
import math

import numpy as np
import torch

from scoreprobe.errors import ConfigError, DataError
from scoreprobe.oracles.common import as_bits, check_inputs, undefined_at_nan_sigma

MAX_DIM = 4096                 # largest D a GaussianDenoiser holds (Σ: D² float64 = 128 MiB, eigh seconds)
_CHUNK = 1 << 16               # rows of bits summed at a time when computing moments


def _check_dim(dim, what):
    if dim > MAX_DIM:
        raise ConfigError(f"{what} has D = {dim} bits, more than a GaussianDenoiser holds (limit {MAX_DIM}: "
                          "a D×D float64 covariance and its eigendecomposition)")


def bit_moments(bits):
    """Population mean and covariance (1/N) of signed items v = 2b − 1. bits: (N, D) uint8 -> (D,), (D, D).

    Sums of ±1 values and of their products are integers, exact in float64; only the final division and
    the subtraction of m mᵀ round (relative error ~1e-16)."""
    n, d = bits.shape
    total = np.zeros(d)                                                          # (D,)
    outer = np.zeros((d, d))                                                     # (D, D)
    for start in range(0, n, _CHUNK):
        v = bits[start:start + _CHUNK].astype(np.float64) * 2 - 1                # (C, D)
        total += v.sum(0)
        outer += v.T @ v
    mean = total / n
    return mean, outer / n - np.outer(mean, mean)


def _parity_moments(rule):
    """Closed form: within a group of G bits with an even number of ones, E Π_{i∈S} v_i = 0 for every
    proper non-empty subset S, and Π over the whole group = (−1)^G; groups are independent."""
    d, g = rule.n_bits, int(rule.G)
    sign = -1.0 if g % 2 else 1.0
    mean, cov = np.zeros(d), np.zeros((d, d))
    if g == 1:
        mean[:] = sign                                                           # every bit is 0
        return mean, cov
    np.fill_diagonal(cov, 1.0)
    if g == 2:
        a, b = rule.groups[:, 0], rule.groups[:, 1]
        cov[a, b] = cov[b, a] = sign                                             # the two bits are equal
    return mean, cov


def _count_block(n, k):
    """Mean and covariance of n signed bits uniform over the patterns with exactly k ones. -> (n,), (n, n)."""
    p1 = k / n                                                                   # E b_i
    p2 = k * (k - 1) / (n * (n - 1)) if n > 1 else 0.0                           # E b_i b_j, i ≠ j
    m = 2 * p1 - 1
    off = (4 * p2 - 4 * p1 + 1) - m * m                                          # Cov(v_i, v_j)
    cov = np.full((n, n), off)
    np.fill_diagonal(cov, 1 - m * m)
    return np.full(n, m), cov


def _enumerated_moments(rule):
    n_valid = getattr(rule, "n_valid", None)
    from scoreprobe.oracles.rule import MAX_ENUMERATED
    if not hasattr(rule, "enumerate") or n_valid is None or int(n_valid) > MAX_ENUMERATED:
        raise ConfigError(f"no exact mean and covariance are available for {rule!r}: no closed form is known and "
                          f"its {n_valid} valid images are too many to enumerate (limit {MAX_ENUMERATED}); use a "
                          "smaller rule (e.g. Sudoku(4), LatinSquare(4))")
    try:
        return bit_moments(np.asarray(rule.enumerate(), dtype=np.uint8))
    except ConfigError as err:
        raise ConfigError(f"no exact mean and covariance are available for {rule!r}: {err}") from err


def rule_moments(rule):
    """Exact mean (D,) and covariance (D, D) of the signed images uniform over a rule's valid set.

    Parity: closed form per group; ExactK: counting (E b_i = k/D, E b_i b_j = k(k−1)/(D(D−1))); RowK: the
    same per row, rows independent; LatinSquare / Sudoku: enumeration of every valid grid. ConfigError for
    any other rule or a valid set too large to enumerate."""
    from scoreprobe.data import rules as R

    if isinstance(rule, R.Rule):
        _check_dim(rule.n_bits, repr(rule))
    if isinstance(rule, R.Parity):
        return _parity_moments(rule)
    if isinstance(rule, R.ExactK):
        return _count_block(rule.n_bits, int(rule.k))
    if isinstance(rule, R.RowK):
        rows, cols = (int(s) for s in rule.shape)
        m, block = _count_block(cols, int(rule.k))
        return np.tile(m, rows), np.kron(np.eye(rows), block)
    if isinstance(rule, R.LatinSquare):                                          # Sudoku included
        return _enumerated_moments(rule)
    raise ConfigError(f"no exact mean and covariance are available for {rule!r}: GaussianDenoiser.from_rule "
                      "knows Parity, ExactK, RowK and small LatinSquare / Sudoku")


def _as_moments(mean, cov):
    """Validate (mean (D,), cov (D, D)): finite, symmetric, positive semi-definite. -> float64 numpy."""
    mean = np.asarray(mean.detach().cpu() if torch.is_tensor(mean) else mean, dtype=np.float64)
    cov = np.asarray(cov.detach().cpu() if torch.is_tensor(cov) else cov, dtype=np.float64)
    if mean.ndim != 1 or mean.size < 1 or cov.shape != (mean.size, mean.size):
        raise DataError(f"mean must have shape (D,) and cov (D, D), got {mean.shape} and {cov.shape}")
    _check_dim(mean.size, "the Gaussian")
    if not (np.isfinite(mean).all() and np.isfinite(cov).all()):
        raise DataError("mean and cov must be finite")
    scale = max(1.0, float(np.abs(cov).max()))
    if np.abs(cov - cov.T).max() > 1e-12 * scale:
        raise DataError("cov must be symmetric")
    return mean, 0.5 * (cov + cov.T)


class GaussianDenoiser:
    """The Wiener denoiser: exact posterior mean under a Gaussian prior N(μ, Σ) (module docstring).

    Parameters
    ----------
    mean : (D,) array, μ.  cov : (D, D) symmetric positive semi-definite array, Σ.

    Attributes
    ----------
    dim : int, D.  mean : (D,) float64 tensor.  cov : (D, D) float64 tensor.
    eigvals : (D,) float64 tensor, λ ascending (those below D·eps·max λ set to exactly 0).
    eigvecs : (D, D) float64 tensor, U (columns).  rank : int, the number of λ > 0.
    source : str, "given" | "bits" | "rule".
    """

    def __init__(self, mean, cov, source="given"):
        mean, cov = _as_moments(mean, cov)
        lam, vec = np.linalg.eigh(cov)                                           # (D,), (D, D)
        top = max(float(lam.max()), 0.0)
        if lam.min() < -1e-9 * max(1.0, top):
            raise DataError(f"cov must be positive semi-definite; its smallest eigenvalue is {lam.min():.3g}")
        lam = np.where(lam <= mean.size * np.finfo(np.float64).eps * top, 0.0, lam)
        self.dim, self.source = mean.size, str(source)
        self.mean, self.cov = torch.from_numpy(mean), torch.from_numpy(cov)
        self.eigvals, self.eigvecs = torch.from_numpy(lam), torch.from_numpy(vec)
        self.rank = int((lam > 0).sum())
        self._cache = {}

    @classmethod
    def from_bits(cls, train_bits):
        """The Wiener denoiser of a training set's mean and covariance (population moments, 1/N).
        train_bits: (N, D) uint8 bits."""
        bits = as_bits(train_bits, "train_bits")
        _check_dim(bits.shape[1], "train_bits")
        return cls(*bit_moments(bits), source="bits")

    @classmethod
    def from_rule(cls, rule):
        """The Wiener denoiser of the rule distribution's exact mean and covariance (`rule_moments`)."""
        return cls(*rule_moments(rule), source="rule")

    def _tables(self, device):
        if device not in self._cache:
            self._cache[device] = tuple(t.to(device) for t in (self.mean, self.eigvals, self.eigvecs))
        return self._cache[device]

    def _rotate(self, x, sigma):
        """z = Uᵀ(x − μ) and λ + σ² in float64. x: (B, D), sigma: (B, 1) -> (B, D), (B, D), tables."""
        if bool((sigma < 0).any()):
            raise DataError("GaussianDenoiser: sigma must be >= 0 (0: the limit σ → 0)")
        mu, lam, vec = self._tables(x.device)
        z = (x.to(torch.float64) - mu) @ vec                                     # (B, D)
        return z, lam + sigma.to(torch.float64) ** 2, (mu, lam, vec)

    @torch.no_grad()
    def __call__(self, x, sigma):
        """Posterior mean μ + Σ(Σ + σ²I)⁻¹(x − μ). x: (B, D) float, sigma: (B,) -> (B, D) same dtype/device."""
        sigma = check_inputs(x, sigma, self.dim)                                 # (B, 1)
        z, total, (mu, lam, vec) = self._rotate(x, sigma)
        gain = torch.where(lam > 0, lam / torch.where(total > 0, total, 1.0), 0.0)   # (B, D) λ/(λ+σ²)
        return undefined_at_nan_sigma(mu + (z * gain) @ vec.T, sigma).to(x.dtype)

    def log_density(self, x, sigma):
        """Exact log N(x; μ, Σ + σ²I) (all constants included). -> (B,) in x's dtype.

        Differentiable in x (autograd gives the score (D(x,σ) − x)/σ²). DataError where Σ + σ²I is
        singular (σ = 0 with rank(Σ) < D): the density is undefined there."""
        sigma = check_inputs(x, sigma, self.dim)
        z, total, _ = self._rotate(x, sigma)
        if bool((total <= 0).any()):
            raise DataError("GaussianDenoiser.log_density: Σ + σ²I is singular (σ = 0 and rank(Σ) = "
                            f"{self.rank} < D = {self.dim}); the density is undefined there")
        quad = (z * z / total).sum(1)                                            # (B,)
        logdet = torch.log(total).sum(1)                                         # (B,)
        return (-0.5 * (quad + logdet + self.dim * math.log(2 * math.pi))).to(x.dtype)

    def __repr__(self):
        return f"GaussianDenoiser(D={self.dim}, rank={self.rank}, source={self.source!r})"
