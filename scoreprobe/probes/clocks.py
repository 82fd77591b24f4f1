"""The two clocks: when samples become rule-valid (τ_rule) and when they copy training items (τ_mem).

`measure_clocks` draws the same samples (same seed, so the same initial noise or the same ancestral
random stream) at every checkpoint, classifies each endpoint into one of the five states of
`scoreprobe.data.STATES`, and reports per step the accuracies and the memorization ratio.
The τ are inference over these curves and live in `scoreprobe.stats` (`stats.taus` reads the two clocks
off them, `fit_power_law` fits τ = a·N^b across runs); the public `sp.clocks`
(`scoreprobe.stats.clocks.clocks`) composes the two: `measure_clocks`, then τ with CIs in the attrs and
as data variables. The data flow one way: this module imports nothing from `scoreprobe.stats`.

Definitions: docs/definitions.md ("Endpoint states", "Sample metrics"). In short: validity is
decided by the thresholded bits (an `invalid` endpoint is a non-finite one); rule_acc counts
copies; novel_valid = valid and not a training item; off_vertex is a flag reported on its own.
"""
import json
import logging
import math
import warnings

import numpy as np
import torch
import xarray as xr

from scoreprobe import slices, store
from scoreprobe.ode import integrator as ode, samplers
from scoreprobe.data import datasets as data
from scoreprobe.defaults import DEFAULT_N_STEPS, DEFINITIONS_VERSION
from scoreprobe.errors import ConfigError, NonFiniteWarning, user_stacklevel
from scoreprobe.limits import check_rows, check_seed, warn_nonfinite
from scoreprobe.precision import with_autocast
from scoreprobe.models.hooked import windowed_probe
from scoreprobe.models.stack import StackedDenoiser, chunk_rows, replicate, split
from scoreprobe.sweep import dataset_and_rule, is_multi, source_identity, sweep

logger = logging.getLogger(__name__)

SCALARS = {  # name: (long_name, units); definitions: docs/definitions.md, "Sample metrics"
    "rule_acc": ("fraction of samples whose thresholded bits satisfy the rule (copies included)", "1"),
    "novel_valid": ("fraction of samples valid and not a training item", "1"),
    "heldout_hit": ("fraction of samples equal to a held-out item", "1"),
    "novel_ratio": ("fraction of samples valid and new (neither training nor held-out)", "1"),
    "mem_ratio": ("fraction of samples equal to a training item", "1"),
    "violating_ratio": ("fraction of samples whose thresholded bits violate the rule", "1"),
    "invalid_ratio": ("fraction of samples with a non-finite endpoint", "1"),
    "off_vertex": ("fraction of finite samples with some |x_i| farther than 0.5 from ±1 (a flag, not a state)",
                   "1"),
    "group_acc": ("fraction of groups that satisfy the rule (finite samples)", "1"),
    "group_mem": ("mean fraction of groups equal to those of the nearest training item (finite samples)", "1"),
}
# the five states as fractions; they add up to 1
STATE_FRACTIONS = {"invalid": "invalid_ratio", "rule_violating": "violating_ratio", "valid_novel": "novel_ratio",
                   "valid_heldout": "heldout_hit", "valid_memorized": "mem_ratio"}

# ---------------------------------------------------------------------------------------------
# One checkpoint
# ---------------------------------------------------------------------------------------------


class AncestralSampler:
    """Tags a GPT sampler (`.sample(n, seed) -> uint8 (n, D)`) so `clock_step` samples it directly."""

    def __init__(self, sampler):
        self.sampler = sampler
        self.__wrapped__ = sampler   # the GPT module itself: its weights identify a stored step


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


def _draw(model, n_samples, seed, n_steps, device, chunk_size, dim, spec):
    """Signed endpoints (n, D) numpy float: samples of a denoiser by `spec` (a samplers.Sampler), or
    ancestral GPT samples."""
    sampler = model.sampler if isinstance(model, AncestralSampler) else None
    if sampler is None and callable(getattr(model, "sample", None)):
        sampler = model  # a GPT (or any sampler) in a mapping; denoisers have no .sample
    if sampler is not None:
        _check_token_sampler(spec)
        kw = {} if chunk_size is None else {"chunk_size": chunk_size}
        return data.to_signed(np.asarray(sampler.sample(n_samples, seed, **kw)))
    with warnings.catch_warnings():   # non-finite endpoints: counted and warned about once by `clocks`
        warnings.simplefilter("ignore", NonFiniteWarning)
        if isinstance(model, StackedDenoiser):   # K checkpoints, one batched integration: a list of K
            x = _sample_stack(model, n_samples, seed, n_steps, device, chunk_size, dim, spec)
            return [xi.detach().to("cpu", torch.float64).numpy() for xi in split(x, model.k)]
        x = samplers.sample(model, n_samples, seed, n_steps=n_steps, chunk_size=chunk_size, device=device, dim=dim,
                            sampler=spec)
    return x.detach().to("cpu", torch.float64).numpy()


def _check_token_sampler(spec):
    if spec is not None and spec != samplers.Sampler():
        raise ConfigError(f"sampler {spec.name!r} is for denoisers; a GPT samples its tokens ancestrally "
                          "(leave the sampler at its default)")


def _sample_stack(model, n_samples, seed, n_steps, device, chunk_size, dim, spec, sigma_max=80.0):
    """samplers.sample for a StackedDenoiser: the same starting noise (and step noise) for each of its K
    models, (n*K, D) in the stacked layout."""
    device = ode.resolve_device(device, model)
    x0 = sigma_max * ode.randn_per_sample(seed, np.arange(int(n_samples)), dim, device=device)   # (n, D)
    index = np.repeat(np.arange(int(n_samples)), model.k)                                          # (n*K,)
    return samplers.integrate_with(model, replicate(x0, model.k), sigma_max, spec, seed, index=index,
                                   n_steps=n_steps, chunk_size=chunk_rows(chunk_size, model.k))


def clock_step(model, dataset, rule, n_samples=1000, seed=0, n_steps=DEFAULT_N_STEPS, device=None, chunk_size=None,
               keep_bits=False, sampler=None):
    """Sample one model and classify the samples: the clocks of one checkpoint.

    Parameters
    ----------
    model : denoiser D(x, sigma) (sampled by `sampler`) or AncestralSampler / GPT sampler.
    dataset : data.Dataset (train / held-out bits); rule : the rule of the dataset.
    sampler : None (the Heun PF-ODE), a name or a `scoreprobe.ode.samplers.Sampler` (see `samplers.sample`).

    A `models.stack.StackedDenoiser` of K checkpoints is sampled in one batched integration
    (the same starting noise for each) and gives a list of K Datasets.

    Returns
    -------
    xarray.Dataset, dims (sample[, bit]): `state` (sample,) int8, `off_vertex_flag` (sample,) uint8,
    `nearest_train_hamming` (sample,) int64 (-1: invalid), [`bits` (sample, bit) uint8], and the
    scalars of SCALARS.
    """
    spec = samplers.as_sampler(sampler)
    x = _draw(model, n_samples, seed, n_steps, device, chunk_size, rule.n_bits, spec)  # (n, D), or K of them
    if isinstance(x, list):
        return [_clock_dataset(xi, dataset, rule, n_samples, keep_bits) for xi in x]
    return _clock_dataset(x, dataset, rule, n_samples, keep_bits)


def _clock_dataset(x, dataset, rule, n_samples, keep_bits):
    """The per-checkpoint Dataset of `clock_step` from its signed endpoints x (n, D)."""
    cls = slices.classify_endpoints(x, dataset, rule)
    ds = xr.Dataset(coords={"sample": ("sample", np.arange(n_samples, dtype=np.int64),
                                       {"long_name": "sample index (same initial noise at every step)", "units": "1"})})
    for name, value in sample_metrics(cls, dataset, rule).items():
        long_name, units = SCALARS[name]
        ds[name] = xr.Variable((), np.float64(value), {"long_name": long_name, "units": units})
    ds["state"] = xr.Variable(("sample",), cls["state"].astype(np.int8), data.state_flag_attrs())
    ds["off_vertex_flag"] = xr.Variable(("sample",), cls["off_vertex"].astype(np.uint8), {
        "long_name": "endpoint farther than 0.5 from ±1 in some coordinate", "units": "1",
        "flag_values": [0, 1], "flag_meanings": "on_vertex off_vertex"})
    ds["nearest_train_hamming"] = xr.Variable(("sample",), np.asarray(cls["nearest_train_hamming"], np.int64), {
        "long_name": "Hamming distance from the thresholded sample to the nearest training item (-1: invalid)",
        "units": "1"})
    if rule.family_names:
        ds = _add_families(ds, cls, rule)
    if keep_bits:
        ds["bits"] = xr.Variable(("sample", "bit"), cls["bits"].astype(np.uint8),
                                 {"long_name": "thresholded sample bits", "units": "1"})
        bit_attrs = {"long_name": "bit index", "units": "1"}
        ds = ds.assign_coords(bit=("bit", np.arange(rule.n_bits, dtype=np.int64), bit_attrs))
    return ds


def _add_families(ds, cls, rule):
    """family_valid (sample, family) uint8 (0 for a non-finite endpoint) and family_acc (family,)."""
    finite = np.asarray(cls["state"]) != data.STATE_CODES["invalid"]
    valid = rule.family_valid(cls["bits"]) & finite[:, None]                 # (n, F)
    ds = ds.assign_coords(family=("family", np.array(rule.family_names, dtype=str),
                                  {"long_name": "constraint family (docs/definitions.md)"}))
    ds["family_valid"] = xr.Variable(("sample", "family"), valid.astype(np.uint8), {
        "long_name": "the thresholded sample satisfies the constraint family", "units": "1",
        "flag_values": [0, 1], "flag_meanings": "violated satisfied"})
    ds["family_acc"] = xr.Variable(("family",), valid.mean(axis=0).astype(np.float64), {
        "long_name": "fraction of samples satisfying the constraint family (non-finite ones fail)", "units": "1"})
    return ds


def sample_metrics(cls, dataset, rule):
    """The SCALARS of one checkpoint from `slices.classify_endpoints` output. dict name -> float."""
    state, finite = np.asarray(cls["state"]), np.asarray(cls["state"]) != data.STATE_CODES["invalid"]
    frac = {STATE_FRACTIONS[name]: float(np.mean(state == code)) for name, code in data.STATE_CODES.items()}
    bits = cls["bits"][finite]
    out = {**frac, "rule_acc": frac["novel_ratio"] + frac["heldout_hit"] + frac["mem_ratio"],
           "novel_valid": frac["novel_ratio"] + frac["heldout_hit"],
           "off_vertex": float(np.mean(cls["off_vertex"][finite])) if finite.any() else float("nan"),
           "group_acc": float(rule.group_valid(bits).mean()) if finite.any() else float("nan"),
           "group_mem": _group_mem(bits, dataset.train, cls["nearest_train_index"][finite], rule)}
    return {name: out[name] for name in SCALARS}


def _group_mem(bits, train, nearest, rule):
    groups = group_bits(rule)
    if groups is None or len(train) == 0 or len(bits) == 0:
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


def novel_oracle(dataset, rule):
    """novel_valid of the perfect generalizer (uniform over valid images): 1 − N_train / n_valid."""
    return 1.0 - len(dataset.train) / float(rule.n_valid)


def measure_clocks(series_or_mapping, n_samples=1000, seed=0, n_steps=DEFAULT_N_STEPS, device=None, dataset=None,
                   rule=None, keep_bits=False, out=None, chunk_size=None, steps=None, progress=None, overwrite=False,
                   models_per_pass=1, autocast=None, model_id=None, sampler=None, fwd_hooks=None, sigma_window=None):
    """The clock curves of a training run: sample every checkpoint with the same seed and classify (no τ).

    Parameters
    ----------
    series_or_mapping : CheckpointSeries (DiT: PF-ODE samples; GPT: ancestral samples), a mapping
        {step: denoiser} (e.g. oracles), or a single denoiser (no `step` dim).
    n_samples, seed : samples per checkpoint; sample i starts from the same noise at every step.
    n_steps : sampler steps. device : "cpu", "cuda", "auto" or None (= auto).
    sampler : None (the deterministic Heun PF-ODE), a name, a dict or a `scoreprobe.ode.samplers.Sampler`
        (EDM stochastic, DDIM-η, ancestral); recorded in the config (`sampler`), so a store made
        with one sampler is never extended with another. A GPT series takes only the default.
    dataset, rule : the training data; taken from a series, required for a mapping.
    keep_bits : also store the thresholded samples, `bits` (step, sample, bit).
    out : zarr store path (resumable; see `scoreprobe.store`). chunk_size : ODE batch rows.
    steps : subset of the series' steps.
    models_per_pass : checkpoints sampled together as one stacked network (see `sweep`).
    autocast : None (float32), "bf16" or "fp16": the network's matrix products in that dtype, the ODE
        in float32 (see `scoreprobe.precision`); recorded in the store's config.
    model_id : names a weightless source (a function, an oracle) for resuming `out` (see `sweep`).
    fwd_hooks, sigma_window : hooks applied to the evaluations of D whose σ lies in the window, as `sp.sample` takes
        them (models.hooked.SigmaWindowHooks; a DiT's sampler, one checkpoint at a time, in memory: no `out`);
        recorded in the config (`interventions`).

    Returns
    -------
    xarray.Dataset, dims (step, sample[, bit]): the SCALARS (step,), `state` (step, sample) int8
    with flag attrs, `off_vertex_flag`, `nearest_train_hamming` (step, sample); attrs: the config
    (JSON) and, over steps, `novel_oracle` (also written to `out`). τ: `scoreprobe.stats.clocks.clocks`.
    Warns (NonFiniteWarning) with the count when endpoints are non-finite.
    """
    obj = series_or_mapping
    dataset, rule = dataset_and_rule(obj, dataset, rule, who="clocks on a mapping or a single denoiser")
    check_rows(n_samples, rule.n_bits, "n_samples")   # limits.MAX_SAMPLES / MAX_ROWS_BYTES, before any work
    check_seed(seed)
    ode.edm_sigmas(n_steps)                           # n_steps within limits.MAX_ODE_STEPS
    load_device = resolve_device(device)
    ode_device = None if device in (None, "auto") else device  # None: the denoiser's own device
    spec = samplers.as_sampler(sampler)
    if getattr(obj, "kind", None) == "gpt":
        _check_token_sampler(spec)
    config = _config(obj, dataset, rule, n_samples, seed, n_steps, keep_bits, spec)

    def probe(model):   # a StackedDenoiser of K checkpoints gives K Datasets
        return clock_step(model, dataset, rule, n_samples=n_samples, seed=seed, n_steps=n_steps,
                          device=ode_device, chunk_size=chunk_size, keep_bits=keep_bits, sampler=spec)
    probe.stackable, probe.n_bits = True, dataset.train.shape[1]

    if fwd_hooks is not None and (getattr(obj, "kind", None) == "gpt" or type(obj).__name__ == "GPT"):
        raise ConfigError("fwd_hooks= over a σ window need a denoiser: a GPT samples tokens without σ")
    probe, config = windowed_probe(probe, config, fwd_hooks, sigma_window, out)
    probe, config = with_autocast(probe, config, autocast, load_device)
    if not is_multi(obj):
        ds = probe(obj)
        ds.attrs["scoreprobe_config"] = json.dumps(store.normalize_config(config), sort_keys=True)
        _warn_nonfinite(ds)
        return ds
    ds = sweep(probe, obj, steps=steps, out=out, config=config, device=load_device, progress=progress,
               load=_load, overwrite=overwrite, models_per_pass=models_per_pass, model_id=model_id)
    _warn_nonfinite(ds)
    ds.attrs["novel_oracle"] = novel_oracle(dataset, rule)
    if out is not None:
        store.update_attrs(out, {"novel_oracle": ds.attrs["novel_oracle"]})
    ds.attrs.setdefault("scoreprobe_config", json.dumps(store.normalize_config(config), sort_keys=True))
    return ds


def _config(obj, dataset, rule, n_samples, seed, n_steps, keep_bits, spec):
    """The clocks' config (what identifies a store's measurements)."""
    config = {"probe": "clocks", "definitions": DEFINITIONS_VERSION, "n_samples": int(n_samples),
              "seed": int(seed), "noise": ode.NOISE, "n_steps": int(n_steps), "keep_bits": bool(keep_bits),
              "sampler": spec.config(), "source": source_identity(obj), "data": _dataset_identity(dataset, rule)}
    if rule.family_names:   # only for rules with families, so the configs (and stores) of the others are unchanged
        config["families"] = list(rule.family_names)
    return config


def _warn_nonfinite(ds):
    bad = int((ds["state"] == data.STATE_CODES["invalid"]).sum())
    warn_nonfinite(bad, ds["state"].size, "sampled endpoints",
                   "they are counted as `invalid` and excluded from group_acc, group_mem and off_vertex",
                   stacklevel=user_stacklevel() + 1)   # the caller of sp.clocks / measure_clocks


def gallery_samples(series, step, n_samples, seed=0, n_steps=DEFAULT_N_STEPS, device=None):
    """The first n_samples of `clocks` at `step` of a series (same seed, same per-sample noise, the
    default sampler), with what a gallery shows of them.

    Returns
    -------
    dict: bits (n, D) uint8, state (n,) int8, train_index and heldout_index (n,) int64 (-1: none).
    """
    model = AncestralSampler(series.sampler(step, device=device or "cpu")) if series.kind == "gpt" else \
        series.denoiser(step, device=device or "cpu")
    ds = clock_step(model, series.dataset, series.rule, n_samples=n_samples, seed=seed, n_steps=n_steps,
                    device=device, keep_bits=True)
    bits, state = ds["bits"].values, ds["state"].values
    finite = state != data.STATE_CODES["invalid"]
    return {"bits": bits, "state": state,
            "train_index": np.where(finite, series.dataset.train_index.lookup(bits), -1),
            "heldout_index": np.where(finite, series.dataset.heldout_index.lookup(bits), -1)}
