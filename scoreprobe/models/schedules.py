"""Discrete variance-preserving (VP) noise schedules, seen from scoreprobe's variance-exploding side.

A DDPM-style model is trained on x_t = √ᾱ_t·y + √(1−ᾱ_t)·ε at integer timesteps t = 0..T−1, with
ᾱ_t = Π_{s≤t}(1 − β_s). The same noisy image in scoreprobe's convention x = y + σ·ε has

    σ_t = √((1 − ᾱ_t) / ᾱ_t)        x_t = x / √(1 + σ²)        (so √ᾱ_t = 1/√(1 + σ_t²))

    schedule = VPSchedule("linear")              # β from 1e-4 to 0.02 over T = 1000 (Ho et al. 2020)
    t = schedule.t_of_sigma(torch.tensor([0.5, 1.24]))   # continuous timesteps, (B,)

Between table entries t is interpolated linearly in ln σ; below σ_0 it is 0 and above σ_{T−1} it is
T−1 (clamped: the network never saw other timesteps). docs/checkpoints.md gives the sources.
"""
import math
from dataclasses import dataclass

import numpy as np
import torch

from scoreprobe.errors import ConfigError
from scoreprobe.limits import MAX_TIMESTEPS, check_int

SCHEDULES = ("linear", "cosine")
COSINE_OFFSET = 0.008      # s in Nichol & Dhariwal (2021), eq. 17
MAX_BETA = 0.999           # their clipping of β_t near t = T


@dataclass(frozen=True)
class VPSchedule:
    """A discrete VP schedule.

    name: "linear" (β_t evenly spaced from 1e-4·1000/T to 0.02·1000/T: Ho et al. 2020 at T = 1000,
          extended to other T as in improved DDPM) or "cosine" (Nichol & Dhariwal 2021, eq. 17).
    num_timesteps: T, the number of discrete timesteps the network was trained on.
    """
    name: str = "linear"
    num_timesteps: int = 1000

    def __post_init__(self):
        if not isinstance(self.name, str) or self.name not in SCHEDULES:
            raise ConfigError(f"unknown schedule {str(self.name)[:40]!r}; known: {', '.join(SCHEDULES)}")
        check_int(self.num_timesteps, "num_timesteps", 2, MAX_TIMESTEPS)

    def betas(self):
        """β_t for t = 0..T−1: float64 (T,)."""
        T = int(self.num_timesteps)
        if self.name == "linear":
            scale = 1000 / T
            return np.linspace(scale * 1e-4, scale * 0.02, T, dtype=np.float64)
        f = [math.cos((i / T + COSINE_OFFSET) / (1 + COSINE_OFFSET) * math.pi / 2) ** 2 for i in range(T + 1)]
        return np.array([min(1 - f[i + 1] / f[i], MAX_BETA) for i in range(T)], dtype=np.float64)

    def alpha_bar(self):
        """ᾱ_t = Π_{s≤t} (1 − β_s): float64 (T,)."""
        return np.cumprod(1.0 - self.betas())

    def sigmas(self):
        """σ_t = √((1 − ᾱ_t)/ᾱ_t), increasing: float64 (T,)."""
        ab = self.alpha_bar()
        return np.sqrt((1.0 - ab) / ab)

    def t_of_sigma(self, sigma):
        """Continuous timestep of each noise level: sigma (B,) -> t (B,) float32, clamped to [0, T−1].

        Linear interpolation of t against ln σ_t between neighbouring table entries.
        """
        sigma = torch.as_tensor(sigma)
        log_table = torch.from_numpy(np.log(self.sigmas())).to(sigma.device)       # (T,) float64
        log_s = sigma.double().log().clamp(log_table[0], log_table[-1])             # (B,)
        hi = torch.searchsorted(log_table, log_s).clamp(1, len(log_table) - 1)     # (B,)
        lo = hi - 1
        frac = (log_s - log_table[lo]) / (log_table[hi] - log_table[lo])
        return (lo.double() + frac).float()

    def describe(self):
        """One line for `scoreprobe info` and reprs."""
        s = self.sigmas()
        betas = "β 1e-4→0.02" if self.num_timesteps == 1000 else f"β {1e-1 / self.num_timesteps:.3g}→{20 / self.num_timesteps:.3g}"
        what = betas if self.name == "linear" else "cosine ᾱ, s=0.008"
        return f"{self.name} ({what}, T={self.num_timesteps}; σ from {s[0]:.4g} to {s[-1]:.4g}, clamped outside)"
