"""The claims of the mechanism study, tested with trained models and units as the units of resampling: each
claim one p-value, Holm over the whole family (family-wise error 0.05), and a plain verdict.

A claim on a half-change step against a clock (τ_rule or τ_mem) is read at every threshold of that clock
(rule accuracy 0.3–0.95, memorization 0.01–0.2; scoreprobe.stats.curves) and holds only where it holds at
every readable one: its p-value is the largest of the per-threshold p-values (an intersection-union test,
no correction needed inside the claim); thresholds where some model's τ or half-change is not a number
are not readable. "near" claims are equivalence tests (TOST: 1/2 < ratio < 2). A claim at one step reads
the crossed mean there (one-sided p). Verdicts: "supported" (Holm-adjusted p < 0.05); "contrary" (the 95%
intervals lie on the other side at every readable threshold: below 1 for "after", above for "before", all
outside [1/2, 2] for "near", below the reference for a mean); otherwise "not decided", with the intervals.
"""
import math

from analyses.mechanism_seeds.series import CAPTURED, DSM_GAP
from scoreprobe.stats.pvalues import ALPHA, adjust_pvalues

# (series, the claim in words, the quantity, the test): tests "before"/"after"/"near" a clock (half-change /
# τ < 1, > 1, within a factor 2), or ("mean above", reference, step) of a per-step curve
CLAIMS = [
    ("open", "vertices become attractors before the rule: the off-vertex share (local planes) halves before "
     "τ_rule", "off-vertex (local planes)", ("before", "tau_rule")),
    ("open", "violating basins shrink before τ_rule", "violating basin", ("before", "tau_rule")),
    ("open", "training and held-out basins part around τ_mem: the t − h half-change is within a factor 2 of τ_mem",
     "t − h basin (symmetric planes)", ("near", "tau_mem")),
    ("open", "held-out basins are invaded around τ_mem (within a factor 2)", "held-out basin", ("near", "tau_mem")),
    ("open", "training basins grow after τ_mem", "training basin", ("after", "tau_mem")),
    ("open", "held-out capture at σ 1 lags τ_mem", CAPTURED, ("after", "tau_mem")),
    ("open", "the DSM gap in σ 0.2–2 rises around τ_mem (within a factor 2)", DSM_GAP, ("near", "tau_mem")),
    ("open", "captured held-out restarts at σ 1 started nearer their own item (share of captured > 1/2 at the "
     "last step)", "nearer own, share of captured (σ 1)", ("mean above", 0.5, "last")),
    ("closed", "the model fits its training images before any rule: held-out − training DSM loss in σ 0.2–2 above 0 "
     "at the first grid step (a loss gap: fitting the training set, not copies in samples)", DSM_GAP,
     ("mean above", 0.0, "first grid")),
    ("closed", "t − h basin above 0 at the first grid step", "t − h basin (symmetric planes)",
     ("mean above", 0.0, "first grid")),
    ("closed", "the DSM gap rises around τ_mem (within a factor 2)", DSM_GAP, ("near", "tau_mem")),
    ("closed", "held-out basins are invaded around τ_mem (within a factor 2)", "held-out basin", ("near", "tau_mem")),
    ("closed", "captured held-out restarts at σ 1 started nearer their own item (share > 1/2 at the last step)",
     "nearer own, share of captured (σ 1)", ("mean above", 0.5, "last")),
]
P_KEY = {"before": "p_below", "after": "p_above", "near": "p_within2"}
# (claim number, series, what the control shows, quantity, test): the same test on the series that is not the
# claim's, where the claim's reading would not follow; reported beside the claim, outside the Holm family
CONTROLS = [
    (9, "open", "the same gap in the open-window series at its first grid step, before its τ_rule (a series that "
     "does learn the rule)", DSM_GAP, ("mean above", 0.0, "first grid")),
    (9, "open", "the same gap in the open-window series at the claim's step", DSM_GAP, ("mean above", 0.0, "claim")),
]


def _step_index(rep, where):
    """Index of the step a claim reads: the last, or the first of the series' log grid (its first_checkpoint:
    the first step the one-model study measured)."""
    if where == "last":
        return len(rep["steps"]) - 1
    if isinstance(where, int):                         # a step itself (a control read at its claim's step)
        return next(i for i, s in enumerate(rep["steps"]) if s >= where)
    return next(i for i, s in enumerate(rep["steps"]) if s >= rep["first_grid_step"])


def _contrary(test, lo, hi, ref=None):
    if test == "before":
        return lo > 1
    if test == "after":
        return hi < 1
    if test == "near":
        return hi < 0.5 or lo > 2
    return hi < ref


def clock_claim(rep, quantity, test, clock):
    """{p, readable, per_threshold, contrary, at_paper}: a half-change claim over the thresholds of `clock`."""
    h = rep["half_change"].get(quantity)
    if h is None:
        return {"p": math.nan, "readable": [], "note": "not measured"}
    rows = h["ratio"][clock]
    ok = [r for r in rows if not r["censored"]]
    paper = 0.9 if clock == "tau_rule" else 0.1
    at = next((r for r in rows if abs(r["threshold"] - paper) < 1e-9), None)
    out = {"readable": [r["threshold"] for r in ok], "p": max((r[P_KEY[test]] for r in ok), default=math.nan),
           "contrary": bool(ok) and all(_contrary(test, *r["ci"]) for r in ok), "at_paper": at,
           "range": [min(r["value"] for r in ok), max(r["value"] for r in ok)] if ok else None,
           "censored": [r["threshold"] for r in rows if r["censored"]], "half_change": h["step"],
           "half_change_ci": h["ci"], "censored_models": [c for c in h["censored"] if c]}
    if not ok:
        out["note"] = "no readable threshold (a half-change or τ not reached in some model)"
    return out


def mean_claim(rep, quantity, ref, where):
    c = rep["curves"].get(quantity)
    if c is None:
        return {"p": math.nan, "note": "not measured"}
    i = _step_index(rep, where)
    mean, lo, hi = c["mean"][i], c["lo"][i], c["hi"][i]
    if mean is None or not math.isfinite(mean) or c["se"][i] is None:
        return {"p": math.nan, "step": rep["steps"][i], "note": "not defined at that step (no captures)"}
    import scipy.stats
    se, df = c["se"][i], c["df"][i]
    p = float(scipy.stats.t.sf((mean - ref) / se, df)) if se > 0 else float(mean <= ref)
    return {"p": p, "step": rep["steps"][i], "value": mean, "ci": [lo, hi], "contrary": hi < ref,
            "per_model": [pm[i] for pm in c["per_model"]]}


def evaluate_controls(reports, claims):
    """[control row] of CONTROLS whose series is reported: the mean test with its one-sided p, never
    Holm-adjusted (a control is not a claim), with the claim it stands beside (`for_claim`, its number in
    CLAIMS); a control at "claim" reads the step its claim was read at (`claims`: evaluate's rows)."""
    rows = []
    for number, series, text, quantity, test in CONTROLS:
        rep = reports.get(series)
        claim = next((c for c in claims if c["claim"] == CLAIMS[number - 1][1]), None)
        if rep is None or rep.get("n_models", 0) < 2 or claim is None or "step" not in claim:
            continue
        where = claim["step"] if test[2] == "claim" else test[2]
        rows.append({"for_claim": number, "series": series, "control": text, "quantity": quantity, "test": list(test),
                     **mean_claim(rep, quantity, test[1], where)})
    return rows


def copies_at(rep, where):
    """The memorized share of each model's samples at a claim's step (its clocks, `mem_ratio_by_step`): what
    copying in samples would be, beside a loss gap; None where a model has no clock at that step."""
    step = rep["steps"][_step_index(rep, where)]
    vals = [m.get("mem_ratio_by_step", {}).get(str(step)) for m in rep["models"]]
    return None if any(v is None for v in vals) else {"step": step, "per_model": vals}


def evaluate(reports):
    """[claim row]: every claim of CLAIMS whose series is reported, with p, Holm-adjusted p and verdict."""
    rows = []
    for series, text, quantity, test in CLAIMS:
        rep = reports.get(series)
        if rep is None or rep.get("n_models", 0) < 2:
            continue
        if test[0] == "mean above":
            r = mean_claim(rep, quantity, test[1], test[2])
        else:
            r = clock_claim(rep, quantity, test[0], test[1])
        rows.append({"series": series, "claim": text, "quantity": quantity, "test": list(test), **r})
    finite = [i for i, r in enumerate(rows) if math.isfinite(r["p"])]
    adj = adjust_pvalues([rows[i]["p"] for i in finite], "holm") if finite else []
    for i, a in zip(finite, adj):
        rows[i]["p_holm"] = float(a)
    for r in rows:
        ph = r.get("p_holm", math.nan)
        r["verdict"] = ("supported" if ph < ALPHA else "contrary" if r.get("contrary") else
                        "not testable" if not math.isfinite(r["p"]) else "not decided")
    return rows
