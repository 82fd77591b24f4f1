"""The decompose study's summaries, markdown and figures, from its JSON alone (so --from-results works)."""
import json
import math

import numpy as np

from analyses.decompose.models_write import fig_models, models_findings, models_section, models_summary
from analyses.decompose.pairs_write import (
    crossover_section,
    cross_findings,
    excess_slopes,
    fig_crossover,
    fig_pairs,
    pairs_findings,
    pairs_section,
    pairs_summary,
    slope,
)
from scoreprobe.atomic import atomic_write_text


def gap_closed(cross, taus):
    """(L_rule − L_net)/(L_rule − L_mem) of the σ-averaged training losses per step, and interpolated
    (in ln(step + 1)) at τ_rule and τ_mem."""
    avg = dict(zip(cross["oracle"], cross["oracle_loss_avg"]))
    g = (avg["rule"] - np.array(cross["loss_avg"])) / (avg["rule"] - avg["memorizer"])
    x = np.log(np.array(cross["steps"], float) + 1)
    at = {k: float(np.interp(np.log(taus[k] + 1), x, g)) for k in ("tau_rule", "tau_mem")}
    return {"per_step": dict(zip(map(str, cross["steps"]), g.round(4).tolist())), "at": at}


def summaries(res):
    cross, ex = res["crossover"], res["excess_by_n"]
    out = {"models": models_summary(res.get("models")), "models_closed": models_summary(res.get("models_closed")),
           "tau_cross": cross["tau_cross"], "tau_cross_sigma": dict(zip([f"{s:.3g}" for s in cross["sigma"]],
                                                                      cross["tau_cross_sigma"])),
           "gap_closed": gap_closed(cross, res["taus"]),
           "excess_slope_N": slope(ex["N"], ex["excess"]), "excess_slopes": excess_slopes(ex),
           "pairs": pairs_summary(res["pairs"])}
    meas = ex.get("tau_mem_measured") or {}
    if meas:
        ns = sorted(int(n) for n in meas)
        out["tau_mem_slope_N"] = slope(ns, [meas[str(n)] for n in ns])
    return out


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------

# ---------------------------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------------------------

def _f(v, fmt="{:.0f}"):
    return "never" if v is None or (isinstance(v, float) and not math.isfinite(v)) else fmt.format(v)


def findings(res, s):
    """The headline numbers as a list of markdown lines (computed, so --from-results rewrites them)."""
    out = ["## Findings (held-out points unless said)", ""] + models_findings(res.get("models"), s, res["taus"])
    if res.get("models_closed"):
        out += models_findings(res["models_closed"], s, res["taus"], "models_closed")
    out += cross_findings(res, s) + pairs_findings(s)
    return out


def markdown(res, s, prefix):
    t, p = res["taus"], res["params"]
    L = [f"# What kind of denoiser is it? ({res['preset']} preset)", "",
         "Made by `analyses/decompose` (issue 38). Shipped series: parity G = 2 (offset layout), N = 120, "
         f"τ_rule = {t['tau_rule']:.0f} [{t['tau_rule_ci'][0]:.0f}, {t['tau_rule_ci'][1]:.0f}], "
         f"τ_mem = {t['tau_mem']:.0f} [{t['tau_mem_ci'][0]:.0f}, {t['tau_mem_ci'][1]:.0f}] "
         "(checkpoints/parity-default/clocks.json).", "",
         f"Sizes: decompose {p['n_points']} points per split × {p['n_noise']} noise draws, σ = "
         f"{', '.join(f'{x:g}' for x in p['sigmas'])}; crossover on all training items × {p['cross_noise']} draws, "
         f"{len(p['cross_sigmas'])} σ in [{min(p['cross_sigmas']):.2g}, {max(p['cross_sigmas']):.2g}]; pairs: N = "
         f"{', '.join(map(str, p['pair_Ns']))}, {p['pair_replicates']} replicate pairs, DiT width {p['pair_width']}, "
         f"depth {p['pair_depth']}, batch {p['pair_batch']}, {p['pair_steps']} steps. "
         f"Wall times (s, 1 torch thread, shared machine): {json.dumps(res.get('timings_s', {}))}.", "",
         *findings(res, s), ""]
    L += models_section(res.get("models"), s, t, prefix)
    if "models_closed" in res:
        L += models_section(res["models_closed"], s, t, prefix, "models_closed",
                            "1b. The same over the closed-window series")
    L += crossover_section(res, s, t, prefix) + pairs_section(res, s, prefix)
    return "\n".join(L)


def write_all(res, out, prefix=""):
    s = summaries(res)
    res_s = dict(res, summary=s)
    atomic_write_text(out / f"{prefix}decompose.json", json.dumps(res_s, indent=1))
    if res.get("models"):
        fig_models(res["models"], out / f"{prefix}decompose_heatmap.png")
    if res.get("models_closed"):
        fig_models(res["models_closed"], out / f"{prefix}decompose_heatmap_closed.png")
    fig_crossover(res, s, out / f"{prefix}decompose_crossover.png")
    fig_pairs(s, out / f"{prefix}decompose_disjoint.png")
    atomic_write_text(out / f"{prefix}decompose.md", markdown(res, s, prefix))
    return s
