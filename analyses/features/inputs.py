"""The features study's rows: every training item, then held-out items, each noised once at σ (per-row noise)."""
import numpy as np
import torch

import scoreprobe as sp
from scoreprobe.noise import randn_per_sample


def noised(clean, sigma, seed=0):
    """(n, D) noisy signed x = signed(clean) + σ·z, z drawn per row (row i's draw does not depend on n)."""
    x = torch.as_tensor(sp.to_signed(clean), dtype=torch.float32)
    return x + sigma * randn_per_sample(seed, np.arange(len(clean)), clean.shape[1])


def inputs(series, n_rows, sigma, seed=0):
    """(clean bits (n, D), noisy signed x (n, D)): every training item, then held-out items."""
    ds = series.dataset
    clean = np.concatenate([ds.train, ds.heldout])[:n_rows]
    return clean, noised(clean, sigma, seed)
