"""The figure of models matched per step and per training FLOP (analyses/gpt_dit_match): rule accuracy and
memorized share per step (top) and per training FLOP (bottom), a colour per model, the common memorization band
dotted."""
import numpy as np

from scoreprobe.viz.common import save_figure


def match_figure(rows_by, labels, band, path):
    """rows_by: {model: rows with "curve" (step, rule_acc, mem_ratio) and "step_flops"}; band: (lo, hi) memorized
    share, drawn as dotted lines; written to `path` (png)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    for i, (m, rs) in enumerate(rows_by.items()):
        for r in rs:
            s = np.asarray(r["curve"]["step"], dtype=float) + 1
            for row, x in enumerate((s, s * r["step_flops"])):
                axes[row, 0].plot(x, r["curve"]["rule_acc"], color=f"C{i}", label=labels[m] if r is rs[0] and row == 0 else None)
                axes[row, 1].plot(x, r["curve"]["mem_ratio"], color=f"C{i}")
    for row, unit in enumerate(("training step + 1", "training FLOPs (step + 1 steps)")):
        for col, name in enumerate(("rule accuracy", "memorized share")):
            axes[row, col].set(xscale="log", xlabel=unit, ylabel=name)
    for lo in band:
        for row in range(2):
            axes[row, 1].axhline(lo, color="0.6", lw=0.6, ls=":")
    if rows_by:
        axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
