"""Bounds on a censored ratio of τ from the budget (analyses/exactk_ladder): where one side reaches a threshold in
every seed and the other in none, the ratio is bounded by the unreached runs' last step; `bounded_ratio_curve`
is `scoreprobe.stats.curves.ratio_curve` with that bound at each censored threshold."""
import math

import numpy as np

from scoreprobe.stats import curves as C


def ratio_bounds(rows_a, rows_b, curves, key, thresholds):
    """Where the ratio b / a is censored but one side reaches a threshold in every seed and the other in
    none: a bound from the budget. [{"threshold", "side" ("<": b / a below value; ">": above; None),
    "value"}]: every seed of b reached, none of a -> b / a < geometric mean τ_b / geometric mean budget_a
    (each unreached τ_a exceeds its run's last step); the mirror case gives ">"."""
    A = np.array([curves[r["run"]][key] for r in rows_a], dtype=np.float64)      # (S_a, T)
    B = np.array([curves[r["run"]][key] for r in rows_b], dtype=np.float64)
    last_a = np.array([float(r["steps"]) for r in rows_a])
    last_b = np.array([float(r["steps"]) for r in rows_b])
    gm = lambda v: float(np.exp(np.mean(np.log(v))))   # noqa: E731
    out = []
    for j, t in enumerate(thresholds):
        a_in, b_in = np.isfinite(A[:, j]), np.isfinite(B[:, j])
        if b_in.all() and not a_in.any():
            out.append({"threshold": float(t), "side": "<", "value": gm(B[:, j]) / gm(last_a)})
        elif a_in.all() and not b_in.any():
            out.append({"threshold": float(t), "side": ">", "value": gm(last_b) / gm(A[:, j])})
        else:
            out.append({"threshold": float(t), "side": None, "value": math.nan})
    return out


def bounded_ratio_curve(rows_a, rows_b, curves, key):
    """ratio_curve b / a with, at each censored threshold, its bound from the budget (`ratio_bounds`):
    row["bound"] = {"side", "value"}."""
    curve = C.ratio_curve(rows_a, rows_b, curves, key)
    for row, b in zip(curve, ratio_bounds(rows_a, rows_b, curves, key, C.thresholds_of(key))):
        if row.get("censored") and b["side"]:
            row["bound"] = {"side": b["side"], "value": b["value"]}
    return curve
