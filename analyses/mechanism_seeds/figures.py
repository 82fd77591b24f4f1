"""The figure of analyses/mechanism_seeds: per series (rows), four quantities over training (columns), each
trained model a thin line and the mean over models and units with its 95% interval."""
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from scoreprobe.viz.common import save_figure  # noqa: E402

PANELS = ("violating basin", "t − h basin (symmetric planes)", "held-out captured (σ 1)", "DSM gap, σ in [0.2, 2.0]")


def figure(report, path):
    """Write the figure to `path`; x is symlog in steps (step 0 included), dashed: the models' τ_mem."""
    series = {k: v for k, v in report["series"].items() if v.get("n_models", 0) >= 2}
    fig, axes = plt.subplots(len(series), len(PANELS), figsize=(3.3 * len(PANELS), 2.8 * len(series)), squeeze=False)
    for row, (name, rep) in zip(axes, series.items()):
        steps = np.asarray(rep["steps"], dtype=float)
        first = min(s for s in steps if s > 0)
        for ax, q in zip(row, PANELS):
            c = rep["curves"].get(q)
            ax.set_xscale("symlog", linthresh=first)
            ax.set_title(f"{name}: {q}", fontsize=8)
            if c is None:
                continue
            for i, pm in enumerate(c["per_model"]):
                ax.plot(steps, np.asarray(pm, dtype=float), lw=0.8, alpha=0.6, color=f"C{i}",
                        label=f"training seed {rep['models'][i]['training_seed']}")
            mean, lo, hi = (np.asarray([np.nan if v is None else v for v in c[k]], dtype=float) for k in ("mean", "lo", "hi"))
            ax.fill_between(steps, lo, hi, color="k", alpha=0.15, lw=0)
            ax.plot(steps, mean, color="k", lw=1.6, label="mean [95% CI]")
            for r in rep["models"]:
                if r["tau_mem"] is not None and math.isfinite(r["tau_mem"]):
                    ax.axvline(r["tau_mem"], color="grey", ls="--", lw=0.6)
            ax.set_xlabel("training step", fontsize=8)
            ax.tick_params(labelsize=7)
        row[0].legend(fontsize=6)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
