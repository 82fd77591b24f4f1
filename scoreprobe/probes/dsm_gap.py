"""The held-out − train gap of one DSM loss cube, as `dsm_by_sigma` stores it beside the losses: finite
means, standard errors, the gap, its z and the first significant σ (docs/definitions.md, "DSM loss by σ").

Measurement-side: these are reductions of the cube a probe writes at every checkpoint, so they live with
the probes (`scoreprobe.probes` imports nothing from `scoreprobe.stats`); the readings over stored cubes
(band means, paired differences, Holm over σ) are `scoreprobe.stats.dsm_stats`.
"""
import numpy as np

Z_SIGNIFICANT = 3.0            # gap_z above this (one-sided) counts as a significant held-out > train gap


def split_stats(loss, mask):
    """loss (..., S), mask (S,) bool -> over the finite masked items: n_finite (...) int64, mean (...)
    (NaN if none) and se = std(ddof=1)/sqrt(n_finite) (...) (NaN with fewer than two)."""
    x = np.asarray(loss, dtype=np.float64)[..., np.asarray(mask, bool)]
    fin = np.isfinite(x)
    n = fin.sum(axis=-1).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(fin, x, 0.0).sum(axis=-1) / n
        var = (np.where(fin, x - mean[..., None], 0.0) ** 2).sum(axis=-1) / (n - 1)
        se = np.where(n >= 2, np.sqrt(var / n), np.nan)
    return n, mean, se


def gap_stats(loss, split, sigmas):
    """Training vs held-out statistics per σ over finite items only (NaN/inf losses are dropped).

    loss (..., n_sigma, S) float (any leading dims, e.g. step); split (S,) "train"/"heldout";
    sigmas (n_sigma,). Returns {name: array} for the names of _STAT_ATTRS: (..., n_sigma) float64
    means, SEs, gap, gap_se (independent samples: the paired noise is ignored), gap_z (±inf when
    gap_se = 0 < |gap|, NaN when both are 0); (..., n_sigma) int64 `n_nonfinite_*`; (...)
    `first_significant_sigma` (smallest σ with gap_z > Z_SIGNIFICANT, NaN when none).
    """
    split, sigmas = np.asarray(split), np.asarray(sigmas, dtype=np.float64)
    out = {}
    for name in ("train", "heldout"):
        mask = split == name
        n, out[f"loss_{name}_mean"], out[f"loss_{name}_se"] = split_stats(loss, mask)
        out[f"n_nonfinite_{name}"] = int(mask.sum()) - n
    out["gap"] = out["loss_heldout_mean"] - out["loss_train_mean"]
    out["gap_se"] = np.hypot(out["loss_train_se"], out["loss_heldout_se"])
    with np.errstate(invalid="ignore", divide="ignore"):
        out["gap_z"] = out["gap"] / out["gap_se"]
    first = np.where(out["gap_z"] > Z_SIGNIFICANT, sigmas, np.inf).min(axis=-1)
    out["first_significant_sigma"] = np.where(np.isfinite(first), first, np.nan)
    return out


_STAT_ATTRS = {  # long_name of each gap_stats output; all units "1"
    "loss_train_mean": "mean DSM loss over the finite training items",
    "loss_heldout_mean": "mean DSM loss over the finite held-out items",
    "loss_train_se": "standard error of loss_train_mean: std(ddof=1)/sqrt(n) over the finite training items",
    "loss_heldout_se": "standard error of loss_heldout_mean: std(ddof=1)/sqrt(n) over the finite held-out items",
    "gap": "loss_heldout_mean − loss_train_mean (finite items only; paired noise)",
    "gap_se": "standard error of gap, sqrt(loss_train_se² + loss_heldout_se²) (independent samples)",
    "gap_z": "gap / gap_se (one-sided test of held-out > train)",
    "n_nonfinite_train": "number of training items with a NaN/inf loss (any bad noise draw); excluded from means",
    "n_nonfinite_heldout": "number of held-out items with a NaN/inf loss (any bad noise draw); excluded from means",
    "first_significant_sigma": (f"smallest σ of the grid (first scanning up from low noise) with "
                                f"gap_z > {Z_SIGNIFICANT:g}; NaN when no σ has one"),
}


def _stat_vars(loss, split, sigmas):
    """gap_stats of (n_sigma, S) losses as Dataset variables {name: (dims, values, attrs)}."""
    out = {}
    for name, v in gap_stats(loss, split, sigmas).items():
        extra = {"z_threshold": Z_SIGNIFICANT} if name in ("gap_z", "first_significant_sigma") else {}
        attrs = {"units": "1", "long_name": _STAT_ATTRS[name], **extra}
        out[name] = ((() if np.ndim(v) == 0 else ("sigma",)), v, attrs)
    return out
