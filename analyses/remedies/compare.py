"""The remedies' verdicts across trained models (issue 35): each variant against its baseline, paired
by seed (the same initialisation seed and data), with a t interval over the seeds
(`timing.seed_t_interval`) and Holm over the whole family of comparisons; a τ that is not reached is a
bound at the run's budget, never a number in a difference or a ratio.
"""
import math

import numpy as np

from scoreprobe.stats.pvalues import adjust_pvalues
from scoreprobe.stats.timing import seed_t_interval

ALPHA = 0.05
# (variant, reference, quantity): the comparisons the README's verdicts rest on
FAMILY = [(v, "baseline", q) for q in ("final_rule_acc", "final_mem_ratio")
          for v in ("global_token", "multiplicative", "curriculum", "all")] + \
         [("curriculum", "baseline_matched", q) for q in ("final_rule_acc", "final_mem_ratio")] + \
         [("multiplicative", "baseline", "log_tau_mem")]
LABELS = {"final_rule_acc": "final rule accuracy (curriculum runs: beyond the pieces)",
          "final_mem_ratio": "final memorized share", "log_tau_mem": "τ_mem ratio"}


def value(row, quantity):
    """A run's value of `quantity`; NaN for a τ not reached (a bound, left out of any difference)."""
    if quantity == "final_rule_acc":
        return float(row["beyond"]["final_rule_acc"] if "beyond" in row else row["final_rule_acc"])
    if quantity == "final_mem_ratio":
        return float(row["final_mem_ratio"])
    tau = row.get("tau_mem")
    return math.log(tau) if isinstance(tau, (int, float)) and math.isfinite(tau) else math.nan


def comparisons(rows):
    """[dict]: per comparison of FAMILY, the seeds both runs have, the per-seed differences, the t interval
    over seeds, p (paired t) and p_holm over the family (comparisons with < 2 usable seeds: NaN, left out
    of the family); τ ratios as exp of the log difference, with the seeds censored named."""
    by = {(r["variant"], r["seed"]): r for r in rows}
    out = []
    for variant, ref, q in FAMILY:
        seeds = sorted(s for v, s in by if v == variant and (ref, s) in by)
        diffs = [value(by[(variant, s)], q) - value(by[(ref, s)], q) for s in seeds]
        censored = [s for s, d in zip(seeds, diffs) if not math.isfinite(d)]
        usable = [d for d in diffs if math.isfinite(d)]
        stat = seed_t_interval(usable)
        out.append({"variant": variant, "reference": ref, "quantity": q, "seeds": seeds, "differences": diffs,
                    "censored_seeds": censored, **stat})
    p = np.array([c["p"] for c in out], dtype=float)
    adj = adjust_pvalues(p[None], "holm")[0]
    for c, a in zip(out, adj):
        c["p_holm"] = float(a)
        c["significant"] = bool(np.isfinite(a) and a < ALPHA)
    return out


def _num(v, q):
    if not (isinstance(v, float) and math.isfinite(v)):
        return "—"
    return f"×{math.exp(v):.3f}" if q == "log_tau_mem" else f"{v:+.3f}"


def comparison_lines(cmp, n_family):
    """The markdown section of `comparisons`."""
    lines = ["", "## Variants against their baseline, across trained models", "",
             ("Each run is one trained model; a comparison pairs the two runs of the same seed (same initialisation "
              "seed and training data). Interval: Student t over the seeds' differences (n − 1 degrees of freedom; "
              "with 2 seeds t = 12.7, with 3 t = 4.3), p: paired t-test, **Holm over the whole family of "
              f"{n_family} comparisons** (α = {ALPHA}). A τ not reached within a run's budget is a bound and enters no "
              "difference (its seed is named). Within a run, the sampling CIs above are far narrower: they say how "
              "well one model was measured, not how the next seed would train."), "",
             "| variant − reference | quantity | seeds | per seed | mean [95% t CI] | p | p (Holm) |",
             "|---|---|---|---|---|---|---|"]
    for c in cmp:
        q = c["quantity"]
        per = ", ".join(_num(d, q) if math.isfinite(d) else "bound" for d in c["differences"])
        ci = f"{_num(c['mean'], q)} [{_num(c['lo'], q)}, {_num(c['hi'], q)}]"
        p = "—" if not math.isfinite(c["p"]) else f"{c['p']:.3g}"
        ph = "—" if not math.isfinite(c["p_holm"]) else f"{c['p_holm']:.3g}" + (" *" if c["significant"] else "")
        lines.append(f"| {c['variant']} − {c['reference']} | {LABELS[q]} | {','.join(map(str, c['seeds']))} | "
                     f"{per} | {ci} | {p} | {ph} |")
    lines += ["", "`*`: significant after Holm over the family. τ_mem ratio: variant / reference (exp of the mean "
              "log difference)."]
    return lines
