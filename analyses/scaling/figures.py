"""The figures of analyses/scaling, drawn from its JSON report (so from the exports only):
pooled τ with seed-inclusive 95% CI ribbons, per-seed points, lower bounds and unbounded CIs as arrows,
the paper's reference laws dashed."""
import math

import numpy as np

from scoreprobe.viz import new_figure
from scoreprobe.viz.common import save_figure

COLORS = {"tau_rule": "#2ca02c", "tau_mem": "#ff9f1c", "window_log10_width": "#1f77b4", "abruptness": "#d62728"}


def _finite(v):
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


def draw_pooled(ax, xs, pools, color, label, marker="o"):
    """Pooled values with a CI ribbon over x, per-seed points, and arrows: up from a lower bound (some seed
    unreached) or from the top of a CI that is unbounded (more than 2.5% of the replicates unreached)."""
    xs = list(xs)
    if not xs:
        return
    y = np.array([p["pooled"] if _finite(p["pooled"]) else np.nan for p in pools], dtype=float)
    lo = np.array([p["ci"][0] if _finite(p["ci"][0]) else np.nan for p in pools], dtype=float)
    hi = np.array([p["ci"][1] if _finite(p["ci"][1]) else np.nan for p in pools], dtype=float)
    exact = np.array([not p["lower_bound"] for p in pools])
    ax.fill_between(xs, lo, np.where(np.isfinite(hi), hi, y), color=color, alpha=0.2, lw=0)
    ax.plot(np.asarray(xs)[exact], y[exact], "-" + marker, color=color, label=label)
    for x, p, yy, h in zip(xs, pools, y, hi):
        seeds = [v for v in p["per_seed"] if _finite(v)]
        ax.plot([x] * len(seeds), seeds, marker, color=color, ms=3, alpha=0.5, mfc="none")
        if p["lower_bound"] or not math.isfinite(h):
            start = yy if p["lower_bound"] else (lo[xs.index(x)] if np.isfinite(lo[xs.index(x)]) else yy)
            if np.isfinite(start):
                ax.annotate("", xy=(x, start * 3), xytext=(x, start), arrowprops=dict(arrowstyle="->", color=color))
                if p["lower_bound"]:
                    ax.plot([x], [start], "v", color=color, mfc="none")


def panel_G(ax, rep):
    per = rep.get("G", {}).get("per_G", {})
    Gs = sorted(int(g) for g in per)
    draw_pooled(ax, Gs, [per[g] for g in Gs], COLORS["tau_rule"], "τ_rule (pooled, 95% CI)")
    ref = [g for g in Gs if not per[g]["lower_bound"]]
    if ref:
        g0 = ref[0]
        xs = np.array(Gs, dtype=float)
        ax.plot(xs, per[g0]["pooled"] * 10.0 ** (xs - g0), "--", color="grey", lw=1, label="paper: ×10 per unit G")
    ax.set(xlabel="group size G", ylabel="training step", yscale="log", title="τ_rule vs G")
    ax.set_xticks(Gs or [2, 3, 4])


def panel_N(ax, rep):
    n = rep.get("N", {})
    for key, G, marker in (("tau_mem", 2, "s"), ("tau_rule", 2, "o"), ("tau_rule", 3, "^")):
        per = n.get(f"G{G}", {})
        Ns = sorted(int(x) for x in per)
        draw_pooled(ax, Ns, [per[x][key] for x in Ns], COLORS[key] if G == 2 else "#9467bd",
                    f"{key.replace('tau_', 'τ_')} G = {G}", marker)
    fit = n.get("fit_mem_G2")
    allN = sorted(int(x) for x in n.get("G2", {}))
    if allN:
        xs = np.geomspace(min(allN), max(allN), 50)
        ax.plot(xs, 35 * xs ** 1.14, "--", color="grey", lw=1, label="paper: 35·N^1.14")
        if fit and _finite(fit.get("b")):
            ax.plot(xs, fit["a"] * xs ** fit["b"], ":", color=COLORS["tau_mem"], lw=1,
                    label=f"fit {fit['a']:.3g}·N^{fit['b']:.2f}")
    ax.set(xlabel="training set size N", ylabel="training step", xscale="log", yscale="log", title="τ vs N")


def panel_capacity(ax, rep):
    cap = rep.get("capacity", {})
    for G, marker in ((2, "o"), (3, "^")):
        per = cap.get(f"G{G}", {})
        sizes = sorted(per, key=lambda k: per[k]["params"])
        for key in ("tau_rule", "tau_mem"):
            draw_pooled(ax, [per[s]["params"] for s in sizes], [per[s][key] for s in sizes], COLORS[key],
                        f"{key.replace('tau_', 'τ_')} G = {G}", marker)
    ax.set(xlabel="parameters", ylabel="training step", xscale="log", yscale="log", title="τ vs capacity")


def panel_gpt(ax, rep):
    gpt = rep.get("gpt", {})
    labels = [k for k in gpt if "abruptness" in gpt[k]]
    for i, label in enumerate(labels):
        p = gpt[label]["abruptness"]
        ax.vlines(i, *p["ci"], color=COLORS["abruptness"])                # the CI as it is (need not be centred)
        ax.plot([i], [p["pooled"]], "o", color=COLORS["abruptness"])
        ax.plot([i] * len(p["per_seed"]), p["per_seed"], "o", color=COLORS["abruptness"], ms=3, mfc="none")
    ax.set_xticks(range(len(labels)), [label.split(" (")[0] for label in labels], fontsize=7)
    ax.set(ylabel="abruptness of memorization\n(logit mem_ratio per decade)", title="GPT vs DiT")


def figures(rep, args, stem):
    fig = new_figure((13, 9))
    axes = fig.subplots(2, 2).ravel()
    for ax, panel in zip(axes, (panel_G, panel_N, panel_capacity, panel_gpt)):
        panel(ax, rep)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        elif not ax.has_data():
            ax.text(0.5, 0.5, "no runs done yet", ha="center", transform=ax.transAxes)
    fig.suptitle(f"Scaling of the two clocks (preset {args.preset}), paper thresholds: pooled over seeds, 95% CI "
                 "ribbons (t on ln τ); open points: seeds; arrows: lower bounds at the budget")
    save_figure(fig, stem.with_suffix(".png"), dpi=100)
    curves_figure(rep, stem.with_name(stem.name + "_curves.png"))
    from analyses.scaling.threshold_figures import threshold_figures
    threshold_figures(rep, stem)


def curves_figure(rep, path):
    """Memorization of the GPTs and the DiT on the same data (per seed), and the puzzles' family accuracies."""
    fig = new_figure((12, 4.2))
    ax1, ax2 = fig.subplots(1, 2)
    g = {label: v["runs"] for label, v in rep.get("gpt", {}).items() if "runs" in v}
    runs = {r["run"]: r for r in rep.get("runs", [])}
    for (label, names), color in zip(g.items(), ("black", "#d62728", "#1f77b4")):
        for i, name in enumerate(names):
            c = runs[name]["curve"]
            ax1.plot(np.asarray(c["step"]) + 1, c["mem_ratio"], "-", color=color, lw=1,
                     label=label if i == 0 else None)
    ax1.axhline(0.1, color="grey", lw=0.5)
    ax1.set(xscale="log", xlabel="training step + 1", ylabel="mem_ratio", title="memorization, GPT vs DiT (seeds)")
    styles = dict(zip(("rows", "columns", "boxes", "cells"), ("-", "--", ":", "-.")))
    for r, color in zip([r for r in rep.get("runs", []) if "family_names" in r and r["seed"] == 0],
                        ("#2ca02c", "#9467bd", "#8c564b")):
        for f in r["family_names"]:
            ax2.plot(np.asarray(r["curve"]["step"]) + 1, r["curve"]["family_acc"][f], styles.get(f, "-"), color=color,
                     label=f"{r['group']} {f}")
    ax2.axhline(0.9, color="grey", lw=0.5)
    ax2.set(xscale="log", xlabel="training step + 1", ylabel="family accuracy", title="constraint families (seed 0)")
    for ax in (ax1, ax2):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    save_figure(fig, path, dpi=100)
