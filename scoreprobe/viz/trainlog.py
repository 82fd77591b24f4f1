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


def _bucket(recs, label, field=None):
    """(L,) the bucket `label` of each record's loss_by_sigma (of rec[field] when given); NaN where absent."""
    parts = [((r.get(field) or {}) if field else r).get("loss_by_sigma") or {} for r in recs]
    return np.array([np.nan if p.get(label) is None else p[label] for p in parts], dtype=np.float64)


def _heldout_lines(ax, recs, steps, labels):
    """The held-out loss of the log lines that have it (trainlog.heldout_record), dashed beside the training loss."""
    if not any(r.get("heldout") for r in recs):
        return
    held = np.array([np.nan if not r.get("heldout") else r["heldout"]["loss"] for r in recs], dtype=np.float64)
    ax.plot(steps, held, color="black", lw=1.4, ls="--", label="all σ (held-out, fixed bank)")
    for label, color in zip(labels, BUCKET_COLORS):
        ax.plot(steps, _bucket(recs, label, "heldout"), color=color, lw=0.9, ls="--")


def plot_train_log(run_dir, ax=None):
    """Loss vs training step on log axes: the mean training loss per logging interval, its mean in
    each σ bucket (trainlog.SIGMA_EDGES) as separate lines, the held-out loss on the fixed bank
    (when logged; dashed, same colours), the checkpoint steps as dotted lines and the old totals of
    an extended run as dashed ones.

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
        ax.plot(steps, _bucket(recs, label), color=color, lw=1.0, label=_nice(label))
    _heldout_lines(ax, recs, steps, labels)
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


def plot_train_logs(run_dirs, names=None, ax=None):
    """Several runs' training curves overlaid, one colour per run: the training loss (solid) and the
    held-out loss on the fixed bank when logged (dashed), on log axes.

    Parameters
    ----------
    run_dirs : run directories written by `scoreprobe train`; names : one label each (default: folder names).

    Returns
    -------
    matplotlib Figure. DataError when a directory has no training log.
    """
    from scoreprobe.viz.compare import run_color
    logs = [read_log(d) for d in run_dirs]                   # every log read before anything is drawn
    names = [Path(d).name for d in run_dirs] if names is None else list(names)
    fig, ax = _new_axes(ax, figsize=(7.0, 4.2))
    kinds = set()
    for i, (recs, name) in enumerate(zip(logs, names)):
        steps = np.array([r["step"] for r in recs], dtype=np.float64)            # (L,)
        color = run_color(i)
        ax.plot(steps, [r["loss"] for r in recs], color=color, lw=1.5, label=f"{name}: training")
        if any(r.get("heldout") for r in recs):
            held = [np.nan if not r.get("heldout") else r["heldout"]["loss"] for r in recs]
            ax.plot(steps, held, color=color, lw=1.2, ls="--", label=f"{name}: held-out")
        kinds.add(_run_meta(run_dirs[i])[1])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel({"dit": "loss (EDM-weighted DSM)", "gpt": "loss (next-token cross-entropy)"}.get(
        kinds.pop() if len(kinds) == 1 else None, "loss"))
    ax.legend(fontsize=7, loc="best")
    ax.set_title(f"training loss of {len(logs)} runs (mean over each log interval)")
    return fig
