"""Where a run that did not reach a threshold would reach it, were its rule accuracy to keep rising."""
import math

import numpy as np
import scipy.stats

from scoreprobe.stats.taus import logit_fraction


def extrapolate_tau(ds, threshold=0.9, last=6, confidence=0.95):
    """Where rule_acc would reach `threshold` if its logit kept rising linearly in log(step + 1), from a
    fit to the last `last` checkpoints: {"tau", "ci": [lo, hi], "slope"}; None when it does not rise."""
    steps = ds.step.values[-last:].astype(np.float64)
    z = logit_fraction(ds.rule_acc.values[-last:], ds.sizes["sample"])   # as the clocks interpolate
    fit = scipy.stats.linregress(np.log1p(steps), z)
    if fit.slope <= 0:
        return None
    target = math.log(threshold / (1 - threshold))
    t = scipy.stats.t.ppf(0.5 + confidence / 2, len(steps) - 2)
    slopes = [fit.slope + t * fit.stderr, max(fit.slope - t * fit.stderr, 1e-12)]   # steep -> early
    ext = [(target - fit.intercept - (s - fit.slope) * np.log1p(steps).mean()) / s for s in slopes]
    # the line through the mean point with the bounding slopes: a simple, stated interval
    u_hat = (target - fit.intercept) / fit.slope
    return {"tau": float(np.expm1(u_hat)), "ci": [float(np.expm1(min(e, 50.0))) for e in ext],
            "slope": float(fit.slope), "from_steps": [int(steps[0]), int(steps[-1])]}
