"""Abruptness of a clock curve: how steeply logit(y) rises per decade of training steps in its transition.

Definition (docs/definitions.md, "Abruptness"): for a fraction y of n samples at checkpoints
s_1 < ... < s_S, with k_i = round(n·y_i) samples counted and z_i = logit((k_i + 0.5) / (n + 1)),
the transition band is the checkpoints with at least `min_count` (20) samples on each side
(k_i >= 20 and n − k_i >= 20), and

    abruptness = the least-squares slope of z_i against log10(s_i + 1) over the band,
    at_step = the geometric middle of the band (in step + 1); NaN when fewer than 2 checkpoints are in it.

Not the steepest segment: with one or two copies among 1000 samples a single count moves z by ≈ 1,
so the steepest segment of a real curve was a segment of count noise at either end (the DiT's at
step 951 of a transition near 10 000), and the maximum of noisy slopes is biased upwards under
resampling (its percentile CI lay above the estimate).

A curve logistic in log10(step + 1), y = 1 / (1 + exp(−k (log10(s + 1) − c))), has logit(y)
linear with slope k, so its abruptness is k (exactly for n → ∞; at finite n the shrinkage pulls z
towards 0). The CI resamples the sample indices jointly across checkpoints when the per-sample
`state` is there (sample i has the same initial noise at every checkpoint; `taus.sample_weights`),
else each checkpoint's count (k_i* ~ Binomial(n, k_i / n), independently per checkpoint); numpy
default_rng(seed). The draws can be pooled over seeds with `seeds.pool_seeds(..., log=False)`.
"""
import numpy as np

from scoreprobe.errors import ConfigError
from scoreprobe.stats.taus import _ci, check_boot, sample_weights


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


def in_band(k, n, min_count=20, band=None):
    """(S,) bool: checkpoints inside the transition, at least `min_count` samples on each side; with
    `band` (lo, hi) fractions instead, the checkpoints whose share k / n lies in [lo, hi] (a band fixed in
    the curve's own units, the same for every run it is applied to)."""
    k = np.asarray(k)
    if band is not None:
        lo, hi = band
        return (k >= lo * n) & (k <= hi * n)
    return (k >= min_count) & (n - k >= min_count)


def least_squares(X, Y):
    """Least-squares slope and intercept of Y (..., K) on X (K,); ±inf/NaN propagate."""
    w = (X - X.mean()) / np.sum((X - X.mean()) ** 2)                   # (K,)
    with np.errstate(invalid="ignore"):
        slope = np.sum(w * Y, axis=-1)
        return slope, np.mean(Y, axis=-1) - slope * X.mean()


def abruptness(ds, var="mem_ratio", n_boot=1000, seed=0, ci=0.95, min_count=20, band=None):
    """How steeply logit(`var`) rises per decade of steps through the transition, with a bootstrap CI.

    Parameters
    ----------
    ds : a clocks Dataset (DiT or GPT series) with `var` (step,) and a `sample` dim or attrs
        n_samples; mem_ratio is counted from `state` when present.
    n_boot, seed, ci : resamples (0: no CI), their seed, the interval level.
    min_count : a checkpoint is in the transition band when at least this many samples are on each
        side (k >= min_count and n - k >= min_count).
    band : None, or (lo, hi) with 0 <= lo < hi <= 1: the band is instead the checkpoints whose share lies in
        [lo, hi] (`in_band`), so runs that rise to different heights are measured over one common band.

    Returns
    -------
    dict: abruptness (logit units per decade; NaN when fewer than 2 checkpoints are in the band),
    ci [lo, hi], at_step (geometric middle of the band), band [first, last step], n_band, draws
    (n_boot,), var, n_boot.
    """
    n_boot, ci, seed = check_boot(n_boot, ci, seed)    # before any work: a NaN level, a huge n_boot
    if not isinstance(var, str) or var not in ds:
        raise ConfigError(f"abruptness: the Dataset has no variable {var!r}")
    ds = ds.sortby("step")
    steps = ds["step"].values.astype(np.float64)
    if steps.size < 2 or np.any(steps < 0) or np.any(np.diff(steps) <= 0):
        raise ConfigError("abruptness needs at least two distinct checkpoints with steps >= 0")
    if band is not None and not (len(band) == 2 and 0 <= band[0] < band[1] <= 1):
        raise ConfigError(f"abruptness: band must be (lo, hi) with 0 <= lo < hi <= 1, got {band!r}")
    k, n = _counts(ds, var)
    band = in_band(k, n, min_count, band)                             # (S,) fixed by the measured counts
    out = {"var": var, "n_boot": int(n_boot), "n_band": int(band.sum()), "draws": np.full(int(n_boot), np.nan)}
    if band.sum() < 2:
        return {**out, "abruptness": float("nan"), "ci": [np.nan] * 2, "at_step": float("nan"),
                "band": [np.nan] * 2}
    v = np.log10(steps[band] + 1)                                     # (S_band,)
    slope = least_squares(v, logit_counts(k[band], n))[0]
    if n_boot and var == "mem_ratio" and "state" in ds:
        from scoreprobe.data.datasets import STATE_CODES
        copies = (np.asarray(ds["state"].values)[band] == STATE_CODES["valid_memorized"]).T   # (n, S_band)
        boot = np.rint(sample_weights(n, n_boot, seed) @ copies.astype(np.float64))          # (B, S_band)
        out["draws"] = least_squares(v, logit_counts(boot, n))[0]
    elif n_boot:
        boot = np.random.default_rng(seed).binomial(n, k[band] / n, size=(int(n_boot), int(band.sum())))
        out["draws"] = least_squares(v, logit_counts(boot, n))[0]    # (B,)
    first, last = steps[band][0], steps[band][-1]
    return {**out, "abruptness": float(slope), "at_step": float(np.sqrt((first + 1) * (last + 1)) - 1),
            "band": [float(first), float(last)],
            "ci": _ci(out["draws"], ci, infinite_nan=False) if n_boot else [np.nan] * 2}
