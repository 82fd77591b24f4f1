"""Threshold-curve panels (issue 35): a claim's statistic (a factor, a ratio, an exponent) at every threshold with
its seed-level 95% CI (rows of `scoreprobe.stats.curves`), the paper's threshold as a dashed vertical line, the
value the claim is tested against as a grey horizontal line, and thresholds where a seed is censored as crosses
on the axis."""
import math

from scoreprobe.stats.curves import value_of

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
