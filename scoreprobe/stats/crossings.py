"""Crossings and windows of clock curves (fractions of n samples against u = log(step + 1)), vectorized over
bootstrap replicates: the geometry `stats.taus` reads τ and the window with (docs/definitions.md, "Clocks")."""
import math

import numpy as np

from scoreprobe.defaults import DEFAULT_DEFINITION
from scoreprobe.probes.wilson import wilson_lower

DEFINITIONS = ("reliable", "first_crossing")
RELIABLE_K = 2            # consecutive checkpoints whose Wilson lower bound is at or above the threshold


# ---------------------------------------------------------------------------------------------
# Curves: crossing and window, vectorized over bootstrap replicates
# ---------------------------------------------------------------------------------------------


def logit_fraction(y, n):
    """logit of fractions of n samples, clipped to [1/(2n), 1 − 1/(2n)] so 0 and 1 stay finite."""
    eps = 0.5 / n
    y = np.clip(np.asarray(y, dtype=np.float64), eps, 1 - eps)
    return np.log(y) - np.log1p(-y)


def crossing(u, z, zt):
    """First u where z, linear between knots, reaches zt. u (S,), z (B, S) -> (B,) (NaN: never).

    A NaN knot never counts as reaching zt (the argmax runs over the finite knots at or above zt): a
    crossing is only read at a measured knot. The clocks' curves have none (a non-finite sample counts
    as `invalid`, so every fraction is defined); a caller's own NaN knot is an unmeasured checkpoint."""
    ok = np.isfinite(z) & (z >= zt)                                       # (B, S)
    i = ok.argmax(axis=1)                                                 # first crossing knot
    prev = np.maximum(i - 1, 0)
    rows = np.arange(z.shape[0])
    z0, z1 = z[rows, prev], z[rows, i]
    with np.errstate(invalid="ignore", divide="ignore"):
        f = np.where(i > 0, (zt - z0) / (z1 - z0), 0.0)                   # z0 < zt <= z1
    f = np.where(np.isfinite(f), f, 0.0)
    return np.where(ok.any(axis=1), u[prev] + f * (u[i] - u[prev]), np.nan)


def confident_start(ok, k=RELIABLE_K):
    """(B,) index of the first checkpoint that starts k consecutive True of ok (B, S) (a run may end at
    the last checkpoint), and (B,) whether there is one."""
    S = ok.shape[1]
    run = ok.copy()
    for j in range(1, k):                       # run[:, i] = ok[:, i .. min(i + k - 1, S - 1)] all True
        run[:, : S - j] &= ok[:, j:]
    return run.argmax(axis=1), run.any(axis=1)


def reliable_crossing(u, z, zt, ok, k=RELIABLE_K):
    """Crossing of zt into the stretch of knots z >= zt holding the first k consecutive `ok` knots.

    u (S,), z (B, S) transformed curves, ok (B, S) confident knots (ok implies z >= zt) -> (B,) u (NaN: never).
    """
    B, S = z.shape
    first, has = confident_start(ok, k)
    below = ~(np.isfinite(z) & (z >= zt)) & (np.arange(S)[None] <= first[:, None])         # (B, S)
    last_below = np.where(below.any(axis=1), S - 1 - below[:, ::-1].argmax(axis=1), -1)
    i = last_below + 1                                                    # first knot of the stretch
    prev, rows = np.maximum(i - 1, 0), np.arange(B)
    ic = np.minimum(i, S - 1)
    z0, z1 = z[rows, prev], z[rows, ic]
    with np.errstate(invalid="ignore", divide="ignore"):
        f = np.where(i > 0, (zt - z0) / (z1 - z0), 0.0)
    f = np.where(np.isfinite(f), f, 0.0)
    return np.where(has, u[prev] + f * (u[ic] - u[prev]), np.nan)


def crossing_of(u, y, n, threshold, definition=DEFAULT_DEFINITION):
    """τ in u of fraction curves y (B, S) of n samples at `threshold` under `definition` -> (B,)."""
    z, zt = logit_fraction(y, n), logit_fraction(threshold, n)
    if definition == "first_crossing":
        return crossing(u, z, zt)
    return reliable_crossing(u, z, zt, wilson_lower(y, n) >= threshold)


def _segment_set(z0, z1, zt, above):
    """Part [a, b] of the t-line where z0 + t·(z1 − z0) >= zt (above) or <= zt (below), not yet cut to
    [0, 1] (so that a crossing beyond the segment leaves it empty). (B,) each; a > b: empty."""
    dz = z1 - z0
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(dz != 0, (zt - z0) / dz, 0.0)
    rising = dz > 0 if above else dz < 0
    flat_ok = (z0 >= zt) if above else (z0 <= zt)
    a = np.where(dz == 0, np.where(flat_ok, 0.0, 1.0), np.where(rising, t, 0.0))
    b = np.where(dz == 0, np.where(flat_ok, 1.0, 0.0), np.where(rising, 1.0, t))
    return a, b


def window_segments(u, r, m, rt, mt):
    """Per segment between knots, the [lo, hi] in u where r >= rt and m <= mt (lo > hi: empty).

    u (S,), r and m (B, S) transformed curves -> lo, hi (B, S - 1); with S = 1, one point segment.
    """
    if len(u) == 1:
        ok = (r[:, 0] >= rt) & (m[:, 0] <= mt)
        return np.where(ok, u[0], np.inf)[:, None], np.where(ok, u[0], -np.inf)[:, None]
    ra, rb = _segment_set(r[:, :-1], r[:, 1:], rt, above=True)
    ma, mb = _segment_set(m[:, :-1], m[:, 1:], mt, above=False)
    a, b = np.maximum(np.maximum(ra, ma), 0.0), np.minimum(np.minimum(rb, mb), 1.0)
    du = np.diff(u)
    lo, hi = u[:-1] + a * du, u[:-1] + b * du
    empty = a > b
    return np.where(empty, np.inf, lo), np.where(empty, -np.inf, hi)


def window_summary(lo, hi):
    """(B, K) segment bounds -> open (B,) bool, first lo, last hi, width (log10 units) (B,)."""
    nonempty = lo <= hi
    is_open = nonempty.any(axis=1)
    first = np.where(is_open, np.min(lo, axis=1), np.nan)
    last = np.where(is_open, np.max(hi, axis=1), np.nan)
    width = np.where(nonempty, hi - lo, 0.0).sum(axis=1) / math.log(10)
    return is_open, first, last, width


def window_intervals(lo, hi):
    """Disjoint [lo, hi] intervals in u of one curve pair, segments that touch merged. lo, hi (K,)."""
    out = []
    for a, b in zip(lo, hi):
        if a > b:
            continue
        if out and a <= out[-1][1] + 1e-12:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out
