"""The training curve of a run directory: logged loss vs step, its σ buckets, checkpoint steps marked.

`load_log` reads train_log.jsonl for the figure through `training.trainlog.read_log`, whose checks
make no log a traceback (a log past limits.MAX_LOG_BYTES refused before it is read; lines that are no
record skipped and counted in one warning; a record with a wrong value a DataError naming the line);
here:

- a non-finite loss (NaN, Infinity: a diverged run) is kept as a gap in the curve and counted in a warning;
- a log of more than MAX_POINTS records is drawn as the means over MAX_POINTS log-spaced step bins (`thin`).

Text from the log or the run directory's name is drawn as written: `$` is escaped so matplotlib
reads no mathtext in it.
"""
import json
import math
import warnings
from pathlib import Path

import numpy as np

from scoreprobe.errors import ScoreprobeWarning
from scoreprobe.limits import MAX_JSON_BYTES, MAX_JSON_DEPTH, MAX_STEP, json_depth
from scoreprobe.training.trainlog import LOG_NAME, read_log
from scoreprobe.viz.common import _new_axes, new_figure

BUCKET_COLORS = ("#1f77b4", "#9467bd", "#d62728", "#8c564b", "#e377c2")
MAX_MARKERS = 1000   # checkpoint steps marked at most (a run.json listing more marks none, with a warning)
LOSS_LABELS = {"dit": "loss (EDM-weighted DSM)", "gpt": "loss (next-token cross-entropy)"}   # by run.json `kind`
MAX_POINTS = 4000    # records drawn as they are; a longer log is drawn as means over this many log-spaced bins


def plain_text(text):
    """`text` for a matplotlib label or title: `$` escaped, so no mathtext is parsed from data."""
    return str(text).replace("$", r"\$")


def _nice(label):
    return plain_text(label.replace("sigma", "σ").replace("<=", "≤").replace(">=", "≥"))


def load_log(run_dir):
    """The training curve of RUN_DIR/train_log.jsonl, its records read and checked by
    `training.trainlog.read_log`: {"step": (L,) int64, "loss": (L,) float64, "buckets": {label: (L,)
    float64}, "heldout": (L,) float64, "heldout_buckets": {label: (L,) float64}} sorted by step, the
    bucket labels those of the first record that has any (NaN where a record has none; "heldout" NaN
    where a line has no held-out loss, trainlog.heldout_record). DataError as read_log; a warning
    counts the non-finite losses."""
    recs = read_log(run_dir)
    labels = next((list(r["loss_by_sigma"]) for r in recs if r.get("loss_by_sigma")), [])
    held = [r.get("heldout") or {} for r in recs]
    loss = np.array([float(r["loss"]) for r in recs], dtype=np.float64)              # (L,)
    nonfinite = int((~np.isfinite(loss)).sum())
    if nonfinite:
        warnings.warn(f"{Path(run_dir) / LOG_NAME}: {nonfinite} of {len(loss)} records have a non-finite loss "
                      "(NaN/inf, a diverged run): they are gaps in the curve", ScoreprobeWarning, stacklevel=2)
    return {"step": np.array([r["step"] for r in recs], dtype=np.int64), "loss": loss,
            "buckets": {k: _column([r.get("loss_by_sigma") for r in recs], k) for k in labels},
            "heldout": np.array([float(h["loss"]) if h else math.nan for h in held], dtype=np.float64),
            "heldout_buckets": {k: _column([h.get("loss_by_sigma") for h in held], k) for k in labels}}


def _column(parts, label):
    """(L,) float64: parts[i][label] (a loss_by_sigma object or None), NaN where absent or null."""
    return np.array([math.nan if (p or {}).get(label) is None else float(p[label]) for p in parts],
                    dtype=np.float64)


def thin(steps, *values, n=MAX_POINTS):
    """(steps, *values) as drawn: unchanged up to `n` records; past that, the means over n log-spaced
    step bins (each bin's mean step, and the mean of each value's finite entries: NaN when none),
    so a long log draws as fast as a short one. steps: (L,) int, sorted; values: (L,) floats."""
    steps = np.asarray(steps, dtype=np.float64)
    if len(steps) <= n:
        return (steps, *values)
    edges = np.geomspace(max(steps[0], 1.0), steps[-1] + 1, n + 1)
    idx = np.clip(np.searchsorted(edges, steps, side="right") - 1, 0, n - 1)          # (L,) bin of each record
    count = np.bincount(idx, minlength=n)                                             # (n,)
    keep = count > 0
    out = [np.bincount(idx, steps, n)[keep] / count[keep]]
    for v in values:
        v = np.asarray(v, dtype=np.float64)
        fin = np.isfinite(v)
        total, m = np.bincount(idx, np.where(fin, v, 0.0), n), np.bincount(idx, fin, n)
        with np.errstate(invalid="ignore", divide="ignore"):
            out.append((total / m)[keep])
    return tuple(out)


def _steps_of(meta, key):
    """meta[key] as a list of steps in [0, MAX_STEP], or None when it is not one."""
    value = meta.get(key, [])
    ok = isinstance(value, list) and all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= MAX_STEP
                                         for s in value)
    return value if ok else None


def _run_meta(run_dir):
    """(checkpoint steps, model kind, old totals of extensions) from run.json; what cannot be read
    is left out with a warning (the markers are a help, the curve is the figure)."""
    path = Path(run_dir) / "run.json"
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            raise ValueError(f"larger than {MAX_JSON_BYTES >> 20} MiB")
        meta = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(meta, dict) or json_depth(meta) > MAX_JSON_DEPTH:
            raise ValueError("not a JSON object within the nesting limit")
    except FileNotFoundError:
        return [], None, []
    except (OSError, ValueError, RecursionError) as e:
        warnings.warn(f"{path} is unreadable ({str(e)[:80]}): no checkpoint steps marked", ScoreprobeWarning,
                      stacklevel=3)
        return [], None, []
    ckpts, extended = _steps_of(meta, "checkpoint_steps"), _steps_of(meta, "extended_from")
    for key, value in (("checkpoint_steps", ckpts), ("extended_from", extended)):
        if value is None:
            warnings.warn(f"{path}: {key} is not a list of steps in [0, {MAX_STEP}]: not marked", ScoreprobeWarning,
                          stacklevel=3)
    if ckpts is not None and len(ckpts) > MAX_MARKERS:
        warnings.warn(f"{path}: {len(ckpts)} checkpoint steps; more than {MAX_MARKERS} are not marked",
                      ScoreprobeWarning, stacklevel=3)
        ckpts = None
    kind = meta.get("kind") if meta.get("kind") in ("dit", "gpt") else None
    return ckpts or [], kind, (extended or [])[:MAX_MARKERS]


def _heldout_lines(ax, log):
    """The held-out loss of the log lines that have it (trainlog.heldout_record), dashed beside the training loss."""
    if not np.isfinite(log["heldout"]).any():
        return
    steps, held, *parts = thin(log["step"], log["heldout"], *log["heldout_buckets"].values())
    ax.plot(steps, held, color="black", lw=1.4, ls="--", label="all σ (held-out, fixed bank)")
    for color, vals in zip(BUCKET_COLORS, parts):
        ax.plot(steps, vals, color=color, lw=0.9, ls="--")


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
    matplotlib Figure. DataError when the directory has no training log or a record of it is wrong
    (see `load_log`); warnings count the lines skipped and the non-finite losses.
    """
    log = load_log(run_dir)
    labels = list(log["buckets"])
    steps, loss, *parts = thin(log["step"], log["loss"], *log["buckets"].values())
    fig, ax = _new_axes(ax, figsize=(6.0, 4.0))
    ax.plot(steps, loss, color="black", lw=1.6, label="all σ (training loss)" if labels else "training loss")
    for label, color, vals in zip(labels, BUCKET_COLORS, parts):
        ax.plot(steps, vals, color=color, lw=1.0, label=_nice(label))             # nan: no sample there
    _heldout_lines(ax, log)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ckpts, kind, extended = _run_meta(run_dir)
    for i, s in enumerate(s for s in ckpts if s > 0):
        ax.axvline(s, color="0.6", lw=0.6, ls=":", zorder=0, label=None if i else "checkpoint steps")
    for i, s in enumerate(extended):
        ax.axvline(s, color="0.3", lw=1.0, ls="--", zorder=0,
                   label=None if i else f"extended from {', '.join(map(str, extended))}")
    ax.set_xlabel("training step")
    ax.set_ylabel(LOSS_LABELS.get(kind, "loss"))
    ax.legend(fontsize=8, loc="best", title="mean over each log interval" if labels else None, title_fontsize=8)
    ax.set_title(plain_text(f"training loss: {Path(run_dir).name}"))
    return fig


def plot_train_logs(run_dirs, names=None, ax=None):
    """Several runs' training curves overlaid, one colour per run: the training loss (solid) and the
    held-out loss on the fixed bank when logged (dashed), on log axes. Runs with different losses (a
    DiT's EDM-weighted DSM loss and a GPT's cross-entropy) are never drawn on one axis: one panel per
    loss, side by side, each labelled with its loss.

    Parameters
    ----------
    run_dirs : run directories written by `scoreprobe train`; names : one label each (default: folder names).
    ax : an axes to draw on (runs of one kind of loss only: ConfigError for mixed losses).

    Returns
    -------
    matplotlib Figure. DataError when a directory has no training log.
    """
    from scoreprobe.errors import ConfigError
    logs = [load_log(d) for d in run_dirs]                   # every log read and checked before anything is drawn
    names = [Path(d).name for d in run_dirs] if names is None else list(names)
    kinds = [_run_meta(d)[1] for d in run_dirs]
    groups = list(dict.fromkeys(kinds))                      # one panel per kind of loss, in the runs' order
    if ax is not None and len(groups) > 1:
        raise ConfigError(f"plot_train_logs: these runs log {len(groups)} different losses "
                          f"({', '.join(map(str, groups))}), which one axis cannot show; leave ax=None for one panel "
                          "per loss")
    if ax is None:
        fig = new_figure((7.0 * len(groups), 4.2))
        axes = list(np.atleast_1d(fig.subplots(1, len(groups))))
    else:
        fig, axes = ax.figure, [ax]
    for kind, panel in zip(groups, axes):
        members = [i for i, k in enumerate(kinds) if k == kind]
        _overlay(panel, [logs[i] for i in members], [names[i] for i in members], members)
        panel.set_ylabel(LOSS_LABELS.get(kind, "loss"))
        what = f" ({'DiT' if kind == 'dit' else 'GPT' if kind == 'gpt' else 'unknown kind'})" if len(groups) > 1 else ""
        panel.set_title(f"training loss of {len(members)} run{'s' if len(members) > 1 else ''}{what} "
                        "(mean over each log interval)", fontsize=10 if len(groups) > 1 else None)
    return fig


def _overlay(ax, logs, names, colours):
    """The training (solid) and held-out (dashed) losses of `logs` on one axes, colour run_color(colours[i])."""
    from scoreprobe.viz.compare import run_color
    for log, name, c in zip(logs, names, colours):
        steps, loss, held = thin(log["step"], log["loss"], log["heldout"])
        color, name = run_color(c), plain_text(name)
        ax.plot(steps, loss, color=color, lw=1.5, label=f"{name}: training")
        if np.isfinite(held).any():
            ax.plot(steps, held, color=color, lw=1.2, ls="--", label=f"{name}: held-out")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.legend(fontsize=7, loc="best")
