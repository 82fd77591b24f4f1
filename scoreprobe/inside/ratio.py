"""Ratios whose denominator is checked: a pooled effect Σ num / Σ den is defined only when every den
has the same sign and |Σ den| / n is at least a stated floor.

A patching effect is a fraction of a contrast (metric clean − metric corrupt). Pooling over pairs,
Σ (m − m_r) / Σ (m_c − m_r), is the fraction of the *total* contrast restored; when the pairs' contrasts
have opposite signs the total cancels and the ratio means nothing (+3.56 / −2.11 / +1.33 pool to "+0.93"),
and a contrast near zero makes any ratio a division by noise. Such a value stays undefined (NaN) and the
reason is kept beside it (`reason`: "" where defined, "mixed sign" or "below floor"), so every layer above
(API, CLI, md) can say why.

Part of how a patching effect is measured (`inside.patch`, `inside.paths`, `probes.circuits` store it), so it
lives here and not in `scoreprobe.stats`: the probes import nothing from the statistics.
"""
import warnings

import numpy as np

DEN_FLOOR = 0.01      # |mean contrast| below this (metric units) → undefined

MIXED, SMALL = "mixed sign", "below floor"


def _reasons(den, floor, axis):
    """Reason strings for den (..., n, ...) reduced over `axis`: mixed sign, then below floor."""
    den = np.asarray(den, np.float64)
    finite = np.isfinite(den)
    pos = np.any((den > 0) & finite, axis=axis)
    neg = np.any((den < 0) & finite, axis=axis)
    mean = np.nanmean(np.where(finite, den, np.nan), axis=axis) if den.size else np.nan
    reason = np.full(np.shape(pos), "", dtype=object)
    small = ~(np.abs(mean) >= floor)                                              # NaN mean counts as small
    reason[small] = SMALL
    reason[pos & neg] = MIXED
    return reason


def pooled_ratio(num, den, axis=-1, floor=DEN_FLOOR):
    """Σ num / Σ den over `axis`, NaN where the den are of mixed sign or |mean den| < floor.

    num: (..., n, ...) per-unit numerators (NaN entries are left out of Σ num, as of Σ den: a unit counts
    only where both are finite); den: same shape. Returns (ratio, reason): arrays of the reduced shape,
    reason "" where the ratio is defined. floor: in the units of den (DEN_FLOOR by default).
    """
    num, den = np.broadcast_arrays(np.asarray(num, np.float64), np.asarray(den, np.float64))
    if not floor >= 0:
        raise ValueError(f"floor must be a non-negative number, got {floor!r}")
    ok = np.isfinite(num) & np.isfinite(den)
    reason = _reasons(np.where(ok, den, np.nan), floor, axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(ok, num, 0).sum(axis=axis) / np.where(ok, den, 0).sum(axis=axis)
    ratio = np.where(reason == "", ratio, np.nan)
    ratio = np.where(ok.any(axis=axis), ratio, np.nan)
    return ratio, reason


def unit_ratio(num, den, floor=DEN_FLOOR):
    """num / den element-wise, NaN where |den| < floor (a unit's own contrast too small). -> (ratio, reason)"""
    num, den = np.broadcast_arrays(np.asarray(num, np.float64), np.asarray(den, np.float64))
    small = ~(np.abs(den) >= floor)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(small, np.nan, num / den)
    return ratio, np.where(small, SMALL, "").astype(object)


def warn_undefined(reason, what="pooled effect", floor=DEN_FLOOR, stacklevel=3):
    """One UserWarning counting the undefined cells of `reason` by cause; nothing when all are defined."""
    r = np.asarray(reason, dtype=object).ravel()
    counts = {k: int((r == k).sum()) for k in (MIXED, SMALL)}
    if not any(counts.values()):
        return
    parts = [f"{n} with contrasts of mixed sign" if k == MIXED else f"{n} with |mean contrast| < {floor:g}"
             for k, n in counts.items() if n]
    warnings.warn(f"{what}: {sum(counts.values())} of {r.size} left undefined (NaN): " + ", ".join(parts),
                  UserWarning, stacklevel=stacklevel)
