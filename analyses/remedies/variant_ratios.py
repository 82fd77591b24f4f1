"""Variants against their references over training seeds (analyses/remedies' G = 3 preset): per comparison the
ratio of τ at every threshold (Welch t on ln τ, `stats.seeds.pool_ratio`) with Welch's p and Holm over the
comparisons at that threshold; a side with a seed that does not reach a threshold gives no ratio, only a bound
with that seed at its budget. Beside the τ, two endpoints (peak rule accuracy, the last memorized share) as
differences of seed means, Holm over the same comparisons; and a run's τ counted from a switch step
(`since_switch`). Multiplicity in every family: analyses.remedies.holm_families."""
import math

import numpy as np

from scoreprobe.stats import curves as C
from scoreprobe.stats.intervals import welch_p
from analyses.remedies.piece_clocks import ENDPOINTS, endpoint
from scoreprobe.stats.pvalues import adjust_pvalues
from scoreprobe.stats.seeds import pool_ratio, pool_seeds, ratio_curve

KEYS = ("tau_rule", "tau_mem")
ALPHA = 0.05


def since_switch(rows, curves, switch):
    """The curriculum's rows with τ counted from the end of its first phase (τ − `switch`, budget steps −
    `switch`): how soon the rule comes (and the copies) once the model trains on its own images, against a
    baseline that starts from nothing. Rows are renamed `<run>@switch`, their curves added to a copy of `curves`.
    As a crossing before a run's first checkpoint after step 0 is, a crossing before its first checkpoint after
    the switch is unreadable (under-resolved: C.mark_under_resolved), never a ratio."""
    out_rows, out_curves = [], dict(curves)
    for r in rows:
        steps = np.asarray(r["curve"]["step"], np.float64)
        first = float(steps[steps > switch].min() - switch)
        c = dict(curves[r["run"]], resolved_from=[first])
        for key in KEYS:          # a τ inside the first phase: below `first`, kept positive for the log
            c[key] = np.maximum(np.asarray(c[key], np.float64) - switch, first / 2).tolist()
        out_curves[r["run"] + "@switch"] = c
        out_rows.append({**r, "run": r["run"] + "@switch", "steps": r["steps"] - switch})
    return out_rows, out_curves


def censored_bound(a, b, last_a, last_b):
    """The ratio b / a of geometric means with every unreached seed at its run's last step: a lower bound
    ('>') when only b has unreached seeds, an upper bound ('<') when only a has; None when both or none do.
    `value` sets the comparison arm (the side every seed of which reaches) at its point value; `value_ci_end`
    at the end of its 95% t interval that makes the bound hold with that arm's uncertainty ("> b / a's upper
    end", "< b's upper end / a"): the bound to read (NaN with fewer than 2 seeds on that arm)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    ca, cb = ~np.isfinite(a), ~np.isfinite(b)
    if ca.any() == cb.any():
        return None
    fa, fb = np.where(ca, last_a, a), np.where(cb, last_b, b)
    point = float(np.exp(np.log(fb).mean() - np.log(fa).mean()))
    arm = a if cb.any() else b                       # the comparison arm: every seed reached
    end = pool_seeds(arm)["ci"][1] if arm.size >= 2 else math.nan
    gm = float(np.exp(np.log(arm).mean()))
    return {"kind": ">" if cb.any() else "<", "value": point, "value_ci_end": point * (gm / end if cb.any() else end / gm),
            "budget": float(max(np.max(last_b[cb]) if cb.any() else 0, np.max(last_a[ca]) if ca.any() else 0)),
            "n_censored": int(ca.sum() + cb.sum())}


def comparison_curve(rows_a, rows_b, curves, key):
    """b / a at each threshold of `key`: pool_ratio (value, ci, censored), p (Welch), bound (censored_bound)."""
    A, B = C._points(rows_a, curves, key), C._points(rows_b, curves, key)            # (S_a, T), (S_b, T)
    last_a, last_b = (np.array([float(r["steps"]) for r in rs]) for rs in (rows_a, rows_b))
    out = ratio_curve(A, B, C.thresholds_of(key))
    for j, r in enumerate(out):
        r["p"] = math.nan if r["censored"] else welch_p(A[:, j], B[:, j])
        r["bound"] = censored_bound(A[:, j], B[:, j], last_a, last_b) if r["censored"] else None
    out = C.mark_under_resolved(out, rows_a + rows_b, curves, key)
    for r in out:   # a threshold crossed before the first checkpoint after 0 is neither tested nor bounded
        if r.get("under_resolved"):
            r.update(p=math.nan, bound=None)
    return out


def family(rows_by, curves, comparisons):
    """{key: {(variant, reference): curve}} over `comparisons` ((variant, reference) pairs of `rows_by`'s keys) with
    both sides run, Holm-adjusted p (`p_holm`, `significant`) over the comparisons at each threshold of each key."""
    out = {}
    for key in KEYS:
        curves_k = {(v, ref): comparison_curve(rows_by[ref], rows_by[v], curves, key) for v, ref in comparisons
                    if rows_by.get(v) and rows_by.get(ref)}
        for j in range(len(C.thresholds_of(key))):
            holm([c[j] for c in curves_k.values()])
        out[key] = curves_k
    return out


def holm(cells):
    """Set `p_holm` and `significant` on each dict of `cells` from their `p`, Holm-adjusted together."""
    p = np.array([c["p"] for c in cells], dtype=np.float64)
    for c, a in zip(cells, adjust_pvalues(p[None], "holm")[0] if p.size else p):
        c.update(p_holm=float(a), significant=bool(np.isfinite(a) and a < ALPHA))


def endpoint_family(rows_by, comparisons, skip=("curriculum_since_switch",)):
    """{name: {(variant, reference): row}}: b − a of the seed means of each endpoint (`piece_clocks.endpoint`; Welch
    t interval), Welch's p Holm-adjusted over `comparisons` (`p_holm`, `significant`). The variants in `skip` are
    left out (the curriculum from its switch: its endpoints are the curriculum's)."""
    out = {}
    for name in ENDPOINTS:
        comps = {}
        for v, ref in comparisons:
            if v in skip or not (rows_by.get(v) and rows_by.get(ref)):
                continue
            a, b = ([endpoint(r, name) for r in rows_by[k]] for k in (ref, v))
            comps[(v, ref)] = {**pool_ratio(a, b, log=False), "p": welch_p(a, b, log=False), "a": a, "b": b}
        holm(list(comps.values()))
        out[name] = comps
    return out


def verdict(curve, family="planned"):
    """Where the ratio's CI lies against 1 over the readable thresholds (curves.robust), and the thresholds at
    which it differs from 1 after Holm in `family` (holm_families; "readable" before holm_families.assign ran)."""
    words = {"below": "earlier than the reference (CI below 1)", "includes": "CI includes 1",
             "above": "later than the reference (CI above 1)"}
    sig = [r["threshold"] for r in curve if (r["holm"][family]["significant"] if "holm" in r else r.get("significant"))]
    size = next((r["holm"][family]["size"] for r in curve if "holm" in r), None)
    where = f"Holm-significant ({'of ' + str(size) + ' at each threshold' if size else 'readable family'}) at"
    return f"{C.robust(curve, 1.0, words)}; {where} {C.span(sig, [r['threshold'] for r in curve])}"
