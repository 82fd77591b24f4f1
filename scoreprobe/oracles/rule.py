"""The perfect generalizer: the exact posterior mean under uniform rule-valid images (package docstring).

Parity: a two-state dynamic programme per group; ExactK, RowK: dynamic programming over counts;
small Latin squares and Sudoku: enumeration (an EmpiricalDenoiser over every valid grid).
"""
import logging
import math

import numpy as np
import torch

from scoreprobe.errors import ConfigError
from scoreprobe.oracles.common import check_inputs, gaussian_terms
from scoreprobe.oracles.memorizer import EmpiricalDenoiser

logger = logging.getLogger(__name__)

MAX_ENUMERATED = 2_000_000     # largest valid set RuleDenoiser enumerates (Latin/Sudoku)
_LOG_ZERO = -1e30              # log 0 in the DPs: finite, so autograd never sees -inf - -inf


# ---------------------------------------------------------------------------------------------
# Perfect generalizer: log-space dynamic programmes
# ---------------------------------------------------------------------------------------------

def _parity_scan(log_r):
    """Prefix log-sums over flip sets of even/odd size. log_r: (..., G) -> (..., G+1, 2)."""
    even = torch.zeros_like(log_r[..., 0])                                       # (...,) log 1
    odd = torch.full_like(even, _LOG_ZERO)                                       # (...,) log 0
    states = [torch.stack([even, odd], -1)]
    for j in range(log_r.shape[-1]):
        lr = log_r[..., j]
        even, odd = torch.logaddexp(even, odd + lr), torch.logaddexp(odd, even + lr)
        states.append(torch.stack([even, odd], -1))
    return torch.stack(states, -2)                                               # (..., G+1, 2)


def _parity_posterior(a, sign):
    """Posterior over v ∈ {±1}^G with Π v = sign, p(v) ∝ exp(a·v). a: (..., G).

    Works relative to the unconstrained mode m = sign(a): flipping bit j costs a factor
    r_j = exp(-2|a_j|), and the constraint fixes the parity of the number of flips. With E/O
    the log-sums over even/odd flip sets, E[v_i | x] = tanh(a_i + h_i), where the constraint's
    message h_i = ½·sign·Π_{j≠i} m_j·(E_{-i} - O_{-i}) = atanh(sign·Π_{j≠i} tanh a_j).

    Returns
    -------
    mean : (..., G) posterior mean.  log_z : (...,) log Σ_{v valid} exp(a·v).
    """
    m = torch.where(a < 0, -1.0, 1.0).to(a.dtype)                                # (..., G)
    log_r = -2 * a.abs()                                                         # (..., G)
    prefix = _parity_scan(log_r)                                                 # (..., G+1, 2)
    suffix = _parity_scan(log_r.flip(-1)).flip(-2)                               # (..., G+1, 2)
    pre, suf = prefix[..., :-1, :], suffix[..., 1:, :]                           # (..., G, 2)
    even_wo = torch.logaddexp(pre[..., 0] + suf[..., 0], pre[..., 1] + suf[..., 1])
    odd_wo = torch.logaddexp(pre[..., 0] + suf[..., 1], pre[..., 1] + suf[..., 0])
    m_all = m.prod(-1, keepdim=True)                                             # (..., 1)
    message = 0.5 * sign * (m_all * m) * (even_wo - odd_wo)                      # Π_{j≠i}m_j = m_all·m_i
    mean = torch.tanh(a + message)                                               # (..., G)
    full = prefix[..., -1, :]                                                    # (..., 2)
    mode_ok = (m_all[..., 0] == sign)                                            # m itself valid?
    log_z = a.abs().sum(-1) + torch.where(mode_ok, full[..., 0], full[..., 1])
    return mean, log_z


def _count_scan(a, k):
    """Prefix log-sums over ±1 patterns by number of +1s (0..k). a: (..., n) -> (..., n+1, k+1)."""
    state = torch.full(a.shape[:-1] + (k + 1,), _LOG_ZERO, dtype=a.dtype, device=a.device)
    state[..., 0] = 0.0
    pad = torch.full_like(state[..., :1], _LOG_ZERO)                             # (..., 1)
    states = [state]
    for j in range(a.shape[-1]):
        aj = a[..., j:j + 1]                                                     # (..., 1)
        shifted = torch.cat([pad, state[..., :-1]], -1)                          # one more +1
        state = torch.logaddexp(state - aj, shifted + aj)
        states.append(state)
    return torch.stack(states, -2)                                               # (..., n+1, k+1)


def _count_posterior(a, k):
    """Posterior over v ∈ {±1}^n with exactly k entries +1, p(v) ∝ exp(a·v). a: (..., n).

    E[v_i | x] = tanh(a_i + ½(log Z_{-i}(k-1) - log Z_{-i}(k))) where Z_{-i}(c) sums exp(a·v)
    over the other bits with c of them +1 (forward/backward DP, combined by convolution).

    Returns
    -------
    mean : (..., n) posterior mean.  log_z : (...,) log Σ_{v valid} exp(a·v).
    """
    prefix = _count_scan(a, k)                                                   # (..., n+1, k+1)
    suffix = _count_scan(a.flip(-1), k).flip(-2)                                 # (..., n+1, k+1)
    pre, suf = prefix[..., :-1, :], suffix[..., 1:, :]                           # (..., n, k+1)
    z_k = torch.logsumexp(pre + suf.flip(-1), -1)                                # others hold k
    if k > 0:
        z_km1 = torch.logsumexp(pre[..., :k] + suf[..., :k].flip(-1), -1)        # others hold k-1
    else:
        z_km1 = torch.full_like(z_k, _LOG_ZERO)
    mean = torch.tanh(a + 0.5 * (z_km1 - z_k))                                   # (..., n)
    return mean, prefix[..., -1, k]


# ---------------------------------------------------------------------------------------------
# Perfect generalizer
# ---------------------------------------------------------------------------------------------

class RuleDenoiser:
    """Exact posterior mean when the data are uniform over all valid images of a rule.

    Parity: per group, a two-state DP over the parity of flips (closed form, see
    `_parity_posterior`); ExactK: DP over the number of ones in the image; RowK: the same DP
    per row; LatinSquare / Sudoku with at most `MAX_ENUMERATED` valid grids (n = 4, Latin n ≤ 5):
    `EmpiricalDenoiser` over `rule.enumerate()`, which is exact because the data are uniform
    over that set. Other rules raise ConfigError (no exact oracle exists).

    Parameters
    ----------
    rule : a rule from `scoreprobe.data.rules`.

    Attributes
    ----------
    rule, dim : int (= rule.n_bits), kind : "parity" | "exact_k" | "row_k" | "enumerated".
    """

    def __init__(self, rule):
        from scoreprobe.data import rules as R

        self.rule, self.dim = rule, int(rule.n_bits)
        if isinstance(rule, R.Parity):
            self.kind = "parity"
            self._groups = torch.as_tensor(np.asarray(rule.groups), dtype=torch.int64)  # (n_g, G)
            self._sign = -1.0 if int(rule.G) % 2 else 1.0      # Π v over a group with even #ones
            n_groups, g = self._groups.shape
            self._log_n_valid = n_groups * (g - 1) * math.log(2)
        elif isinstance(rule, R.ExactK):
            self.kind, self._k = "exact_k", int(rule.k)
            self._log_n_valid = math.log(math.comb(self.dim, self._k))
        elif isinstance(rule, R.RowK):
            self.kind, self._k = "row_k", int(rule.k)
            self._rows, self._cols = (int(s) for s in rule.shape)
            self._log_n_valid = self._rows * math.log(math.comb(self._cols, self._k))
        else:
            self.kind = "enumerated"
            self._empirical = EmpiricalDenoiser(self._enumerate(rule))
            self._log_n_valid = math.log(self._empirical.n_items)

    @staticmethod
    def _enumerate(rule):
        n_valid = int(rule.n_valid)
        if n_valid > MAX_ENUMERATED or not hasattr(rule, "enumerate"):
            raise ConfigError(f"no exact oracle exists for {rule!r}: its {n_valid} valid "
                              f"images are too many to enumerate (limit {MAX_ENUMERATED}) and no "
                              "closed form is known; use a smaller rule (e.g. Sudoku(4), "
                              "LatinSquare(4)) for oracle comparisons")
        try:
            return rule.enumerate()
        except ConfigError as err:
            raise ConfigError(f"no exact oracle exists for {rule!r}: {err}") from err

    def _posterior(self, x, sigma):
        """Posterior mean (B, D) and log Σ_{v valid} exp(a·v) (B,) at a = x/σ²."""
        a = x / sigma ** 2                                                       # (B, D)
        if self.kind == "parity":
            groups = self._groups.to(x.device)
            mean_g, log_z = _parity_posterior(a[:, groups], self._sign)         # (B, n_g, G)
            mean = torch.empty_like(x)
            mean[:, groups.reshape(-1)] = mean_g.reshape(x.shape[0], -1)
            return mean, log_z.sum(-1)
        if self.kind == "exact_k":
            return _count_posterior(a, self._k)
        rows = a.reshape(x.shape[0], self._rows, self._cols)                      # (B, R, C)
        mean, log_z = _count_posterior(rows, self._k)
        return mean.reshape(x.shape), log_z.sum(-1)

    @torch.no_grad()
    def __call__(self, x, sigma):
        """Posterior mean. x: (B, D) float, sigma: (B,) -> (B, D) same dtype/device."""
        if self.kind == "enumerated":
            return self._empirical(x, sigma)
        sigma = check_inputs(x, sigma, self.dim)
        return self._posterior(x, sigma)[0]

    def log_density(self, x, sigma):
        """Exact log p_σ(x) = log(1/|V| Σ_{v∈V} N(x; v, σ²I)) (all constants included). -> (B,)

        Differentiable in x (autograd gives the score (D(x,σ) - x)/σ², except on the
        measure-zero set where some x_i = 0 exactly).
        """
        if self.kind == "enumerated":
            return self._empirical.log_density(x, sigma)
        sigma = check_inputs(x, sigma, self.dim)
        log_z = self._posterior(x, sigma)[1]                                     # (B,)
        return log_z - self._log_n_valid + gaussian_terms(x, sigma)
