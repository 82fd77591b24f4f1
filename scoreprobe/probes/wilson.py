"""The Wilson score interval of a fraction of n samples: the confidence bound a probe attaches to a share it
counts (`oracle_samples`' agreement), the one the "reliable" τ definition reads (`scoreprobe.stats.crossings`),
and the clipped two-sided interval of the report's ribbons and the decompose pairs' tables (`wilson_interval`).

It sits with the probes, not in `scoreprobe.stats`, because a probe stores it with its measurement and
`scoreprobe.probes` imports nothing from `scoreprobe.stats` (the data flow one way: probes → stats).
"""
import numpy as np

WILSON_Z = 1.959963984540054   # the 95% two-sided Wilson interval


def wilson_lower(y, n, z=WILSON_Z):
    """Lower end of the Wilson score interval of fractions y (any shape) of n samples."""
    y = np.clip(np.asarray(y, dtype=np.float64), 0.0, 1.0)
    centre, half = y + z * z / (2 * n), z * np.sqrt(y * (1 - y) / n + z * z / (4 * n * n))
    return (centre - half) / (1 + z * z / n)


def wilson_interval(p, n, z=WILSON_Z):
    """Wilson score interval (lo, hi) of fractions p (any shape) of n samples, clipped to [0, 1].

    (The lower end is `wilson_lower` written with the denominator divided in first; the two orders can differ
    in the last bit, so each caller keeps the one its published numbers were made with.)
    """
    p = np.asarray(p, dtype=np.float64)
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)
