"""Models matched per step and per training FLOP (analyses/gpt_dit_match): per run the scaling study's numbers,
its training compute (scoreprobe.models.flops) and the abruptness of memorization over one common band; per
model against a reference model (the DiT) the ratio of τ over thresholds per step and per training FLOP, and the
difference in abruptness.
"""
import math

import numpy as np

from scoreprobe.stats import curves as C
from scoreprobe.stats.runs import run_stats
from scoreprobe.models.flops import forward_flops, step_flops
from scoreprobe.stats.abruptness import abruptness
from scoreprobe.stats.seeds import pool_ratio, pool_seeds

# the common memorization band: every checkpoint whose memorized share lies in it, for both models. Lower end:
# 2% (20 of 1000 samples, the per-run band's count floor, docs/definitions.md "Abruptness"); upper end: 20%,
# the largest memorization threshold of the curves (scoreprobe/stats/curves.py), which the DiT's runs reach
# at the end of their budget (final memorized share 0.22–0.36 at G = 2, N = 120) and the GPT's pass early.
COMMON_BAND = (0.02, 0.2)
N_BOOT = 1000


def run_row(run, info):
    """run_stats of one run plus `lr`, `split`, `match_model`, FLOPs (forward per item, per step, budget) and
    `abrupt_common`: abruptness of mem_ratio over COMMON_BAND (value, ci, band steps, checkpoints in it)."""
    row = run_stats(run.name, run, info)[0]
    a = abruptness(info["ds"], "mem_ratio", n_boot=N_BOOT, band=COMMON_BAND)
    row.update(lr=run.meta["lr"], split=run.meta["split"], match_model=run.meta["match_model"],
               forward_flops=forward_flops(run.cfg), step_flops=step_flops(run.cfg),
               budget_flops=step_flops(run.cfg) * run.steps,
               abrupt_common={k: a[k] for k in ("abruptness", "ci", "band", "n_band")},
               sampler=sampler_of(info["clocks_config"]))
    return row


def sampler_of(clocks_config):
    """'heun, 32 steps' / 'ancestral, temperature 1': the sampler a run's clocks were read with, from its export's
    clocks settings (scoreprobe.studies.export.clocks_config_text: a GPT's is ancestral sampling of its tokens)."""
    s = dict(clocks_config.get("sampler") or {})
    name = s.pop("name", "unknown")
    steps = clocks_config.get("n_steps")
    extra = [f"{steps} steps"] if steps else []
    extra += [f"{k} {v:g}" if isinstance(v, (int, float)) else f"{k} {v}" for k, v in sorted(s.items())]
    return ", ".join([name] + extra)


def abrupt_pooled(rows):
    """pool_seeds (t interval, arithmetic) of the common-band abruptness over the seeds where it is measured
    (at least two checkpoints in the band); `n_unmeasured` the others."""
    v = np.array([r["abrupt_common"]["abruptness"] for r in rows], dtype=np.float64)
    ok = np.isfinite(v)
    if not ok.any():
        return {"pooled": math.nan, "ci": [math.nan, math.nan], "per_seed": v.tolist(), "n_unmeasured": int(v.size)}
    out = pool_seeds(v[ok], log=False)
    return {**out, "per_seed": v.tolist(), "n_unmeasured": int((~ok).sum())}


def abrupt_rows(dense, rows):
    """(runs, "dense" | "evaluation"): a model's abruptness is read from its dense-checkpoint runs once every seed
    of them is exported, else from its evaluation runs `rows`."""
    return (dense, "dense") if len(dense) == len(rows) > 0 else (rows, "evaluation")


def abrupt_difference(rows_dit, rows_gpt):
    """GPT − DiT of the common-band abruptness (Welch t over seeds); NaN where a seed of either is unmeasured."""
    a, b = ([r["abrupt_common"]["abruptness"] for r in rs] for rs in (rows_dit, rows_gpt))
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return {"value": math.nan, "ci": [math.nan, math.nan], "censored": True, "note": "a seed has < 2 checkpoints in the band"}
    return pool_ratio(a, b, log=False)


def per_flop(curve, factor):
    """A ratio curve in steps turned into one in training FLOPs: every value and CI end times `factor`
    (FLOPs per step of the numerator's model / the denominator's); a constant per model, so exact."""
    out = []
    for row in curve:
        r = dict(row)
        if not row.get("censored"):
            r["value"] = row["value"] * factor
            r["ci"] = [v * factor for v in row["ci"]]
        out.append(r)
    return out


def versus_dit(rows_by, curves, dense_by=None):
    """{model: {"tau_rule"|"tau_mem": {"step": curve, "flop": curve}, "flop_factor", "abruptness"}} of every
    GPT order against the DiT (GPT / DiT at each threshold, Welch t on ln τ). The abruptness is read from the
    order's dense-checkpoint runs (`dense_by`, same configurations) when every seed of them is exported
    ("abruptness_from": "dense"), else from its evaluation runs; the DiT's likewise ("dit_abruptness_from")."""
    dit = rows_by.get("dit")
    dit_abrupt, dit_from = abrupt_rows((dense_by or {}).get("dit", []), dit or [])
    out = {}
    for m, rs in rows_by.items():
        if m == "dit" or not dit:
            continue
        factor = rs[0]["step_flops"] / dit[0]["step_flops"]
        abrupt, where = abrupt_rows((dense_by or {}).get(m, []), rs)
        out[m] = {"flop_factor": factor, "abruptness": abrupt_difference(dit_abrupt, abrupt),
                  "abruptness_from": where, "dit_abruptness_from": dit_from}
        for key in ("tau_rule", "tau_mem"):
            step = C.ratio_curve(dit, rs, curves, key)
            out[m][key] = {"step": step, "flop": per_flop(step, factor)}
    return out


def pooled_at(rows, curves, key, threshold):
    """pool_seeds of `key` at one threshold over the runs `rows` (a bound at the budget where a seed is censored)."""
    return C.at(C.pooled_curve(rows, curves, key), threshold)
