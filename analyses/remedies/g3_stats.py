"""Statistics of the remedies where the baseline learns (g3_grid): per run the scaling study's numbers (the rule
clock of a curriculum run and of its control read beyond the curriculum's pieces), per comparison the ratio of
τ over the training seeds at every threshold (Welch t on ln τ, `stats.seeds.pool_ratio`) with Welch's p and
Holm over the family of comparisons at that threshold; a side with a seed that does not reach a threshold
gives no ratio, only a bound with that seed at its budget. Beside the τ, two endpoints (peak rule accuracy, the
last memorized share) as differences of seed means, Holm over the same comparisons."""
import math

import numpy as np

from scoreprobe.stats import curves as C
from scoreprobe.studies.export import clocks_dataset
from scoreprobe.stats.runs import run_stats
from scoreprobe.data.curriculum import beyond_state
from scoreprobe.probes.wilson import wilson_lower
from scoreprobe.stats.crossings import logit_fraction, reliable_crossing
from scoreprobe.stats.intervals import welch_p
from scoreprobe.stats.pvalues import adjust_pvalues
from scoreprobe.stats.seeds import pool_ratio, pool_seeds, ratio_curve

# (variant, reference): the family of comparisons, Holm-adjusted together at each threshold
COMPARISONS = (("global_token", "baseline"), ("multiplicative", "baseline"), ("curriculum", "baseline"),
               ("curriculum_mixed", "baseline"), ("curriculum", "curriculum_mixed"),
               ("curriculum_since_switch", "baseline"))
KEYS = ("tau_rule", "tau_mem")
ALPHA = 0.05


def beyond_info(info):
    """An export (read_export) with its clocks read beyond the curriculum's pieces when it has `piece_valid`
    (a curriculum run or its control), else unchanged; `piece_share` (S,) added (None without pieces)."""
    piece = info.get("piece_valid")
    if piece is None:
        return {**info, "piece_share": None}
    ds = info["ds"]
    state, _ = beyond_state(ds["state"].values, piece)
    beyond = clocks_dataset(ds["step"].values, state, ds.attrs["novel_oracle"])
    return {**info, "ds": beyond, "piece_share": piece.mean(axis=1).tolist()}


def among_breaking(state, piece):
    """Rule accuracy among the samples that break a piece: (S,) share of them valid (copies count as valid,
    as everywhere), (S,) how many there are. state, piece (S, n)."""
    _, valid = beyond_state(state, piece)
    count = (~piece).sum(axis=1)
    return (valid & ~piece).sum(axis=1) / np.maximum(count, 1), count


def breaking_taus(steps, acc, count, thresholds):
    """τ (steps; inf: not reached) of `acc` (S,) at each threshold, read as every τ is (reliably exceeds:
    definitions version 6) but with each checkpoint's own sample count in its Wilson bound (`count` (S,);
    a checkpoint without a piece-breaking sample is never confident)."""
    u, n = np.log1p(np.asarray(steps, np.float64)), np.maximum(np.asarray(count, np.float64), 1)
    y = np.asarray(acc, np.float64)[None]                                        # (1, S)
    z = logit_fraction(y, n)
    out = [reliable_crossing(u, z, logit_fraction(t, n.max()), wilson_lower(y, n) >= t)[0] for t in thresholds]
    return np.where(np.isnan(out), np.inf, np.expm1(out))


def run_row(run, info):
    """run_stats of one run (beyond the pieces where it has them). For a curriculum run or its control the rule
    clock compared (`curves["tau_rule"]`) is rule accuracy among the samples that break a piece
    (among_breaking, breaking_taus): the control keeps drawing piece images (a share of its data), so counting
    its piece samples as failures would cap its rule accuracy at 1 − its piece share. Kept beside:
    `curves["tau_rule_beyond"]` (pieces as failures), `tau_rule_all` (pieces as valid), `piece_share`."""
    b = beyond_info(info)
    row = run_stats(run.name, run, b)[0]
    row["beyond_pieces"] = b["piece_share"] is not None
    if row["beyond_pieces"]:
        acc, count = among_breaking(info["ds"]["state"].values, info["piece_valid"])
        row["piece_share"] = b["piece_share"]
        row["curve"]["rule_acc_all"] = info["ds"].rule_acc.values.tolist()
        row["curve"].update(rule_acc_breaking=acc.tolist(), n_breaking=count.tolist())
        row["tau_rule_all"] = C.run_curves(info["ds"])["tau_rule"].tolist()
        row["curves"]["tau_rule_beyond"] = row["curves"]["tau_rule"]
        row["curves"]["tau_rule"] = breaking_taus(row["curve"]["step"], acc, count, C.thresholds_of("tau_rule")).tolist()
    return row


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


def family(rows_by, curves):
    """{key: {(variant, reference): curve}} over COMPARISONS with both sides run, Holm-adjusted p
    (`p_holm`, `significant`) over the comparisons at each threshold of each key."""
    out = {}
    for key in KEYS:
        curves_k = {(v, ref): comparison_curve(rows_by[ref], rows_by[v], curves, key) for v, ref in COMPARISONS
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


# ---------------------------------------------------------------------------------------------
# Endpoints: where every τ_mem threshold above 0.01 is censored, the share copied at the end still reads
# ---------------------------------------------------------------------------------------------

ENDPOINTS = ("peak_rule", "final_mem")


def rule_curve(row):
    """(S,) the rule accuracy compared for a run: among the piece-breaking samples for a curriculum run or its
    control (run_row), rule accuracy itself for the others."""
    return row["curve"].get("rule_acc_breaking", row["curve"]["rule_acc"])


def endpoint(row, name):
    """A run's peak rule accuracy (rule_curve) or its memorized share at the last checkpoint."""
    if name == "final_mem":
        return float(row["final_mem_ratio"])
    return float(np.max(rule_curve(row)))


def endpoint_family(rows_by):
    """{name: {(variant, reference): row}}: b − a of the seed means of each endpoint (Welch t interval), Welch's p
    Holm-adjusted over the comparisons (`p_holm`, `significant`). The curriculum from its switch is left out: its
    endpoints are the curriculum's."""
    out = {}
    for name in ENDPOINTS:
        comps = {}
        for v, ref in COMPARISONS:
            if v == "curriculum_since_switch" or not (rows_by.get(v) and rows_by.get(ref)):
                continue
            a, b = ([endpoint(r, name) for r in rows_by[k]] for k in (ref, v))
            comps[(v, ref)] = {**pool_ratio(a, b, log=False), "p": welch_p(a, b, log=False), "a": a, "b": b}
        holm(list(comps.values()))
        out[name] = comps
    return out


def verdict(curve, family="planned"):
    """Where the ratio's CI lies against 1 over the readable thresholds (curves.robust), and the thresholds at
    which it differs from 1 after Holm in `family` (g3_families; "readable" before g3_families.assign ran)."""
    words = {"below": "earlier than the reference (CI below 1)", "includes": "CI includes 1",
             "above": "later than the reference (CI above 1)"}
    sig = [r["threshold"] for r in curve if (r["holm"][family]["significant"] if "holm" in r else r.get("significant"))]
    size = next((r["holm"][family]["size"] for r in curve if "holm" in r), None)
    where = f"Holm-significant ({'of ' + str(size) + ' at each threshold' if size else 'readable family'}) at"
    return f"{C.robust(curve, 1.0, words)}; {where} {C.span(sig, [r['threshold'] for r in curve])}"
