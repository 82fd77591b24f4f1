"""Slopes of ln τ on ln x over every run, with censoring (scaling exponents over N, widths, rules): b of
τ ∝ x^b at each threshold by `censored.censored_fit` (a run that did not reach the threshold is censored at its
last step: kept in the likelihood, not dropped), and the difference of two groups' slopes as the interaction of one
fit (censored the same way)."""
import math

import numpy as np
from scipy import stats

from scoreprobe.stats import curves as C
from scoreprobe.stats.censored import censored_coef, censored_fit
from scoreprobe.stats.misfit import lack_of_fit, means_difference, means_slope


def censored_slope_curve(rows, curves, xs, key="tau_mem", full=False):
    """censored_fit of ln τ on ln x over the runs `rows` (xs (R,): each run's x) at each threshold of `key`.

    Returns a curve (one dict per threshold): threshold, b, b_ci [lo, hi], n_censored and n_points (the runs);
    with `full` the count is "n" and the row also says censored False (the censored runs are in the likelihood:
    the slope is an estimate, not a bound) and the fit's method. b and b_ci are read with the per-x means as the
    units (`scoreprobe.stats.misfit.means_slope`, t on K − 2 df: an interval that holds its coverage where each x
    deviates from the line; NaN with the reason in `method` where an x has every run censored or K < 3);
    b_runs, b_ci_runs: every run as a unit (`censored_fit`), shown beside it, never read for a verdict;
    lack_of_fit: the pure-error test (`misfit.lack_of_fit`). Thresholds some run crossed before its first
    checkpoint after step 0 are unreadable (`curves.mark_under_resolved`)."""
    x = np.log(np.asarray(xs, dtype=np.float64))
    out = []
    for j, t in enumerate(C.thresholds_of(key)):
        tau = np.array([curves[r["run"]][key][j] for r in rows], dtype=np.float64)
        cens = ~np.isfinite(tau)
        y = np.log(np.where(cens, [float(r["steps"]) for r in rows], tau))
        f = censored_fit(x, y, cens)
        m = means_slope(x, y, cens) if np.isfinite(f["slope"]) else {"slope": math.nan, "lower": math.nan,
                                                                     "upper": math.nan, "df": 0, "why": f["method"]}
        row = {"threshold": float(t), "b": m["slope"], "b_ci": [m["lower"], m["upper"]],
               ("n" if full else "n_points"): f["n"], "n_censored": f["n_censored"], "b_df": m["df"],
               "b_runs": f["slope"], "b_ci_runs": [f["lower"], f["upper"]], "lack_of_fit": lack_of_fit(x, y, cens)}
        if full:
            row.update(censored=False, method=m["why"] or f"per-x means as units, t on {m['df']} df (x's means: "
                       + ("least squares" if not f["n_censored"] else "censored normal, one s") + ")")
        out.append(row)
    return C.mark_under_resolved(out, rows, curves, key)


def slope_difference(rows_a, rows_b, xs, x_of, key="tau_mem", threshold=0.1):
    """b_b − b_a over the runs whose x (x_of(row)) is in `xs`, at `threshold` of `key`: ln τ on ln x with a group
    term and a group × ln x term (one residual variance), the interaction's `censored.censored_coef` interval (a
    run that did not reach the threshold is censored at its last step, kept in the likelihood; with none censored
    least squares and its t interval, n − 4 df). NaN with its reason where a group has fewer than 3 crossed runs or
    fewer than 2 distinct x among them (the crossed runs do not identify its slope).
    "means": the same difference with the per-(group, x) means as units (`misfit.means_difference`: an interval
    that keeps its coverage where each x deviates from the line), the one to read."""
    x, g, y, cens = _pair_points(rows_a, rows_b, xs, x_of, key, threshold)
    means = means_difference(*[(x[g == k], y[g == k], cens[g == k]) for k in (0, 1)])
    for grp in (0, 1):
        seen = x[(g == grp) & ~cens]
        if seen.size < 3 or np.unique(seen).size < 2:
            return {"value": math.nan, "ci": [math.nan, math.nan], "n_censored": int(cens.sum()), "means": means,
                    "why": "a group with fewer than 3 crossed runs or fewer than 2 distinct N among them"}
    f = censored_coef(np.column_stack([np.ones_like(x), x, g, g * x]), y, cens, 3)
    return {"value": f["coef"], "ci": [f["lower"], f["upper"]], "df": f["df"], "n": f["n"],
            "n_censored": f["n_censored"], "means": means, "why": ""}


def means_slope_difference(rows_a, rows_b, xs, x_of, key="tau_mem", threshold=0.1):
    """slope_difference's "means" alone (`misfit.means_difference` over the two groups' runs), without the runs'
    censored fit."""
    x, g, y, cens = _pair_points(rows_a, rows_b, xs, x_of, key, threshold)
    return means_difference(*[(x[g == k], y[g == k], cens[g == k]) for k in (0, 1)])


def _pair_points(rows_a, rows_b, xs, x_of, key, threshold):
    """(ln x (n,), group 0/1 (n,), ln τ (n,), censored (n,)) of the two groups' runs whose x is in `xs`, at
    `threshold` of `key`; a run that did not reach it at ln of its last step, censored."""
    j = list(C.thresholds_of(key)).index(threshold)
    pts = [(math.log(x_of(r)), g, r["curves"][key][j], r) for g, rs in ((0, rows_a), (1, rows_b))
           for r in rs if x_of(r) in xs]
    tau = np.array([p[2] if p[2] is not None else math.inf for p in pts], dtype=float)
    cens = ~np.isfinite(tau)
    x, g = np.array([p[0] for p in pts]), np.array([p[1] for p in pts], dtype=float)
    y = np.log([float(p[3]["steps"]) if c else t for p, c, t in zip(pts, cens, tau)])   # censored at its budget
    return x, g, y, cens


def means_difference_text(m, larger="the larger model"):
    """'+0.12 [-0.30, +0.54] (per-N means as units, t with 4 df; p 0.57): <which is larger>'; 'undefined (why)'."""
    if not math.isfinite(m["value"]):
        return f"undefined ({m['why']})"
    side = f"b smaller for {larger}" if m["upper"] < 0 else f"b larger for {larger}" if m["lower"] > 0 else \
        "the interval includes 0: no difference resolved"
    return (f"{m['value']:+.2f} [{m['lower']:+.2f}, {m['upper']:+.2f}] (per-N means as units, t with {m['df']} df; "
            f"p {m['p']:.2g}): {side}")


def difference_text(d, larger="the larger model"):
    """'+0.12 [-0.30, +0.54] (least squares with an interaction, t with 8 df): <which group's b is larger>'; with
    censored runs '... (censored normal regression with an interaction, 2 of 23 runs censored, profile interval
    t-calibrated with 19 df): ...'."""
    if not math.isfinite(d["value"]):
        return f"undefined ({d['why']})"
    lo, hi = d["ci"]
    k = d.get("n_censored", 0)
    how = (f"censored normal regression with an interaction, {k} of {d['n']} runs censored, profile interval "
           f"t-calibrated with {d['df']} df" if k else f"least squares with an interaction, t with {d['df']} df")
    side = f"b smaller for {larger}" if hi < 0 else f"b larger for {larger}" if lo > 0 else \
        "the interval includes 0: no difference resolved"
    return f"{d['value']:+.2f} [{lo:+.2f}, {hi:+.2f}] ({how}): {side}"
