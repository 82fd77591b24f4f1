"""Each latent's top-activating inputs: which rows make a latent fire hardest.

    tops = top_activating(sae, cache, k=8, site="blocks.2.hook_resid_post")   # Dataset (latent, rank)
    tops.row.sel(latent=17)          # the row indices of latent 17's 8 strongest activations, strongest first
    tops.sample.sel(latent=17)       # the same rows' `sample` coordinate (the input each row came from)
    best_latents(sp.sae_scores(sae, cache, truth, site=site), 3, prefix="group")   # the 3 best parity latents

Rows are ranked per latent by activation f_l(x) (sae.encode), highest first; equal activations are ordered by
row index (lowest first), so the result is a function of the rows alone. Only rows where the latent is active
(f > 0) are listed: a latent active on fewer than k rows fills its last ranks with row -1 and activation NaN,
and a dead latent (active on no row) has row -1 and NaN at every rank, never an index it did not earn.
"""
import numpy as np
import torch
import xarray as xr

from scoreprobe.errors import ConfigError, DataError
from scoreprobe.features.rows import site_rows


def top_activating(sae, activations, k=8, *, latents=None, site=None, steps=None, sigmas=None, token=None):
    """The k rows on which each latent is most active (module docstring).

    sae : an SAE (sp.train_sae / sp.load_sae) with d_in matching the rows.
    activations : as sp.train_sae (a tensor (n, d_in), or a cached Dataset with site=, steps=, sigmas=, token=).
    k : ranks per latent (1..n). latents : which latents (default all d_sae), in the order given.
    Returns a Dataset over (latent, rank): row (int, -1 where no active row is left), activation (float, NaN
    there), sample (the row's `sample` coordinate, -1 there); and n_active (latent,): rows where it fires."""
    X = site_rows(activations, site, steps, sigmas, token)
    n = X.sizes["row"]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n:
        raise ConfigError(f"k must be an int from 1 to the number of rows ({n}), got {k!r}")
    chosen = _latents(latents, sae.d_sae)
    if X.sizes["d_in"] != sae.d_in:
        raise DataError(f"the rows have d_in {X.sizes['d_in']}, the SAE {sae.d_in}")
    with torch.no_grad():
        f = sae.encode(torch.as_tensor(X.values)).numpy()[:, chosen]        # (n, n_latents)
    order = np.argsort(-f, axis=0, kind="stable")[:k]                        # (k, n_latents): ties by row index
    act = np.take_along_axis(f, order, axis=0).astype(np.float64)            # (k, n_latents)
    live = act > 0
    row = np.where(live, order, -1).T                                        # (n_latents, k)
    sample = np.asarray(X["sample"].values) if "sample" in X.coords else np.arange(n)
    return xr.Dataset({
        "row": (("latent", "rank"), row, {"long_name": "row index of the rank-th strongest activation (-1: none)"}),
        "activation": (("latent", "rank"), np.where(live, act, np.nan).T,
                       {"long_name": "the latent's activation on that row (NaN: none)"}),
        "sample": (("latent", "rank"), np.where(row >= 0, sample[np.maximum(row, 0)], -1),
                   {"long_name": "the row's sample coordinate (-1: none)"}),
        "n_active": ("latent", (f > 0).sum(0), {"long_name": "rows on which the latent is active"}),
    }, coords={"latent": chosen, "rank": np.arange(k)}, attrs={"site": str(X.attrs.get("site")), "n_rows": int(n)})


def best_latents(scores, n, prefix=""):
    """(latents (m,), features (m,), f1 (m,)) the n latents (m = min(n, d_sae) that have a defined F1) with the
    highest F1 against any feature whose name starts with `prefix`, best first, ties by lower latent index;
    each with that feature and F1. scores : sp.sae_scores Dataset with f1 (latent, feature)."""
    if "f1" not in scores:
        raise ConfigError("best_latents needs sae_scores computed with ground_truth (its f1)")
    names = [f for f in scores.feature.values if str(f).startswith(prefix)]
    if not names:
        raise ConfigError(f"no feature name starts with {prefix!r}")
    f1 = scores.f1.sel(feature=names).values.astype(np.float64)                # (d_sae, n_names)
    ok = np.isfinite(f1).any(1)                                                # a latent with a defined F1
    defined = np.where(np.isfinite(f1), f1, -np.inf)                            # undefined F1 never the best
    chosen = [i for i in np.argsort(-defined.max(1), kind="stable")[:n] if ok[i]]
    which = [int(np.argmax(defined[i])) for i in chosen]
    return (np.asarray(chosen, dtype=np.int64), np.asarray([names[j] for j in which], dtype=object),
            np.asarray([f1[i, j] for i, j in zip(chosen, which)], dtype=np.float64))


def _latents(latents, d_sae):
    if latents is None:
        return np.arange(d_sae)
    arr = np.atleast_1d(np.asarray(latents))
    if arr.size == 0 or arr.ndim != 1 or arr.dtype.kind not in "iu" or arr.min() < 0 or arr.max() >= d_sae:
        raise ConfigError(f"latents must be one or more indices in 0..{d_sae - 1}, got {latents!r}")
    return arr.astype(np.int64)
