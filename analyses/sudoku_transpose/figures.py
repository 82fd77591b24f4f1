"""The figure of a transposition design (analyses/sudoku_transpose): per configuration (columns), τ_rows /
τ_columns over family thresholds on the original and the transposed data (top) and its kept (architecture) and
reversed (data) parts (bottom), with 95% CIs; censored thresholds as crosses on the axis. Drawn from the report
(analyses.sudoku_transpose.transpose_split_md.orientation_report's dicts)."""
from scoreprobe.viz.common import save_figure
from scoreprobe.viz.thresholds import panel

X = "family-accuracy threshold"


def transpose_figure(reps, labels, path):
    """reps: {config: orientation report}; labels: {config: panel title}; written to `path` (png)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    archs = [a for a, r in reps.items() if "decision" in r]
    n = max(len(archs), 1)
    fig, axes = plt.subplots(2, n, figsize=(4.4 * n, 7.0), squeeze=False)
    for j, arch in enumerate(archs):
        r = reps[arch]
        panel(axes[0, j], [("original", r["ratio_original"]), ("transposed", r["ratio_transposed"])], 1.0, 0.9, X,
              "τ_rows / τ_columns (image)", labels[arch], log=True)
        panel(axes[1, j], [("kept: sqrt(R_o·R_t)", r["architecture_part"]), ("reversed: sqrt(R_o/R_t)", r["data_part"])],
              1.0, 0.9, X, "part of τ_rows / τ_columns", "architecture (kept) and data (reversed); < 1: rows first",
              log=True)
    if not archs:
        axes[0, 0].text(0.5, 0.5, "no architecture run in both orientations yet", ha="center", va="center")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
