"""Multiple testing: Holm (family-wise error) and Benjamini–Hochberg (false-discovery rate) adjusted
p-values, the one implementation every study and `scoreprobe.stats.dsm_stats` use."""
import numpy as np

from scoreprobe.errors import ConfigError

ALPHA = 0.05                   # family-wise (Holm) or false-discovery (BH) level over the σ grid


def adjust_pvalues(p, method="holm"):
    """Adjusted p-values over the last axis of p (..., m): "holm" (Holm–Bonferroni step-down,
    controls the family-wise error) or "bh" (Benjamini–Hochberg step-up, the false-discovery rate).
    NaN entries are left out of the family and stay NaN."""
    if method not in ("holm", "bh"):
        raise ConfigError(f"method must be 'holm' or 'bh', got {method!r}")
    p = np.asarray(p, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    for idx in np.ndindex(p.shape[:-1]):
        row = p[idx]
        ok = np.flatnonzero(np.isfinite(row))
        m = len(ok)
        if m == 0:
            continue
        order = ok[np.argsort(row[ok], kind="stable")]
        ranked = row[order]
        if method == "holm":
            adj = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * ranked))
        else:
            adj = np.minimum.accumulate(np.minimum(1.0, m / np.arange(1, m + 1) * ranked)[::-1])[::-1]
        out[idx + (order,)] = adj
    return out


def adjust_family(p, method="holm"):
    """Adjusted p-values with every finite entry of p (any shape, e.g. (step, σ)) in ONE family: a claim
    across steps and σ ("first significant at step s", "significant at k of n checkpoints") is then
    controlled as a whole (Holm: family-wise error; BH: false-discovery rate). Same shape as p."""
    p = np.asarray(p, dtype=np.float64)
    return adjust_pvalues(p.reshape(1, -1), method).reshape(p.shape)
