"""The decompose study's summaries, markdown and figures, from its JSON alone (so --from-results works); the sections
are the library's reports of each measurement."""
import json

from scoreprobe.atomic import atomic_write_text
from analyses.decompose.crossover_md import cross_findings, crossover_section
from analyses.decompose.decompose_calls_md import models_findings, models_section
from analyses.decompose.disjoint_pairs_md import pairs_findings, pairs_section
from analyses.decompose.crossover_summary import excess_slopes, gap_closed, loglog_slope
from scoreprobe.stats.decompose_models import models_summary
from scoreprobe.stats.disjoint_pairs import pairs_summary
from scoreprobe.viz.common import save_figure
from analyses.decompose.crossover_figure import plot_crossover
from scoreprobe.viz.decompose import plot_calls_map
from scoreprobe.viz.disjoint import plot_disjoint_pairs

SERIES_TEXT = {"open": "the shipped recipe (parity G = 2, N = 120, 36 000 steps: its window opens)",
               "closed": "the closed-window series (parity G = 2, N = 30, 3750 steps: τ_mem before any τ_rule; "
                         "analyses/mechanism_seeds' config, trained here: studies.trained_models.train_closed)"}


def summaries(res):
    """What the md and figures read, computed from the measurements (written into the json as "summary")."""
    cross, ex = res["crossover"], res["excess_by_n"]
    out = {"models": models_summary(res.get("models")), "models_closed": models_summary(res.get("models_closed")),
           "tau_cross": cross["tau_cross"], "tau_cross_sigma": dict(zip([f"{s:.3g}" for s in cross["sigma"]],
                                                                      cross["tau_cross_sigma"])),
           "gap_closed": gap_closed(cross, res["taus"]),
           "excess_slope_N": loglog_slope(ex["N"], ex["excess"]), "excess_slopes": excess_slopes(ex),
           "pairs": pairs_summary(res["pairs"])}
    for key in ("pairs_mem", "pairs_long"):
        if res.get(key):
            out[key] = pairs_summary(res[key])
    meas = ex.get("tau_mem_measured") or {}
    if meas:
        ns = sorted(int(n) for n in meas)
        out["tau_mem_slope_N"] = loglog_slope(ns, [meas[str(n)] for n in ns])
    return out


def findings(res, s):
    """The headline numbers as a list of markdown lines (computed, so --from-results rewrites them)."""
    out = ["## Findings (held-out points unless said)", ""] + models_findings(res.get("models"), s, res["taus"],
                                                                              SERIES_TEXT)
    if res.get("models_closed"):
        out += models_findings(res["models_closed"], s, res["taus"], SERIES_TEXT, "models_closed")
    out += cross_findings(res, s) + pairs_findings(s) + pairs_findings(s, "pairs_mem")
    out += pairs_findings(s, "pairs_long")
    return out


def markdown(res, s, prefix):
    """The whole report: header and sizes, findings, then sections 1 (1b), 2 and 3 from the library's reports."""
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
    L += models_section(res.get("models"), s, t, prefix, SERIES_TEXT)
    if "models_closed" in res:
        L += models_section(res["models_closed"], s, t, prefix, SERIES_TEXT, "models_closed",
                            "1b. The same over the closed-window series")
    L += crossover_section(res, s, t, prefix) + pairs_section(res, s, prefix)
    return "\n".join(L)


def write_all(res, out, prefix=""):
    """The json (with its summary), the figures and the md under `out` -> the summary."""
    s = summaries(res)
    res_s = dict(res, summary=s)
    atomic_write_text(out / f"{prefix}decompose.json", json.dumps(res_s, indent=1))
    if res.get("models"):
        save_figure(plot_calls_map(res["models"]), out / f"{prefix}decompose_heatmap.png", dpi=110)
    if res.get("models_closed"):
        save_figure(plot_calls_map(res["models_closed"]), out / f"{prefix}decompose_heatmap_closed.png", dpi=110)
    save_figure(plot_crossover(res, s), out / f"{prefix}decompose_crossover.png", dpi=110)
    save_figure(plot_disjoint_pairs(s), out / f"{prefix}decompose_disjoint.png", dpi=110)
    for key, name in (("pairs_mem", "mem"), ("pairs_long", "long")):
        if key in s:
            save_figure(plot_disjoint_pairs({"pairs": s[key]}), out / f"{prefix}decompose_disjoint_{name}.png",
                        dpi=110)
    atomic_write_text(out / f"{prefix}decompose.md", markdown(res, s, prefix))
    return s
