"""Activation caches over a checkpoint series, streamed to a zarr store one checkpoint at a time (step × σ).

    ds = sp.cache_series(series, x, sigmas=[0.3, 0.7, 1.5], names="blocks.*.attn.hook_z", out="z.zarr")

Each checkpoint's cache — `run_with_cache` of the same inputs x at every σ, concatenated along `sigma` — is
appended to the store and committed as soon as it is computed (`scoreprobe.sweep`), so memory holds one
checkpoint's cache at a time and an interrupted run resumes (steps already written are skipped when they measured
the same model). `names=` keeps only the hook points needed, `dtype=torch.float16` halves the store.
"""
import hashlib
import json

import numpy as np
import torch
import xarray as xr

from scoreprobe.errors import ConfigError
from scoreprobe.inside.cache import run_with_cache
from scoreprobe.limits import MAX_SIGMA
from scoreprobe.sweep import is_multi, source_identity, sweep


def cache_series(series, x, sigmas, names=None, steps=None, out=None, dtype=None, progress=None,
                 overwrite=False):
    """The activation cache of every checkpoint of `series` at inputs x and noise levels `sigmas`.

    x : (B, D) noisy signed images (the same rows at every σ and step); sigmas : list of σ; names : hook points
    (None: all), as `run_with_cache`; steps : a subset of the series' steps; out : a zarr store (appended per step,
    resumable); dtype : torch.float32 (default) or torch.float16.
    Returns the Dataset (step, sigma, sample, layer, ... as `run_with_cache`'s variables)."""
    sig = [float(s) for s in np.atleast_1d(np.asarray(sigmas, dtype=float))]
    if not sig or not all(0 < s <= MAX_SIGMA for s in sig) or len(set(sig)) < len(sig):
        raise ConfigError(f"sigmas must be distinct, positive and at most {MAX_SIGMA:g}, got {sigmas!r}")
    if not is_multi(series):
        raise ConfigError("cache_series takes a series or a {step: denoiser} mapping; run_with_cache takes one denoiser")
    if callable(names):
        raise ConfigError("cache_series records its hook points in the store: pass names or patterns, not a predicate")
    x = torch.as_tensor(x, dtype=torch.float32)
    dt = torch.float32 if dtype is None else dtype
    if dt not in (torch.float32, torch.float16):
        raise ConfigError(f"dtype must be torch.float32 or torch.float16 for a store, got {dtype!r}")
    digest = hashlib.sha256(x.numpy().tobytes()).hexdigest()[:16]
    config = {"probe": "cache", "sigmas": sig, "names": names if names is None or isinstance(names, str) else
              list(names), "x_sha256": digest, "n_samples": int(len(x)), "dtype": str(dt).replace("torch.", ""),
              "source": source_identity(series)}

    def probe(model):
        parts = []
        for s in sig:
            _, ds = run_with_cache(model, x, s, names=names, dtype=dt, return_type="dataset")
            parts.append(ds.drop_vars("sigma"))
        out_ds = xr.concat(parts, dim=xr.DataArray(sig, dims="sigma", name="sigma"))
        out_ds.attrs = {k: v for k, v in parts[0].attrs.items() if k in ("kind", "hooks")}
        return out_ds
    probe.n_bits = int(x.shape[1])
    ds = sweep(probe, series, steps=steps, out=out, config=config, progress=progress, overwrite=overwrite)
    ds.attrs["scoreprobe_config"] = json.dumps(config, sort_keys=True)
    return ds
