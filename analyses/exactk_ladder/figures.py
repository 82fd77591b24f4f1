"""The figure of a rule ladder (analyses/exactk_ladder): exact accuracy of every rule over steps (chance dashed),
and the count error of exact-K (mean |Σ − k|, and the share within one pixel of k) over steps, each the mean over
training seeds with their range shaded."""
import numpy as np

from scoreprobe.viz.common import save_figure


def _mean_curve(rows, get):
    """(steps, mean over seeds, min, max) of a per-step list `get(row)`."""
    v = np.array([get(r) for r in rows], dtype=np.float64)
    return np.asarray(rows[0]["curve"]["step"]), v.mean(axis=0), v.min(axis=0), v.max(axis=0)


def ladder_figure(by, chance, path):
    """Three panels: rule_acc per rule; mean |Σ − k| and share with |Σ − k| ≤ 1 per exact-K k (seed range
    shaded); chance levels of uniformly random bits as dashed lines in the colour of the rule. by: {label: rows
    with "curve" and "counts"}; chance: {label: {"chance": stats.count_error.chance}}."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    for i, (label, rows) in enumerate(by.items()):
        colour = f"C{i}"
        steps, m, lo, hi = _mean_curve(rows, lambda r: r["curve"]["rule_acc"])
        axes[0].plot(steps + 1, m, color=colour, label=label)
        axes[0].fill_between(steps + 1, lo, hi, color=colour, alpha=0.15)
        axes[0].axhline(chance[label]["chance"]["value"], color=colour, ls="--", lw=0.8)
        have = [r for r in rows if r.get("counts")]
        if not have:
            continue
        ch = chance[label]["chance"]["count_error"]
        for ax, get, ref in ((axes[1], lambda r: r["counts"]["mean_abs"], ch["mean_abs"]),
                             (axes[2], lambda r: np.sum(np.asarray(r["counts"]["share"])[:, :2], axis=1),
                              sum(ch["share"][:2]))):
            steps, m, lo, hi = _mean_curve(have, get)
            ax.plot(steps + 1, m, color=colour, label=label)
            ax.fill_between(steps + 1, lo, hi, color=colour, alpha=0.15)
            ax.axhline(ref, color=colour, ls="--", lw=0.8)
    titles = ("exact accuracy (rule_acc)", "mean |Σ bits − k| (finite samples)", "share with |Σ bits − k| ≤ 1")
    for ax, title in zip(axes, titles):
        ax.set_xscale("log")
        ax.set_xlabel("training step + 1")
        ax.set_title(title, fontsize=10)
    for ax in axes[:2]:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.text(0.01, 0.005, "dashed: uniformly random bits (exact); shaded: range over training seeds", fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
