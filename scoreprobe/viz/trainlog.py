"""The training curve of a run directory: logged loss vs step, its σ buckets, checkpoint steps marked."""
import json
from pathlib import Path

import numpy as np

from scoreprobe.training.trainlog import read_log
from scoreprobe.viz.common import _new_axes

BUCKET_COLORS = ("#1f77b4", "#9467bd", "#d62728", "#8c564b", "#e377c2")


def _nice(label):
    return label.replace("sigma", "σ").replace("<=", "≤").replace(">=", "≥")


def _run_meta(run_dir):
    """(checkpoint steps, model kind, old totals of extensions) from run.json; ([], None, []) when it
    cannot be read."""
    try:
        meta = json.loads((Path(run_dir) / "run.json").read_text())
        return ([int(s) for s in meta.get("checkpoint_steps", [])], meta.get("kind"),
                [int(s) for s in meta.get("extended_from", [])])
    except (OSError, ValueError, TypeError, AttributeError):
        return [], None, []


def plot_train_log(run_dir, ax=None):
    """Loss vs training step on log axes: the mean training loss per logging interval, its mean in
    each σ bucket (trainlog.SIGMA_EDGES) as separate lines, the checkpoint steps as dotted lines and
    the old totals of an extended run as dashed ones.

    Parameters
    ----------
    run_dir : a run directory written by `scoreprobe train` (reads train_log.jsonl and run.json).

    Returns
    -------
    matplotlib Figure. DataError when the directory has no training log.
    """
    recs = read_log(run_dir)
    steps = np.array([r["step"] for r in recs], dtype=np.float64)                # (L,)
    fig, ax = _new_axes(ax, figsize=(6.0, 4.0))
    labels = next((list(r["loss_by_sigma"]) for r in recs if r.get("loss_by_sigma")), [])
    ax.plot(steps, [r["loss"] for r in recs], color="black", lw=1.6,
            label="all σ (training loss)" if labels else "training loss")
    for label, color in zip(labels, BUCKET_COLORS):
        vals = np.array([np.nan if (r.get("loss_by_sigma") or {}).get(label) is None else r["loss_by_sigma"][label]
                         for r in recs], dtype=np.float64)                        # (L,) nan: no sample there
        ax.plot(steps, vals, color=color, lw=1.0, label=_nice(label))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ckpts, kind, extended = _run_meta(run_dir)
    for i, s in enumerate(s for s in ckpts if s > 0):
        ax.axvline(s, color="0.6", lw=0.6, ls=":", zorder=0, label=None if i else "checkpoint steps")
    for i, s in enumerate(extended):
        ax.axvline(s, color="0.3", lw=1.0, ls="--", zorder=0,
                   label=None if i else f"extended from {', '.join(map(str, extended))}")
    ax.set_xlabel("training step")
    ax.set_ylabel({"dit": "loss (EDM-weighted DSM)", "gpt": "loss (next-token cross-entropy)"}.get(kind, "loss"))
    ax.legend(fontsize=8, loc="best", title="mean over each log interval" if labels else None, title_fontsize=8)
    ax.set_title(f"training loss: {Path(run_dir).name}")
    return fig
