"""Readings of stored DSM loss cubes: band means of the training / held-out loss with their standard
errors, paired held-out − train differences with a multiple-testing correction over σ, and the σ / step
at which a gap is first significant; definitions: docs/definitions.md, "DSM loss by σ".

The per-checkpoint gap statistics the probe stores (`gap_stats`) are measurement-side:
`scoreprobe.probes.dsm_gap`. Holm / BH adjustment: `scoreprobe.stats.pvalues`.
"""
import math

import numpy as np
import scipy.stats
import xarray as xr

from scoreprobe.errors import ConfigError
from scoreprobe.probes.dsm_gap import split_stats
from scoreprobe.stats.pvalues import ALPHA, adjust_family, adjust_pvalues


def dsm_summary(ds, sigma_range=(0.2, 2.0), var="loss"):
    """Band means of the training / held-out loss over σ in `sigma_range`, their gap and SEs.

    `var`: "loss", "loss_weighted", "mem_loss" or "rule_loss" (dims [step,] sigma, sample). As in
    the cube, `train` (`heldout`) is the mean over the band's σ of the per-σ mean over finite items
    (of `loss_train_mean` for var="loss"); NaN when a σ of the band has no finite item of the split.
    SEs: over items of each item's band average (a NaN/inf cell weighs 0 and the other items at that
    σ are up-weighted, so these average to the band mean; plain per-item means when all are finite).
    Returns a Dataset of `train`, `heldout`, `gap` = heldout − train, `train_se`, `heldout_se`,
    `gap_se` = sqrt(train_se² + heldout_se²), over the remaining dims (`step` if any).
    """
    if var not in ds:
        raise ConfigError(f"{var!r} is not in the dataset (variables: {sorted(ds.data_vars)})")
    lo, hi = sigma_range
    sub = ds.sel(sigma=(ds.sigma >= lo) & (ds.sigma <= hi))
    if sub.sizes["sigma"] == 0:
        raise ConfigError(f"no σ of the dataset lies in [{lo}, {hi}]; σ ∈ [{float(ds.sigma.min())}, "
                          f"{float(ds.sigma.max())}]")
    attrs = {"units": "1", "sigma_range": [float(lo), float(hi)]}
    out = {}
    for name, who in (("train", "training"), ("heldout", "held-out")):
        out[name], out[f"{name}_se"] = _band_mean_se(sub[var], sub.split == name)
        out[name].attrs.update(attrs, long_name=f"mean {who} DSM loss over the band (finite items)")
        out[f"{name}_se"].attrs.update(attrs, long_name=f"standard error of {name}")
    out["gap"] = (out["heldout"] - out["train"]).assign_attrs(attrs, long_name="held-out − training")
    out["gap_se"] = np.hypot(out["train_se"], out["heldout_se"]).assign_attrs(attrs, long_name="standard error of gap")
    return xr.Dataset(out)


def _band_mean_se(loss, mask):
    """Band mean of one split's per-σ finite-item means and its SE: two DataArrays ([step])."""
    x = loss.isel(sample=np.flatnonzero(np.asarray(mask)))
    if x.sizes["sample"] == 0:
        nan = xr.full_like(loss.isel(sample=0, sigma=0, drop=True), np.nan, dtype=np.float64)
        return nan, nan
    fin = np.isfinite(x)
    n_fin = fin.sum("sample")                                                # ([step,] sigma)
    mean = x.where(fin).mean("sample").mean("sigma", skipna=False)           # NaN if a σ has no finite item
    with np.errstate(invalid="ignore", divide="ignore"):
        per_item = (x.where(fin, 0.0) * (x.sizes["sample"] / n_fin)).where(n_fin > 0).mean("sigma", skipna=False)
    n = per_item.sizes["sample"]
    se = per_item.std("sample", ddof=1, skipna=False) / np.sqrt(n) if n >= 2 else xr.full_like(mean, np.nan)
    return mean, se


# ---------------------------------------------------------------------------------------------
# Paired differences and a multiple-testing correction over σ (docs/definitions.md, "DSM loss by σ")
# ---------------------------------------------------------------------------------------------

def paired_gap_stats(loss, split, position, sigmas, method="holm", alpha=ALPHA):
    """Held-out − train DSM loss as paired differences: the training and the held-out item at the same
    `position` saw the same noise (dsm_by_sigma's noise bank), so d_j = loss(heldout j) − loss(train j).

    loss (..., n_sigma, S); split (S,) "train"/"heldout"; position (S,) noise-bank key (item_index of a
    dsm_by_sigma Dataset); pairs with a non-finite loss at a σ are dropped there. Per (..., σ): n_pairs,
    paired_gap (mean d), paired_gap_se (std(ddof=1)/√n), paired_gap_z, p_value (one-sided t-test of
    held-out > train, n − 1 degrees of freedom), p_adjusted (`adjust_pvalues` over σ with `method`); per
    (...): first_significant_sigma = the smallest σ with p_adjusted < alpha (NaN: none).
    """
    import scipy.stats
    split, position = np.asarray(split), np.asarray(position)
    tr, ho = np.flatnonzero(split == "train"), np.flatnonzero(split == "heldout")
    common = np.intersect1d(position[tr], position[ho])
    if common.size == 0:
        raise ConfigError("no training and held-out items share a noise position: nothing to pair")
    ti, hi = (rows[np.argsort(position[rows], kind="stable")] for rows in (tr, ho))   # sorted by position
    ti, hi = ti[np.isin(position[ti], common)], hi[np.isin(position[hi], common)]     # (P,) aligned pairs
    x = np.asarray(loss, dtype=np.float64)
    d = x[..., hi] - x[..., ti]                                              # (..., n_sigma, P)
    n, mean, se = split_stats(d, np.ones(d.shape[-1], bool))
    with np.errstate(invalid="ignore", divide="ignore"):
        z = mean / se
        p = np.where(n >= 2, scipy.stats.t.sf(z, np.maximum(n - 1, 1)), np.nan)
    adj = adjust_pvalues(p, method)
    first = np.where(adj < alpha, np.asarray(sigmas, dtype=np.float64), np.inf).min(axis=-1)
    return {"n_pairs": n, "paired_gap": mean, "paired_gap_se": se, "paired_gap_z": z, "p_value": p,
            "p_adjusted": adj, "first_significant_sigma": np.where(np.isfinite(first), first, np.nan),
            "method": method, "alpha": alpha}


def max_abs_error(a, b):
    """max |a − b| over the cells where both are defined; inf when a cell is NaN in one and not in the other
    (an undefined value reproduces only an undefined one), NaN when no cell is defined in either."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if (np.isnan(a) != np.isnan(b)).any():
        return math.inf
    both = ~np.isnan(a)
    return float(np.abs(a - b)[both].max()) if both.any() else math.nan


def family_from_z(dsm, steps):
    """Holm and BH over the whole step × σ family from stored paired tests: `dsm` holds z and n_pairs
    (steps, σ), the per-step Holm p_adjusted, sigma and alpha (paired_gap_stats' output as a report stores it).
    Raw p from the one-sided t-test (n − 1 degrees of freedom, as paired_gap_stats); checks that Holm per
    step on them reproduces the stored adjusted p-values (`per_step_holm_reproduced_max_abs_error`). JSON-able:
    per method the adjusted p, the significant σ as sets and the first significant step; the stored per-step
    reading beside them."""
    z, n = np.asarray(dsm["z"], dtype=float), np.asarray(dsm["n_pairs"], dtype=float)
    with np.errstate(invalid="ignore"):
        p = np.where(n >= 2, scipy.stats.t.sf(z, np.maximum(n - 1, 1)), np.nan)
    stored = np.asarray(dsm["p_adjusted"], dtype=float)
    err = max_abs_error(adjust_pvalues(p, "holm"), stored)
    out = {"sigma": dsm["sigma"], "n_pairs": int(n.flat[0]), "p_value": p.tolist(), "alpha": dsm["alpha"],
           "per_step_holm_reproduced_max_abs_error": err, "family_size": int(np.isfinite(p).sum())}
    for method in ("holm", "bh"):
        adj = adjust_family(p, method)
        out[method] = {"p_adjusted": adj.tolist(), "significant_sigma": significant_sets(adj, dsm["sigma"]),
                       "first_significant_step": first_significant_step(adj, steps)}
    per_step = stored < dsm["alpha"]
    out["per_step_holm"] = {"significant_sigma": significant_sets(stored, dsm["sigma"]),
                            "first_significant_step": first_significant_step(stored, steps)}
    out["per_step_holm"]["checkpoints_with_a_significant_sigma"] = int(per_step.any(axis=1).sum())
    return out


def significant_sets(p_adjusted, sigmas, alpha=ALPHA):
    """[[σ, ...] per row]: the σ whose adjusted p-value is below alpha, as a set (a sorted list; gaps
    stay gaps, unlike a [min, max] band). p_adjusted (n_rows, n_sigma)."""
    sig = np.asarray(sigmas, dtype=np.float64)
    return [[float(v) for v in sig[np.asarray(row) < alpha]] for row in np.atleast_2d(p_adjusted)]


def first_significant_step(p_adjusted, steps, alpha=ALPHA):
    """The first of `steps` (n_rows,) whose row of p_adjusted (n_rows, n_sigma) has a σ below alpha;
    NaN when none."""
    hit = (np.atleast_2d(p_adjusted) < alpha).any(axis=1)
    return float(np.asarray(steps, dtype=np.float64)[hit][0]) if hit.any() else float("nan")
