"""The figure of analyses/sudoku_transpose: per architecture (columns), τ_rows / τ_columns over family thresholds
on the original and the transposed data (top) and its kept (architecture) and reversed (data) parts (bottom),
with 95% CIs; censored thresholds as crosses on the axis. Drawn from the report (the exports only)."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from scoreprobe.viz.thresholds import panel  # noqa: E402
from analyses.sudoku_transpose.grid import ARCH_LABELS  # noqa: E402
from scoreprobe.viz.common import save_figure  # noqa: E402

X = "family-accuracy threshold"


def figure(rep, path):
    archs = [a for a, r in rep["archs"].items() if "decision" in r]
    n = max(len(archs), 1)
    fig, axes = plt.subplots(2, n, figsize=(4.4 * n, 7.0), squeeze=False)
    for j, arch in enumerate(archs):
        r = rep["archs"][arch]
        panel(axes[0, j], [("original", r["ratio_original"]), ("transposed", r["ratio_transposed"])], 1.0, 0.9, X,
              "τ_rows / τ_columns (image)", ARCH_LABELS[arch], log=True)
        panel(axes[1, j], [("kept: sqrt(R_o·R_t)", r["architecture_part"]), ("reversed: sqrt(R_o/R_t)", r["data_part"])],
              1.0, 0.9, X, "part of τ_rows / τ_columns", "architecture (kept) and data (reversed); < 1: rows first",
              log=True)
    if not archs:
        axes[0, 0].text(0.5, 0.5, "no architecture run in both orientations yet", ha="center", va="center")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
