"""The G factor read where both arms reach the threshold (issue 73 item 7): where G = 3 does not learn the rule to
the paper's threshold at the grid's N (its runs peak and fall: `scoreprobe.stats.budget_trend`), the factor can
still be read against a larger N at which G = 3's runs do cross — τ_rule(G = 3, N') / τ_rule(G = 2, N) — under the
assumption that G = 2's τ_rule does not move between N and N'. That assumption is tested where G = 2 was run at two
N (τ_rule(G = 2, N) / τ_rule(G = 2, N_small) at the thresholds both cross, 0.3–0.85 on the shipped grid).

Intervals on ln τ: G = 3 at N' over its runs (t, S − 1 df: training seeds of one data seed), G = 2 over its crossed
data seed × training seed block (`crossed.crossed_mean`), combined by MOVER (`crossed_arms.mover`); the G = 2 shift
by `crossed_arms.crossed_difference` (both blocks crossed, both variance components).
"""
import math

import numpy as np

from scoreprobe.stats.crossed import crossed_mean
from scoreprobe.stats.crossed_arms import crossed_difference, mover
from scoreprobe.stats.intervals import t_interval


def cross_factor(ln_b, ln_a, thresholds):
    """ln_b (S, T): ln τ of G = 3's runs at the larger N (inf: not reached); ln_a (D, I, T): G = 2's crossed block.
    Returns one dict per threshold: threshold, value, ci [lo, hi] (the factor), or value NaN with `why`."""
    out = []
    for j, t in enumerate(thresholds):
        vb, va = np.asarray(ln_b, float)[:, j], np.asarray(ln_a, float)[..., j]
        if not (np.isfinite(vb).all() and np.isfinite(va).all()):
            out.append({"threshold": float(t), "value": math.nan, "ci": [math.nan, math.nan],
                        "why": "a run of either arm does not reach it"})
            continue
        mb, lb, hb = (float(x) for x in t_interval(vb))
        ra = crossed_mean(va)
        d, lo, hi = mover(mb, (lb, hb), float(ra["mean"]), (float(ra["lo"]), float(ra["hi"])))
        out.append({"threshold": float(t), "value": math.exp(d), "ci": [math.exp(lo), math.exp(hi)],
                    "n_b": int(vb.size), "why": ""})
    return out


def g2_shift(ln_small, ln_big, thresholds):
    """τ_rule(G = 2, larger N) / τ_rule(G = 2, smaller N) per threshold from two crossed blocks (D, I, T) each:
    dicts threshold, value, ci, df, covers_1 (the interval holds 1: no shift resolved); NaN where a run misses it."""
    out = []
    for j, t in enumerate(thresholds):
        a, b = np.asarray(ln_small, float)[..., j], np.asarray(ln_big, float)[..., j]
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            out.append({"threshold": float(t), "value": math.nan, "ci": [math.nan, math.nan], "df": math.nan,
                        "covers_1": None})
            continue
        d = crossed_difference(a, b)
        lo, hi = math.exp(float(d["lo"])), math.exp(float(d["hi"]))
        out.append({"threshold": float(t), "value": math.exp(float(d["diff"])), "ci": [lo, hi],
                    "df": float(d["df"]), "covers_1": bool(lo <= 1 <= hi)})
    return out
