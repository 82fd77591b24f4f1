"""Variants against references across trained models, paired by seed (analyses/remedies, issue 35): per comparison
the seeds both have, the per-seed differences, a t interval over the seeds (`timing.seed_t_interval`) and Holm over
the whole family of comparisons; a value that is not a number (a τ not reached: a bound at the run's budget) enters
no difference (its seed is named). The markdown: analyses.remedies.holm_md.comparison_lines."""
import math

import numpy as np

from scoreprobe.stats.pvalues import adjust_pvalues
from scoreprobe.stats.timing import seed_t_interval

ALPHA = 0.05


def comparisons(rows, family, value):
    """[dict]: per (variant, reference, quantity) of `family`, over the rows (each with "variant" and "seed") the
    seeds both runs have, the per-seed differences value(row, quantity) of the two, the t interval over seeds, p
    (paired t) and p_holm over the family (comparisons with < 2 usable seeds: NaN, left out of the family); a
    difference that is not finite (NaN: a bound) is left out, its seed in `censored_seeds`."""
    by = {(r["variant"], r["seed"]): r for r in rows}
    out = []
    for variant, ref, q in family:
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
