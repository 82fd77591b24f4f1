"""Markdown, figure and plan of analyses/circuits/run.py (formatting only; the numbers come from the json)."""
from pathlib import Path

import numpy as np

from scoreprobe.atomic import atomic_write_text
from scoreprobe.viz.common import save_figure


def _f(v, fmt="{:.0f}"):
    return "not reached" if v is None else fmt.format(v)


def _ci(ci, fmt="{:.0f}"):
    if not ci or any(v is None for v in ci):
        return "CI open"
    return f"[{fmt.format(ci[0])}, {fmt.format(ci[1])}]"


def plan(cfg):
    steps = "all 24 checkpoints" if cfg["steps"] is None else f"checkpoints {cfg['steps']}"
    n_sites = sum({"block": 4, "sub": 8, "head": 16}[g] for g in cfg["sites"])
    n_steps = 24 if cfg["steps"] is None else len(cfg["steps"])
    fw = n_steps * 2 * len(cfg["sigmas"]) * (n_sites + 3)
    return (f"sp.circuits on the shipped series: {steps}, σ {cfg['sigmas']}, {cfg['n_pairs']} copy and "
            f"{cfg['n_pairs']} rule pairs, sites {cfg['sites']} ({n_sites} on the shipped DiT)\n"
            f"≈ {fw} patched forwards of {cfg['n_pairs']} rows (≈ {fw * 0.02 / 60:.1f} min at 20 ms each, 1 thread), "
            f"then {cfg['n_boot']} bootstrap resamples over pairs and sp.patch_ode at the last checkpoint "
            f"({cfg['ode_pairs']} pairs, σ_start {cfg['ode_sigma_start']}, σ* {cfg['ode_stars']}, "
            f"{cfg['ode_steps']} Heun steps)")


def _top_table(rows, tau_name, tau):
    out = ["| site | kind | final effect [95% CI] | effect by σ (last step) | half-final step [95% CI] | "
           f"share of resamples reaching it | half-final step / {tau_name} |", "|---|---|---|---|---|---:|---:|"]
    for r in rows:
        by = ", ".join(f"{s}: {v:+.2f}" for s, v in r["by_sigma_final"].items())
        bound = "≤ " if r.get("half_step_is_bound") else ""
        ratio = "–" if r["half_step"] is None else f"{bound}{r['half_step'] / tau:.2f}"
        out.append(f"| `{r['site']}` | {r['site_kind']} | {r['final']:+.2f} {_ci(r['final_ci'], '{:+.2f}')} | {by} | "
                   f"{bound}{_f(r['half_step'])} {_ci(r['half_step_ci'])} | {r['half_reached_share']:.2f} | {ratio} |")
    return out


def markdown(res):
    t = res["taus"]
    tr, tm = t["tau_rule"], t["tau_mem"]
    lines = [
        "# Circuits: where the shipped DiT carries the rule and the copies",
        "",
        f"Series `{Path(res['series']).name}`, checkpoints {res['steps'][0]}–{res['steps'][-1]} ({len(res['steps'])}); "
        f"τ_rule = {tr:.0f} {_ci(t['tau_rule_ci'])}, τ_mem = {tm:.0f} {_ci(t['tau_mem_ci'])} "
        "(the series' clocks.json). "
        f"Preset: {res['preset']['n_pairs']} pairs of each kind, σ {res['preset']['sigmas']}, sites "
        f"{res['preset']['sites']}; this run's probe call took {res['seconds']['probe']:.0f} s (checkpoints already "
        "in the resumable store are read, not recomputed). "
        "Definitions: docs/inside.md.",
        "",
        "Effect 0 = the corrupt input's output, 1 = the output with the whole network run on the clean input "
        "(mean over σ of the effect pooled over pairs). *Rule pairs*: a held-out item vs the same with one bit "
        "flipped; the metric reads the flipped bit's group mates. *Copy pairs*: a training item vs its nearest "
        "held-out item; the metric reads their difference. Half-final step: the first checkpoint step (log-"
        "interpolated) at which the site's effect reaches half of its value at the last checkpoint; CIs resample "
        "the pairs (2.5–97.5 percentiles over the resamples that reach it).",
        "",
        *_summary(res), "",
        "## Rule pairs: top sites", "", *_top_table(res["top"]["rule"], "τ_rule", tr), "",
        "`≤`: already at half of its final value at the first checkpoint with a contrast (step 0 has none: "
        "the adaLN-Zero network outputs 0 there).", "",
        "## Copy pairs", "", *_copy(res), "",
        "Top sites at the last checkpoint (ratios of a small contrast, see above; shown for completeness):", "",
        *_top_table(res["top"]["copy"], "τ_mem", tm), "",
        "Size of what is being split (mean over σ of network-clean − corrupt metric, per checkpoint): rule "
        + ", ".join(f"{v:.2f}" for v in res["totals"]["rule"]) + "; copy "
        + ", ".join(f"{v:.2f}" for v in res["totals"]["copy"]) + ". A copy total near 0 means the network "
        "answers the training item and its held-out neighbour alike; effects are then ratios of small numbers.",
        "",
    ]
    lines += _attention(res) + _ode(res)
    return "\n".join(lines) + "\n"


def _summary(res):
    t, rule, cc = res["taus"], res["top"]["rule"], res.get("copy_contrast")
    best = rule[0]
    sub = next((r for r in rule if r["site_kind"] in ("sub", "head") and r["half_step"] is not None), None)
    out = ["## Summary", "",
           f"- Rule: the largest effect at the last checkpoint is `{best['site']}` ({best['final']:+.2f} "
           f"{_ci(best['final_ci'], '{:+.2f}')})."]
    if sub:
        bound = "≤ " if sub.get("half_step_is_bound") else ""
        out.append(f"  Of the sub-blocks and heads, `{sub['site']}` ({sub['final']:+.2f}) reaches half of it at "
                   f"step {bound}{sub['half_step']:.0f} {_ci(sub['half_step_ci'])} = "
                   f"{sub['half_step'] / t['tau_rule']:.2f} τ_rule.")
    for h in res.get("attention_timing", [])[:2]:
        if h["half_step"] is not None:
            when = (f"before the first checkpoint after step 0 (≤ {h['first_step']}, ≤ "
                    f"{h['first_step'] / t['tau_rule']:.2f} τ_rule)" if h["half_step"] < h["first_step"] else
                    f"by step {h['half_step']:.0f} = {h['half_step'] / t['tau_rule']:.2f} τ_rule")
            out.append(f"- Attention to the group: head {h['layer']}.{h['head']} ends {h['excess_final']:+.2f} above "
                       f"chance and gets half of that {when}.")
    if cc and cc["half_decay_step"] is not None:
        out.append(f"- Copies: the network stops telling a training item from its nearest held-out item (the copy "
                   f"contrast halves from its peak) at step {cc['half_decay_step']:.0f} {_ci(cc['half_decay_ci'])} "
                   f"= {cc['half_decay_step'] / t['tau_mem']:.2f} τ_mem; no single site stands out as *the* copy "
                   "site once that contrast is gone (below).")
    return out


def _copy(res):
    cc = res.get("copy_contrast")
    if not cc:
        return []
    top = ", ".join(f"`{r['site']}` {r['effect']:+.2f}" for r in cc["top_at_peak"])
    return [f"The copy contrast (network-clean − corrupt metric, mean over σ and pairs) peaks at step "
            f"{cc['peak_step']} and falls to half of its peak at step {_f(cc['half_decay_step'])} "
            f"{_ci(cc['half_decay_ci'])} ({cc['half_decay_reached_share']:.2f} of the pair resamples fall that far; "
            f"τ_mem = {res['taus']['tau_mem']:.0f}): a network that copies answers the training item and its "
            "held-out neighbour alike, so the pair has less and less for any site to carry. At the peak step the "
            f"sites that carry most of the item-specific difference are {top}."]


def _attention(res):
    a, sb = res["attention"], res["sub_blocks"]["rule"]
    out = ["## Attention and the group product", ""]
    if a is None:
        return out + ["(no parity groups: not measured)", ""]
    out += [f"Attention mass from a query token to the tokens that share a parity group with it; uniform "
            f"attention would give {a['chance']:.3f}.", "",
            "| layer | head | first checkpoint | last checkpoint |", "|---:|---:|---:|---:|"]
    out += [f"| {h['layer']} | {h['head']} | {h['first']:.3f} | {h['last']:.3f} |" for h in a["heads"][:6]]
    out += ["", f"Rule effect of the attention sub-blocks summed over layers: {sb['attn']:+.2f}; of the MLP "
            f"sub-blocks: {sb['mlp']:+.2f}; attn − MLP 95% CI {_ci(sb.get('diff_ci'), '{:+.2f}')} over pairs "
            "(last checkpoint, mean over σ). " + _verdict(a, sb), ""]
    return out


def _verdict(a, sb):
    excess = a["heads"][0]["last"] - a["chance"]
    lo, hi = sb.get("diff_ci", [np.nan, np.nan])
    where = ("neither kind of sub-block carries more of the rule effect than the other (the CI of the "
             "difference contains 0)" if lo <= 0 <= hi else
             f"the {'attention' if lo > 0 else 'MLP'} sub-blocks carry more of the rule effect")
    return (f"The strongest same-group head attends {excess:+.3f} above chance; {where}. Patching tells where "
            "the flipped bit's information travels, not whether a product of the group's values is formed "
            "there: that the product is formed in attention is neither shown nor excluded by these numbers.")


def _ode(res):
    out = ["## Along the PF-ODE (last checkpoint)", "",
           "Each site patched at every Heun evaluation with σ ≤ σ*, from σ_start "
           f"{res['preset']['ode_sigma_start']}; `*` = every hook point (the network fully clean; only the "
           "preconditioning's skip term still sees the corrupt input).", "",
           "| pairs | site | σ* | basin-flip fraction | ends in the clean basin | pairs in one basin unpatched |",
           "|---|---|---:|---:|---:|---:|"]
    out += [f"| {r['kind']} | `{r['site']}` | {r['sigma_star']:g} | {r['flip_fraction']:.2f} | "
            f"{r['to_clean_fraction']:.2f} | {r['same_basin_unpatched']:.2f} |" for r in res["ode"]]
    return out + ["", "Not done here: a closed-window series and several trained seeds (the issue's CIs over "
                  "seeds); the CIs above are over pairs only.", ""]


def write(res, ds, out_dir, name):
    """The .md and the heat map (.png) of one run."""
    atomic_write_text(Path(out_dir) / f"{name}.md", markdown(res))
    from scoreprobe.viz.circuits import plot_circuits
    fig = plot_circuits(ds, taus={"tau_rule": res["taus"]["tau_rule"], "tau_mem": res["taus"]["tau_mem"]})
    save_figure(fig, Path(out_dir) / f"{name}.png", dpi=110)
