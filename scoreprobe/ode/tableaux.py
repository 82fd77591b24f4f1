"""Embedded explicit Runge–Kutta pairs and the per-row step-size controller of the adaptive engine.

A pair advances with the weights `b` and estimates its local error from the difference to the
embedded weights `b_hat` (Hairer, Nørsett & Wanner, "Solving ODEs I", II.4). The coefficients are
the published ones:

  "bs3"         Bogacki & Shampine (1989), orders 3(2), 4 stages, first-same-as-last (FSAL): an
                accepted step costs 3 evaluations, its last stage is the next step's first;
  "heun-euler"  Heun's method (order 2) with Euler (order 1) embedded, 2 evaluations per step:
                the EDM Heun step with its own error estimate.

The engine applies a pair to dx/dσ = (x − D(x, σ))/σ in σ (so a step is exact when D is constant,
as it is once a row has settled on a vertex) and chooses each row's step in t = ln σ.
"""
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Pair:
    """An embedded pair: c (S,), a (S rows of lower-triangular weights), b (S,), b_hat (S,); `order`
    is the lower order q (the error estimate is O(h^(q+1))); `fsal`: the last stage is f(x_new)."""
    name: str
    c: tuple
    a: tuple
    b: tuple
    b_hat: tuple
    order: int
    fsal: bool

    @property
    def stages(self):
        return len(self.c)


PAIRS = {
    "bs3": Pair("bs3", c=(0.0, 0.5, 0.75, 1.0),
                a=((), (0.5,), (0.0, 0.75), (2 / 9, 1 / 3, 4 / 9)),
                b=(2 / 9, 1 / 3, 4 / 9, 0.0), b_hat=(7 / 24, 1 / 4, 1 / 3, 1 / 8), order=2, fsal=True),
    "heun-euler": Pair("heun-euler", c=(0.0, 1.0), a=((), (1.0,)),
                       b=(0.5, 0.5), b_hat=(1.0, 0.0), order=1, fsal=False),
}

SAFETY = 0.9      # controller: the next step aims at SAFETY times the tolerated error
FAC_MIN = 0.2     # the step shrinks at most 5x after a rejection
FAC_MAX = 5.0     # and grows at most 5x after an acceptance


def error_ratio(err, x, x_new, rtol, atol):
    """Per-row max-norm of the local error over its tolerance: (B, D) tensors -> (B,) float64.
    A row is accepted when its ratio is <= 1. The max norm (not the RMS) because one coordinate
    crossing zero changes a label."""
    scale = atol + rtol * torch.maximum(x.abs(), x_new.abs())                   # (B, D)
    ratio = (err.abs() / scale).amax(dim=1).double()                             # (B,)
    return torch.where(torch.isfinite(ratio), ratio, torch.full_like(ratio, float("inf")))


def next_step(h, ratio, order, accepted, safety=SAFETY):
    """The next step in ln σ for each row (the elementary I-controller): h (B,) float64 < 0,
    ratio (B,) from `error_ratio`, accepted (B,) bool; safety in (0, 1]. A rejected row never grows
    its step."""
    expo = -1.0 / (order + 1)
    fac = safety * torch.where(ratio > 0, ratio, torch.full_like(ratio, 1e-10)) ** expo     # (B,)
    fac = fac.clamp(FAC_MIN, FAC_MAX)
    fac = torch.where(accepted, fac, fac.clamp(max=1.0))
    return h * fac
