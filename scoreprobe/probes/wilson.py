"""The Wilson score interval of a fraction of n samples: the confidence bound a probe attaches to a share it
counts (`oracle_samples`' agreement) and the one the "reliable" τ definition reads (`scoreprobe.stats.crossings`).

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
