"""Abruptness of a clock curve: the steepest rise of logit(y) per decade of training steps.

Definition (docs/definitions.md, "Abruptness"): for a fraction y of n samples at checkpoints
s_1 < ... < s_S, with k_i = round(n·y_i) samples counted,

    z_i = logit((k_i + 0.5) / (n + 1)),   slope_i = (z_{i+1} − z_i) / (log10(s_{i+1} + 1) − log10(s_i + 1)),
    abruptness = max_i slope_i,           at_step = the geometric midpoint of that segment in step + 1.

A curve logistic in log10(step + 1), y = 1 / (1 + exp(−k (log10(s + 1) − c))), has logit(y)
linear with slope k, so its abruptness is k (exactly for n → ∞; at finite n the shrinkage pulls z
towards 0). The CI resamples each checkpoint's samples (k_i* ~ Binomial(n, k_i / n),
independently per checkpoint, numpy default_rng(seed)); the draws can be pooled over seeds with
`seeds.pool_seeds(..., log=False)`.
"""
import numpy as np

from scoreprobe.errors import ConfigError
from scoreprobe.probes.taus import _ci


def _counts(ds, var):
    """(S,) counts of `var` per checkpoint and n: from `state` for mem_ratio, else round(n·y)."""
    if var == "mem_ratio" and "state" in ds:
        from scoreprobe.data.datasets import STATE_CODES
        state = np.asarray(ds["state"].values)                      # (S, n)
        return (state == STATE_CODES["valid_memorized"]).sum(axis=1), state.shape[1]
    n = ds.sizes.get("sample") or ds.attrs.get("n_samples")
    if not n:
        raise ConfigError("abruptness needs the number of samples (a `sample` dim or attrs n_samples)")
    y = np.asarray(ds[var].values, dtype=np.float64)
    return np.rint(np.clip(y, 0, 1) * n).astype(np.int64), int(n)


def logit_counts(k, n):
    """logit((k + 0.5) / (n + 1)) of counts k (any shape) out of n."""
    p = (np.asarray(k, dtype=np.float64) + 0.5) / (n + 1)
    return np.log(p) - np.log1p(-p)


def steepest(v, z):
    """Steepest slope of z (B, S) against v (S,) between consecutive knots -> slope (B,), segment (B,)."""
    slope = np.diff(z, axis=-1) / np.diff(v)                          # (B, S - 1)
    i = np.argmax(slope, axis=-1)
    return np.take_along_axis(slope, i[:, None], axis=-1)[:, 0], i


def abruptness(ds, var="mem_ratio", n_boot=1000, seed=0, ci=0.95):
    """The steepest rise of logit(`var`) per decade of steps, with a bootstrap CI.

    Parameters
    ----------
    ds : a clocks Dataset (DiT or GPT series) with `var` (step,) and a `sample` dim or attrs
        n_samples; mem_ratio is counted from `state` when present.
    n_boot, seed, ci : resamples (0: no CI), their seed, the interval level.

    Returns
    -------
    dict: abruptness (logit units per decade), ci [lo, hi], at_step, draws (n_boot,), var, n_boot.
    """
    if var not in ds:
        raise ConfigError(f"abruptness: the Dataset has no variable {var!r}")
    ds = ds.sortby("step")
    steps = ds["step"].values.astype(np.float64)
    if steps.size < 2 or np.any(steps < 0) or np.any(np.diff(steps) <= 0):
        raise ConfigError("abruptness needs at least two distinct checkpoints with steps >= 0")
    v = np.log10(steps + 1)                                           # (S,)
    k, n = _counts(ds, var)
    slope, i = steepest(v, logit_counts(k, n)[None])
    draws = np.empty(0)
    if n_boot:
        boot = np.random.default_rng(seed).binomial(n, k / n, size=(int(n_boot), len(steps)))   # (B, S)
        draws = steepest(v, logit_counts(boot, n))[0]
    return {"abruptness": float(slope[0]), "ci": _ci(draws, ci, infinite_nan=False) if n_boot else [np.nan] * 2,
            "at_step": float(np.sqrt((steps[i[0]] + 1) * (steps[i[0] + 1] + 1)) - 1), "draws": draws, "var": var,
            "n_boot": int(n_boot)}
