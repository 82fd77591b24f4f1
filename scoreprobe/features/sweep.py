"""sae_sweep: one SAE per (site, step, σ) cell of a cached store, trained, scored, and resumable.

    store = sp.cache_series(series, x, sigmas=[0.3, 0.7, 2.0], names=sites, out="acts.zarr")
    ds = sp.sae_sweep(store, sites, 128, k=8, ground_truth=truth, out_dir="saes")   # sae_steps=, sigmas=: a subset
    ds.coverage.sel(site="blocks.2.hook_resid_post")          # (step, sigma)
    ds.best_f1.sel(feature="group0=odd")                      # (site, step, sigma)

Each cell's rows are the samples of that (step, σ) (features.rows.site_rows); its SAE is sp.train_sae with the
given settings and the same seed in every cell, and it is scored by sp.sae_scores. With `out_dir`, each cell's
training state is kept in `out_dir/<site>/step<step>_sigma<σ>.state` (train_sae's checkpoint=) and its SAE in
the folder of the same name (sp.save_sae): a second call (after a kill, or with more steps in the store) trains
only the cells not finished; a cell trained on other rows or settings is refused, never reused.
"""
from pathlib import Path

import numpy as np
import xarray as xr

from scoreprobe.errors import ConfigError
from scoreprobe.features.disk import save_sae
from scoreprobe.features.rows import site_rows
from scoreprobe.features.scores import sae_scores
from scoreprobe.features.train import train_sae
from scoreprobe.progress import CountProgress

SCALARS = ("explained_variance", "l0", "dead", "dead_fraction", "shrinkage")


def sae_sweep(cache, sites, d_sae, *, sae_steps=None, sigmas=None, ground_truth=None, directions=None, out_dir=None,
              progress=None, **train_kw):
    """Train and score one SAE per (site, step, σ) of `cache` (see the module docstring).

    cache : a Dataset from sp.cache_series / open_store / run_with_cache(return_type="dataset") (or its
        ActivationCache); the step and σ dimensions are used where it has them.
    sites : hook names (a str or a list). d_sae, train_kw : as sp.train_sae (arch, k, l1, l0, seed, steps...).
    sae_steps, sigmas : subsets of the store's checkpoints and σ (None: all); `steps` (in train_kw) is the
        number of training steps, as in train_sae.
    ground_truth : None, a DataArray (sample, feature) of bools used in every cell, or a callable
        (step, sigma) -> such a DataArray (features of the noisy input depend on σ: sp.rule_features).
    directions : None, (n_dirs, d_in) directions used in every cell, or a callable (site, step, sigma) -> them.
    out_dir : a folder for the cells' training states and SAEs (resumable; see the module docstring).
    Returns a Dataset over (site, [step,] [sigma,]): explained_variance, l0, dead, dead_fraction, shrinkage;
    with ground_truth best_f1 (..., feature) and coverage; with directions mcc. A cell's SAE is not returned
    (load it with sp.load_sae from out_dir)."""
    if callable(getattr(cache, "to_xarray", None)) and not isinstance(cache, xr.Dataset):
        cache = cache.to_xarray()
    if not isinstance(cache, xr.Dataset):
        raise ConfigError(f"sae_sweep needs a cached Dataset (cache_series, open_store), got {type(cache).__name__}")
    sites = [sites] if isinstance(sites, str) else list(sites)
    if not sites or not all(isinstance(s, str) for s in sites):
        raise ConfigError(f"sites must be one or more hook names, got {sites!r}")
    axes = _axes(cache, sites[0], sae_steps, sigmas)
    for site in sites:                                  # every site readable before the first SAE trains
        site_rows(cache, site, *_pick(axes, _first(axes)))
    cells = [(site, key) for site in sites for key in _keys(axes)]
    bar = CountProgress(len(cells), 0, "sae_sweep", progress)
    scored = {}
    for site, key in cells:
        scored[site, key] = _cell(cache, site, axes, key, d_sae, ground_truth, directions, out_dir, train_kw)
        bar.update()
    bar.close()
    return _assemble(scored, sites, axes)


def _axes(cache, site, steps, sigmas):
    """{"step": values, "sigma": values} for the dims the site's variable has (subsets checked by site_rows)."""
    X = site_rows(cache, site, steps, sigmas)
    return {d: list(dict.fromkeys(X[d].values.tolist())) for d in ("step", "sigma") if d in X.coords}


def _keys(axes):
    grids = np.meshgrid(*[np.arange(len(v)) for v in axes.values()], indexing="ij")
    return [tuple(axes[d][int(g.ravel()[i])] for d, g in zip(axes, grids)) for i in range(grids[0].size)] \
        if axes else [()]


def _first(axes):
    return tuple(v[0] for v in axes.values())


def _pick(axes, key):
    """(steps, sigmas) arguments of site_rows for one cell."""
    where = dict(zip(axes, key))
    return ([where["step"]] if "step" in where else None), ([where["sigma"]] if "sigma" in where else None)


def _cell(cache, site, axes, key, d_sae, ground_truth, directions, out_dir, train_kw):
    steps, sigmas = _pick(axes, key)
    where = dict(zip(axes, key))
    step, sigma = where.get("step"), where.get("sigma")
    ckpt = None
    if out_dir is not None:
        stem = "_".join(f"{d}{v:g}" if isinstance(v, float) else f"{d}{v}" for d, v in where.items()) or "cell"
        ckpt = Path(out_dir) / site / f"{stem}.state"
        ckpt.parent.mkdir(parents=True, exist_ok=True)
    X = site_rows(cache, site, steps, sigmas)                   # (row, d_in): read once for training and scores
    sae = train_sae(X, d_sae, checkpoint=ckpt, progress=False, **train_kw)
    if ckpt is not None and not (ckpt.with_suffix("") / "cfg.json").is_file():   # cfg.json is written last
        save_sae(sae, ckpt.with_suffix(""))
    truth = ground_truth(step, sigma) if callable(ground_truth) else ground_truth
    dirs = directions(site, step, sigma) if callable(directions) else directions
    return sae_scores(sae, X, truth, dirs)


def _assemble(scored, sites, axes):
    """The cells' Datasets stacked over (site, *axes)."""
    dims = ("site", *axes)
    shape = (len(sites), *[len(v) for v in axes.values()])
    first = next(iter(scored.values()))
    names = [n for n in (*SCALARS, "coverage", "mcc") if n in first]
    out = {n: np.full(shape, np.nan) for n in names}
    feat = first["best_f1"].feature.values if "best_f1" in first else None
    f1 = np.full((*shape, len(feat)), np.nan) if feat is not None else None
    for (site, key), ds in scored.items():
        idx = (sites.index(site), *[axes[d].index(v) for d, v in zip(axes, key)])
        for n in names:
            out[n][idx] = float(ds[n])
        if f1 is not None:
            f1[idx] = ds["best_f1"].sel(feature=feat).values
    coords = {"site": sites, **{d: v for d, v in axes.items()}}
    data = {n: (dims, v) for n, v in out.items()}
    if f1 is not None:
        data["best_f1"] = ((*dims, "feature"), f1)
        coords["feature"] = feat
    return xr.Dataset(data, coords=coords, attrs={k: v for k, v in first.attrs.items() if k != "site"})
