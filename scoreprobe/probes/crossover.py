"""The loss crossover: when does the network fit its training set better than the perfect generalizer?

On the training set, per σ, the EDM-weighted DSM loss (the training loss's own weighting,
λ(σ)·‖D(x + σε, σ) − x‖²/D with λ = (σ² + σ_data²)/(σ·σ_data)²; `scoreprobe.probes.dsm`) of the
network and of the exact oracles. The memorizer is the exact minimizer of this loss, so every
denoiser's expected training loss lies at or above it; the rule oracle (the perfect generalizer)
pays the excess L_rule(σ) − L_mem(σ) ≥ 0 for not knowing which valid images were trained on.
Buchanan, Pai, Ma & De Bortoli (NeurIPS 2025) read the memorization transition off the
competition between the two losses. Two readings are computed here:

- per σ and in total (σ averaged over the training distribution ln σ ~ N(p_mean, p_std²) on the
  grid), the excess of the generalizer over the memorizer (`excess`), which shrinks as N grows;
- over training steps, τ_cross: the step from which the network's training loss stays below the
  rule oracle's — a network that beats the perfect generalizer on its own training set must use
  what is specific to that set, so τ_cross is a loss-only predictor of τ_mem (`crossing_step`).

The same noise bank serves every denoiser and step (`dsm_losses`, keyed by item), so the
differences are paired.
"""
import json
import warnings

import numpy as np
import torch
import xarray as xr

from scoreprobe.errors import ConfigError, NonFiniteWarning, user_stacklevel
from scoreprobe.noise import NOISE
from scoreprobe.probes.decompose import ORACLES, oracle_denoisers
from scoreprobe.probes.dsm import (
    _resolve_sigmas,
    _sigma_data_of,
    dsm_losses,
    edm_weight,
)
from scoreprobe.sweep import dataset_and_rule, run_probe

P_MEAN, P_STD = -1.2, 1.2      # the training σ distribution (TrainConfig defaults)
EXCESS_RTOL = 1e-9              # gap_closed is NaN when L_rule − L_mem ≤ this × L_rule (a zero denominator)


def sigma_weights(sigmas, p_mean=P_MEAN, p_std=P_STD):
    """Weights of the σ grid for the average over ln σ ~ N(p_mean, p_std²): the normal density in ln σ
    times the trapezoid width in ln σ, normalized to sum 1. (n_sigma,) float64 (grid sorted or not)."""
    s = np.asarray(sigmas, np.float64)
    order = np.argsort(s)
    ln = np.log(s[order])
    width = np.gradient(ln) if len(ln) > 1 else np.ones(1)
    dens = np.exp(-0.5 * ((ln - p_mean) / p_std) ** 2)
    w = np.empty_like(s)
    w[order] = dens * width
    return w / w.sum()


def training_loss(D, bits, sigmas, n_noise, seed, sigma_data, dtype=torch.float64, device="cpu"):
    """EDM-weighted DSM loss of D on the items `bits`, mean over items and noise: (n_sigma,) float64."""
    loss = dsm_losses(D, bits, np.arange(len(bits)), sigmas, n_noise, seed, None, device, dtype, False)
    return edm_weight(sigmas, sigma_data) * loss.mean(axis=1)                   # (n_sigma,)


def crossing_step(steps, diff):
    """First step from which `diff` stays < 0, interpolated linearly in ln(step + 1) between the last
    checkpoint with diff ≥ 0 and the next. NaN when the last diff is ≥ 0 (not reached); the first
    step when every diff is < 0 (a bound: crossed before the first checkpoint).

    Only checkpoints whose diff is defined (finite) take part: a NaN diff is a checkpoint whose loss
    is undefined (a diverged network), which says nothing about whether it is above or below; NaN
    when none is defined.

    steps (S,) ascending, diff (S,) -> float."""
    steps, diff = np.asarray(steps, np.float64), np.asarray(diff, np.float64)
    defined = np.isfinite(diff)
    steps, diff = steps[defined], diff[defined]
    if len(steps) == 0 or not diff[-1] < 0:
        return float("nan")
    above = np.flatnonzero(~(diff < 0))
    if len(above) == 0:
        return float(steps[0])
    i = int(above[-1])
    a, b = np.log(steps[i] + 1), np.log(steps[i + 1] + 1)
    t = diff[i] / (diff[i] - diff[i + 1])                                        # in [0, 1)
    return float(np.exp(a + t * (b - a)) - 1)


def crossover(D_or_series, dataset=None, rule=None, sigmas=None, n_noise=8, seed=0, n_train=None, *,
              oracles=ORACLES, patch=3, sigma_data=None, p_mean=P_MEAN, p_std=P_STD, steps=None, out=None,
              device=None, dtype=torch.float32, progress=None, overwrite=False, model_id=None):
    """Weighted training loss of the network and the oracles per σ, and the crossing step (module docstring).

    Parameters
    ----------
    D_or_series : a denoiser, a CheckpointSeries or {step: denoiser}.
    dataset, rule : needed for a plain denoiser; a series brings its own.
    sigmas : int or noise levels (default 40 log-spaced in [0.002, 80], as `dsm_by_sigma`).
    n_noise, seed : noise draws per training item and the noise-bank seed.
    n_train : the first n_train training items (default all).
    oracles, patch : as `decompose`; sigma_data : σ_data of λ(σ) when the denoiser has none (else 1).
    p_mean, p_std : the training σ distribution for the σ-averaged losses.

    Returns
    -------
    xarray.Dataset: `loss` ([step], sigma) and `loss_avg` ([step]) of the network; `oracle_loss`
    (sigma, oracle), `oracle_loss_avg` (oracle); `excess` (sigma) = rule − memorizer and
    `gap_closed` ([step]) = (L_rule − L_net)/(L_rule − L_mem) σ-averaged (when both are among the
    oracles); `sigma_weight` (sigma). Over a series, attrs `tau_cross` (first step
    from which loss_avg < the rule oracle's) and `tau_cross_sigma` (sigma) per σ; NaN when never.
    A NaN/inf loss at any σ makes that checkpoint's `loss_avg` and `gap_closed` NaN (never an average
    of the rest), with a NonFiniteWarning naming the step and σ; the τ's read only defined checkpoints.
    `gap_closed` is NaN too where the oracles' σ-averaged losses are equal (no excess: a zero denominator).
    """
    dataset, rule = dataset_and_rule(D_or_series, dataset, rule, need_rule=False, who="crossover")
    sig = _resolve_sigmas(sigmas)
    n = len(dataset.train) if n_train is None else int(n_train)
    if not 1 <= n <= len(dataset.train):
        raise ConfigError(f"n_train={n_train}: the training set has {len(dataset.train)} items")
    bits = np.asarray(dataset.train[:n], np.uint8)
    named = oracle_denoisers(dataset, rule, oracles, patch)
    sd_default = 1.0 if sigma_data is None else float(sigma_data)
    ref = np.stack([training_loss(o, bits, sig, n_noise, seed, sd_default) for o in named.values()], 1)
    weights = sigma_weights(sig, p_mean, p_std)
    config = {"probe": "crossover", "sigmas": [float(s) for s in sig], "n_noise": int(n_noise), "seed": int(seed),
              "n_train": n, "oracles": list(named), "patch": int(patch), "noise": NOISE,
              "p_mean": float(p_mean), "p_std": float(p_std), "dtype": str(dtype).replace("torch.", "")}

    def probe(D):
        sd, _ = _sigma_data_of(D, sigma_data)
        loss = training_loss(D, bits, sig, n_noise, seed, sd, dtype, device or "cpu")
        return xr.Dataset({
            "loss": (("sigma",), loss, {"units": "1", "long_name": "EDM-weighted DSM loss on the training set"}),
            "loss_avg": ((), float(np.sum(weights * loss)) if np.isfinite(loss).all() else float("nan"), {
                "units": "1", "long_name": "weighted training loss averaged over the training σ distribution"})},
            coords={"sigma": ("sigma", sig, {"units": "1", "long_name": "noise level σ"})},
            attrs={"title": "loss crossover", "scoreprobe_config": json.dumps(config, sort_keys=True)})
    probe.n_bits = bits.shape[1]
    ds = run_probe(probe, D_or_series, config, steps=steps, out=out, device="cpu" if device is None else str(device),
                   progress=progress, overwrite=overwrite, model_id=model_id)
    _warn_undefined(ds)
    return _with_oracles(ds, ref, list(named), weights)


def _warn_undefined(ds):
    """One NonFiniteWarning naming each checkpoint (step) whose training loss is NaN/inf at some σ, and those σ:
    its `loss_avg` and `gap_closed` are NaN and τ_cross is read from the other checkpoints."""
    loss = ds.loss.transpose(..., "sigma").values
    bad = ~np.isfinite(loss.reshape(-1, loss.shape[-1]))                     # ([step], sigma)
    if not bad.any():
        return
    steps = ds.step.values if "step" in ds.dims else [None]
    sig = ds.sigma.values
    parts = [(f"step {int(st)}: " if st is not None else "") + "σ = " + ", ".join(f"{s:g}" for s in sig[row])
             for st, row in zip(steps, bad) if row.any()]
    warnings.warn(f"crossover: the network's training loss is NaN/inf at {'; '.join(parts[:8])}"
                  + (f" (and {len(parts) - 8} more checkpoints)" if len(parts) > 8 else "")
                  + "; its σ-averaged loss and gap_closed are NaN there, and τ_cross is read only from the "
                    "checkpoints whose loss is defined", NonFiniteWarning, stacklevel=user_stacklevel())


def _with_oracles(ds, ref, names, weights):
    """Add the oracle references, the excess and (over steps) the crossing steps."""
    ds = ds.assign_coords(oracle=("oracle", np.array(names, dtype=object), {"long_name": "exact oracle denoiser"}))
    ds["sigma_weight"] = (("sigma",), weights, {"units": "1", "long_name": "weight of σ in the averages "
                                                "(ln σ ~ N(p_mean, p_std²), trapezoid in ln σ)"})
    ds["oracle_loss"] = (("sigma", "oracle"), ref, {"units": "1", "long_name": "EDM-weighted DSM training loss "
                                                    "of the oracle"})
    ds["oracle_loss_avg"] = (("oracle",), weights @ ref, {"units": "1", "long_name": "oracle_loss averaged "
                                                          "over the training σ distribution"})
    if "rule" in names and "memorizer" in names:
        ds["excess"] = ds.oracle_loss.sel(oracle="rule", drop=True) - ds.oracle_loss.sel(oracle="memorizer", drop=True)
        ds["excess"].attrs = {"units": "1", "long_name": "training loss of the rule oracle minus the memorizer's "
                                                         "(≥ 0 in expectation)"}
    if "rule" in names and "memorizer" in names:
        avg = dict(zip(names, weights @ ref))
        gap = float(avg["rule"]) - float(avg["memorizer"])
        defined = gap > EXCESS_RTOL * abs(float(avg["rule"]))          # no excess (e.g. every valid image trained):
        ds["gap_closed"] = (float(avg["rule"]) - ds.loss_avg) / (gap if defined else np.nan)   # a share of nothing
        ds["gap_closed"].attrs = {"units": "1", "long_name": "share of the generalizer's excess over the memorizer "
                                                            "that the network's σ-averaged training loss has closed "
                                                            "(0: the rule oracle's loss, 1: the memorizer's; NaN: "
                                                            "no excess to close, or the network's loss undefined)"}
    if "step" in ds.dims and "rule" in names:
        rule_loss = ds.oracle_loss.sel(oracle="rule", drop=True)
        steps = ds.step.values
        ds.attrs["tau_cross"] = crossing_step(steps, (ds.loss_avg - float(ds.oracle_loss_avg.sel(oracle="rule"))).values)
        ds["tau_cross_sigma"] = (("sigma",), np.array([crossing_step(steps, (ds.loss - rule_loss).isel(sigma=j).values)
                                                      for j in range(ds.sizes["sigma"])]), {
            "units": "steps", "long_name": "first step from which the network's training loss at σ stays below "
                                           "the rule oracle's (NaN: never)"})
    return ds


# ---------------------------------------------------------------------------------------------
# Per-cell losses for τ_cross's interval (the interval itself: scoreprobe.stats.tau_cross)
# ---------------------------------------------------------------------------------------------

def draw_losses(D, bits, sigmas, n_draws, seed, sigma_data, dtype=torch.float64, device="cpu"):
    """EDM-weighted DSM loss per σ and (item, draw) cell, draw k from noise-bank seed `seed + k`:
    (n_sigma, S·n_draws) float64, cells ordered draw-major (the same cells for every denoiser: paired)."""
    per = [dsm_losses(D, bits, np.arange(len(bits)), sigmas, 1, seed + k, None, device, dtype, False)
           for k in range(int(n_draws))]                                              # n_draws × (n_sigma, S)
    return edm_weight(sigmas, sigma_data)[:, None] * np.concatenate(per, axis=1)


def model_cells(source, dataset, rule, sig, weights, n_draws, seed, sigma_data, dtype, device, steps):
    """(steps (S_steps,), per-cell σ-averaged loss of the network minus the rule oracle's (S_steps, C)) of one
    series or {step: denoiser} mapping, on its own training set."""
    from scoreprobe.oracles import RuleDenoiser
    from scoreprobe.sweep import as_steps, select_steps
    dataset, rule = dataset_and_rule(source, dataset, rule, who="tau_cross_interval")
    bits = np.asarray(dataset.train, np.uint8)
    ref = weights @ draw_losses(RuleDenoiser(rule), bits, sig, n_draws, seed,
                                1.0 if sigma_data is None else float(sigma_data))            # (C,)
    pairs = select_steps(as_steps(source), steps)
    rows = []
    for _, load in pairs:
        D = load()
        sd, _ = _sigma_data_of(D, sigma_data)
        rows.append(weights @ draw_losses(D, bits, sig, n_draws, seed, sd, dtype, device) - ref)
    return np.array([k for k, _ in pairs], np.float64), np.array(rows)


def crossover_json(ds):
    """A `crossover` Dataset -> JSON-able dict: steps, σ, oracles, the network's loss (step, σ) and σ-average, the
    oracles' (oracle, σ) and averages, the excess, the σ weights, τ_cross and τ_cross per σ (None: never)."""
    from scoreprobe.store.json_ready import number_or_none as _num
    return {"steps": [int(s) for s in ds.step.values], "sigma": [float(s) for s in ds.sigma.values],
            "oracle": list(ds.oracle.values), "loss": ds.loss.values.tolist(), "loss_avg": ds.loss_avg.values.tolist(),
            "oracle_loss": ds.oracle_loss.values.tolist(), "oracle_loss_avg": ds.oracle_loss_avg.values.tolist(),
            "excess": ds.excess.values.tolist(), "sigma_weight": ds.sigma_weight.values.tolist(),
            "tau_cross": _num(ds.attrs.get("tau_cross")),
            "tau_cross_sigma": [_num(v) for v in ds.tau_cross_sigma.values]}


def excess_by_n(rule, Ns, seeds, sigmas, n_noise):
    """The rule oracle's and the memorizer's σ-averaged weighted training loss for datasets of N items (`Ns`), per
    data seed (`seeds`); the first seed's as `rule`, `memorizer`, `excess` (N); every seed's excess as
    `excess_by_seed` (seed, N) -> JSON-able dict."""
    from scoreprobe.data.datasets import make_dataset
    from scoreprobe.oracles import RuleDenoiser
    gen = RuleDenoiser(rule)
    by = {}
    for seed in seeds:
        rows = []
        for n in Ns:
            c = crossover(gen, dataset=make_dataset(rule, n, 1, seed=seed), rule=rule, sigmas=sigmas,
                          n_noise=n_noise, oracles=("memorizer", "rule"), progress=False)
            avg = dict(zip(c.oracle.values, c.oracle_loss_avg.values))
            rows.append((float(avg["rule"]), float(avg["memorizer"])))
        by[seed] = np.array(rows)                                            # (N, 2)
    s0 = by[seeds[0]]
    return {"N": list(Ns), "rule": s0[:, 0].tolist(), "memorizer": s0[:, 1].tolist(),
            "excess": (s0[:, 0] - s0[:, 1]).tolist(), "excess_seeds": list(seeds),
            "excess_by_seed": [(by[k][:, 0] - by[k][:, 1]).tolist() for k in seeds]}
