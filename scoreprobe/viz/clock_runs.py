"""Figures of single runs' clocks (any study of single runs): a run's rule accuracy / memorization and its
endpoint states, τ against G and N over a sweep with the power-law fit, and models' curves against steps and
views per training image side by side."""
import numpy as np

from scoreprobe.stats.run_ci_fits import finite_rows
from scoreprobe.viz.clocks import plot_clocks, plot_states
from scoreprobe.viz.common import new_figure, save_figure


def _new_figure(figsize, ncols):
    fig = new_figure(figsize)
    return fig, fig.subplots(1, ncols)


def run_figure(ds, path, title):
    """plot_clocks and plot_states of one run's clocks Dataset side by side, written to `path`."""
    fig, (ax1, ax2) = _new_figure((12, 4.2), 2)
    plot_clocks(ds, ax=ax1)
    plot_states(ds, ax=ax2)
    fig.suptitle(title)
    save_figure(fig, path, dpi=110)


def scaling_figure(rows, fit, N_fixed, G_fixed, Ns, path):
    """τ_rule, τ_novel, τ_mem with CIs against G (at N_fixed) and N (at G_fixed, the fit a·N^b over Ns)."""
    fig, (ax1, ax2) = _new_figure((10, 4), 2)
    for ax, sel, x in ((ax1, lambda r: r["N"] == N_fixed, "G"), (ax2, lambda r: r["G"] == G_fixed, "N")):
        for key, color, fmt, shift in (("tau_rule", "#2ca02c", "o", 0.97), ("tau_novel", "#9467bd", "D", 1.03),
                                       ("tau_mem", "#ff9f1c", "s", 1.0)):   # shift: τ_rule ≈ τ_novel side by side
            pts = finite_rows([r for r in rows if sel(r)], key)
            if not pts:
                continue
            ci = np.array([[r[key] - (r[key + "_ci"][0] or r[key]), ((r[key + "_ci"][1] or np.inf) - r[key])]
                           for r in pts]).T
            xs = [r[x] * shift if x == "N" else r[x] + (shift - 1) * 2 for r in pts]
            ax.errorbar(xs, [r[key] for r in pts], yerr=np.minimum(ci, 10 * np.array([r[key] for r in pts])),
                        fmt=fmt, mfc="none" if key == "tau_novel" else color, color=color, capsize=3,
                        label=key.replace("tau_", "τ_"))
    if "error" not in fit:
        xs = np.geomspace(min(Ns), max(Ns), 50)
        ax2.plot(xs, fit["a"] * xs ** fit["b"], "-", color="#ff9f1c", lw=1, label=f"{fit['a']:.3g}·N^{fit['b']:.2f}")
    ax1.set(xlabel="group size G", ylabel="training step", title=f"N = {N_fixed}", yscale="log")
    ax2.set(xlabel="training set size N", ylabel="training step", title=f"G = {G_fixed}", xscale="log",
            yscale="log")
    for ax in (ax1, ax2):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no clock reached in this budget", ha="center", transform=ax.transAxes)
    save_figure(fig, path, dpi=110)


def curves_figure(sets, path):
    """sets: [(name, series, (curves {step, rule_acc, mem_ratio}, attrs))]: rule accuracy and memorized share
    against training steps (left) and views per training image (right), a colour per model."""
    fig = new_figure((11, 4))
    ax1, ax2 = fig.subplots(1, 2)
    for (name, series, (curves, _)), color in zip(sets, ("#1f77b4", "#d62728")):
        steps = np.asarray(curves["step"], dtype=float)
        views = steps * series.config["batch_size"] / series.config["n_train"]
        for ax, x in ((ax1, steps), (ax2, views)):
            ax.plot(x, curves["rule_acc"], "-o", ms=3, color=color, label=f"{name} rule_acc")
            ax.plot(x, curves["mem_ratio"], "--s", ms=3, color=color, label=f"{name} mem_ratio")
    for ax, label in ((ax1, "training step"), (ax2, "views per training image")):
        first = min(x for line in ax.lines for x in line.get_xdata() if x > 0)   # log above it, linear to 0
        ax.set_xscale("symlog", linthresh=first, linscale=0.3)
        ax.set(xlabel=label, ylabel="fraction of samples", ylim=(-0.02, 1.02))
        ax.axhline(0.9, color="grey", lw=0.5)
        ax.axhline(0.1, color="grey", lw=0.5)
        ax.legend(fontsize=7)
    save_figure(fig, path, dpi=110)
