"""Section 1 of the decompose study, from the json alone: the calls over trained models (models_stage.py).

A cell (step, σ, split) names an oracle only where the two-level bootstrap (models, then points) puts the best
oracle's lead over the runner-up above 0 and its margin over the shrinkage baseline c·x above 0
(`sp.decompose_summary`); otherwise "undecided", "indistinguishable" (the top two oracles within 0.01 of the
network's variance of each other), "shrinkage" (the network is a linear shrinkage, r² of c·x ≥ 0.999: the
untrained adaLN-Zero network) or "undefined". The mixture weights with intervals are the primary attribution.
"""
import numpy as np

from scoreprobe.viz.common import save_figure

MIX_SIGMAS = (0.5, 1.0, 2.0, 5.0)
NO_CALL = ("undecided", "indistinguishable", "shrinkage", "undefined")


def _labels(m, split, which="pooled"):
    """(step, σ) labels of one split."""
    j = m["split"].index(split)
    return np.array(m[which]["label"] if which == "pooled" else m["per_model"][which]["label"], dtype=object)[:, :, j]


def regions(m, split):
    """{label: {cells, steps [lo, hi], sigma [lo, hi]}} of the pooled calls of one split."""
    lab = _labels(m, split)
    out = {}
    for name in sorted(set(lab.ravel()), key=lambda n: (n in NO_CALL, n)):
        i, k = np.nonzero(lab == name)
        steps, sig = [m["steps"][a] for a in i], [m["sigma"][b] for b in k]
        out[name] = {"cells": int(len(i)), "steps": [min(steps), max(steps)], "sigma": [min(sig), max(sig)]}
    return out


def models_summary(m):
    if not m:
        return None
    per_model_agree = {}
    for name in m["models"]:
        a, b = _labels(m, "heldout"), _labels(m, "heldout", name)
        called = ~np.isin(a, NO_CALL)
        per_model_agree[name] = [int((a[called] == b[called]).sum()), int(called.sum())]
    return {"regions": {sp: regions(m, sp) for sp in m["split"]}, "per_model_agree": per_model_agree}


def _cell(m, step, sigma, split="heldout"):
    i, k, j = m["steps"].index(step), m["sigma"].index(sigma), m["split"].index(split)
    return i, k, j


def _mix(m, i, k, j):
    w, lo, hi = (np.array(m["mixture"][v], float)[i, k, j] for v in ("weight", "lower", "upper"))
    parts = [f"{o} {w[q]:.2f} [{lo[q]:.2f}, {hi[q]:.2f}]" for q, o in enumerate(m["oracle"])
             if np.isfinite(w[q]) and hi[q] >= 0.05]
    return "; ".join(parts) if parts else "—"


def _call_text(m, i, k, j):
    lab = m["pooled"]["label"][i][k][j]
    if lab in NO_CALL:
        return lab
    lo, hi = m["pooled"]["lead_lower"][i][k][j], m["pooled"]["lead_upper"][i][k][j]
    return f"{lab} (lead {m['pooled']['lead'][i][k][j]:+.3f} [{lo:+.3f}, {hi:+.3f}])"


SERIES_TEXT = {"open": "the shipped recipe (parity G = 2, N = 120, 36 000 steps: its window opens)",
               "closed": "the closed-window series (parity G = 2, N = 30, 3750 steps: τ_mem before any τ_rule; "
                         "analyses/mechanism_seeds' config, trained here: models_stage.train_closed)"}


def _taus_text(m):
    """'name τ_rule …, τ_mem …' per model from the clocks each series' run directory holds."""
    def one(t, k):
        v = (t or {}).get(k)
        return "not reached" if v is None else f"{v:.0f}"
    taus = m.get("taus") or {}
    return "; ".join(f"{n}: τ_rule {one(taus.get(n), 'tau_rule')}, τ_mem {one(taus.get(n), 'tau_mem')}"
                     for n in m["models"])


def models_findings(m, s, t, key="models"):
    if not m:
        return [f"- Section 1 ({key}) was not measured (no trained models found)."]
    reg = s[key]["regions"]["heldout"]
    text = SERIES_TEXT[m.get("series", "open")]
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
                   "candidates (it cannot copy): " + "; ".join(cells) + ".")
    i, j = len(m["steps"]) - 1, m["split"].index("heldout")
    out.append(f"- Mixture weights at the last step ({m['steps'][-1]}), the primary attribution: " + "; ".join(
        f"σ {x:g}: {_mix(m, i, m['sigma'].index(x), j)}" for x in (1.0, 2.0) if x in m["sigma"]) + ".")
    return out


def models_section(m, s, t, prefix, key="models", title="1. Which oracle explains the network (over trained models)"):
    if not m:
        return [f"## {title}", "", "Not measured (no trained models of this series found).", ""]
    clk = f" Clocks (each model's clocks.json): {_taus_text(m)}." if m.get("taus") else ""
    L = [f"## {title}", "", f"Series: {SERIES_TEXT[m.get('series', 'open')]}.{clk}", "",
         f"Models: {', '.join(f'{n} ({d})' for n, d in m['model_dirs'].items())}. Oracles: {', '.join(m['oracle'])}. "
         f"A cell names an oracle only where a two-level bootstrap ({m['n_boot']} resamples: models, then points "
         "within each) puts its lead over the runner-up above 0 and its margin over the best shrinkage c·x above 0; "
         "otherwise undecided / indistinguishable (top two oracles within 0.01 of the network's variance of each "
         "other) / shrinkage (r² of c·x ≥ 0.999) / undefined. Per split, the (step × σ) cells of each label:", ""]
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
          "Mixture weights (w ≥ 0, Σ w = 1; 95% two-level interval; oracles whose upper end is below 0.05 left out), "
          "held-out points — the primary attribution:", "",
          "| step | " + " | ".join(f"σ {x:g}" for x in MIX_SIGMAS if x in m["sigma"]) + " |",
          "|---|" + "---|" * sum(x in m["sigma"] for x in MIX_SIGMAS)]
    for i, st in enumerate(m["steps"]):
        L.append(f"| {st} | " + " | ".join(_mix(m, i, m["sigma"].index(x), j) for x in MIX_SIGMAS if x in m["sigma"])
                 + " |")
    fig = "decompose_heatmap.png" if key == "models" else f"decompose_heatmap_{m['series']}.png"
    L += _patch_lines(m) + ["", f"![calls]({prefix}{fig})", ""]
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


def fig_models(m, path):
    """Held-out calls over (step, σ): one colour per label."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    lab = _labels(m, "heldout")
    names = sorted(set(lab.ravel()), key=lambda n: (n in NO_CALL, n))
    idx = np.vectorize(names.index)(lab).T.astype(float)                         # (σ, step)
    fig, ax = plt.subplots(figsize=(8, 3.6))
    cmap = matplotlib.colormaps["tab10"].resampled(max(len(names), 2))
    ax.imshow(idx, aspect="auto", origin="lower", cmap=cmap, vmin=-0.5, vmax=len(names) - 0.5)
    ax.set_xticks(range(len(m["steps"])), [str(s) for s in m["steps"]], rotation=60, fontsize=7)
    ax.set_yticks(range(len(m["sigma"])), [f"{x:g}" for x in m["sigma"]], fontsize=7)
    ax.set_xlabel("step"), ax.set_ylabel("σ")
    handles = [matplotlib.patches.Patch(color=cmap(q), label=n) for q, n in enumerate(names)]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_title(f"{m.get('series', 'open')} series: held-out calls over {len(m['models'])} models "
                 "(two-level bootstrap)", fontsize=9)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
