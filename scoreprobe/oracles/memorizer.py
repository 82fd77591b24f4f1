"""The perfect memorizer: the optimal denoiser of a finite set of items (package docstring)."""
import math

import torch

from scoreprobe.errors import ConfigError
from scoreprobe.oracles.common import as_bits, check_inputs, gaussian_terms

_ELEMENT_BUDGET = 1 << 24      # logits held at once by EmpiricalDenoiser when chunk_size=None


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
        bits = as_bits(train_bits, "train_bits")
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
        sigma = check_inputs(x, sigma, self.dim)
        _, run_sum, acc = self._softmax_pass(x, sigma, want_mean=True)
        return (acc / run_sum[:, None]).clamp_(-1.0, 1.0)                        # (B, D) no ulp overshoot

    def log_density(self, x, sigma):
        """Exact log p_σ(x) = log(1/N Σ_n N(x; t_n, σ²I)) (all constants included). -> (B,)

        Differentiable in x (autograd gives the score (D(x,σ) - x)/σ²).
        """
        sigma = check_inputs(x, sigma, self.dim)
        run_max, run_sum, _ = self._softmax_pass(x, sigma, want_mean=False)
        lse = run_max + torch.log(run_sum)                                       # (B,)
        return lse - math.log(self.n_items) + gaussian_terms(x, sigma)
