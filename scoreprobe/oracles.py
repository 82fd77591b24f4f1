"""Oracle denoisers: the perfect memorizer and the perfect generalizer.

Both are exact posterior means E[v | x] of a clean signed image v ∈ {-1,+1}^D observed as
x = v + σ·ε, ε ~ N(0, I), under a uniform prior on a finite set V of vertices:

    p(v | x) ∝ exp(-‖x - v‖²/2σ²) ∝ exp(a·v),   a = x/σ²   (‖v‖² = D for every vertex).

`EmpiricalDenoiser` takes V = the training set (the minimizer of the DSM loss on it);
`RuleDenoiser` takes V = all rule-valid images, computed in closed form (parity: a two-state
dynamic programme per group, equivalent to E[v_i|x] = (t_i + sΠ_{j≠i}t_j)/(1 + sΠ_j t_j) with
t = tanh(a)), by dynamic programming over counts (ExactK, RowK), or by enumeration (small
Latin squares and Sudoku). Every computation is done in log space, so the results are finite
for σ from 0.002 to 80 in float32 and float64. Both expose `log_density(x, σ)`, the exact
normalized log p_σ(x) = log(1/|V| Σ_v N(x; v, σ²I)), whose gradient is the score (D - x)/σ².
"""
import logging
import math

import numpy as np
import torch

from scoreprobe.errors import ConfigError, DataError

logger = logging.getLogger(__name__)

MAX_ENUMERATED = 2_000_000     # largest valid set RuleDenoiser enumerates (Latin/Sudoku)
_ELEMENT_BUDGET = 1 << 24      # logits held at once by EmpiricalDenoiser when chunk_size=None
_LOG_ZERO = -1e30              # log 0 in the DPs: finite, so autograd never sees -inf - -inf


def _check_inputs(x, sigma, dim):
    """Validate (x (B, D), sigma) and return sigma as a (B, 1) tensor of x's dtype/device."""
    if not torch.is_tensor(x) or x.ndim != 2 or x.shape[1] != dim or not x.is_floating_point():
        shape = tuple(x.shape) if torch.is_tensor(x) else type(x).__name__
        raise DataError(f"x must be a float tensor of shape (B, {dim}), got {shape}")
    sigma = torch.as_tensor(sigma, dtype=x.dtype, device=x.device).reshape(-1)
    if sigma.numel() == 1:
        sigma = sigma.expand(x.shape[0])
    if sigma.numel() != x.shape[0]:
        raise DataError(f"sigma must have shape ({x.shape[0]},) (one noise level per row), "
                        f"got {sigma.numel()} values")
    return sigma[:, None]                                                        # (B, 1)


def _gaussian_terms(x, sigma):
    """The part of log p_σ(x) shared by all oracles: -(‖x‖² + D)/2σ² - D/2·log(2πσ²). (B,)"""
    d = x.shape[1]
    s2 = sigma[:, 0] ** 2                                                        # (B,)
    return -((x * x).sum(1) + d) / (2 * s2) - 0.5 * d * torch.log(2 * math.pi * s2)


def _as_bits(bits, name):
    bits = np.asarray(bits.detach().cpu() if torch.is_tensor(bits) else bits)
    if bits.ndim != 2 or bits.shape[0] < 1 or bits.shape[1] < 1:
        raise DataError(f"{name} must be a non-empty (N, D) array of bits, got shape {bits.shape}")
    if not np.isin(bits, (0, 1)).all():
        raise DataError(f"{name} must hold only 0/1 values (uint8 bits, not signed ±1 values)")
    return bits.astype(np.uint8)


# ---------------------------------------------------------------------------------------------
# Perfect memorizer
# ---------------------------------------------------------------------------------------------

class EmpiricalDenoiser:
    """Optimal denoiser of a finite set of items (the exact minimizer of the DSM loss on it).

    D(x, σ) = Σ_n w_n t_n with w = softmax_n(-‖x - t_n‖²/2σ²) over the signed items t_n.
    The softmax runs over chunks of items with a running (online) log-sum-exp, so memory stays
    bounded for large N.

    Parameters
    ----------
    train_bits : (N, D) uint8 bits, the items.
    chunk_size : int or None, items per chunk (None: about 2^24 logits at a time).

    Attributes
    ----------
    dim : int, D.  n_items : int, N.
    """

    def __init__(self, train_bits, chunk_size=None):
        bits = _as_bits(train_bits, "train_bits")
        if chunk_size is not None and (int(chunk_size) != chunk_size or chunk_size < 1):
            raise ConfigError(f"chunk_size must be a positive integer or None, got {chunk_size!r}")
        self.chunk_size = chunk_size
        self.items = torch.from_numpy(bits).to(torch.float64) * 2 - 1           # (N, D) signed
        self.n_items, self.dim = bits.shape
        self._cache = {}

    def _items_like(self, x):
        key = (x.device, x.dtype)
        if key not in self._cache:
            self._cache[key] = self.items.to(device=x.device, dtype=x.dtype)
        return self._cache[key]

    def _softmax_pass(self, x, sigma, want_mean):
        """Online log-sum-exp of logits x·t_n/σ² over item chunks; optionally the weighted mean."""
        items = self._items_like(x)                                              # (N, D)
        size = self.chunk_size or max(1, _ELEMENT_BUDGET // max(1, x.shape[0]))
        a = x / sigma ** 2                                                       # (B, D)
        run_max = torch.full_like(x[:, 0], -float("inf"))                        # (B,)
        run_sum = torch.zeros_like(x[:, 0])                                      # (B,)
        acc = torch.zeros_like(x) if want_mean else None                         # (B, D)
        for start in range(0, self.n_items, size):
            chunk = items[start:start + size]                                    # (C, D)
            logits = a @ chunk.T                                                 # (B, C)
            new_max = torch.maximum(run_max, logits.max(1).values)               # (B,)
            scale = torch.exp(run_max - new_max)                                 # (B,) 0 at start
            weights = torch.exp(logits - new_max[:, None])                       # (B, C)
            run_sum = run_sum * scale + weights.sum(1)
            if want_mean:
                acc = acc * scale[:, None] + weights @ chunk
            run_max = new_max
        return run_max, run_sum, acc

    @torch.no_grad()
    def __call__(self, x, sigma):
        """Posterior mean. x: (B, D) float, sigma: (B,) -> (B, D) same dtype/device."""
        sigma = _check_inputs(x, sigma, self.dim)
        _, run_sum, acc = self._softmax_pass(x, sigma, want_mean=True)
        return (acc / run_sum[:, None]).clamp_(-1.0, 1.0)                        # (B, D) no ulp overshoot

    def log_density(self, x, sigma):
        """Exact log p_σ(x) = log(1/N Σ_n N(x; t_n, σ²I)) (all constants included). -> (B,)

        Differentiable in x (autograd gives the score (D(x,σ) - x)/σ²).
        """
        sigma = _check_inputs(x, sigma, self.dim)
        run_max, run_sum, _ = self._softmax_pass(x, sigma, want_mean=False)
        lse = run_max + torch.log(run_sum)                                       # (B,)
        return lse - math.log(self.n_items) + _gaussian_terms(x, sigma)


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
        sigma = _check_inputs(x, sigma, self.dim)
        return self._posterior(x, sigma)[0]

    def log_density(self, x, sigma):
        """Exact log p_σ(x) = log(1/|V| Σ_{v∈V} N(x; v, σ²I)) (all constants included). -> (B,)

        Differentiable in x (autograd gives the score (D(x,σ) - x)/σ², except on the
        measure-zero set where some x_i = 0 exactly).
        """
        if self.kind == "enumerated":
            return self._empirical.log_density(x, sigma)
        sigma = _check_inputs(x, sigma, self.dim)
        log_z = self._posterior(x, sigma)[1]                                     # (B,)
        return log_z - self._log_n_valid + _gaussian_terms(x, sigma)
