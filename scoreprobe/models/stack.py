"""Several checkpoints of one architecture evaluated in one batched call.

`StackedDenoiser([D_0, ..., D_{K-1}])` stacks the parameters of K denoisers
(`torch.func.stack_module_state`) and evaluates them with `vmap(functional_call(...))`, so K
checkpoints cost one batched forward instead of K. Rows are interleaved: row r goes to model
r % K, so any chunk of rows whose length is a multiple of K holds equally many rows per model
(the integrator's chunks stay valid when chunk_size is a multiple of K):

    x (N, D), N = B·K, row b·K + k  ->  model k  ->  (N, D) in the same order

`replicate(x0, K)` and `split(x, K)` convert between a batch (B, D) per model and that layout.
"""
import copy
import warnings

import torch
import torch.nn as nn
from torch.func import functional_call, stack_module_state, vmap

from scoreprobe.errors import ConfigError

_SETTINGS = ("parameterization", "image_shape", "label", "sigma_data", "time_scale", "schedule")


def _signature(model):
    """What must agree for two denoisers to share one forward: type, settings, parameter shapes."""
    settings = tuple(repr(getattr(model, k, None)) for k in _SETTINGS)
    shapes = tuple((n, tuple(p.shape), p.dtype) for n, p in model.named_parameters())
    return type(model), settings, shapes


def can_stack(models):
    """True when the models are denoiser nn.Modules (not samplers such as a GPT) of one type,
    settings and parameter shapes."""
    models = list(models)
    return (len(models) > 0 and all(isinstance(m, nn.Module) and not callable(getattr(m, "sample", None))
                                    for m in models)
            and len({_signature(m) for m in models}) == 1)


class StackedDenoiser(nn.Module):
    """K denoisers of one architecture as one: forward(x (N, D), sigma (N,)) with N a multiple of K,
    row r evaluated by model r % K. `k` is K; `dim` is the models' data dimension."""

    def __init__(self, models):
        super().__init__()
        models = list(models)
        if not can_stack(models):
            raise ConfigError("only denoisers of one type, one architecture and the same settings can be stacked")
        self.k = len(models)
        self.dim = getattr(models[0], "dim", None)
        self.sigma_data = getattr(models[0], "sigma_data", None)            # equal for all (can_stack)
        params, buffers = stack_module_state(models)                        # each (K, ...)
        self.params, self.buffers_ = params, buffers
        self.base = copy.deepcopy(models[0]).to("meta")                     # structure only
        self.device = next(iter(params.values())).device if params else torch.device("cpu")

    def _one(self, params, buffers, x, sigma):
        return functional_call(self.base, (params, buffers), (x, sigma))

    def forward(self, x, sigma):
        """x: (N, D), sigma: (N,) or scalar -> (N, D); N must be a multiple of K."""
        n, d = x.shape
        if n % self.k:
            raise ConfigError(f"a stacked denoiser of {self.k} models needs a multiple of {self.k} rows, got {n}")
        sigma = torch.as_tensor(sigma, dtype=x.dtype, device=x.device).reshape(-1).expand(n)
        xs = x.reshape(n // self.k, self.k, d).transpose(0, 1)              # (K, B, D)
        ss = sigma.reshape(n // self.k, self.k).transpose(0, 1)             # (K, B)
        with warnings.catch_warnings():   # CPU attention has no vmap rule yet: a loop over K, same numbers
            warnings.filterwarnings("ignore", message="There is a performance drop because we have not yet")
            out = vmap(self._one)(self.params, self.buffers_, xs, ss)       # (K, B, D)
        return out.transpose(0, 1).reshape(n, d)                            # (N, D)


def stack_size(D):
    """K for a StackedDenoiser, 1 for any other denoiser."""
    return D.k if isinstance(D, StackedDenoiser) else 1


def counted(what, k):
    """What a non-finite count is over: `what` plus ' x K stacked checkpoints' for a stack, in parentheses."""
    return f"({what}" + (f" x {k} stacked checkpoints)" if k > 1 else ")")


def replicate(x0, k):
    """(B, D) starting points -> (B·K, D) in the stacked layout (row b·K + k is x0[b] for model k)."""
    return x0.repeat_interleave(k, dim=0)


def split(x, k):
    """(B·K, ...) in the stacked layout -> list of K tensors (B, ...), one per model."""
    x = x.reshape(-1, k, *x.shape[1:])                                      # (B, K, ...)
    return [x[:, i] for i in range(k)]


def chunk_rows(chunk_size, k):
    """A chunk size that is a multiple of K (None stays None: one chunk; "auto" is resolved by
    `ode.auto_chunk_rows`, which knows K)."""
    return chunk_size if chunk_size in (None, "auto") else max(k, int(chunk_size) // k * k)
