"""τ_cross with intervals: a bootstrap over the (item, noise draw) cells of one model, and a t interval over
trained models (docs/definitions.md, "What kind of denoiser": τ_cross).

Inference over the per-cell losses that `scoreprobe.probes.crossover.model_cells` measures (the network's
σ-averaged training loss minus the rule oracle's, paired over steps); τ_cross itself is read by
`crossover.crossing_step`. The data flow one way: the probe measures, this module reads.
"""
import numpy as np
import torch
import xarray as xr

from scoreprobe.errors import ConfigError
from scoreprobe.probes.crossover import P_MEAN, P_STD, crossing_step, model_cells, sigma_weights
from scoreprobe.probes.dsm import _resolve_sigmas
from scoreprobe.stats.intervals import t_interval


def boot_crossing(steps, diff_cells, n_boot=1000, ci=0.95, seed=0):
    """τ_cross and its percentile interval from the per-cell σ-averaged loss differences net − rule.

    diff_cells (S_steps, C): each checkpoint's difference per (item, draw) cell, paired over steps. A resample
    draws C cells with replacement (the same cells at every step) and reads `crossing_step` of the mean
    difference. A resample that never crosses counts as beyond the last checkpoint: the upper end is NaN
    (not reached) when more than (1 − ci)/2 of them never cross. -> (tau, lo, hi, share never crossed)."""
    diff_cells = np.asarray(diff_cells, np.float64)
    tau = crossing_step(steps, diff_cells.mean(1))
    rng = np.random.default_rng(seed)
    n_cells = diff_cells.shape[1]
    counts = rng.multinomial(n_cells, np.full(n_cells, 1.0 / n_cells), size=int(n_boot))   # (B, C)
    means = counts @ diff_cells.T / n_cells                                                # (B, S_steps)
    taus = np.array([crossing_step(steps, m) for m in means])
    never = ~np.isfinite(taus)
    a = (1 - ci) / 2
    ranked = np.sort(np.where(never, np.inf, taus))                     # never: beyond every checkpoint
    lo = float(ranked[int(np.floor(a * (len(ranked) - 1)))])
    hi = float(ranked[int(np.ceil((1 - a) * (len(ranked) - 1)))])
    return tau, lo if np.isfinite(lo) else float("nan"), hi if np.isfinite(hi) else float("nan"), float(never.mean())


def tau_cross_interval(sources, dataset=None, rule=None, sigmas=None, n_draws=8, seed=0, *, n_boot=1000, ci=0.95,
                       boot_seed=0, steps=None, sigma_data=None, p_mean=P_MEAN, p_std=P_STD, dtype=torch.float32,
                       device=None):
    """τ_cross (module docstring) of one or several trained models, with intervals.

    Parameters
    ----------
    sources : a CheckpointSeries or {step: denoiser} (with dataset=, rule=), or a list of them (models as units;
        each is read on its own training set; dataset= may then be a list, one per model).
    sigmas, n_draws, seed : σ grid (as `crossover`), noise draws per training item (draw k: noise-bank seed
        seed + k) — every model and step sees the same draws.
    n_boot, ci, boot_seed : the bootstrap over the (item, draw) cells of each model (`boot_crossing`).

    Returns
    -------
    xarray.Dataset (model): tau_cross, tau_cross_lo, tau_cross_hi (percentile bootstrap over cells; hi NaN: more
    than (1 − ci)/2 of the resamples never cross), boot_never (share of resamples that never cross); attrs
    `tau_cross_mean`, `tau_cross_mean_lo/hi` (t interval over the models, M − 1 df; NaN with fewer than 2 models
    or any model that never crosses) and `n_models`.
    """
    many = isinstance(sources, (list, tuple))
    sources = list(sources) if many else [sources]
    if not sources:
        raise ConfigError("tau_cross_interval needs at least one model")
    if int(n_draws) < 2 or int(n_boot) < 10 or not 0 < ci < 1:
        raise ConfigError(f"n_draws={n_draws} (≥ 2), n_boot={n_boot} (≥ 10), ci={ci} (in (0, 1))")
    sig = _resolve_sigmas(sigmas)
    weights = sigma_weights(sig, p_mean, p_std)
    data = list(dataset) if isinstance(dataset, (list, tuple)) else [dataset] * len(sources)
    if len(data) != len(sources):
        raise ConfigError(f"{len(sources)} models but {len(data)} datasets")
    rows = []
    for m, src in enumerate(sources):
        steps_m, cells = model_cells(src, data[m], rule, sig, weights, n_draws, seed, sigma_data, dtype,
                                      device or "cpu", steps)
        rows.append(boot_crossing(steps_m, cells, n_boot, ci, boot_seed + m))
    tau, lo, hi, never = (np.array(v, np.float64) for v in zip(*rows))
    attrs = {"n_models": len(sources), "ci": float(ci), "n_draws": int(n_draws), "n_boot": int(n_boot),
             "tau_cross_mean": float(tau.mean()), "tau_cross_mean_lo": float("nan"), "tau_cross_mean_hi": float("nan")}
    if len(tau) >= 2 and np.isfinite(tau).all():
        _, lo_m, hi_m = t_interval(tau, ci)
        attrs.update(tau_cross_mean_lo=float(lo_m), tau_cross_mean_hi=float(hi_m))
    long = "first step from which the network's σ-averaged training loss stays below the rule oracle's"
    return xr.Dataset({
        "tau_cross": (("model",), tau, {"units": "steps", "long_name": long + " (NaN: never)"}),
        "tau_cross_lo": (("model",), lo, {"units": "steps", "long_name": f"{ci:.0%} bootstrap lower end"}),
        "tau_cross_hi": (("model",), hi, {"units": "steps", "long_name": f"{ci:.0%} bootstrap upper end "
                                                                        "(NaN: not reached)"}),
        "boot_never": (("model",), never, {"units": "1", "long_name": "share of resamples that never cross"})},
        coords={"model": np.arange(len(sources))}, attrs=attrs)
