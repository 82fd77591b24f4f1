"""The markdown report of patching over several trained models of one series (`scoreprobe.stats.circuit_effects`
per model, `scoreprobe.stats.circuit_effects_across` over them), written from the study's JSON alone (so a study's
--from-results rewrites it byte for byte): the clocks, the top sites per σ with intervals over models and Holm, the
copy contrast with its sign, the heads beside their attention, attention against MLP sub-blocks, and the outcomes
along the PF-ODE. The heat map beside it: `scoreprobe.viz.circuits.plot_effect_maps`.
"""
import numpy as np

from scoreprobe.reports.interval_text import ci_pair as _ci
from scoreprobe.reports.interval_text import num as _n
from scoreprobe.reports.interval_text import per_model as _models

N_SHOW = 4          # sites per σ in the top tables


def _tau(t, k):
    """τ with its CI: "not reached" where the point is undefined, an upper end "not reached" where the resamples
    that do not reach it exceed the CI's tail (share reaching it given)."""
    if t.get(k) is None:
        return f"not reached (threshold {t.get('rule_threshold', 0.9)} on the rule accuracy)" if k == "tau_rule" else "not reached"
    lo, hi = (t.get(f"{k}_ci") or [None, None])
    reached = t.get(f"{k}_reached")
    tail = "" if reached in (None, 1.0) else f", reached in {reached:.0%} of the resamples"
    return f"{t[k]:.0f} [{_n(lo, '{:.0f}', 'open')}, {_n(hi, '{:.0f}', 'not reached')}{tail}]"


def _header(res, series_who):
    names, p = list(res["models"]), res["preset"]
    taus = "; ".join(f"{n} (`{res['models'][n]}`): τ_rule {_tau(t, 'tau_rule')}, τ_mem {_tau(t, 'tau_mem')}, "
                     f"rule accuracy at most {t.get('rule_acc_max', np.nan):.3f} (last {t.get('rule_acc_last', np.nan):.3f})"
                     for n, t in res["taus"].items())
    series = res.get("series", "open")
    who = (f"{len(names)} {series_who[series]} carry" if len(names) > 1 else
           "the shipped DiT carries" if series == "open" else f"one of the {series_who[series]} carries")
    return [f"# Circuits: where {who} the rule and the copies, read per σ", "",
            f"Models (training seeds of one recipe, one dataset): {taus} (each series' clocks.json). Checkpoints "
            f"{res['steps'][0]}–{res['steps'][-1]} ({len(res['steps'])}); {p['n_pairs']} pairs of each kind, σ "
            f"{p['sigmas']}, sites {p['sites']}, contrast floor {p['floor']:g}; probe {res['seconds']['probe']:.0f} s "
            "(checkpoints already in the resumable stores are read, not recomputed). Definitions: docs/inside.md.", "",
            "How to read it. Effect 0 = the corrupt input's output, 1 = the output with the whole network run on the "
            "clean input; pooled over pairs it is Σ (m_patched − m_corrupt) / Σ (m_clean − m_corrupt) over the pairs "
            f"whose own |contrast| ≥ {p['floor']:g}, and **undefined (NaN)** where those contrasts have mixed sign or "
            "their mean is below the floor: such a ratio means nothing (+3.56 / −2.11 / +1.33 pool to \"+0.93\"). "
            "Every effect is read **per σ**: a site can carry +a at one noise level and −a at another, and a mean "
            "over σ would call that no effect. *Models are the units*: mean over models [95% t interval, "
            f"{len(names) - 1} df] and the per-model values; claims \"effect ≠ 0\" are Holm-adjusted over the family "
            "stated with each table. *Rule pairs*: a held-out item vs the same with one bit flipped; the metric "
            "reads the flipped bit's group mates. *Copy pairs*: a training item vs its nearest held-out item; the "
            "metric reads their difference.", ""]


def _undefined_lines(res, kind):
    cells = [c for c in res["cells"][kind] if c["undefined"]]
    if not cells:
        return [f"Every {kind} effect at the last checkpoint is defined in every model."]
    by = {}
    for c in cells:
        by.setdefault(c["sigma"], set()).add(c["undefined"])
    return [f"Undefined {kind} effects at the last checkpoint: " + "; ".join(
        f"σ {s:g}: {sum(c['sigma'] == s for c in cells)} of {len(res['sites'])} sites ({' | '.join(sorted(r))})"
        for s, r in by.items()) + "."]


def _ranked(res, kind, sigma):
    row = [c for c in res["cells"][kind] if c["sigma"] == sigma and c["mean"] is not None]
    return sorted(row, key=lambda c: -c["mean"])


def _top_table(res, kind):
    names, kinds = list(res["models"]), res["site_kinds"]
    fam, tau = res["family"][kind], "τ_rule" if kind == "rule" else "τ_mem"
    out = [f"Holm family: {fam['what']} ({fam['size']} tests, α {fam['alpha']}).", "",
           f"| σ | rank | site | kind | effect, mean [95% t CI] | per model | p (Holm) | half-final step, geometric mean [CI] "
           f"(per model: step = step / its {tau}) |", "|---:|---:|---|---|---|---|---:|---|"]
    for s in res["sigmas"]:
        row = _ranked(res, kind, s)
        if not row:
            out.append(f"| {s:g} | – | every site undefined | | | | | |")
        for r, c in enumerate(row[:N_SHOW]):
            out.append(f"| {s:g} | {r + 1} | `{c['site']}` | {kinds[c['site']]} | {_n(c['mean'])} {_ci(c['ci'])} | "
                       f"{_models(c['per_model'], names)} | {_n(c['p_holm'], '{:.3f}')} | "
                       f"{_half(c, names)} |")
    return out + ["", "`≤`: already at half of its last value at the first checkpoint where the effect is defined "
                  "(a bound; a mean over models with a bound in it is a bound).", "", *_undefined_lines(res, kind)]


def _half(c, names):
    """Half-final step in steps: mean [CI] over models, then per model its step and step / τ ("≤": a bound)."""
    b = c.get("half_is_bound") or [False] * len(names)
    le = "≤ " if any(b) else ""
    per = ", ".join(f"{n} {'≤' if bi else ''}{_n(v, '{:.0f}', 'NaN')} = {_n(r, '{:.2f}', 'NaN')}"
                    for n, v, r, bi in zip(names, c["half_step"], c["half_over_tau"], b))
    return f"{le}{_n(c['half_step_mean'], '{:.0f}')} {_ci(c['half_step_ci'], '{:.0f}')} ({per})"


def _pair_ci_table(res, kind):
    """Per model, the pair-bootstrap CI of the top site per σ (the within-model uncertainty)."""
    names, out = list(res["models"]), []
    idx = {s: i for i, s in enumerate(res["sites"])}
    for si, s in enumerate(res["sigmas"]):
        row = _ranked(res, kind, s)
        if not row:
            continue
        j = idx[row[0]["site"]]
        parts = [f"{n} {_n(res['per_model'][n]['effects'][kind]['effect'][si][j])} "
                 f"{_ci(res['per_model'][n]['effects'][kind]['pair_ci'][si][j])}" for n in names]
        out.append(f"- σ {s:g}, `{row[0]['site']}`: " + "; ".join(parts))
    return ["Within each model, a bootstrap over pairs (2.5–97.5 %, over the resamples where the pooled effect is "
            "defined) of the top site per σ:", "", *out] if out else []


def _contrast_table(res):
    c, names = res["contrasts"], list(res["models"])
    n = res["per_model"][names[0]]["copy_contrast"]["n_pairs"]
    out = ["| σ | copy contrast, mean [CI] | per model | pairs < 0 (of " + f"{n}) per model | rule contrast, mean | "
           "rule pairs < 0 | copy contrast half-decay / τ_mem, mean [CI] |", "|---:|---|---|---|---:|---|---|"]
    for i, s in enumerate(res["sigmas"]):
        cl, hd = c["copy_last"], c["copy_half_decay_over_tau"]
        out.append(f"| {s:g} | {_n(cl['mean'][i], '{:+.3f}')} {_ci(cl['ci'][i], '{:+.3f}')} | "
                   f"{_models([v[i] for v in cl['per_model']], names, '{:+.3f}')} | "
                   f"{', '.join(str(v[i]) for v in c['copy_negative'])} | {_n(c['rule_last']['mean'][i], '{:+.3f}')} | "
                   f"{', '.join(str(v[i]) for v in c['rule_negative'])} | {_n(hd['mean'][i], '{:.2f}')} "
                   f"{_ci(hd['ci'][i], '{:.2f}')} ({_models([v[i] for v in hd['per_model']], names, '{:.2f}')}) |")
    return out


def _copy(res):
    return ["## Copy pairs, per σ", "",
            "The copy contrast (network-clean − corrupt metric at the last checkpoint, mean over pairs) is read with "
            "its sign: near 0 or **negative is what copying looks like** (the network's output on the held-out "
            "neighbour points as far or further towards the training item than on the item itself), not the absence "
            "of an effect; where the pairs' contrasts have mixed sign, the copy effects of that σ are undefined.", "",
            *_contrast_table(res), "", *_top_table(res, "copy"), ""]


def _heads(res):
    a = [res["per_model"][n]["attention"] for n in res["models"]]
    if any(v is None for v in a):
        return []
    att = np.mean([v["last"] for v in a], 0)                                    # (σ, layer, head)
    heads = [s for s in res["sites"] if res["site_kinds"][s] == "head"]
    rank = {s: {h: i + 1 for i, h in enumerate(c["site"] for c in _ranked(res, "rule", s))} for s in res["sigmas"]}
    cell = {(c["sigma"], c["site"]): c for c in res["cells"]["rule"]}

    def key(h):
        return min(rank[s].get(h, 99) for s in res["sigmas"])
    out = ["## Heads: ranked by rule effect per σ, attention beside it", "",
           "Attention is where a head looks (mass from a query token to the tokens sharing a parity group with it, "
           f"last checkpoint, mean over models; uniform attention gives {np.mean([v['chance'] for v in a]):.3f}); it is "
           "a description, not an effect, and a head is not highlighted by it.", "",
           "| head | " + " | ".join(f"rule effect σ {s:g} (rank)" for s in res["sigmas"]) + " | attention to the group, "
           "per σ |", "|---|" + "---|" * len(res["sigmas"]) + "---|"]
    for h in sorted(heads, key=key):
        layer, head = int(h.split(".")[1]), int(h.split("head=")[1].rstrip("]"))
        eff = " | ".join(f"{_n(cell[(s, h)]['mean'])} {_ci(cell[(s, h)]['ci'])} ({rank[s].get(h, '–')})"
                         for s in res["sigmas"])
        out.append(f"| `{h}` | {eff} | {' / '.join(f'{att[i, layer, head]:.2f}' for i in range(len(res['sigmas'])))} |")
    return out + [""]


def _sub_blocks(res):
    out = ["## Attention vs MLP sub-blocks, per σ", "",
           "Σ over layers of the attention sub-block effects minus Σ of the MLP sub-block effects (last checkpoint), "
           "mean over models [t CI] (per model). Patching tells where the flipped bit's information travels, not "
           "whether a product of the group's values is formed there.", ""]
    for kind in ("rule", "copy"):
        d, names = res["contrasts"][f"{kind}_attn_minus_mlp"], list(res["models"])
        out.append(f"- {kind}: " + "; ".join(f"σ {s:g}: {_n(d['mean'][i])} {_ci(d['ci'][i])} "
                                             f"({_models([v[i] for v in d['per_model']], names)})"
                                             for i, s in enumerate(res["sigmas"])))
    return out + [""]


def _share(r, k, names):
    return f"{_n(r[k]['mean'], '{:.2f}')} {_ci(r[k]['ci'], '{:.2f}')} ({_models(r[k]['per_model'], names, '{:.2f}')})"


def _ode(res):
    names = list(res["models"])
    out = ["## Along the PF-ODE (each model's last checkpoint)", "",
           f"Each site patched at every Heun evaluation with σ ≤ σ*, from σ_start {res['preset']['ode_sigma_start']}; "
           "`*` = every hook point. Outcomes are shares of the pairs whose clean and corrupt trajectories end in "
           "*different* basins unpatched (\"apart\"); there the patched corrupt endpoint lands in the clean basin, "
           "back in its own (no flip) or in a third basin, and the three sum to 1. Pairs that end together "
           "unpatched are left out (counted, with how many of them the patch moved). Mean over models of each model's "
           "share [95% interval inside [0, 1]: Korn–Graubard's Clopper–Pearson at the effective number of pairs the "
           "models' spread leaves, df-adjusted for 3 models (`scoreprobe.stats.unit_intervals.cluster_share`)] "
           "(per model).", "",
           "| pairs | site | σ* | apart (together, moved) per model | to clean | to corrupt (no flip) | to a third basin |",
           "|---|---|---:|---|---|---|---|"]
    for r in res["ode_across"]:
        counts = ", ".join(f"{a} ({t}, {m})" for a, t, m in zip(r["n_apart"], r["n_together"], r["together_moved"]))
        out.append(f"| {r['kind']} | `{r['site']}` | {r['sigma_star']:g} | {counts} | {_share(r, 'to_clean', names)} | "
                   f"{_share(r, 'to_corrupt', names)} | {_share(r, 'to_third', names)} |")
    return out + [""]


def _summary(res):
    out, names = ["## Summary", ""], list(res["models"])
    out.append("- Clocks: " + "; ".join(f"{n} τ_rule {_tau(t, 'tau_rule')}" for n, t in res["taus"].items())
               + ". Rule timings are therefore given in steps, with step / τ_rule only where τ_rule exists.")
    for kind in ("rule", "copy"):
        for s in res["sigmas"]:
            row = _ranked(res, kind, s)
            if not row:
                out.append(f"- {kind}, σ {s:g}: every effect undefined ({_reasons(res, kind, s)}).")
                continue
            c = row[0]
            holm = ("Holm p < 0.05" if c["p_holm"] is not None and c["p_holm"] < 0.05 else
                    f"not significant after Holm (p {_n(c['p_holm'], '{:.2f}')})")
            out.append(f"- {kind}, σ {s:g}: top site `{c['site']}` {_n(c['mean'])} {_ci(c['ci'])} "
                       f"({_models(c['per_model'], names)}; {holm}).")
    for kind in ("rule", "copy"):
        sig = [c for c in res["cells"][kind] if c["p_holm"] is not None and c["p_holm"] < res["family"][kind]["alpha"]]
        out.append(f"- {kind}: cells whose effect ≠ 0 survives Holm ({res['family'][kind]['size']} tests): " + (
            "; ".join(_significant(c) for c in sig) if sig else "none") + ".")
    cl = res["contrasts"]["copy_last"]
    out.append("- Copy contrast at the last checkpoint, by σ: " + ", ".join(
        f"{s:g}: {_n(cl['mean'][i], '{:+.3f}')} {_ci(cl['ci'][i], '{:+.3f}')}" for i, s in enumerate(res["sigmas"]))
        + " — a negative one is what copying looks like; pooled over σ these signs would cancel.")
    return out + [""]


def _significant(c):
    """A Holm-significant cell with its rank and size beside its p: 'σ 1.5 `site` +0.09 [..] (p_Holm 0.006;
    rank 19 of 28 at σ 1.5, the largest there +0.61)' — significance is not size."""
    where = (f"; rank {int(c['rank'])} of {c['n_ranked']} at σ {c['sigma']:g}, the largest there {_n(c['top_mean'])}"
             if c.get("rank") is not None else "")
    return f"σ {c['sigma']:g} `{c['site']}` {_n(c['mean'])} {_ci(c['ci'])} (p_Holm {c['p_holm']:.3f}{where})"


def _reasons(res, kind, s):
    return " | ".join(sorted({c["undefined"] for c in res["cells"][kind] if c["sigma"] == s and c["undefined"]}))


def markdown(res, series_who, result_names, command):
    """The report of one series' result `res` (the study's JSON): `series_who` {series: who its models are},
    `result_names` {series: the file stem of its report} (the figure is <stem>.png; the other series are named),
    `command` the command that switches series."""
    series = res.get("series", "open")
    lines = [*_header(res, series_who), *_summary(res), "## Rule pairs, per σ: sites ranked by effect", "",
             *_top_table(res, "rule"), "", *_pair_ci_table(res, "rule"), "", *_copy(res), *_heads(res),
             *_sub_blocks(res), *_ode(res),
             f"Figure `{result_names[series]}.png`: per pair kind and σ, the pooled effect (site × "
             "checkpoint), mean over models; blank where it is undefined in at least one model.", "",
             "The other series: " + ", ".join(f"`{v}.md`" for k, v in result_names.items() if k != series)
             + f" (`{command}`). Not done here: the copy effects where the "
             "pairs' contrasts have mixed sign stay undefined (no sign-split reading is attempted).", ""]
    return "\n".join(lines) + "\n"
