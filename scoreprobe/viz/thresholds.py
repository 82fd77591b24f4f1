"""One threshold-curve figure per claim of analyses/scaling (issue 35): the claim's statistic (a factor, a ratio,
an exponent) at every threshold with its seed-level 95% CI, the paper's threshold as a dashed vertical line, the
value the claim is tested against as a grey horizontal line, and thresholds where a seed is censored as crosses
on the axis. Drawn from the report of tables.py (the exports only)."""
import math

from scoreprobe.stats.curves import value_of
from scoreprobe.viz import new_figure
from scoreprobe.viz.common import save_figure

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")


def draw_curve(ax, curve, label, color, offset=0.0):
    """Values with CI bars at the readable thresholds; censored thresholds as crosses at the bottom."""
    xs, ys, lo, hi, cens = [], [], [], [], []
    for row in curve:
        v, a, b = value_of(row)
        if math.isfinite(v) and math.isfinite(a) and math.isfinite(b):
            xs.append(row["threshold"] + offset)
            ys.append(v)
            lo.append(v - a)
            hi.append(b - v)
        else:
            cens.append(row["threshold"] + offset)
    if xs:
        ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o-", color=color, ms=4, capsize=2, label=label)
    if cens:
        ax.plot(cens, [0.02] * len(cens), "x", color=color, transform=ax.get_xaxis_transform(),
                label=None if xs else f"{label}: censored")


def panel(ax, curves, ref, paper, xlabel, ylabel, title, log=False):
    """curves: [(label, curve)]."""
    span = max((len(c) for _, c in curves), default=1)
    step = 0.004 if span > 6 else 0.0012
    for i, (label, c) in enumerate(curves):
        draw_curve(ax, c, label, COLORS[i % len(COLORS)], offset=(i - (len(curves) - 1) / 2) * step)
    ax.axvline(paper, color="black", ls="--", lw=0.8, label=f"paper's threshold {paper:g}")
    if ref is not None:
        ax.axhline(ref, color="grey", lw=1)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    if log:
        ax.set_yscale("log")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


RULE_X, MEM_X = "rule-accuracy threshold", "memorization threshold"


def claims(rep):
    """{name: [(curves, ref, paper, xlabel, ylabel, title, log)]} of the claims with curves in the report."""
    out = {}
    g, n, cap = rep.get("G", {}), rep.get("N", {}), rep.get("capacity", {})
    if "curve_factor" in g:
        out["G"] = [([("G = 2 → 3 (fit over G)", g["curve_factor"])], 10.0, 0.9, RULE_X, "τ_rule factor per unit G",
                     "τ_rule grows ×10 per unit G? (grey: 10)", True)]
    if "curve_b" in n:
        out["N"] = [([(f"N = {k} / 240", c) for k, c in n.get("curve_rule_N_G2", {}).items()], 1.0, 0.9, RULE_X,
                     "τ_rule ratio", "τ_rule invariant to N? (G = 2; grey: 1)", True),
                    ([("b", n["curve_b"])], 1.14, 0.1, MEM_X, "exponent b of τ_mem ∝ N^b",
                     "τ_mem ∝ N^1.14? (G = 2; grey: 1.14)", False)]
    if any(k.startswith("curve_") for k in cap):
        out["capacity"] = [([(f"G = {G}", cap[f"curve_{key}_G{G}"]) for G in (2, 3) if f"curve_{key}_G{G}" in cap],
                            0.0, paper, x, f"exponent of {key.replace('tau_', 'τ_')} ∝ params^b",
                            f"{key.replace('tau_', 'τ_')} falls with capacity? (grey: 0)", False)
                           for key, paper, x in (("tau_rule", 0.9, RULE_X), ("tau_mem", 0.1, MEM_X))]
    rules = rep.get("rules", {})
    if "curve_tau_rule_vs_parity2" in rules:
        out["rules"] = [(list(rules["curve_tau_rule_vs_parity2"].items()), 1.0, 0.9, RULE_X, "τ_rule / parity G = 2",
                         "exact-K learned fast? (grey: 1)", True),
                        (list(rules["curve_tau_mem_vs_parity2"].items()), 1.0, 0.1, MEM_X, "τ_mem / parity G = 2",
                         "τ_mem invariant to the rule? (grey: 1)", True)]
    puzzles = [(k, v["curve_rows_over_columns"]) for k, v in rep.get("puzzles", {}).items()
               if isinstance(v, dict) and "curve_rows_over_columns" in v]
    if puzzles:
        out["puzzles"] = [(puzzles, 1.0, 0.9, "family-accuracy threshold", "τ_rows / τ_columns (within runs)",
                           "rows before columns? (grey: 1)", True)]
    gc = rep.get("gpt", {}).get("curves", {})
    if gc:
        out["gpt"] = [(list(gc[f"{key}_vs_dit"].items()), 1.0, paper, x, f"{key.replace('tau_', 'τ_')} GPT / DiT",
                       f"GPT {key.replace('tau_', 'τ_')} earlier than the DiT's? (grey: 1)", True)
                      for key, paper, x in (("tau_rule", 0.9, RULE_X), ("tau_mem", 0.1, MEM_X)) if f"{key}_vs_dit" in gc]
    return out


def threshold_figures(rep, stem):
    """Write <stem>_thresholds_<claim>.png for every claim; returns the paths."""
    paths = []
    for name, panels in claims(rep).items():
        fig = new_figure((5.5 * len(panels), 4.2))
        axes = fig.subplots(1, len(panels), squeeze=False)[0]
        for ax, spec in zip(axes, panels):
            curves, ref, paper, xlabel, ylabel, title, log = spec
            panel(ax, curves, ref, paper, xlabel, ylabel, title, log)
        fig.suptitle("seed-level 95% CIs (t on ln τ; fits: t on the slope); ×: a seed censored at that threshold",
                     fontsize=8)
        path = stem.with_name(f"{stem.name}_thresholds_{name}.png")
        save_figure(fig, path, dpi=100)
        paths.append(path)
    return paths
