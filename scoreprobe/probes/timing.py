"""When a quantity changes over training: half-change steps with bootstrap CIs, and mean curves or
differences with CIs over planes / items (docs/definitions.md, "Half-change steps").

A quantity q(step) measured per unit (a plane, an item) at the checkpoints of a series is averaged over
units; its **half-change step** is the first step where the mean curve, interpolated linearly in
log(step + 1) (as the clocks are, before their logit), crosses q_0 + (q_end − q_0)/2, with q_0 the
value at the first checkpoint and q_end at the last (`to="last"`) or at the checkpoint farthest from
q_0 (`to="extreme"`, for a quantity that rises and falls back). NaN: not reached (no change, or NaN).

Confidence intervals resample units with replacement within each group (a seed of the plane or item
draws: a stratified bootstrap, the CI over planes / items), or, with `resample_groups=True`, first the
groups and then units within them (the CI over seeds and planes). The spread over seeds is reported
apart: the statistic of each group alone.
"""
import contextlib
import math
import warnings

import numpy as np

from scoreprobe.errors import ConfigError
from scoreprobe.probes.taus import crossing

N_BOOT = 1000


def half_change_step(steps, y, to="last"):
    """Half-change steps of curves y (B, S) (or (S,)) over checkpoints `steps` (S,): (B,) float (or scalar),
    NaN when not reached."""
    steps = np.asarray(steps, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    one = y.ndim == 1
    y = np.atleast_2d(y)                                                     # (B, S)
    if y.shape[1] != steps.size or steps.size < 2 or np.any(np.diff(steps) <= 0):
        raise ConfigError(f"half_change_step needs >= 2 increasing steps matching y, got {steps.size} and {y.shape}")
    if to not in ("last", "extreme"):
        raise ConfigError(f"to must be 'last' or 'extreme', got {to!r}")
    y0 = y[:, 0]
    if to == "last":
        end = y[:, -1]
    else:
        far = np.nanargmax(np.where(np.isfinite(y), np.abs(y - y0[:, None]), -np.inf), axis=1)
        end = y[np.arange(len(y)), far]
    delta = end - y0
    sign = np.where(delta >= 0, 1.0, -1.0)[:, None]
    with np.errstate(invalid="ignore"):
        hit = crossing(np.log1p(steps), sign * (y - (y0 + delta / 2)[:, None]), 0.0)   # (B,)
    ok = np.isfinite(delta) & (np.abs(delta) > 1e-12) & np.isfinite(y).all(axis=1)
    out = np.where(ok, np.expm1(hit), np.nan)
    return float(out[0]) if one else out


def bootstrap_means(values, groups=None, n_boot=N_BOOT, seed=0, resample_groups=False):
    """(n_boot, S) means over units of resampled `values` (U, S): units drawn with replacement within
    each group (stratified), or groups first and then units within them (`resample_groups`). NaN
    entries are skipped in each mean."""
    values = np.asarray(values, dtype=np.float64)
    groups = np.zeros(len(values), np.int64) if groups is None else np.asarray(groups)
    labels = list(dict.fromkeys(groups.tolist()))
    members = [np.flatnonzero(groups == g) for g in labels]
    rng = np.random.default_rng(seed)
    picks = []
    for _ in range(int(n_boot)):
        chosen = [members[i] for i in rng.integers(len(members), size=len(members))] if resample_groups else members
        picks.append(np.concatenate([m[rng.integers(len(m), size=len(m))] for m in chosen]))
    with _quiet():
        return np.stack([np.nanmean(values[p], axis=0) for p in picks])      # (n_boot, S)


@contextlib.contextmanager
def _quiet():
    """Means and percentiles of all-NaN columns are NaN, silently."""
    with warnings.catch_warnings(), np.errstate(invalid="ignore"):
        warnings.filterwarnings("ignore", message="Mean of empty slice")
        warnings.filterwarnings("ignore", message="All-NaN slice")
        yield


def _interval(boot, ci):
    q = [(1 - ci) / 2 * 100, (1 + ci) / 2 * 100]
    with _quiet():
        return np.nanpercentile(boot, q[0], axis=0), np.nanpercentile(boot, q[1], axis=0)


def mean_ci(values, groups=None, n_boot=N_BOOT, ci=0.95, seed=0, resample_groups=False):
    """Mean over units of `values` (U, S) with a percentile bootstrap CI: dict of (S,) arrays mean, lo, hi,
    and by_group {group: (S,) mean of that group alone} (the spread over seeds)."""
    values = np.asarray(values, dtype=np.float64)
    groups = np.zeros(len(values), np.int64) if groups is None else np.asarray(groups)
    if n_boot:
        lo, hi = _interval(bootstrap_means(values, groups, n_boot, seed, resample_groups), ci)
    else:
        lo = hi = np.full(values.shape[1:], np.nan)
    with _quiet():
        by = {g: np.nanmean(values[groups == g], axis=0) for g in dict.fromkeys(groups.tolist())}
        return {"mean": np.nanmean(values, axis=0), "lo": lo, "hi": hi, "by_group": by}


def difference_ci(a, b, groups_a=None, groups_b=None, n_boot=N_BOOT, ci=0.95, seed=0):
    """mean(a) − mean(b) over two independent sets of units a (U, S), b (V, S) (e.g. training vs held-out
    items), each resampled within its groups: dict mean, lo, hi (S,) and by_group (groups of both)."""
    ba = bootstrap_means(a, groups_a, n_boot, seed)
    bb = bootstrap_means(b, groups_b, n_boot, seed + 1)
    lo, hi = _interval(ba - bb, ci)
    ma, mb = mean_ci(a, groups_a, 0)["by_group"], mean_ci(b, groups_b, 0)["by_group"]
    with _quiet():
        mean = np.nanmean(np.asarray(a, np.float64), axis=0) - np.nanmean(np.asarray(b, np.float64), axis=0)
    return {"mean": mean, "lo": lo, "hi": hi, "by_group": {g: ma[g] - mb[g] for g in ma if g in mb}}


def half_change(steps, values, groups=None, to="last", n_boot=N_BOOT, ci=0.95, seed=0, resample_groups=False):
    """Half-change step of the mean over units of `values` (U, S), with a bootstrap CI.

    Returns a JSON-able dict: step (NaN: not reached), ci [lo, hi] (percentiles of the resamples, a
    resample that does not reach it counting as +inf, so hi = inf means "not reached" in more than
    (1 − ci)/2 of them), reached (share of resamples that reach it), by_group {group: step} (the spread
    over seeds), q0, q_end (the mean curve's first value and its end value), change = q_end − q0 with
    change_ci (same resamples; a half-change step of a change whose CI holds 0 means nothing), to.
    """
    values = np.asarray(values, dtype=np.float64)
    groups_ = np.zeros(len(values), np.int64) if groups is None else np.asarray(groups)
    with _quiet():
        curve = np.nanmean(values, axis=0)                                    # (S,)
        by = {str(g): half_change_step(steps, np.nanmean(values[groups_ == g], axis=0), to)
              for g in dict.fromkeys(groups_.tolist())}
    point = half_change_step(steps, curve, to)
    out = {"step": point, "to": to, "q0": float(curve[0]), "q_end": _end(curve, to), "by_group": by}
    out["change"] = out["q_end"] - out["q0"]
    if n_boot:
        means = bootstrap_means(values, groups_, n_boot, seed, resample_groups)   # (B, S)
        boot = half_change_step(steps, means, to)
        b = np.where(np.isnan(boot), np.inf, boot)
        q = [(1 - ci) / 2 * 100, (1 + ci) / 2 * 100]
        out["ci"] = [float(np.percentile(b, q[0], method="lower")), float(np.percentile(b, q[1], method="higher"))]
        out["reached"] = float(np.mean(np.isfinite(boot)))
        far = np.argmax(np.abs(curve - curve[0])) if to == "extreme" and np.isfinite(curve).any() else -1
        with _quiet():
            out["change_ci"] = [float(v) for v in np.nanpercentile(means[:, far] - means[:, 0], q)]
    return out


def _end(curve, to):
    if to == "last" or not np.isfinite(curve).any():
        return float(curve[-1])
    return float(curve[int(np.nanargmax(np.abs(curve - curve[0])))])


def log10_spread(by_group):
    """Range (max / min, in log10) of the finite per-group steps of `half_change`'s by_group; NaN when
    fewer than two are finite."""
    v = [s for s in by_group.values() if s is not None and math.isfinite(s) and s > 0]
    return math.log10(max(v) / min(v)) if len(v) >= 2 else math.nan
