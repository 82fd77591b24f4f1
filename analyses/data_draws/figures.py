"""The figure of analyses/data_draws: τ_rule and τ_mem of every run by data seed (x) and training seed
(marker), per configuration."""
import math

from scoreprobe.viz.common import agg_figure, save_figure

MARKERS = "osD^v<>px*"


def figure(rows_by, path):
    """One column per configuration, rows τ_rule and τ_mem; censored runs drawn hollow at their last step."""
    n = max(len(rows_by), 1)
    fig = agg_figure((3.4 * n, 5.6))
    axes = fig.subplots(2, n, squeeze=False)
    for j, ((G, N), rows) in enumerate(rows_by.items()):
        for i, (key, label) in enumerate((("tau_rule", "τ_rule (0.9)"), ("tau_mem", "τ_mem (0.1)"))):
            ax = axes[i, j]
            for r in rows:
                d, s, v = r["meta"]["data_seed"], r["seed"], r[key]
                reached = math.isfinite(v)
                ax.scatter([d + 0.08 * (s - 1)], [v if reached else r["steps"]], marker=MARKERS[s % len(MARKERS)],
                           facecolors=f"C{d}" if reached else "none", edgecolors=f"C{d}", s=36)
            ax.set_yscale("log")
            ax.set_xlabel("data seed (marker: training seed)")
            ax.set_ylabel(label + " [steps]")
            ax.set_title(f"G = {G}, N = {N}" if i == 0 else "")
            ax.set_xticks(sorted({r["meta"]["data_seed"] for r in rows}))
    fig.text(0.01, 0.005, "hollow: not reached, drawn at the run's last step (a lower bound)", fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
