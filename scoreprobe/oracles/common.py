"""Pieces shared by the exact oracles: input checks, the Gaussian part of log p_σ(x), bit arrays.

Every oracle is an exact posterior mean E[v | x] of a clean signed image v ∈ {-1,+1}^D observed as
x = v + σ·ε under a uniform prior on a finite set V of vertices; see the package docstring.
"""
import math

import numpy as np
import torch

from scoreprobe.errors import DataError


def check_inputs(x, sigma, dim):
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


def undefined_at_nan_sigma(out, sigma):
    """out (B, D) with the rows whose sigma (B, 1) is NaN set to NaN: a posterior mean at an undefined noise level
    is undefined, never the output of another σ (a `torch.where(σ > 0, ...)` reads NaN as σ = 0)."""
    return torch.where(torch.isnan(sigma), torch.full_like(out, math.nan), out)


def gaussian_terms(x, sigma):
    """The part of log p_σ(x) shared by all oracles: -(‖x‖² + D)/2σ² - D/2·log(2πσ²). (B,)"""
    d = x.shape[1]
    s2 = sigma[:, 0] ** 2                                                        # (B,)
    return -((x * x).sum(1) + d) / (2 * s2) - 0.5 * d * torch.log(2 * math.pi * s2)


def as_bits(bits, name):
    bits = np.asarray(bits.detach().cpu() if torch.is_tensor(bits) else bits)
    if bits.ndim != 2 or bits.shape[0] < 1 or bits.shape[1] < 1:
        raise DataError(f"{name} must be a non-empty (N, D) array of bits, got shape {bits.shape}")
    if not np.isin(bits, (0, 1)).all():
        raise DataError(f"{name} must hold only 0/1 values (uint8 bits, not signed ±1 values)")
    return bits.astype(np.uint8)

