"""Activations as rows for dictionary learning: a tensor (n, d_in), or one hook site of a cached Dataset.

    X = site_rows(cache, "blocks.2.hook_resid_post")                 # run_with_cache's Dataset
    X = site_rows(store, "blocks.2.hook_resid_post", steps=[36000], sigmas=[0.7])   # cache_series / its store
    X.values  # (row, d_in) float32;  X.sample, X.step, X.sigma: where each row came from

One row is one input's whole activation at the site: its tokens (and heads) flattened in C order into d_in,
so a feature spread over tokens (a parity group straddling two patches) is one direction. `token=` keeps
one token's activation instead. Columns that are NaN in every row (the register's padding in `embed`,
`final_out`) are dropped; any other NaN is refused.
"""
import numpy as np
import torch
import xarray as xr

from scoreprobe.errors import DataError

ROW_DIMS = ("step", "sigma", "sample")


def site_rows(source, site=None, steps=None, sigmas=None, token=None):
    """The activations of `source` at `site` as a DataArray (row, d_in) float32.

    source : tensor or array (n, d_in) (site not needed), a DataArray (row, d_in), run_with_cache's cache, or a
        Dataset from run_with_cache(return_type="dataset") / cache_series / open_store with the site's variable.
    site : a hook name ('blocks.2.hook_resid_post', 'hook_embed', 'final.hook_out').
    steps, sigmas : a subset of the store's steps / σ (None: all); token : one token's rows only.
    Rows carry the coordinates `sample` (and `step`, `sigma` where the source has them)."""
    if isinstance(source, (torch.Tensor, np.ndarray)):
        arr = source.detach().cpu().numpy() if isinstance(source, torch.Tensor) else np.asarray(source)
        if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
            raise DataError(f"activations must be (n, d_in), got shape {arr.shape}")
        return _checked(xr.DataArray(arr.astype(np.float32), dims=("row", "d_in"),
                                     coords={"sample": ("row", np.arange(len(arr)))}))
    if isinstance(source, xr.DataArray) and source.dims == ("row", "d_in"):
        return _checked(source.astype(np.float32))
    if callable(getattr(source, "to_xarray", None)) and not isinstance(source, (xr.Dataset, xr.DataArray)):
        source = source.to_xarray()                  # run_with_cache's default result (an ActivationCache)
    if not isinstance(source, xr.Dataset):
        raise DataError(f"activations must be a tensor or array (n, d_in) or a cached Dataset, got {type(source).__name__}")
    if not isinstance(site, str):
        raise DataError("a cached Dataset needs site= (a hook name such as 'blocks.2.hook_resid_post')")
    return _checked(_from_dataset(source, site, steps, sigmas, token))


def _from_dataset(ds, site, steps, sigmas, token):
    from scoreprobe.inside.hooks import split_name      # the networks' modules load only for a cached Dataset
    layer, var = split_name(site)
    if var not in ds.data_vars:
        raise DataError(f"site {site!r}: the Dataset has no variable {var!r} (it has {', '.join(ds.data_vars)})")
    a = ds[var]
    if layer is not None:
        if "layer" not in a.dims or layer not in a.layer.values:
            raise DataError(f"site {site!r}: layer {layer} is not in the cache")
        a = a.sel(layer=layer)
    for dim, chosen in (("step", steps), ("sigma", sigmas)):
        if chosen is not None:
            if dim not in a.dims:
                raise DataError(f"{dim}s= given but the cache has no {dim!r} dimension")
            missing = sorted(set(np.atleast_1d(chosen).tolist()) - set(a[dim].values.tolist()))
            if missing:
                raise DataError(f"{dim} {missing} not in the cache (it has {a[dim].values.tolist()})")
            a = a.sel({dim: list(np.atleast_1d(chosen))})
    if token is not None:
        if "token" not in a.dims or not 0 <= token < a.sizes["token"]:
            raise DataError(f"token {token!r} is not a token index of site {site!r}")
        a = a.isel(token=token)
    if "sample" not in a.dims:
        raise DataError(f"site {site!r} has no per-sample activation (dims {a.dims})")
    rows = [d for d in ROW_DIMS if d in a.dims]
    feats = [d for d in a.dims if d not in rows]
    a = a.transpose(*rows, *feats)
    values = np.asarray(a.values, dtype=np.float32).reshape(int(np.prod([a.sizes[d] for d in rows])), -1)
    index = np.stack(np.meshgrid(*[a[d].values for d in rows], indexing="ij"), -1).reshape(-1, len(rows))
    coords = {d: ("row", index[:, i].astype(a[d].dtype)) for i, d in enumerate(rows)}
    return xr.DataArray(values, dims=("row", "d_in"), coords=coords, attrs={"site": site})


def _checked(x):
    """Drop all-NaN columns (padding); DataError for any other non-finite value or an empty result."""
    v = x.values
    keep = ~np.isnan(v).all(axis=0)
    if not keep.all():
        x = x.isel(d_in=np.flatnonzero(keep))
        v = x.values
    if v.shape[1] == 0 or not np.isfinite(v).all():
        raise DataError("activations hold NaN or inf (outside whole padding columns): nothing to train on")
    return x
