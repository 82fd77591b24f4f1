"""Where a run that did not reach a threshold is heading at its budget: still rising (a longer run could cross)
or peaked and falling below it (not learned at this setting; a longer run would not decide it).

A run's curve (step, value) is *falling* at its budget when its peak lies before the last `K_END` checkpoints and
the mean of those last checkpoints lies at least `MARGIN` below the peak (the end read over a few checkpoints so one
noisy point does not decide it). A threshold is *not reached and falling* for an arm when every run of the arm that
does not reach it is falling at its budget and ends below it; one run still rising (or flat) makes the arm's
reading "budget-bound" (`scoreprobe.stats.verdict`).
"""
import numpy as np

from scoreprobe.errors import ConfigError

MARGIN = 0.05      # absolute fall (rule accuracy, a share) from the peak to the end that counts as falling
K_END = 3          # the end of a curve: the mean of its last K_END checkpoints


def end_trend(step, value, margin=MARGIN, k_end=K_END):
    """dict peak, peak_step, end (mean of the last k_end values), falling (bool) of one curve.

    step, value: (S,) checkpoints in training order (NaN values skipped). Refused: fewer than k_end + 1 finite
    points, or steps that do not increase."""
    step, value = np.asarray(step, dtype=float).reshape(-1), np.asarray(value, dtype=float).reshape(-1)
    if step.size != value.size or np.any(np.diff(step) <= 0):
        raise ConfigError(f"end_trend: step and value must be of one length, steps increasing (got {step.size}, "
                          f"{value.size})")
    ok = np.isfinite(value)
    step, value = step[ok], value[ok]
    if value.size < k_end + 1:
        raise ConfigError(f"end_trend: needs at least {k_end + 1} finite points, got {value.size}")
    k = int(np.argmax(value))
    end = float(value[-k_end:].mean())
    falling = bool(k < value.size - k_end and value[k] - end >= margin)
    return {"peak": float(value[k]), "peak_step": float(step[k]), "end": end, "falling": falling}


def falling_at(runs_curves, reached, thresholds, margin=MARGIN, k_end=K_END):
    """(T,) bool: True at a threshold some run does not reach where every such run is falling at its budget and
    ends below the threshold.

    runs_curves: R curves, each (step (S,), value (S,)); reached: (R, T) bool; thresholds: (T,)."""
    reached = np.asarray(reached, dtype=bool)
    t = np.asarray(thresholds, dtype=float).reshape(-1)
    if reached.shape != (len(runs_curves), t.size):
        raise ConfigError(f"falling_at: reached must be (runs, thresholds) = ({len(runs_curves)}, {t.size}), "
                          f"got {reached.shape}")
    trends = [end_trend(s, v, margin, k_end) for s, v in runs_curves]
    out = np.zeros(t.size, dtype=bool)
    for j in range(t.size):
        miss = [tr for tr, r in zip(trends, reached[:, j]) if not r]
        out[j] = bool(miss) and all(tr["falling"] and tr["end"] < t[j] for tr in miss)
    return out
