"""The G factor of this study (reported by analyses/data_draws/g_factor_md.py): τ_rule(G = 3) / τ_rule(G = 2) at one N over the rule thresholds, each arm
a crossed block of data seeds × training seeds (issue 54 items 1–3).

Per threshold one reading:

- both arms crossed every run: the factor with both variance components (`scoreprobe.stats.crossed_arms.
  crossed_difference` on ln τ), beside the two shortcuts (runs as units, data seeds as units), each with its
  coverage measured by simulation at this design (D × I per arm, the arms' estimated components);
- G = 3 censored, G = 2 not: a bound, G = 3's runs at their budget (pooled over its runs, the censored ones at
  their last step: a bound on these runs' geometric mean) over G = 2's UPPER CI end (and, beside it, over its
  pooled value); where some G = 3 runs crossed, the censored-normal estimate (`censored_mean`, runs as units)
  and its factor (MOVER against G = 2's interval) beside the bound, with their coverage at this design and
  censoring;
- otherwise (both censored without a bound, a crossing before the first checkpoint): undefined.

A bound carries `falling`: every run of the censored arm that misses the threshold peaked and fell below it within
its budget (`scoreprobe.stats.budget_trend`; rows without their "curve" cannot tell: False). Its verdict word is
then "not reached and falling", not "budget-bound": a longer run would not decide it.

The verdict words come from `scoreprobe.stats.verdict.verdict` over these readings, the paper's threshold first;
the claim "≈ 10× per unit G" is read as the region REGION, a factor 1.25 either side of 10 (the margin of
docs/findings.md, analyses/findings/claims.py NEAR).
"""
import math

import numpy as np

from scoreprobe.stats import seed_grid as S
from scoreprobe.stats import curves as C
from scoreprobe.stats.crossed import crossed_mean, mean_squares
from scoreprobe.stats import crossed_arms as X
from scoreprobe.stats.censored import censored_mean
from scoreprobe.stats.budget_trend import end_trend, falling_at
from scoreprobe.stats.verdict import verdict

PAPER_FACTOR = 10.0                                    # the paper's ≈ 10× in τ_rule per unit of G
REGION = (PAPER_FACTOR / 1.25, PAPER_FACTOR * 1.25)    # our reading of "≈ 10×": within a factor 1.25
N_REP = 40000                                          # replicates per coverage cell (vectorized)
N_REP_CENSORED = 300                                   # replicates per censored cell (one likelihood fit each)
REGIMES = {"data-dominated": (1, .09, .09), "init-dominated": (.09, 1, .09), "residual-dominated": (.04, .04, 1),
           "residual only": (0, 0, 1), "equal": (1, 1, 1)}


def arm(rows, curves, key="tau_rule"):
    """One arm's complete block: dict ds, ss, ln (D, I, T) ln τ (inf: not reached), budget (D, I) ln last step,
    early (T,) a run crossed before its first checkpoint after step 0, falling (T,) every run missing a
    threshold peaked and fell below it (False without the runs' "curve"); None without a 2 × 2 block."""
    block = S.complete_grid(rows)
    if block is None:
        return None
    ds, ss, grid = block
    flat = [r for row in grid for r in row]
    D, I = len(ds), len(ss)
    early, _ = C._early(flat, curves, (key,))
    ln = np.log(C._points(flat, curves, key))
    falling, trends = np.zeros(ln.shape[1], dtype=bool), None
    if all("curve" in r for r in flat):
        runs = [(r["curve"]["step"], r["curve"]["rule_acc"]) for r in flat]
        falling = falling_at(runs, np.isfinite(ln), C.thresholds_of(key))
        trends = [end_trend(*c) for c in runs]
    return {"ds": ds, "ss": ss, "ln": ln.reshape(D, I, -1), "falling": falling, "trends": trends,
            "budget": np.log([[float(r["steps"]) for r in row] for row in grid]), "early": early.any(axis=0)}


def components(v):
    """(σ²_a, σ²_b, σ²_e) of a (D, I) block, ANOVA estimates clipped at 0."""
    _, ms_d, ms_i, ms_e = mean_squares(v)
    D, I = v.shape
    return [max(float(ms_d - ms_e) / I, 0.0), max(float(ms_i - ms_e) / D, 0.0), float(ms_e)]


def factor_rows(a, b, thresholds):
    """One reading per threshold (module docstring): dicts with threshold, kind ('two-level', 'bound',
    'undefined'), value, ci and the kind's details."""
    out, last = [], {"a": None, "b": None}
    for j, t in enumerate(thresholds):
        va, vb = a["ln"][..., j], b["ln"][..., j]
        if a["early"][j] or b["early"][j]:
            out.append({"threshold": t, "kind": "undefined", "why": "a run crossed before its first checkpoint"})
            continue
        if np.isfinite(va).all() and np.isfinite(vb).all():
            last = {"a": components(va), "b": components(vb)}
            out.append({"threshold": t, **readable_row(va, vb, seed=j)})
            continue
        row = censored_row(va, vb, a["budget"], b["budget"], last, seed=j)
        if row["kind"] == "bound":     # the censored arm's runs: still rising, or peaked and falling
            arm_ = b if "b_bound" in row else a
            row["falling"] = bool(arm_["falling"][j])
            if row["falling"]:     # the missing runs' peak and end (mean of their last checkpoints), min and max
                miss = [tr for tr, v in zip(arm_["trends"], arm_["ln"][..., j].ravel()) if not np.isfinite(v)]
                row["peak_end"] = [[min(x[k] for x in miss), max(x[k] for x in miss)] for k in ("peak", "end")]
        out.append({"threshold": t, **row})
    return out


def readable_row(va, vb, seed):
    """Both arms crossed: the two-level factor, the shortcuts, the components and every interval's coverage."""
    d = X.crossed_difference(va, vb)
    runs, data = X.runs_interval(va, vb), X.data_interval(va, vb)
    ca, cb = components(va), components(vb)
    return {"kind": "two-level", "value": math.exp(d["diff"]), "ci": [math.exp(d["lo"]), math.exp(d["hi"])],
            "df": float(d["df"]), "components_a": ca, "components_b": cb,
            "runs_as_units": [math.exp(x) for x in runs[:3]], "data_seeds_as_units": [math.exp(x) for x in data[:3]],
            "coverage": X.coverage(ca, cb, *va.shape, n_rep=N_REP, seed=seed)}


def arm_interval(v, budget):
    """One arm at one threshold: dict est, ci [lo, hi] (ln τ), sd, how, n_censored. Every run reached: the crossed
    interval; else the censored normal over its runs (runs as units; NaN with fewer than 2 runs crossed)."""
    cens = ~np.isfinite(v.ravel())
    if not cens.any():
        r = crossed_mean(v)
        return {"est": float(r["mean"]), "ci": [float(r["lo"]), float(r["hi"])], "sd": math.nan, "how": "two-level",
                "n_censored": 0}
    r = censored_mean(np.where(cens, budget.ravel(), v.ravel()), cens)
    return {"est": r["mean"], "ci": [r["lower"], r["upper"]], "sd": r["sd"], "n_censored": int(cens.sum()),
            "how": f"censored normal over runs ({int(cens.sum())} of {cens.size} censored)"}


def censored_row(va, vb, budget_a, budget_b, last, seed):
    """A threshold some run does not reach: the bound against the other arm's CI end, the censored estimate."""
    a, b = arm_interval(va, budget_a), arm_interval(vb, budget_b)
    fill_a = float(np.where(np.isfinite(va), va, budget_a).mean())   # the arm's runs, censored ones at their budget
    fill_b = float(np.where(np.isfinite(vb), vb, budget_b).mean())
    row = {"n_censored_a": a["n_censored"], "n_censored_b": b["n_censored"], "n_runs": int(va.size),
           "interval_a": a["how"], "budget_b": float(np.exp(budget_b.max())),
           "censored_estimate_b": _exp_ci(b["est"], b["ci"]), "sd_b": b["sd"],
           "sd_b_last_readable": math.sqrt(sum(last["b"])) if last["b"] is not None else math.nan}
    if b["n_censored"] and math.isfinite(a["ci"][1]):         # G = 3 later than its runs' bound over G = 2's upper end
        bound = math.exp(fill_b - a["ci"][1])
        row.update(kind="bound", value=bound, ci=[bound, math.inf], b_bound=math.exp(fill_b),
                   a_ci_end=math.exp(a["ci"][1]), a_value=math.exp(a["est"]), bound_vs_value=math.exp(fill_b - a["est"]))
    elif a["n_censored"] and not b["n_censored"]:             # G = 2 censored: G = 3's upper end over G = 2's runs
        bound = math.exp(b["ci"][1] - fill_a)
        row.update(kind="bound", value=bound, ci=[0.0, bound], a_bound=math.exp(fill_a), b_ci_end=math.exp(b["ci"][1]))
    else:
        row.update(kind="undefined", why="no interval on the comparison arm to bound against")
    if 0 < b["n_censored"] < vb.size and math.isfinite(b["est"]) and math.isfinite(a["est"]):
        d, lo, hi = X.mover(b["est"], b["ci"], a["est"], a["ci"])
        row["censored_factor"] = _exp_ci(d, [lo, hi])
        if not a["n_censored"]:
            row["censored_coverage"] = censored_coverage(va, b, float(budget_b.max()), last["b"], seed)
    return row


def censored_coverage(va, b, budget, shape_b, seed):
    """Coverage of G = 3's censored estimate and of its factor at this design: G = 3 simulated with its fitted
    mean and variance, split into components as at its last readable threshold (`shape_b`; equal thirds without
    one), censored at its budget; G = 2 with its own components at this threshold."""
    shares = np.asarray(shape_b if shape_b is not None else [1.0, 1.0, 1.0], dtype=float)
    shares = shares / shares.sum() if shares.sum() > 0 else np.full(3, 1 / 3)
    return X.censored_coverage(list(shares * b["sd"] ** 2), b["est"], budget, components(va), *va.shape,
                               n_rep=N_REP_CENSORED, seed=seed)


def _exp_ci(est, ci):
    """{value, ci} back from ln τ (an infinite end stays one)."""
    return {"value": _exp(est), "ci": [_exp(ci[0]), _exp(ci[1])]}


def _exp(x):
    return math.nan if math.isnan(x) else math.exp(x) if math.isfinite(x) else (math.inf if x > 0 else 0.0)


# ---------------------------------------------------------------------------------------------
# Verdicts
# ---------------------------------------------------------------------------------------------

def readings(rows):
    """(thresholds, estimate, lower, upper, censored, falling) of the readings, as `verdict` takes them: a bound
    is a censored reading (its open end 0 or inf), an undefined reading NaN."""
    cols = [[], [], [], [], [], []]
    for r in rows:
        defined = r["kind"] != "undefined"
        vals = (r["threshold"], r["value"] if defined else math.nan, r["ci"][0] if defined else math.nan,
                r["ci"][1] if defined else math.nan, r["kind"] == "bound", bool(r.get("falling", False)))
        for c, v in zip(cols, vals):
            c.append(v)
    return cols


def verdicts(rows, paper):
    """{"claim": the verdict of "≈ 10× per unit G" (REGION), "slower": of "G = 3 is slower" (factor > 1)}, both
    reading the paper's threshold first."""
    t, est, lo, hi, cens, fall = readings(rows)
    return {name: verdict(t, est, lo, hi, region=region, paper_threshold=paper, censored=cens, falling=fall)
            for name, region in (("claim", REGION), ("slower", (1.0, math.inf)))}


def regime_coverage(D, I):
    """{regime: coverage dict} of the three intervals at D × I over REGIMES (both arms alike)."""
    return {name: X.coverage(c, c, D, I, n_rep=N_REP, seed=k) for k, (name, c) in enumerate(REGIMES.items())}
