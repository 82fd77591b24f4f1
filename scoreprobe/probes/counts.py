"""The count error of an exact-K rule and the chance levels of uniformly random bits.

docs/definitions.md, "Count error and chance levels". For a sample with thresholded bits b (D bits) and an
exact-K rule (exactly k ones), the **count error** is |Σ b − k|: 0 exactly when the sample is valid, 1 for
one pixel too many or too few, and so on. Per checkpoint its distribution over the n samples says whether
an inexact model is near the count (errors of 1) or nowhere near it (the spread of random bits).

    sums = bit_sums(ds["bits"].values, ds["state"].values)     # (S, n) int, -1 for a non-finite endpoint
    shares = count_error_shares(sums, k=18)                      # per step: mean |Σ − k|, shares of 0, 1, 2, ≥ 3
    chance_accuracy(rule), chance_count_error(36, 18)            # exact Fractions for uniformly random bits

A non-finite endpoint (state `invalid`) has no bits: its sum is NOT_FINITE (−1), it counts in
`share_not_finite` and in no error share, and the mean is over the finite samples.
"""
import math
from fractions import Fraction

import numpy as np

from scoreprobe.data.datasets import STATE_CODES
from scoreprobe.errors import ConfigError

NOT_FINITE = -1   # the bit sum of a non-finite endpoint
TOP = 3           # errors 0 … TOP − 1 have their own share; the last share is "≥ TOP"


def bit_sums(bits, state=None):
    """Σ bits per sample: bits (..., n, D) 0/1 -> (..., n) int16; NOT_FINITE where `state` (..., n) is
    `invalid` (the thresholded bits of a non-finite endpoint mean nothing)."""
    bits = np.asarray(bits)
    if bits.ndim < 2:
        raise ConfigError(f"bit_sums: bits must be (..., n, D), got shape {bits.shape}")
    sums = bits.sum(axis=-1, dtype=np.int64)
    if np.any(sums > np.iinfo(np.int16).max):
        raise ConfigError(f"bit_sums: more than {np.iinfo(np.int16).max} ones in a sample")
    sums = sums.astype(np.int16)
    if state is not None:
        state = np.asarray(state)
        if state.shape != sums.shape:
            raise ConfigError(f"bit_sums: state has shape {state.shape}, bits give {sums.shape}")
        sums[state == STATE_CODES["invalid"]] = NOT_FINITE
    return sums


def count_error(sums, k):
    """|Σ − k| (..., n) int64 from bit sums; NOT_FINITE (−1) stays −1."""
    sums = np.asarray(sums, dtype=np.int64)
    return np.where(sums == NOT_FINITE, NOT_FINITE, np.abs(sums - int(k)))


def count_error_shares(sums, k, top=TOP):
    """The count-error distribution over the last axis (the samples): sums (..., n) -> dict of (...) float64
    arrays: `mean_abs` (mean |Σ − k| over the finite samples; NaN when none), `share` (..., top) (share of
    all samples with error e = 0 … top − 1), `share_top` (error ≥ top) and `share_not_finite`; the shares
    add up to 1."""
    err = count_error(sums, k)
    n = err.shape[-1]
    if n == 0:
        raise ConfigError("count_error_shares: no samples")
    finite = err >= 0
    n_finite = finite.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_abs = np.where(n_finite > 0, np.where(finite, err, 0).sum(axis=-1) / n_finite, np.nan)
    share = np.stack([(err == e).mean(axis=-1) for e in range(top)], axis=-1)
    return {"mean_abs": mean_abs, "share": share, "share_top": (err >= top).mean(axis=-1),
            "share_not_finite": (~finite).mean(axis=-1)}


def chance_accuracy(rule):
    """The exact accuracy of uniformly random bits under `rule`: n_valid / 2^D (a Fraction). Exact-K:
    C(D, k) / 2^D; parity with groups of G: 2^(−D/G)."""
    return Fraction(int(rule.n_valid), 2 ** int(rule.n_bits))


def chance_count_error(n_bits, k, top=TOP):
    """The exact count-error distribution of n_bits uniformly random bits (Σ ~ Binomial(n_bits, 1/2)):
    {"mean_abs": Fraction, "share": [Fraction] for e = 0 … top − 1, "share_top": Fraction (error ≥ top)}."""
    n_bits, k = int(n_bits), int(k)
    if not 0 <= k <= n_bits:
        raise ConfigError(f"chance_count_error: k must be within 0 … {n_bits}, got {k}")
    p = [Fraction(math.comb(n_bits, s), 2 ** n_bits) for s in range(n_bits + 1)]   # P(Σ = s)
    by_error = {}
    for s, ps in enumerate(p):
        by_error[abs(s - k)] = by_error.get(abs(s - k), Fraction(0)) + ps
    share = [by_error.get(e, Fraction(0)) for e in range(top)]
    return {"mean_abs": sum((e * q for e, q in by_error.items()), Fraction(0)), "share": share,
            "share_top": 1 - sum(share, Fraction(0))}
