"""Denoising score-matching loss by noise level, training items vs held-out items.

For a denoiser D, a clean signed item x (D_bits coordinates in {-1,+1}) and a noise level σ,

    loss(x, σ) = mean_k ‖D(x + σ ε_k, σ) − x‖² / D_bits          (k = 1..n_noise)

and the EDM-weighted loss is λ(σ)·loss with λ(σ) = (σ² + σ_data²) / (σ·σ_data)² (Karras et al. 2022).

Every ε comes from one noise bank keyed by (position of the item inside its split, noise index):
the j-th training item and the j-th held-out item see exactly the same ε at every σ and every
step, so the held-out − train gap is a paired difference, and curves of different checkpoints are
comparable draw for draw. The perfect memorizer (EmpiricalDenoiser of the training set) and the
perfect generalizer (RuleDenoiser) are evaluated on the same items and noise as reference curves.
"""
import json
import logging
import warnings

import numpy as np
import torch
import xarray as xr
from tqdm.auto import tqdm

from scoreprobe.data.datasets import to_signed
from scoreprobe.errors import ConfigError, DataError, NonFiniteWarning, SettingWarning, user_stacklevel
from scoreprobe.limits import MAX_SIGMA, MAX_SIGMAS, check_int, check_seed
from scoreprobe.models.stack import replicate, stack_size
from scoreprobe.models.stack import split as split_rows
from scoreprobe.noise import NOISE, randn_per_sample
from scoreprobe.ode import resolve_device
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.probes.dsm_gap import Z_SIGNIFICANT, _stat_vars, gap_stats
from scoreprobe.sweep import dataset_and_rule, run_probe, source_identity

logger = logging.getLogger(__name__)

SIGMA_MIN, SIGMA_MAX, N_SIGMAS = 0.002, 80.0, 40
DEFAULT_CHUNK_SIZE = 8192      # denoiser rows per call; memory is O(chunk_size * D_bits)
NOISE_STRIDE = 1 << 16         # noise key = position * NOISE_STRIDE + k: banks nest as n_noise grows
MAX_DEFAULT_HELDOUT = 512      # n_heldout=None takes all held-out items, at most this many (cost ∝ items)


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------

def default_sigmas(n=N_SIGMAS, sigma_min=SIGMA_MIN, sigma_max=SIGMA_MAX):
    """`n` log-spaced noise levels in [sigma_min, sigma_max]: float64 (n,)."""
    return np.geomspace(sigma_min, sigma_max, int(n))


def edm_weight(sigma, sigma_data):
    """EDM loss weight λ(σ) = (σ² + σ_data²) / (σ·σ_data)², elementwise on a float array."""
    sigma = np.asarray(sigma, dtype=np.float64)
    return (sigma**2 + sigma_data**2) / (sigma * sigma_data) ** 2


def _resolve_sigmas(sigmas):
    """None -> 40 log-spaced; an int n -> n log-spaced; else a 1-D array of positive floats."""
    if sigmas is None:
        return default_sigmas()
    if isinstance(sigmas, (int, np.integer)) and not isinstance(sigmas, bool):
        if not 1 <= sigmas <= MAX_SIGMAS:
            raise ConfigError(f"sigmas={sigmas}: need between 1 and {MAX_SIGMAS} noise levels "
                              "(scoreprobe.limits.MAX_SIGMAS)")
        return default_sigmas(sigmas)
    s = np.atleast_1d(np.asarray(sigmas, dtype=np.float64))
    if s.ndim != 1 or s.size == 0 or not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise ConfigError(f"sigmas must be a non-empty 1-D list of positive finite numbers, got {_shown(sigmas)}")
    if s.size > MAX_SIGMAS or np.any(s > MAX_SIGMA):
        raise ConfigError(f"sigmas must be at most {MAX_SIGMAS} values of at most {MAX_SIGMA:g} (scoreprobe.limits)")
    return s


def _select_items(dataset, n_train, n_heldout):
    """First n_train training and n_heldout held-out items (None: all training items; all held-out
    items up to MAX_DEFAULT_HELDOUT).

    Returns bits (S, D) uint8, split (S,) object, item_index (S,) int64, position (S,) int64
    (position inside its split = the noise-bank key, shared by the two splits).
    """
    n_tr_all, n_ho_all = len(dataset.train), len(dataset.heldout)
    n_train = n_tr_all if n_train is None else int(n_train)
    n_heldout = min(n_ho_all, MAX_DEFAULT_HELDOUT) if n_heldout is None else int(n_heldout)
    for name, n, avail in (("n_train", n_train, n_tr_all), ("n_heldout", n_heldout, n_ho_all)):
        if not 0 <= n <= avail:
            raise ConfigError(f"{name}={n}, but the dataset has {avail} such items; pass at most {avail}")
    if n_train + n_heldout == 0:
        raise ConfigError("n_train and n_heldout are both 0: nothing to measure")
    bits = np.concatenate([dataset.train[:n_train], dataset.heldout[:n_heldout]]).astype(np.uint8)
    split = np.array(["train"] * n_train + ["heldout"] * n_heldout, dtype=object)
    pos = np.concatenate([np.arange(n_train), np.arange(n_heldout)]).astype(np.int64)
    item_index = pos.copy()  # the first items of each split: row in the split = position
    return bits, split, item_index, pos


def _sigma_data_of(D, sigma_data):
    """σ_data for the weight: the denoiser's `.sigma_data`, else the argument, else 1.0."""
    own = getattr(D, "sigma_data", None)
    if own is not None:
        if sigma_data is not None and float(sigma_data) != float(own):
            warnings.warn(f"the denoiser states sigma_data={float(own):g}; ignoring sigma_data={float(sigma_data):g}",
                          SettingWarning, stacklevel=user_stacklevel())
        return float(own), "denoiser"
    if sigma_data is not None:
        return float(sigma_data), "argument"
    return 1.0, "default"


# ---------------------------------------------------------------------------------------------
# Core: loss of one denoiser on the (item × noise × σ) grid, chunked
# ---------------------------------------------------------------------------------------------

def dsm_losses(D, bits, position, sigmas, n_noise=8, seed=0, chunk_size=None, device="cpu",
               dtype=torch.float32, progress=None):
    """Per-item DSM loss of one denoiser, mean over the noise bank.

    Parameters
    ----------
    D : callable
        Denoiser `D(x: (B, D) float, sigma: (B,) float) -> (B, D)`.
    bits : (S, D) uint8
        Clean items.
    position : (S,) int
        Noise-bank key of each item: items with equal position get identical noise.
    sigmas : (n_sigma,) float
        Noise levels.
    n_noise : int
        Noise draws per item (the same draws at every σ).
    chunk_size : int, optional
        Denoiser rows per call (rows enumerate item × noise × σ); the result does not depend on it.
        A `models.stack.StackedDenoiser` of K checkpoints evaluates each chunk for all K at once.

    Returns
    -------
    loss : (n_sigma, S) float64 (a list of K of them for a stack of K)
        mean_k ‖D(x + σ ε_k, σ) − x‖² / D. Non-finite outputs are returned as they are (NaN/inf);
        `dsm_by_sigma` counts them and excludes them from its means.
    """
    if int(n_noise) < 1 or int(n_noise) > NOISE_STRIDE:
        raise ConfigError(f"n_noise={n_noise}: must be between 1 and {NOISE_STRIDE}")
    chunk = int(chunk_size or DEFAULT_CHUNK_SIZE)
    if chunk < 1:
        raise ConfigError(f"chunk_size={chunk_size}: must be a positive number of rows")
    n_noise, n_sig, d = int(n_noise), len(sigmas), bits.shape[1]
    x_all = torch.as_tensor(to_signed(np.asarray(bits))).to(device=device, dtype=dtype)  # (S, D)
    sig_all = torch.as_tensor(np.asarray(sigmas), dtype=dtype, device=device)               # (n_sigma,)
    keys_all = np.repeat(np.asarray(position, np.int64) * NOISE_STRIDE, n_noise) + np.tile(
        np.arange(n_noise, dtype=np.int64), len(bits))                                      # (S*K,)
    n_rows = len(bits) * n_noise * n_sig          # row r = (item*K + k)*n_sigma + j
    n_models = stack_size(D)
    err = np.empty((n_models, n_rows), dtype=np.float64)
    starts = range(0, n_rows, chunk)
    with torch.no_grad():
        for start in tqdm(starts, desc="dsm", unit="chunk", disable=_tqdm_disable(progress, len(starts))):
            stop = min(start + chunk, n_rows)
            err[:, start:stop] = _chunk_errors(D, x_all, sig_all, keys_all, start, stop, n_noise, seed, d)
    loss = [e.reshape(len(bits), n_noise, n_sig).mean(axis=1).T for e in err]   # (n_sigma, S) per model
    return loss if n_models > 1 else loss[0]


def _chunk_errors(D, x_all, sig_all, keys_all, start, stop, n_noise, seed, d):
    """Squared error per row for rows [start, stop): float64 (K, stop - start), K = stack_size(D)."""
    n_sig = len(sig_all)
    rows = torch.arange(start, stop, device=x_all.device)
    pair, j = rows // n_sig, rows % n_sig                            # (B,) (item, noise) pair, σ index
    p0, p1 = start // n_sig, (stop - 1) // n_sig + 1
    eps = randn_per_sample(seed, keys_all[p0:p1], d, dtype=x_all.dtype, device=x_all.device)  # (P, D)
    x0 = x_all[pair // n_noise]                                      # (B, D)
    sig = sig_all[j]                                                 # (B,)
    k = stack_size(D)
    x_in = replicate(x0 + sig[:, None] * eps[pair - p0], k)          # (B·K, D), stacked layout
    out = D(x_in, replicate(sig, k))                                  # (B·K, D)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(x_in.shape):
        raise DataError(f"denoiser returned {getattr(out, 'shape', type(out))}, expected {tuple(x_in.shape)}")
    return np.stack([((o.double() - x0.double()) ** 2).mean(dim=1).cpu().numpy() for o in split_rows(out, k)])


def _tqdm_disable(progress, n):
    """tqdm's `disable`: None (auto, off when not a terminal) unless progress is given; off for 1 chunk."""
    if progress is not None:
        return not progress
    return True if n <= 1 else None


_LOSS_ATTRS = {"units": "1", "long_name": "DSM loss ‖D(x+σε,σ) − x‖²/D, mean over the noise bank"}


# ---------------------------------------------------------------------------------------------
# Datasets: one denoiser, oracle references, the public entry point
# ---------------------------------------------------------------------------------------------

def _dsm_step(D, *, bits, split, position, sigmas, n_noise, seed, chunk_size, device, dtype, sigma_data,
              progress=None):
    """DSM loss of one denoiser -> Dataset (sigma, sample): loss, loss_weighted, sigma_data and the
    gap_stats variables (sigma) / first_significant_sigma (); a list of K for a stack of K."""
    dev = resolve_device(device, D)
    loss = dsm_losses(D, bits, position, sigmas, n_noise, seed, chunk_size, dev, dtype, progress)
    if isinstance(loss, list):
        return [_loss_dataset(D, lk, split, sigmas, sigma_data) for lk in loss]
    return _loss_dataset(D, loss, split, sigmas, sigma_data)


def _loss_dataset(D, loss, split, sigmas, sigma_data):
    """The Dataset of `_dsm_step` from per-item losses (n_sigma, S)."""
    sd, source = _sigma_data_of(D, sigma_data)
    lam = edm_weight(sigmas, sd)[:, None]                                   # (n_sigma, 1)
    ds = xr.Dataset({
        "loss": (("sigma", "sample"), loss, _LOSS_ATTRS),
        "loss_weighted": (("sigma", "sample"), lam * loss, {
            "units": "1", "long_name": "EDM-weighted DSM loss λ(σ)·loss, λ = (σ²+σ_data²)/(σ·σ_data)²"}),
        **_stat_vars(loss, split, sigmas),
        "sigma_data": ((), sd, {"units": "1", "long_name": "σ_data used in the EDM weight",
                                "source": source}),
    })
    ds.attrs["sigma_data_source"] = f"{source} (denoiser .sigma_data, else the sigma_data argument, else 1.0)"
    return ds


def _references(dataset, rule, bits, split, position, sigmas, n_noise, seed, chunk_size, dtype, progress):
    """Loss of the memorizer and the rule oracle on the same items and noise.

    Returns {"mem_loss": (dims, (n_sigma, S) values, attrs), "rule_loss": ...}; `rule_loss` is
    left out without a rule (logged) and when the rule has no exact oracle (SettingWarning).
    """
    oracles = {"mem": (EmpiricalDenoiser(dataset.train), "perfect memorizer (EmpiricalDenoiser of the training set)")}
    if rule is None:
        logger.info("no rule given: no rule-oracle reference")
    else:
        try:
            oracles["rule"] = (RuleDenoiser(rule), "rule oracle (RuleDenoiser, uniform over valid images)")
        except ConfigError as e:
            warnings.warn(f"no rule-oracle reference (rule_loss, rule_gap): {e}", SettingWarning,
                          stacklevel=user_stacklevel())
    out = {}
    for name, (oracle, who) in oracles.items():
        loss = dsm_losses(oracle, bits, position, sigmas, n_noise, seed, chunk_size, "cpu", dtype, progress)
        out[f"{name}_loss"] = (("sigma", "sample"), loss, {"units": "1", "long_name": f"DSM loss of the {who}"})
    return out


def dsm_by_sigma(D_or_series, sigmas=None, n_noise=8, n_train=None, n_heldout=None, seed=0, dataset=None,
                 rule=None, chunk_size=None, oracles=True, sigma_data=None, *, steps=None, out=None,
                 device=None, dtype=torch.float32, progress=None, overwrite=False, models_per_pass=1,
                 model_id=None):
    """DSM loss as a function of σ for training vs held-out items, with oracle references.

    Parameters
    ----------
    D_or_series : callable, CheckpointSeries or {step: denoiser}
        A denoiser `D(x: (B, D), sigma: (B,)) -> (B, D)`, or several (one per training step).
    sigmas : int or (n_sigma,) float, optional
        Noise levels, or how many log-spaced in [0.002, 80] (default 40).
    n_noise : int, noise draws per item, shared by all σ, steps and the two splits (paired by position).
    n_train, n_heldout : int, optional
        The first n_train training / n_heldout held-out items (default: all training items and
        all held-out items, at most MAX_DEFAULT_HELDOUT = 512; cost is linear in the items).
    seed : int, noise-bank seed.
    dataset, rule : optional
        Needed for a plain denoiser or mapping; a series brings its own (rule: only for `rule_loss`).
    chunk_size : int, optional
        Denoiser rows per call (bounds memory); results do not depend on it (up to a network's
        own batch-size-dependent float rounding, ~1e-7 in float32).
    oracles : bool, also evaluate the memorizer and the rule oracle (`mem_loss`, `rule_loss`, `*_gap`).
    sigma_data : float, optional
        σ_data of the EDM weight when the denoiser has no `.sigma_data` attribute (else 1.0).
    steps : list of int, optional, which checkpoints of a series/mapping (default all).
    out : path, optional
        Write each step to this zarr store (resumes; a single denoiser is stored as step 0);
        `overwrite=True` replaces a store written with other settings.
    device : str, optional
        "cpu", "cuda", "auto"; default: where the denoiser lives (a series is loaded on cpu).
    dtype : torch.dtype of the denoiser inputs (oracle references run in it too, on cpu).
    models_per_pass : checkpoints evaluated together as one stacked network (see `sweep`).
    model_id : names a weightless source (a function, an oracle) for resuming `out` (see `sweep`).

    Returns
    -------
    xarray.Dataset
        dims (step, sigma, sample), no `step` for a single denoiser. `loss`, `loss_weighted`
        (step, sigma, sample), raw (NaN/inf kept); per (step, sigma), over finite items only (see
        `gap_stats`): `loss_train_mean`, `loss_heldout_mean`, their standard errors
        `loss_train_se`, `loss_heldout_se`, `gap` (held-out − train), `gap_se`, `gap_z`, and the
        int64 counts `n_nonfinite_train`, `n_nonfinite_heldout`; `first_significant_sigma` and
        `sigma_data` (step); `mem_loss`, `rule_loss` (sigma, sample); `mem_gap`, `rule_gap`
        (sigma). Coordinates on `sample`: `split` ("train"/"heldout") and `item_index` (row in
        dataset.train / dataset.heldout).

    Warns
    -----
    NonFiniteWarning, once per call, when any per-item loss (model or oracle) is NaN/inf; such
    items are excluded from every mean, standard error and gap, here and in `dsm_summary`.
    """
    dataset, rule = dataset_and_rule(D_or_series, dataset, rule, need_rule=False, who="dsm_by_sigma")
    sig = _resolve_sigmas(sigmas)
    seed, n_noise = check_seed(seed), check_int(n_noise, "n_noise", 1, NOISE_STRIDE)
    bits, split, item_index, pos = _select_items(dataset, n_train, n_heldout)
    kw = dict(sigmas=sig, n_noise=n_noise, seed=seed, chunk_size=chunk_size, dtype=dtype)
    refs = _references(dataset, rule, bits, split, pos, progress=progress, **kw) if oracles else {}
    coords = {
        "sigma": ("sigma", sig, {"units": "1", "long_name": "noise level σ"}),
        "split": ("sample", split, {"long_name": "split of the item: train or heldout"}),
        "item_index": ("sample", item_index, {"units": "1",
                                              "long_name": "row of the item in dataset.train or dataset.heldout"}),
        **refs,  # step-independent: coordinates while sweeping, so the store keeps one copy
    }
    config = {**_config(sig, n_noise, seed, split, oracles, rule, dataset, dtype, sigma_data),
              "source": source_identity(D_or_series)}

    def probe(D):   # a StackedDenoiser of K checkpoints gives K Datasets
        parts = _dsm_step(D, bits=bits, split=split, position=pos, device=device, sigma_data=sigma_data,
                          progress=progress, **kw)
        parts = [ds.assign_coords(coords).assign_attrs(
            title="DSM loss by noise level, train vs held-out", scoreprobe_config=json.dumps(config, sort_keys=True))
            for ds in (parts if isinstance(parts, list) else [parts])]
        return parts if len(parts) > 1 else parts[0]
    probe.stackable, probe.n_bits = True, dataset.train.shape[1]

    sweep_device = "cpu" if device is None else str(resolve_device(device))
    ds = run_probe(probe, D_or_series, config, steps=steps, out=out, device=sweep_device, progress=progress,
                   overwrite=overwrite, models_per_pass=models_per_pass, model_id=model_id)
    ds = ds.reset_coords([k for k in refs if k in ds.coords])
    for name in ("mem", "rule"):
        if f"{name}_loss" in ds:
            ds[f"{name}_gap"] = (("sigma",), gap_stats(ds[f"{name}_loss"].values, split, sig)["gap"], {
                "units": "1", "long_name": f"mean held-out − mean training loss of the {name} oracle "
                                           "(finite items only)"})
    _warn_nonfinite(ds)
    return ds


def _warn_nonfinite(ds):
    """One NonFiniteWarning for the whole result when any per-item loss is NaN/inf."""
    counts = {f"model {name}": int(ds[f"n_nonfinite_{name}"].sum()) for name in ("train", "heldout")}
    counts.update({v: int((~np.isfinite(ds[v].values)).sum()) for v in ("mem_loss", "rule_loss") if v in ds})
    if sum(counts.values()):
        warnings.warn(f"dsm_by_sigma: {sum(counts.values())} non-finite per-item losses (NaN/inf) over all "
                      f"(step, σ) cells ({', '.join(f'{k}: {n}' for k, n in counts.items() if n)}); they are "
                      "excluded from the means, standard errors and gaps", NonFiniteWarning, stacklevel=3)


def _config(sigmas, n_noise, seed, split, oracles, rule, dataset, dtype, sigma_data):
    """The analysis config (JSON-able): what was computed, to tell stores apart."""
    return {
        "probe": "dsm_by_sigma", "sigmas": [float(s) for s in sigmas], "n_noise": int(n_noise),
        "seed": int(seed), "n_train": int((split == "train").sum()), "n_heldout": int((split == "heldout").sum()),
        "oracles": bool(oracles), "noise": NOISE, "noise_key": f"position * {NOISE_STRIDE} + noise index",
        "sigma_data": None if sigma_data is None else float(sigma_data),
        "sigma_data_rule": "denoiser attribute .sigma_data, else the sigma_data argument, else 1.0",
        "rule": rule.spec() if hasattr(rule, "spec") else getattr(rule, "name", None),
        "dataset_seed": getattr(dataset, "seed", None), "dtype": str(dtype).replace("torch.", ""),
        "statistics": "means over finite items, non-finite counted; independent-samples SE",
        "z_significant": Z_SIGNIFICANT,
    }


def _shown(value):
    """`value` as text on one line, at most 80 characters (an array's repr spans several)."""
    return " ".join(str(value).split())[:80]
