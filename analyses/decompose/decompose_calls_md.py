"""The markdown of the decompose calls over trained models (`scoreprobe.stats.decompose_models`), from the study's
JSON alone: the headline lines, and a section with the cells of each label per split, the call per held-out cell,
each model's agreement with the pooled call, the mixture weights (the primary attribution) and the best patch size
per σ. The map beside it: `scoreprobe.viz.decompose.plot_calls_map`.
"""
import numpy as np

from scoreprobe.stats.decompose_models import NO_CALL

MIX_SIGMAS = (0.5, 1.0, 2.0, 5.0)


def _cell(m, step, sigma, split="heldout"):
    i, k, j = m["steps"].index(step), m["sigma"].index(sigma), m["split"].index(split)
    return i, k, j


def _mix(m, i, k, j, mix=None, oracles=None):
    """The weights of one cell (step i, σ k, split j) above 0.05 at their upper end, of m["mixture"] or `mix`."""
    mix, oracles = mix or m["mixture"], oracles or m["oracle"]
    w, lo, hi = (np.array(mix[v], float)[i, k, j] for v in ("weight", "lower", "upper"))
    parts = [f"{o} {w[q]:.2f} [{lo[q]:.2f}, {hi[q]:.2f}]" for q, o in enumerate(oracles)
             if np.isfinite(w[q]) and hi[q] >= 0.05]
    return "; ".join(parts) if parts else "—"


def nested_lines(m):
    """The weights at the last step over nested sets of oracles beside the full set's (held-out points): the
    reading of a weight depends on what else is offered. [] where the json has no nested sets."""
    nested = m.get("mixture_nested")
    if not nested:
        return []
    i, j = len(m["steps"]) - 1, m["split"].index("heldout")
    sets = [(n, x, x["oracle"], x["r2"]) for n, x in nested.items()]
    sets.append((f"all offered ({len(m['oracle'])})", m["mixture"], m["oracle"], m["mixture_r2"]))
    L = ["", f"Mixture weights over nested sets of oracles, step {m['steps'][-1]}, held-out points (the same "
         "intervals; mixture r² beside):", "", "| offered set | " + " | ".join(f"σ {x:g}" for x in MIX_SIGMAS
                                                                            if x in m["sigma"]) + " |",
         "|---|" + "---|" * sum(x in m["sigma"] for x in MIX_SIGMAS)]
    for name, mix, oracles, r2 in sets:
        cells = []
        for x in (x for x in MIX_SIGMAS if x in m["sigma"]):
            k = m["sigma"].index(x)
            v = np.array(r2, float)[i, k, j]
            cells.append(_mix(m, i, k, j, mix, oracles) + (f" (r² {v:.2f})" if np.isfinite(v) else " (r² —)"))
        L.append(f"| {name} | " + " | ".join(cells) + " |")
    return L


def _call_text(m, i, k, j):
    lab = m["pooled"]["label"][i][k][j]
    if lab in NO_CALL:
        return lab
    lo, hi = m["pooled"]["lead_lower"][i][k][j], m["pooled"]["lead_upper"][i][k][j]
    return f"{lab} (lead {m['pooled']['lead'][i][k][j]:+.3f} [{lo:+.3f}, {hi:+.3f}])"


def _offered(m):
    return ", ".join(m["oracle"])


def _method(m):
    """How the json's calls were made: issue 73's (its "calls" record) or the former two-level bootstrap."""
    c = m.get("calls")
    if not c:
        return (f"These calls were made under the former definition (a two-level bootstrap, {m['n_boot']} resamples: "
                "models, then points; no multiplicity control, no r² floor, no linear baseline — it calls ties over 3 "
                "models in about 40% of planted recipes, docs/oracles.md \"Calls\"): a cell names an oracle where the "
                "bootstrap puts its lead over the runner-up and its margin over c·x above 0; otherwise undecided / "
                "indistinguishable / shrinkage / undefined. Rerun the models stage to read them under the current "
                "calls.")
    return (f"A cell names an oracle only where it explains r² ≥ {c['min_r2']:g} and beats the runner-up, the best "
            f"shrinkage c·x and the network's own held-out affine fit (and, for the memorizer, the training-set "
            f"Gaussian), tested over {c['unit']}, {c['adjust']} over the {c['n_family']} tested cells "
            f"({c['family']}) at {1 - c['level']:.0%}; otherwise undecided / indistinguishable / shrinkage / none "
            "(nothing explains the share) / linear (the affine fit does as well) / undefined (docs/oracles.md).")


def _taus_text(m):
    """'name τ_rule …, τ_mem …' per model from the clocks each series' run directory holds."""
    def one(t, k):
        v = (t or {}).get(k)
        return "not reached" if v is None else f"{v:.0f}"
    taus = m.get("taus") or {}
    return "; ".join(f"{n}: τ_rule {one(taus.get(n), 'tau_rule')}, τ_mem {one(taus.get(n), 'tau_mem')}"
                     for n in m["models"])


def models_findings(m, s, t, series_text, key="models"):
    """The headline lines of one series' calls (`s`: the study's summary, `s[key]` its `models_summary`);
    `series_text` {series: what the series is}."""
    if not m:
        return [f"- Section 1 ({key}) was not measured (no trained models found)."]
    reg = s[key]["regions"]["heldout"]
    text = series_text[m.get("series", "open")]
    out = [f"- {text[0].upper() + text[1:]}, over {len(m['models'])} trained models "
           f"({', '.join(m['models'])}), held-out points: "
           + "; ".join(f"{n} in {r['cells']} cells (steps {r['steps'][0]}–{r['steps'][1]}, σ {r['sigma'][0]:g}–"
                       f"{r['sigma'][1]:g})" for n, r in reg.items()) + "."]
    if "shrinkage" in reg:
        out.append("- Step 0 is a linear shrinkage (the untrained adaLN-Zero network is x/(1+σ²)): no oracle is "
                   "named there, whichever is nearest.")
    sig5 = 5.0 if 5.0 in m["sigma"] else None
    if sig5 is not None and m.get("series", "open") == "open":
        cells = [f"step {st}: {_call_text(m, *_cell(m, st, sig5))}" for st in m["steps"] if st > 0]
        out.append("- σ = 5, with the Gaussian (Wiener) oracle of the training set's mean and covariance among the "
                   "candidates (the Gaussian cannot copy; a memorizer call is copying only where the memorizer also "
                   "beats the network's own held-out affine fit" + ("" if m.get("calls") else
                                                                     ", which these calls, made before that test, "
                                                                     "did not check") + "): " + "; ".join(cells) + ".")
    i, j = len(m["steps"]) - 1, m["split"].index("heldout")
    out.append(f"- Mixture weights at the last step ({m['steps'][-1]}) over the offered oracles ({_offered(m)}), "
               "the primary attribution: " + "; ".join(
        f"σ {x:g}: {_mix(m, i, m['sigma'].index(x), j)}" for x in (1.0, 2.0) if x in m["sigma"]) + ".")
    return out


def models_section(m, s, t, prefix, series_text, key="models",
                   title="1. Which oracle explains the network (over trained models)"):
    """The section of one series' calls; the map is <prefix>decompose_heatmap[_<series>].png."""
    if not m:
        return [f"## {title}", "", "Not measured (no trained models of this series found).", ""]
    clk = f" Clocks (each model's clocks.json): {_taus_text(m)}." if m.get("taus") else ""
    L = [f"## {title}", "", f"Series: {series_text[m.get('series', 'open')]}.{clk}", "",
         f"Models: {', '.join(f'{n} ({d})' for n, d in m['model_dirs'].items())}. Oracles offered: "
         f"{_offered(m)}. " + _method(m) + " Per split, the (step × σ) cells of each label:", ""]
    for split in m["split"]:
        L += [f"**{split} points**", "", "| label | cells | steps | σ |", "|---|---|---|---|"]
        L += [f"| {n} | {r['cells']} | {r['steps'][0]}–{r['steps'][1]} | {r['sigma'][0]:g}–{r['sigma'][1]:g} |"
              for n, r in s[key]["regions"][split].items()] + [""]
    L += ["Held-out points, the call per cell (lead over the runner-up with its 95% interval):", "",
          "| step | " + " | ".join(f"σ {x:g}" for x in m["sigma"]) + " |", "|---|" + "---|" * len(m["sigma"])]
    j = m["split"].index("heldout")
    for i, st in enumerate(m["steps"]):
        L.append(f"| {st} | " + " | ".join(_call_text(m, i, k, j) for k in range(len(m["sigma"]))) + " |")
    agree = s[key]["per_model_agree"]
    L += ["", "A call pooled over models against each model's own call (held-out cells with a pooled call): " +
          ", ".join(f"{n} {a} of {b}" for n, (a, b) in agree.items()) + ".", "",
          f"Mixture weights over the offered oracles ({_offered(m)}; the best mixture of exactly these: another set "
          "gives other weights) (w ≥ 0, Σ w = 1; 95% " + ("t interval over the models" if m.get("calls") else
                                                           "two-level bootstrap interval") +
          "; oracles whose upper end is below 0.05 left out), held-out points — the primary attribution:", "",
          "| step | " + " | ".join(f"σ {x:g}" for x in MIX_SIGMAS if x in m["sigma"]) + " |",
          "|---|" + "---|" * sum(x in m["sigma"] for x in MIX_SIGMAS)]
    for i, st in enumerate(m["steps"]):
        L.append(f"| {st} | " + " | ".join(_mix(m, i, m["sigma"].index(x), j) for x in MIX_SIGMAS if x in m["sigma"])
                 + " |")
    fig = "decompose_heatmap.png" if key == "models" else f"decompose_heatmap_{m['series']}.png"
    L += nested_lines(m) + _patch_lines(m) + ["", f"![calls]({prefix}{fig})", ""]
    return L


def _patch_lines(m):
    """The best patch size per σ and local family (seed 0, held-out points), at each step (Kamb & Ganguli
    calibrate p per σ the same way)."""
    bp = m.get("best_patch_seed0")
    if not bp:
        return []
    arr = np.array(bp["patch"], float)                                           # (step, σ, split, family)
    j = m["split"].index("heldout")
    L = ["", "Best patch size per σ (highest r², seed 0, held-out points), per local family — "
         f"{', '.join(bp['family'])} — at each step:", "",
         "| step | " + " | ".join(f"σ {x:g}" for x in m["sigma"]) + " |", "|---|" + "---|" * len(m["sigma"])]
    for i, st in enumerate(m["steps"]):
        cells = ["/".join("?" if not np.isfinite(v) else f"{v:.0f}" for v in arr[i, k, j]) for k in range(len(m["sigma"]))]
        L.append(f"| {st} | " + " | ".join(cells) + " |")
    return L
