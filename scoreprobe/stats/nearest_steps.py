"""The checkpoint nearest a step of interest (a clock, a planned reading step), nearest in ln(step + 1): the scale
on which checkpoints are spaced and clocks interpolated."""
import numpy as np


def nearest_step(steps, target):
    """The step of `steps` (S,) nearest `target` in ln(step + 1) -> int."""
    x = np.log(np.asarray(steps, np.float64) + 1)
    return int(steps[int(np.argmin(abs(x - np.log(target + 1))))])


def nearest_steps(steps, targets):
    """The checkpoint steps nearest (in ln(step + 1)) to each target, sorted and deduplicated -> [int]."""
    return sorted({nearest_step(steps, t) for t in targets})
