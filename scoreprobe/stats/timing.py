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

Means over units skip NaN entries (`np.nanmean`), and that is the definition, not a fill: a unit's value
is NaN only where the quantity does not exist for it (the capture distance ratio of an item none of whose
restarts was captured; a DSM loss of a non-finite item, which dsm_by_sigma counts in n_nonfinite_*). A
denoiser's NaN output never arrives as a NaN share: retention and clocks count such endpoints as their own
state. A step where no unit has a value stays NaN, and a curve with a NaN knot has no half-change step.
"""
import contextlib
import math
import warnings

import numpy as np

from scoreprobe.errors import ConfigError
from scoreprobe.stats.intervals import t_interval
from scoreprobe.stats.taus import crossing

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


def bootstrap_means(values, groups=None, n_boot=N_BOOT, seed=0, resample_groups=False, clusters=None):
    """(n_boot, S) means over units of resampled `values` (U, S): units drawn with replacement within
    each group (stratified), or groups first and then units within them (`resample_groups`), or, with
    `clusters` (U,) labels, whole clusters with replacement (every unit of a drawn cluster; one level,
    `groups` ignored: units that are not independent, e.g. planes sharing a training/held-out pair,
    move together). NaN entries are skipped in each mean."""
    values = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    if clusters is not None:
        members = _members(clusters)
        picks = [np.concatenate([members[i] for i in rng.integers(len(members), size=len(members))])
                 for _ in range(int(n_boot))]
        with _quiet():
            return np.stack([np.nanmean(values[p], axis=0) for p in picks])  # (n_boot, S)
    groups = np.zeros(len(values), np.int64) if groups is None else np.asarray(groups)
    members = _members(groups)
    picks = []
    for _ in range(int(n_boot)):
        chosen = [members[i] for i in rng.integers(len(members), size=len(members))] if resample_groups else members
        picks.append(np.concatenate([m[rng.integers(len(m), size=len(m))] for m in chosen]))
    with _quiet():
        return np.stack([np.nanmean(values[p], axis=0) for p in picks])      # (n_boot, S)


def _members(labels):
    """[(k,) unit indices] of each distinct label, in order of first appearance (labels may be tuples)."""
    keys = [tuple(v) if isinstance(v, (list, tuple, np.ndarray)) else v for v in labels]
    out = {}
    for i, k in enumerate(keys):
        out.setdefault(k, []).append(i)
    return [np.asarray(v, np.int64) for v in out.values()]


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


def mean_ci(values, groups=None, n_boot=N_BOOT, ci=0.95, seed=0, resample_groups=False, clusters=None):
    """Mean over units of `values` (U, S) with a percentile bootstrap CI: dict of (S,) arrays mean, lo, hi,
    and by_group {group: (S,) mean of that group alone} (the spread over seeds); `clusters`: resample
    whole clusters (bootstrap_means)."""
    values = np.asarray(values, dtype=np.float64)
    groups = np.zeros(len(values), np.int64) if groups is None else np.asarray(groups)
    if n_boot:
        lo, hi = _interval(bootstrap_means(values, groups, n_boot, seed, resample_groups, clusters), ci)
    else:
        lo = hi = np.full(values.shape[1:], np.nan)
    with _quiet():
        by = {g: np.nanmean(values[groups == g], axis=0) for g in dict.fromkeys(groups.tolist())}
        return {"mean": np.nanmean(values, axis=0), "lo": lo, "hi": hi, "by_group": by}


def difference_ci(a, b, groups_a=None, groups_b=None, n_boot=N_BOOT, ci=0.95, seed=0, clusters_a=None, clusters_b=None):
    """mean(a) − mean(b) over two independent sets of units a (U, S), b (V, S) (e.g. training vs held-out
    items), each resampled within its groups (or by its clusters): dict mean, lo, hi (S,) and by_group
    (groups of both)."""
    ba = bootstrap_means(a, groups_a, n_boot, seed, clusters=clusters_a)
    bb = bootstrap_means(b, groups_b, n_boot, seed + 1, clusters=clusters_b)
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


# ---------------------------------------------------------------------------------------------
# Half-change steps from a fitted sigmoid in log step (docs/definitions.md, "Half-change steps")
# ---------------------------------------------------------------------------------------------

SIGMOID_WIDTHS = np.geomspace(0.05, 3.0, 30)    # logistic scale w in ln(step) units, searched on this grid
SIGMOID_MARGIN = 1.0                             # midpoints searched up to e^1 beyond the first / last step
SIGMOID_N_MID = 401


def fit_log_sigmoid(steps, y):
    """Least-squares logistic in ln(step), q(s) = a + c / (1 + exp(−(ln s − m) / w)), for each curve of
    y (B, S) over `steps` (S,) > 0: returns dict of (B,) arrays m (ln step of the midpoint), w, a, c
    (the change between the two plateaus) and rmse; NaN for a curve with a non-finite value.

    (m, w) on a grid (SIGMOID_N_MID midpoints from ln s_1 − SIGMOID_MARGIN to ln s_S + SIGMOID_MARGIN ×
    SIGMOID_WIDTHS), (a, c) in closed form for each: an exact minimum over the grid, no local optimizer.
    """
    x = np.log(np.asarray(steps, dtype=np.float64))                               # (S,)
    y = np.atleast_2d(np.asarray(y, dtype=np.float64))                            # (B, S)
    mids = np.linspace(x[0] - SIGMOID_MARGIN, x[-1] + SIGMOID_MARGIN, SIGMOID_N_MID)
    mm, ww = (g.ravel() for g in np.meshgrid(mids, SIGMOID_WIDTHS, indexing="ij"))
    with np.errstate(over="ignore"):
        basis = 1.0 / (1.0 + np.exp(-(x[None, :] - mm[:, None]) / ww[:, None]))   # (K, S)
    gc = basis - basis.mean(axis=1, keepdims=True)
    norm = (gc ** 2).sum(axis=1)                                                  # (K,)
    usable = norm > 1e-10
    out = {k: np.full(len(y), np.nan) for k in ("m", "w", "a", "c", "rmse")}
    ok = np.isfinite(y).all(axis=1)
    for start in range(0, len(y), 256):                                           # (256, K) at a time
        rows = np.flatnonzero(ok[start:start + 256]) + start
        if rows.size == 0:
            continue
        yc = y[rows] - y[rows].mean(axis=1, keepdims=True)
        proj = yc @ gc.T                                                           # (R, K)
        score = np.where(usable, proj ** 2 / np.where(usable, norm, 1.0), -np.inf)
        k = np.argmax(score, axis=1)
        c = proj[np.arange(len(rows)), k] / norm[k]
        out["m"][rows], out["w"][rows], out["c"][rows] = mm[k], ww[k], c
        out["a"][rows] = y[rows].mean(axis=1) - c * basis[k].mean(axis=1)
        rss = (yc ** 2).sum(axis=1) - score[np.arange(len(rows)), k]
        out["rmse"][rows] = np.sqrt(np.maximum(rss, 0.0) / x.size)
    return out


def sigmoid_half_change(steps, values, groups=None, until="last", n_boot=N_BOOT, ci=0.95, seed=0, clusters=None):
    """Half-change step of the mean over units of `values` (U, S) as the midpoint of a logistic in
    ln(step) fitted to the mean curve (`fit_log_sigmoid`), with a bootstrap CI (units resampled within
    `groups`, or whole `clusters`, as bootstrap_means).

    The midpoint is half-way between the fitted plateaus, so it depends neither on the first checkpoint
    nor on the most extreme (noisiest) value. `until="extreme"`: fit only the checkpoints up to the
    point-estimate curve's farthest one from its first (a rise that falls back). A midpoint outside
    [first, last step] of the fitted range is not a number but a bound: `censored` "before" (< first
    step) or "after" (> last step), step NaN. Returns a JSON-able dict: step, censored, bound, ci [lo,
    hi] (a resample's midpoint before the range counts as 0, after it as +inf), resolved (share of
    resamples with the midpoint inside), change (c, plateau to plateau) with change_ci, width (w, ln
    step), rmse, q0 / q_end (fitted curve at the first / last fitted step), share_before_first /
    share_after_last (`plateau_shares`: how much of the fitted change is extrapolated), fit_steps
    [first, last], until, method.
    """
    if until not in ("last", "extreme"):
        raise ConfigError(f"until must be 'last' or 'extreme', got {until!r}")
    steps = np.asarray(steps, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2 or values.shape[1] != steps.size or np.any(steps <= 0) or np.any(np.diff(steps) <= 0):
        raise ConfigError(f"sigmoid_half_change needs (U, S) values over S increasing positive steps, got "
                          f"{values.shape} and {steps.size} steps")
    with _quiet():
        curve = np.nanmean(values, axis=0)                                       # (S,)
    end = steps.size if until == "last" or not np.isfinite(curve).all() else \
        int(np.nanargmax(np.abs(curve - curve[0]))) + 1
    out = {"until": until, "method": "logistic in ln(step), least squares; midpoint between the plateaus",
           "fit_steps": [float(steps[0]), float(steps[end - 1])]}
    if end < 4:
        return {**out, "step": math.nan, "censored": None, "bound": None, "ci": [math.nan, math.nan],
                "resolved": math.nan, "change": math.nan, "change_ci": [math.nan, math.nan],
                "note": f"{end} checkpoints up to the extreme: too few to fit 4 parameters"}
    st = steps[:end]
    fit = fit_log_sigmoid(st, curve[:end])
    m = float(fit["m"][0])
    lo_x, hi_x = math.log(st[0]), math.log(st[-1])
    censored = None if not math.isfinite(m) else ("before" if m < lo_x else "after" if m > hi_x else None)
    out.update(step=math.exp(m) if censored is None and math.isfinite(m) else math.nan, censored=censored,
               bound=None if censored is None else float(st[0] if censored == "before" else st[-1]),
               change=float(fit["c"][0]), width=float(fit["w"][0]), rmse=float(fit["rmse"][0]),
               **plateau_shares(fit, st),
               q0=_logistic(fit, 0, math.log(st[0])), q_end=_logistic(fit, 0, math.log(st[-1])))
    if n_boot:
        means = bootstrap_means(values[:, :end], groups, n_boot, seed, clusters=clusters)   # (B, end)
        bf = fit_log_sigmoid(st, means)
        mb = np.where(bf["m"] < lo_x, -np.inf, np.where(bf["m"] > hi_x, np.inf, bf["m"]))
        mb = np.where(np.isnan(bf["m"]), np.inf, mb)
        q = [(1 - ci) / 2 * 100, (1 + ci) / 2 * 100]
        lo, hi = (float(np.percentile(mb, q[0], method="lower")), float(np.percentile(mb, q[1], method="higher")))
        out["ci"] = [math.exp(lo) if math.isfinite(lo) else (0.0 if lo < 0 else math.inf),
                     math.exp(hi) if math.isfinite(hi) else (0.0 if hi < 0 else math.inf)]
        out["resolved"] = float(np.mean(np.isfinite(mb)))
        with _quiet():
            out["change_ci"] = [float(v) for v in np.nanpercentile(bf["c"], q)]
    return out


def fitted_midpoint(steps, curve, until="extreme"):
    """{step (None: censored), censored, fit_steps, share_before_first, share_after_last}: the
    fitted-sigmoid half-change of one mean curve (steps (S,), curve (S,)): sigmoid_half_change without a CI,
    fitted up to the curve's extreme (`until="extreme"`) or its last step; a midpoint outside the fitted steps is
    censored "before" / "after", fewer than 4 finite points "too few checkpoints"."""
    curve = np.asarray(curve, dtype=float)
    steps = np.asarray(steps, dtype=float)
    end = steps.size if until == "last" else int(np.nanargmax(np.abs(curve - curve[0]))) + 1   # NaN knot: no fit
    fit_steps = [float(steps[0]), float(steps[end - 1])]
    if end < 4 or not np.isfinite(curve[:end]).all():
        return {"step": None, "censored": "too few checkpoints", "fit_steps": fit_steps}
    fit = fit_log_sigmoid(steps[:end], curve[:end][None])
    m = float(fit["m"][0])
    lo, hi = math.log(steps[0]), math.log(steps[end - 1])
    censored = "before" if m < lo else "after" if m > hi else None
    return {"step": math.exp(m) if censored is None else None, "censored": censored, "fit_steps": fit_steps,
            **plateau_shares(fit, steps[:end])}


def plateau_shares(fit, steps):
    """{share_before_first, share_after_last}: the fitted change's share that lies before the first /
    after the last fitted step (of fit_log_sigmoid's first curve). Above ~0.1 the plateau on that side is
    not observed but extrapolated by the logistic shape, and the midpoint leans on that shape."""
    m, w = float(fit["m"][0]), float(fit["w"][0])
    if not (math.isfinite(m) and math.isfinite(w)):
        return {"share_before_first": math.nan, "share_after_last": math.nan}
    frac = lambda x: 1.0 / (1.0 + math.exp(-(x - m) / w))                     # noqa: E731
    return {"share_before_first": frac(math.log(steps[0])), "share_after_last": 1.0 - frac(math.log(steps[-1]))}


def _logistic(fit, i, x):
    return float(fit["a"][i] + fit["c"][i] / (1.0 + math.exp(-(x - fit["m"][i]) / fit["w"][i])))


# ---------------------------------------------------------------------------------------------
# Across trained models: a t interval over seeds
# ---------------------------------------------------------------------------------------------

def seed_t_interval(values, ci=0.95):
    """Mean over trained models (seeds) of `values` (S,) with a Student t interval (S − 1 degrees of
    freedom) and the two-sided p-value of mean = 0: dict n, mean, sd, lo, hi, p. For paired per-seed
    differences (variant − baseline at the same seed) this is the paired t-test. With one seed (or a
    non-finite value) the interval and p are NaN: one trained model says nothing about the next."""
    import scipy.stats
    v = np.asarray(values, dtype=np.float64)
    n = int(v.size)
    mean = float(np.mean(v)) if n else math.nan
    if n < 2 or not np.isfinite(v).all():
        return {"n": n, "mean": mean, "sd": math.nan, "lo": math.nan, "hi": math.nan, "p": math.nan}
    _, lo, hi = t_interval(v, ci)
    sd = float(np.std(v, ddof=1))
    se = sd / math.sqrt(n)
    p = 1.0 if se == 0 and mean == 0 else (0.0 if se == 0 else float(2 * scipy.stats.t.sf(abs(mean) / se, n - 1)))
    return {"n": n, "mean": mean, "sd": sd, "lo": float(lo), "hi": float(hi), "p": p}
