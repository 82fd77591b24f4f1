"""The two clocks: when samples become rule-valid (τ_rule) and when they copy training items (τ_mem).

`clocks` draws the same samples (same seed, so the same initial noise or the same ancestral
random stream) at every checkpoint, classifies each endpoint into one of the five states of
`scoreprobe.data.STATES`, and reports per step the accuracies and the memorization ratio.
`taus` reads the two clocks off those curves; `fit_power_law` fits τ = a·N^b across runs.

Definitions (DESIGN.md): rule_acc = fraction of samples in a valid state (novel, held-out or
memorized; an `invalid` endpoint never counts as valid); group_acc = fraction of groups of the
thresholded endpoints that satisfy the rule (all samples); mem_ratio = fraction of samples equal
to a training item; group_mem = mean fraction of a sample's groups equal to the same groups of
its Hamming-nearest training item.
"""
import json
import logging
import math

import numpy as np
import scipy.stats
import torch
import xarray as xr

from scoreprobe import data, ode, slices, store
from scoreprobe.errors import ConfigError
from scoreprobe.sweep import dataset_and_rule, is_multi, source_identity, sweep

logger = logging.getLogger(__name__)

SCALARS = {  # name: (long_name, units)
    "rule_acc": ("fraction of samples that satisfy the rule", "1"),
    "group_acc": ("fraction of groups that satisfy the rule", "1"),
    "mem_ratio": ("fraction of samples equal to a training item", "1"),
    "group_mem": ("mean fraction of groups equal to those of the nearest training item", "1"),
    "heldout_ratio": ("fraction of samples equal to a held-out item", "1"),
    "novel_ratio": ("fraction of samples valid and new (neither training nor held-out)", "1"),
    "violating_ratio": ("fraction of samples on a vertex that violates the rule", "1"),
    "invalid_ratio": ("fraction of samples not within tolerance of a vertex", "1"),
}

# ---------------------------------------------------------------------------------------------
# One checkpoint
# ---------------------------------------------------------------------------------------------


class AncestralSampler:
    """Tags a GPT sampler (`.sample(n, seed) -> uint8 (n, D)`) so `clock_step` samples it directly."""

    def __init__(self, sampler):
        self.sampler = sampler


def _load(series, step, device):
    if getattr(series, "kind", "dit") == "gpt":
        return AncestralSampler(series.sampler(step, device=device))
    return series.denoiser(step, device=device)


def group_bits(rule):
    """(n_groups, group_size) int64 bit indices of each group of `rule`, or None when unknown."""
    if getattr(rule, "groups", None) is not None:
        return np.asarray(rule.groups, dtype=np.int64)
    d = np.arange(rule.n_bits, dtype=np.int64)
    name = getattr(rule, "name", "")
    if name == "exactk":
        return d[None]
    if name == "rowk":
        return d.reshape(rule.shape[0], rule.shape[1])
    if name in ("latin", "sudoku"):
        n = rule.n
        idx = d.reshape(n, n, n)  # (symbol, row, col)
        out = [idx.transpose(1, 0, 2).reshape(n, -1), idx.transpose(2, 0, 1).reshape(n, -1)]
        if name == "sudoku":
            s = math.isqrt(n)
            out.append(idx.reshape(n, n // s, s, n // s, s).transpose(1, 3, 0, 2, 4).reshape(n, -1))
        return np.concatenate(out)
    return None


def _draw(model, n_samples, seed, n_steps, device, chunk_size, dim):
    """Signed endpoints (n, D) numpy float: PF-ODE samples of a denoiser, or ancestral GPT samples."""
    sampler = model.sampler if isinstance(model, AncestralSampler) else None
    if sampler is None and callable(getattr(model, "sample", None)):
        sampler = model  # a GPT (or any sampler) in a mapping; denoisers have no .sample
    if sampler is not None:
        kw = {} if chunk_size is None else {"chunk_size": chunk_size}
        return data.to_signed(np.asarray(sampler.sample(n_samples, seed, **kw)))
    x = ode.sample(model, n_samples, seed, n_steps=n_steps, chunk_size=chunk_size, device=device, dim=dim)
    return x.detach().to("cpu", torch.float64).numpy()


def clock_step(model, dataset, rule, n_samples=1000, seed=0, n_steps=18, device=None, chunk_size=None,
               keep_bits=False):
    """Sample one model and classify the samples: the clocks of one checkpoint.

    Parameters
    ----------
    model : denoiser D(x, sigma) (sampled by Heun PF-ODE) or AncestralSampler / GPT sampler.
    dataset : data.Dataset (train / held-out bits); rule : the rule of the dataset.

    Returns
    -------
    xarray.Dataset, dims (sample[, bit]): `state` (sample,) int8, `nearest_train_hamming`
    (sample,) int64, [`bits` (sample, bit) uint8], and the scalars of SCALARS.
    """
    x = _draw(model, n_samples, seed, n_steps, device, chunk_size, rule.n_bits)  # (n, D)
    cls = slices.classify_endpoints(x, dataset, rule)
    state, bits = np.asarray(cls["state"]), np.asarray(cls["bits"])
    codes = data.STATE_CODES
    frac = {name: float(np.mean(state == codes[name])) for name in data.STATES}
    scalars = {
        "rule_acc": frac["valid_novel"] + frac["valid_heldout"] + frac["valid_memorized"],
        "group_acc": float(rule.group_valid(bits).mean()),
        "mem_ratio": frac["valid_memorized"],
        "group_mem": _group_mem(bits, dataset.train, cls["nearest_train_index"], rule),
        "heldout_ratio": frac["valid_heldout"],
        "novel_ratio": frac["valid_novel"],
        "violating_ratio": frac["rule_violating"],
        "invalid_ratio": frac["invalid"],
    }
    ds = xr.Dataset(coords={"sample": ("sample", np.arange(n_samples, dtype=np.int64),
                                       {"long_name": "sample index (same initial noise at every step)", "units": "1"})})
    for name, value in scalars.items():
        long_name, units = SCALARS[name]
        ds[name] = xr.Variable((), np.float64(value), {"long_name": long_name, "units": units})
    ds["state"] = xr.Variable(("sample",), state.astype(np.int8), data.state_flag_attrs())
    ds["nearest_train_hamming"] = xr.Variable(("sample",), np.asarray(cls["nearest_train_hamming"], np.int64), {
        "long_name": "Hamming distance from the thresholded sample to the nearest training item", "units": "1"})
    if keep_bits:
        ds["bits"] = xr.Variable(("sample", "bit"), bits.astype(np.uint8),
                                 {"long_name": "thresholded sample bits", "units": "1"})
        bit_attrs = {"long_name": "bit index", "units": "1"}
        ds = ds.assign_coords(bit=("bit", np.arange(rule.n_bits, dtype=np.int64), bit_attrs))
    return ds


def _group_mem(bits, train, nearest, rule):
    groups = group_bits(rule)
    if groups is None or len(train) == 0:
        return float("nan")
    near = np.asarray(train)[np.asarray(nearest, dtype=np.int64)]  # (n, D)
    same = bits[:, groups] == near[:, groups]  # (n, n_groups, size)
    return float(same.all(axis=2).mean())


# ---------------------------------------------------------------------------------------------
# Over the steps of a series
# ---------------------------------------------------------------------------------------------


def resolve_device(device):
    """None or "auto" -> "cuda" when available else "cpu"; an explicit device is checked. Returns a str."""
    return str(ode.resolve_device("auto" if device is None else device))


def _dataset_identity(dataset, rule):
    import hashlib
    train = np.ascontiguousarray(np.asarray(dataset.train, dtype=np.uint8))
    return {"rule": rule.spec(), "n_train": int(len(dataset.train)), "n_heldout": int(len(dataset.heldout)),
            "train_sha1": hashlib.sha1(train.tobytes()).hexdigest()[:16]}


def clocks(series_or_mapping, n_samples=1000, seed=0, n_steps=18, device=None, dataset=None, rule=None,
           keep_bits=False, out=None, chunk_size=None, steps=None, rule_threshold=0.9, hold=2,
           mem_threshold=0.1, progress=None, overwrite=False):
    """The two clocks of a training run: sample every checkpoint with the same seed and classify.

    Parameters
    ----------
    series_or_mapping : CheckpointSeries (DiT: PF-ODE samples; GPT: ancestral samples), a mapping
        {step: denoiser} (e.g. oracles), or a single denoiser (no `step` dim, no τ).
    n_samples, seed : samples per checkpoint; sample i starts from the same noise at every step.
    n_steps : Heun PF-ODE steps. device : "cpu", "cuda", "auto" or None (= auto).
    dataset, rule : the training data; taken from a series, required for a mapping.
    keep_bits : also store the thresholded samples, `bits` (step, sample, bit).
    out : zarr store path (resumable; see `scoreprobe.store`). chunk_size : ODE batch rows.
    steps : subset of the series' steps. rule_threshold, hold, mem_threshold : see `taus`.

    Returns
    -------
    xarray.Dataset, dims (step, sample[, bit]): the SCALARS (step,), `state` (step, sample) int8
    with flag attrs, `nearest_train_hamming` (step, sample); attrs: the config (JSON) and `taus`.
    """
    obj = series_or_mapping
    dataset, rule = dataset_and_rule(obj, dataset, rule, who="clocks on a mapping or a single denoiser")
    load_device = resolve_device(device)
    ode_device = None if device in (None, "auto") else device  # None: the denoiser's own device
    config = {"probe": "clocks", "n_samples": int(n_samples), "seed": int(seed), "n_steps": int(n_steps),
              "keep_bits": bool(keep_bits), "source": source_identity(obj), "data": _dataset_identity(dataset, rule)}

    def probe(model):
        return clock_step(model, dataset, rule, n_samples=n_samples, seed=seed, n_steps=n_steps,
                          device=ode_device, chunk_size=chunk_size, keep_bits=keep_bits)

    if not is_multi(obj):
        ds = probe(obj)
        ds.attrs["scoreprobe_config"] = json.dumps(store.normalize_config(config), sort_keys=True)
        return ds
    ds = sweep(probe, obj, steps=steps, out=out, config=config, device=load_device, progress=progress,
               load=_load, overwrite=overwrite)
    attrs = taus(ds, rule_threshold=rule_threshold, hold=hold, mem_threshold=mem_threshold)
    attrs.update(rule_threshold=rule_threshold, hold=hold, mem_threshold=mem_threshold,
                 tau_interpolation="linear in log(step + 1) between the checkpoints around the crossing")
    if out is not None:
        store.update_attrs(out, attrs)
    ds.attrs.update(attrs)
    ds.attrs.setdefault("scoreprobe_config", json.dumps(store.normalize_config(config), sort_keys=True))
    return ds


# ---------------------------------------------------------------------------------------------
# τ_rule, τ_mem and the innovation window
# ---------------------------------------------------------------------------------------------


def _first_crossing(steps, y, threshold, hold):
    """First step where y >= threshold holds there and at the next `hold` checkpoints (or up to the
    last one), interpolated linearly in log(step + 1) from the checkpoint before; NaN if never."""
    ok = np.isfinite(y) & (y >= threshold)
    for i in range(len(y)):
        if ok[i:i + hold + 1].all():
            if i == 0 or not np.isfinite(y[i - 1]):
                return float(steps[i])
            u0, u1 = np.log1p(steps[i - 1]), np.log1p(steps[i])
            f = (threshold - y[i - 1]) / (y[i] - y[i - 1])  # y[i-1] < threshold <= y[i]
            return float(np.expm1(u0 + f * (u1 - u0)))
    return float("nan")


def taus(ds, rule_threshold=0.9, hold=2, mem_threshold=0.1):
    """Read τ_rule, τ_mem and the innovation window off a clocks Dataset.

    τ_rule is the first step from which rule_acc >= rule_threshold holds at this and the next
    `hold` checkpoints (at the end of a series, at every remaining one); τ_mem the first step
    where mem_ratio >= mem_threshold. Both are interpolated linearly in log(step + 1) between
    the checkpoint before the crossing and the crossing one (log(step + 1) keeps step 0 usable);
    when the first checkpoint already crosses, τ is that step. NaN when never reached.

    Parameters
    ----------
    ds : Dataset with `rule_acc` (step,) and `mem_ratio` (step,).

    Returns
    -------
    dict: tau_rule, tau_mem, window_lo (= τ_rule), window_hi (= τ_mem, NaN when never reached:
    the window is open-ended), window_open (τ_rule reached and τ_mem not reached or later),
    log10_ratio = log10(τ_mem / τ_rule) (NaN when either is NaN or τ_rule is 0).
    """
    ds = ds.sortby("step")
    steps = ds["step"].values.astype(np.float64)
    if np.any(steps < 0):
        raise ConfigError("training steps must be >= 0")
    tau_rule = _first_crossing(steps, ds["rule_acc"].values.astype(np.float64), rule_threshold, int(hold))
    tau_mem = _first_crossing(steps, ds["mem_ratio"].values.astype(np.float64), mem_threshold, 0)
    is_open = bool(np.isfinite(tau_rule) and (np.isnan(tau_mem) or tau_rule < tau_mem))
    ratio = float(np.log10(tau_mem / tau_rule)) if np.isfinite(tau_rule) and np.isfinite(tau_mem) and tau_rule > 0 \
        else float("nan")
    return {"tau_rule": tau_rule, "tau_mem": tau_mem, "window_lo": tau_rule, "window_hi": tau_mem,
            "window_open": is_open, "log10_ratio": ratio}


# ---------------------------------------------------------------------------------------------
# Scaling laws
# ---------------------------------------------------------------------------------------------


def fit_power_law(N, tau, confidence=0.95):
    """Fit tau = a · N^b by least squares on (log N, log tau), with t-distribution intervals.

    Parameters
    ----------
    N, tau : (K,) positive numbers; pairs with a non-finite or non-positive value are dropped.

    Returns
    -------
    dict: a, b, a_ci, b_ci ((lo, hi) at `confidence`; NaN with only two points), n (pairs used),
    r2 (coefficient of determination in log-log).
    """
    N, tau = np.asarray(N, dtype=np.float64).ravel(), np.asarray(tau, dtype=np.float64).ravel()
    if N.shape != tau.shape:
        raise ConfigError(f"N and tau must have the same length, got {N.size} and {tau.size}")
    keep = np.isfinite(N) & np.isfinite(tau) & (N > 0) & (tau > 0)
    n = int(keep.sum())
    if n < 2 or np.unique(N[keep]).size < 2:
        raise ConfigError(f"a power-law fit needs at least two distinct N with finite τ, got {n} usable pairs")
    fit = scipy.stats.linregress(np.log(N[keep]), np.log(tau[keep]))
    t = scipy.stats.t.ppf(0.5 + confidence / 2, n - 2) if n > 2 else float("nan")
    b_ci = (fit.slope - t * fit.stderr, fit.slope + t * fit.stderr)
    ln_a_ci = (fit.intercept - t * fit.intercept_stderr, fit.intercept + t * fit.intercept_stderr)
    return {"a": float(np.exp(fit.intercept)), "b": float(fit.slope),
            "a_ci": tuple(float(np.exp(v)) for v in ln_a_ci), "b_ci": tuple(float(v) for v in b_ci),
            "n": n, "r2": float(fit.rvalue ** 2)}
