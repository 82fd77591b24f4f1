"""A planted dictionary: sparse non-negative codes over known unit directions, for validating an SAE.

    data = planted_dictionary(n=4096, d_in=32, n_features=64, p=0.05, seed=0)
    data.x          # (n, d_in) float32 rows = codes @ directions + bias + noise
    data.codes      # (n, n_features) float32 >= 0, each feature on with probability p
    data.directions # (n_features, d_in) unit rows (the ground truth for MCC)
    data.active     # (n, n_features) bool: which features are on (the ground truth for F1)

The same construction as the synthetic benchmarks of SAE evaluation (SynthSAEBench, Toy Models of
Superposition): more features than dimensions (superposition) when n_features > d_in, each feature present
independently, its magnitude drawn from |N(1, mag_std)| when present.
"""
from dataclasses import dataclass

import numpy as np

from scoreprobe.errors import ConfigError


@dataclass(frozen=True)
class Planted:
    x: np.ndarray            # (n, d_in) float32
    codes: np.ndarray        # (n, n_features) float32
    directions: np.ndarray   # (n_features, d_in) float32, unit rows
    active: np.ndarray       # (n, n_features) bool


def planted_dictionary(n, d_in, n_features, p=0.05, mag_std=0.2, noise=0.01, bias=1.0, seed=0):
    """Rows x = codes @ directions + b + noise (see the module docstring).

    p : probability that each feature is on in a row; mag_std : spread of an active feature's magnitude;
    noise : std of isotropic Gaussian noise; bias : norm of a constant offset b (what b_dec must learn)."""
    for name, v in (("n", n), ("d_in", d_in), ("n_features", n_features)):
        if not (isinstance(v, (int, np.integer)) and v >= 1):
            raise ConfigError(f"{name} must be a positive integer, got {v!r}")
    if not 0 < p <= 1:
        raise ConfigError(f"p must be in (0, 1], got {p!r}")
    rng = np.random.default_rng(seed)
    directions = rng.standard_normal((n_features, d_in))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    active = rng.random((n, n_features)) < p
    mags = np.abs(1.0 + mag_std * rng.standard_normal((n, n_features)))
    codes = np.where(active, mags, 0.0)
    b = rng.standard_normal(d_in)
    b *= bias / np.linalg.norm(b)
    x = codes @ directions + b + noise * rng.standard_normal((n, d_in))
    return Planted(x.astype(np.float32), codes.astype(np.float32), directions.astype(np.float32), active)
