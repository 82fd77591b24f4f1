"""Slopes of ln τ on ln x over every run, with censoring (analyses/capacity_exponent, analyses/scaling): b of
τ ∝ x^b at each threshold by `censored.censored_fit` (a run that did not reach the threshold is censored at its
last step: kept in the likelihood, not dropped), and the difference of two groups' slopes as the interaction of one
least-squares fit."""
import math

import numpy as np
from scipy import stats

from scoreprobe.stats import curves as C
from scoreprobe.stats.censored import censored_fit


def censored_slope_curve(rows, curves, xs, key="tau_mem", full=False):
    """censored_fit of ln τ on ln x over the runs `rows` (xs (R,): each run's x) at each threshold of `key`.

    Returns a curve (one dict per threshold): threshold, b, b_ci [lo, hi], n_censored and n_points (the runs);
    with `full` the count is "n" and the row also says censored False (the censored runs are in the likelihood:
    the slope is an estimate, not a bound) and the fit's method. Thresholds some run crossed before its first
    checkpoint after step 0 are unreadable (`curves.mark_under_resolved`)."""
    x = np.log(np.asarray(xs, dtype=np.float64))
    out = []
    for j, t in enumerate(C.thresholds_of(key)):
        tau = np.array([curves[r["run"]][key][j] for r in rows], dtype=np.float64)
        cens = ~np.isfinite(tau)
        f = censored_fit(x, np.log(np.where(cens, [float(r["steps"]) for r in rows], tau)), cens)
        row = {"threshold": float(t), "b": f["slope"], "b_ci": [f["lower"], f["upper"]],
               ("n" if full else "n_points"): f["n"], "n_censored": f["n_censored"]}
        if full:
            row.update(censored=False, method=f["method"])
        out.append(row)
    return C.mark_under_resolved(out, rows, curves, key)


def slope_difference(rows_a, rows_b, xs, x_of, key="tau_mem", threshold=0.1):
    """b_b − b_a over the runs whose x (x_of(row)) is in `xs`: least squares of ln τ on ln x with a group term and a
    group × ln x term (one residual variance), t interval on the interaction (n − 4 df), at `threshold` of `key`.
    NaN with its reason where a run is censored there (no censored interaction fit is offered) or too few runs."""
    j = list(C.thresholds_of(key)).index(threshold)
    pts = [(math.log(x_of(r)), g, r["curves"][key][j]) for g, rs in ((0, rows_a), (1, rows_b))
           for r in rs if x_of(r) in xs]
    tau = np.array([p[2] if p[2] is not None else math.inf for p in pts], dtype=float)
    if not np.all(np.isfinite(tau)) or len(pts) < 6:
        return {"value": math.nan, "ci": [math.nan, math.nan], "why": f"a run censored at {threshold:g} or fewer than 6 runs"}
    x, g = np.array([p[0] for p in pts]), np.array([p[1] for p in pts], dtype=float)
    X = np.column_stack([np.ones_like(x), x, g, g * x])
    beta, *_ = np.linalg.lstsq(X, np.log(tau), rcond=None)
    dof = len(x) - 4
    resid = np.log(tau) - X @ beta
    se = math.sqrt(resid @ resid / dof * np.linalg.inv(X.T @ X)[3, 3])
    t = stats.t.ppf(0.975, dof)
    return {"value": float(beta[3]), "ci": [float(beta[3] - t * se), float(beta[3] + t * se)], "df": dof, "why": ""}


def difference_text(d, larger="the larger model"):
    """'+0.12 [-0.30, +0.54] (least squares with an interaction, t with 8 df): <which group's b is larger>'."""
    if not math.isfinite(d["value"]):
        return f"undefined ({d['why']})"
    lo, hi = d["ci"]
    side = f"b smaller for {larger}" if hi < 0 else f"b larger for {larger}" if lo > 0 else \
        "the interval includes 0: no difference resolved"
    return f"{d['value']:+.2f} [{lo:+.2f}, {hi:+.2f}] (least squares with an interaction, t with {d['df']} df): {side}"
