"""sae_scores: how well an SAE reconstructs, how sparse it is, and whether it found known features.

    ds = sp.sae_scores(sae, X)                                          # reconstruction and sparsity only
    ds = sp.sae_scores(sae, X, ground_truth=truth, directions=dirs)     # + F1 per latent and feature, MCC

Definitions (as SynthSAEBench, arXiv 2602.14687; docs/features.md):
    explained_variance  1 − Σ‖x − x̂‖² / Σ‖x − x̄‖² over the rows
    l0                  mean number of active latents (f > 0) per row
    dead                latents active on none of the rows (and dead_fraction of d_sae)
    shrinkage           mean over rows of ‖x̂ − b_dec‖ / ‖x − b_dec‖ (1: none; < 1: the codes shrink)
    mcc                 the decoder rows matched one to one to the ground-truth directions by the Hungarian
                        algorithm on |cos| (scipy's linear_sum_assignment), the mean matched |cos| over the
                        directions (one left unmatched, when d_sae is smaller, counts 0) (|cos|: a ReLU SAE may carry a ±feature in one of two opposite latents)
    precision, recall, f1 (latent, feature)   latent active as a classifier of each binary feature
    best_f1 (feature), best_latent (feature), coverage = #features whose best_f1 >= f1_threshold (0.8)
A feature that is always or never on has no F1 worth the name: its best_f1 is NaN (and it is not counted as
covered); a latent never active has precision NaN.
"""
import json

import numpy as np
import torch
import xarray as xr
from scipy.optimize import linear_sum_assignment

from scoreprobe.errors import DataError
from scoreprobe.features.rows import site_rows

F1_THRESHOLD = 0.8


def sae_scores(sae, activations, ground_truth=None, directions=None, *, site=None, steps=None, sigmas=None,
               token=None, f1_threshold=F1_THRESHOLD):
    """Scores of `sae` on activation rows (see the module docstring).

    activations : as train_sae (tensor (n, d_in), or a cached Dataset with site=, steps=, sigmas=, token=).
    ground_truth : bool (n, n_features) aligned with the rows, or a DataArray (sample, feature) matched to
        the rows by their `sample` coordinate (scoreprobe.features.truth.rule_features).
    directions : (n_dirs, d_in) array or a DataArray (feature, d_in) (e.g. probe directions); rows that are
        NaN (an undefined probe) are left out of the matching and get NaN.
    Returns a Dataset: scalars explained_variance, l0, dead, dead_fraction, shrinkage; with ground_truth
    precision, recall, f1 (latent, feature), best_f1, best_latent (feature), coverage; with directions
    matched_latent, matched_cos (direction), mcc."""
    X = site_rows(activations, site, steps, sigmas, token)
    x = torch.as_tensor(X.values)
    if x.shape[1] != sae.d_in:
        raise DataError(f"the rows have d_in {x.shape[1]}, the SAE {sae.d_in}")
    with torch.no_grad():
        f = sae.encode(x)                                                  # (n, d_sae)
        x_hat = sae.decode(f)                                              # (n, d_in)
    ds = xr.Dataset(_reconstruction(x, x_hat, f, sae.b_dec.detach()))
    active = (f > 0).numpy()
    if ground_truth is not None:
        ds = ds.merge(classifier_scores(active, _truth_rows(ground_truth, X), f1_threshold))
    if directions is not None:
        ds = ds.merge(mcc_scores(sae.W_dec.detach().numpy(), directions))
    ds.attrs.update(site=str(X.attrs.get("site")), n_rows=int(len(x)), d_sae=int(sae.d_sae),
                    arch=sae.arch, config=json.dumps(getattr(sae, "config", {}), default=str, sort_keys=True))
    return ds


def _reconstruction(x, x_hat, f, b_dec):
    var = ((x - x.mean(0)) ** 2).sum()
    ev = float(1 - ((x - x_hat) ** 2).sum() / var) if var > 0 else np.nan
    num, den = (x_hat - b_dec).norm(dim=1), (x - b_dec).norm(dim=1)
    ok = den > 0
    shrink = float((num[ok] / den[ok]).mean()) if ok.any() else np.nan
    fired = (f > 0).any(0)
    return {"explained_variance": ((), ev, {"long_name": "explained variance", "units": "1"}),
            "l0": ((), float((f > 0).sum(1).float().mean()), {"long_name": "active latents per row", "units": "1"}),
            "dead": ((), int((~fired).sum()), {"long_name": "latents active on no row", "units": "1"}),
            "dead_fraction": ((), float((~fired).float().mean()), {"long_name": "dead latents / d_sae", "units": "1"}),
            "shrinkage": ((), shrink, {"long_name": "mean ‖x̂ − b_dec‖ / ‖x − b_dec‖", "units": "1"})}


def _truth_rows(truth, X):
    """ground_truth as a bool DataArray (row, feature) aligned with the rows X."""
    if isinstance(truth, xr.DataArray):
        if "sample" not in truth.dims or "feature" not in truth.dims:
            raise DataError(f"ground_truth needs dims (sample, feature), got {truth.dims}")
        missing = np.setdiff1d(X["sample"].values, truth["sample"].values)
        if missing.size:
            raise DataError(f"ground_truth has no row for samples {missing[:5].tolist()}")
        t = truth.sel(sample=X["sample"].values).transpose("sample", "feature")
        return xr.DataArray(t.values.astype(bool), dims=("row", "feature"), coords={"feature": t.feature.values})
    t = np.asarray(truth)
    if t.ndim != 2 or t.shape[0] != X.sizes["row"]:
        raise DataError(f"ground_truth must be (n_rows = {X.sizes['row']}, n_features), got shape {t.shape}")
    return xr.DataArray(t.astype(bool), dims=("row", "feature"), coords={"feature": np.arange(t.shape[1])})


def classifier_scores(active, truth, f1_threshold=F1_THRESHOLD):
    """active (n, d_sae) bool, truth DataArray (row, feature) bool -> precision/recall/f1 (latent, feature),
    best_f1, best_latent (feature), coverage. Features constant over the rows: NaN best_f1, not covered."""
    a, t = active.astype(np.float64), truth.values.astype(np.float64)
    tp = a.T @ t                                                           # (d_sae, n_features)
    n_pred, n_true = a.sum(0)[:, None], t.sum(0)[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(n_pred > 0, tp / n_pred, np.nan)
        recall = np.broadcast_to(np.where(n_true > 0, tp / n_true, np.nan), tp.shape)
        f1 = np.where(n_pred + n_true > 0, 2 * tp / (n_pred + n_true), np.nan)
    constant = (n_true[0] == 0) | (n_true[0] == len(t))
    f1[:, constant] = np.nan
    defined = ~np.isnan(f1).all(0)
    best = np.full(f1.shape[1], np.nan)
    best[defined] = np.nanmax(f1[:, defined], axis=0)
    best_latent = np.where(defined, np.nanargmax(np.where(np.isnan(f1), -1, f1), axis=0), -1)
    feat = {"feature": truth.feature.values}
    return xr.Dataset({
        "precision": (("latent", "feature"), precision, {"long_name": "P(feature | latent active)", "units": "1"}),
        "recall": (("latent", "feature"), np.array(recall), {"long_name": "P(latent active | feature)", "units": "1"}),
        "f1": (("latent", "feature"), f1, {"long_name": "F1 of the latent as a classifier of the feature"}),
        "best_f1": ("feature", best, {"long_name": "best latent's F1 (NaN: feature constant over the rows)"}),
        "best_latent": ("feature", best_latent, {"long_name": "latent with the best F1 (-1: undefined)"}),
        "coverage": ((), int((best >= f1_threshold).sum()), {"long_name": f"features with a latent of F1 >= "
                                                             f"{f1_threshold}", "f1_threshold": f1_threshold}),
        "n_defined": ((), int(defined.sum()), {"long_name": "features that are not constant over the rows"}),
    }, coords=feat)


def mcc_scores(W_dec, directions):
    """Hungarian matching of decoder rows (d_sae, d_in) to directions (n_dirs, d_in) on |cos|.
    Returns matched_latent, matched_cos (direction) and mcc (mean matched |cos| over the defined directions)."""
    names = directions.feature.values if isinstance(directions, xr.DataArray) else None
    d = np.asarray(directions, dtype=np.float64)
    if d.ndim != 2 or d.shape[1] != W_dec.shape[1]:
        raise DataError(f"directions must be (n, d_in = {W_dec.shape[1]}), got shape {d.shape}")
    names = np.arange(len(d)) if names is None else names
    ok = np.isfinite(d).all(1) & (np.linalg.norm(d, axis=1) > 0)
    w = W_dec / np.maximum(np.linalg.norm(W_dec, axis=1, keepdims=True), 1e-12)
    cos = np.abs((d[ok] / np.linalg.norm(d[ok], axis=1, keepdims=True)) @ w.T)   # (n_ok, d_sae)
    r, c = linear_sum_assignment(-cos)
    latent, value = np.full(len(d), -1), np.full(len(d), np.nan)
    idx = np.flatnonzero(ok)[r]
    latent[idx], value[idx] = c, cos[r, c]
    mcc = float(np.nan_to_num(value[ok]).sum() / ok.sum()) if ok.any() else np.nan   # unmatched count as 0
    return xr.Dataset({
        "matched_latent": ("direction", latent, {"long_name": "decoder row matched by the Hungarian algorithm"}),
        "matched_cos": ("direction", value, {"long_name": "|cos| of the matched decoder row", "units": "1"}),
        "mcc": ((), mcc, {"long_name": "mean matched |cos| over the defined directions (one left "
                          "unmatched, d_sae < directions, counts 0)",
                          "n_matched": int(len(r))}),
    }, coords={"direction": names})
