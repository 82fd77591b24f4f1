"""Claims tested with trained models and units as the units of resampling (the battery over several trained
models): each claim one p-value, Holm over the whole family (family-wise error 0.05), and a plain verdict.

A claim is (series, the claim in words, the quantity, the test), read off a series report of
`scoreprobe.studies.battery_series` (its "half_change" rows with their ratio to each model's τ over thresholds,
its per-step "curves"). The tests:

- ("before" | "after" | "near", clock): a half-change step against a clock (τ_rule or τ_mem), read at every
  threshold of that clock; it holds only where it holds at every readable one: its p-value is the largest of the
  per-threshold p-values (an intersection-union test, no correction needed inside the claim); thresholds where
  some model's τ or half-change is not a number are not readable. "before" / "after" = ratio < 1 / > 1 (one-sided),
  "near" = an equivalence test (TOST: 1/2 < ratio < 2).
- ("mean above", reference, where): the crossed mean of a per-step curve at one step ("last", "first grid": the
  series' first log-grid step, or a step itself), one-sided p.

Verdicts: "supported" (Holm-adjusted p < 0.05); "contrary" (the 95% intervals lie on the other side at every
readable threshold: below 1 for "after", above for "before", all outside [1/2, 2] for "near", below the reference
for a mean); "not testable" (no p-value); otherwise "not decided".
"""
import math

import scipy.stats

from scoreprobe.stats.pvalues import ALPHA, adjust_pvalues

P_KEY = {"before": "p_below", "after": "p_above", "near": "p_within2"}


def step_index(rep, where):
    """Index of the step a claim reads: the last, a step itself (the first measured at or after it), or the first
    of the series' log grid (its first_checkpoint: the first step a one-model study measures)."""
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
    """{p, readable, contrary, at_paper, range, censored, half_change, half_change_ci, censored_models}: a
    half-change claim over the thresholds of `clock`; {"p": NaN, "note"} where the quantity was not measured."""
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
    """{p, step, value, ci, contrary, per_model}: the crossed mean of curve `quantity` above `ref` at `where`
    (step_index), one-sided t (the curve's se and df); {"p": NaN, "note"} where it is not defined."""
    c = rep["curves"].get(quantity)
    if c is None:
        return {"p": math.nan, "note": "not measured"}
    i = step_index(rep, where)
    mean, lo, hi = c["mean"][i], c["lo"][i], c["hi"][i]
    if mean is None or not math.isfinite(mean) or c["se"][i] is None:
        return {"p": math.nan, "step": rep["steps"][i], "note": "not defined at that step (no captures)"}
    se, df = c["se"][i], c["df"][i]
    p = float(scipy.stats.t.sf((mean - ref) / se, df)) if se > 0 else float(mean <= ref)
    return {"p": p, "step": rep["steps"][i], "value": mean, "ci": [lo, hi], "contrary": hi < ref,
            "per_model": [pm[i] for pm in c["per_model"]]}


SAYS = {"before": lambda r: r < 1, "after": lambda r: r > 1, "near": lambda r: 0.5 <= r <= 2}
WORDS = {"before": "before", "after": "after", "near": "within a factor 2 of"}


def point_reading(test, step, tau):
    """(text, agrees) of ONE point against a clock claim's test ("before" | "after" | "near", clock): the ratio
    step / tau read as the test reads its interval, never a verdict; agrees is None without two finite numbers."""
    clock = "τ_rule" if test[1] == "tau_rule" else "τ_mem"
    if not (isinstance(step, float) and isinstance(tau, float) and math.isfinite(step) and math.isfinite(tau)):
        return f"{clock} or the half-change not reached: no point", None
    ratio = step / tau
    agrees = SAYS[test[0]](ratio)
    return f"{'' if agrees else 'not '}{WORDS[test[0]]} {clock}: {step:.0f} / {tau:.0f} = {ratio:.2f}", agrees


def evaluate(reports, claims):
    """[claim row] of every claim (series, text, quantity, test) in `claims` whose series is reported with at least
    2 models, with p, Holm-adjusted p (over the rows with a p-value) and verdict."""
    rows = []
    for series, text, quantity, test in claims:
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


def evaluate_controls(reports, rows, controls, claims):
    """[control row] of `controls` [(claim number in `claims`, series, text, quantity, ("mean above", ref, where))]
    whose series is reported: the mean test with its one-sided p, never Holm-adjusted (a control is not a claim),
    with the claim it stands beside (`for_claim`); a control at "claim" reads the step its claim was read at
    (`rows`: evaluate's rows)."""
    out = []
    for number, series, text, quantity, test in controls:
        rep = reports.get(series)
        claim = next((c for c in rows if c["claim"] == claims[number - 1][1]), None)
        if rep is None or rep.get("n_models", 0) < 2 or claim is None or "step" not in claim:
            continue
        where = claim["step"] if test[2] == "claim" else test[2]
        out.append({"for_claim": number, "series": series, "control": text, "quantity": quantity, "test": list(test),
                    **mean_claim(rep, quantity, test[1], where)})
    return out


def copies_at(rep, where):
    """The memorized share of each model's samples at a claim's step (its clocks, `mem_ratio_by_step`): what
    copying in samples would be, beside a loss gap; None where a model has no clock at that step."""
    step = rep["steps"][step_index(rep, where)]
    vals = [m.get("mem_ratio_by_step", {}).get(str(step)) for m in rep["models"]]
    return None if any(v is None for v in vals) else {"step": step, "per_model": vals}
