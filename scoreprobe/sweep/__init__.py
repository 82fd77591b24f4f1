"""Map one analysis over the training steps of a series, one checkpoint in memory at a time.

A probe is a function `probe(model) -> xarray.Dataset` without a `step` dimension, where
`model` is whatever `load(series, step, device)` returns (a denoiser by default; the clocks
probe asks a GPT series for its sampler instead). `sweep` adds the `step` dimension, writes each
step to a zarr store through `scoreprobe.store` when `out` is given (skipping steps already
there), and returns the whole cube.

Accepted sources: a single denoiser (step 0), a mapping {step: denoiser}, or a CheckpointSeries
(anything with `.steps` and `.denoiser(step, device)`).

Scale-out: with `scheduler=` (or inside `scoreprobe.sweep.dask.using(scheduler)`, which is how the
probes' public functions reach it) each step not yet written becomes a dask.distributed task and
this process writes the results in step order through the same StoreWriter; the store equals a
local run's. See `scoreprobe.sweep.dask` for the design
and `scoreprobe.sweep.executor` for the interface between the two.
"""
import contextlib
import functools
import hashlib
import json
import logging
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import xarray as xr

from scoreprobe import store
from scoreprobe.errors import ConfigError
from scoreprobe.progress import StepProgress
from scoreprobe.store.writer import StoreWriter
from scoreprobe.sweep import identity
from scoreprobe.sweep.executor import (MODEL_ATTR, SCHEDULER, STEP_ATTRS, call_probe, identified,  # noqa: F401
                                       run_step, with_step)  # (re-exported)

logger = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# Sources
# ---------------------------------------------------------------------------------------------


def is_series(obj):
    """True for a checkpoint series (duck-typed: `.steps` and `.denoiser` or `.sampler`)."""
    return (not isinstance(obj, Mapping) and hasattr(obj, "steps")
            and (hasattr(obj, "denoiser") or hasattr(obj, "sampler")))


def is_multi(obj):
    """True when `obj` holds several steps (a series or a {step: model} mapping)."""
    return is_series(obj) or isinstance(obj, Mapping)


def load_denoiser(series, step, device):
    """Default loader: the series' (EMA) denoiser at `step`."""
    return series.denoiser(step, device=device)


def as_steps(obj, device="cpu", load=None):
    """Normalize a source into an ordered list of (step, getter).

    Parameters
    ----------
    obj : denoiser callable, mapping {step: model}, or CheckpointSeries.
    device : passed to `load` for a series.
    load : callable (series, step, device) -> model, for a series (default: `load_denoiser`).

    Returns
    -------
    list of (int, callable () -> model), ascending in step. Nothing is loaded until a getter runs.
    """
    if is_series(obj):
        load = load or load_denoiser
        return [(int(s), _bind(load, obj, int(s), device)) for s in sorted(obj.steps)]
    if isinstance(obj, Mapping):
        try:
            keys = sorted(int(k) for k in obj)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"mapping keys must be integer training steps, got {list(obj)[:5]}") from e
        by_int = {int(k): v for k, v in obj.items()}
        return [(k, (lambda v=by_int[k]: v)) for k in keys]
    if callable(obj):
        return [(0, lambda: obj)]
    raise ConfigError("expected a denoiser, a {step: denoiser} mapping or a checkpoint series, "
                      f"got {type(obj).__name__}")


def _bind(load, series, step, device):
    return lambda: load(series, step, device)


def source_identity(obj):
    """JSON-able description of a source, recorded in a store's config to tell analyses apart.

    No machine paths: a series is named by its folder's name, a digest of its data and of its
    training config (run directories: `run_config_digest`, which an extension of the run keeps) or
    its files' names plus the settings they are read with (files), so a store can be moved and
    opened elsewhere and still be resumed. Which weights each
    step measured is recorded per step (`scoreprobe.sweep.identity`), not here; file sizes are not
    part of either (a file re-saved with equal tensors is the same model)."""
    if is_series(obj):
        path = getattr(obj, "path", None)
        ident = {"type": "series", "name": "" if path is None else Path(path).name, "kind": getattr(obj, "kind", None)}
        rule = getattr(obj, "rule", None)
        if rule is not None and hasattr(rule, "spec"):
            ident["rule"] = rule.spec()
        ident.update(_series_digests(obj))
        return ident
    if isinstance(obj, Mapping):
        return {"type": "mapping", "models": sorted({type(v).__name__ for v in obj.values()})}
    return {"type": "denoiser", "model": type(obj).__name__}


def _digest(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else json.dumps(p, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def _series_digests(obj):
    """Data digest, and either the training config's digest or the files (names, sizes) and settings."""
    out, data, config = {}, getattr(obj, "dataset", None), getattr(obj, "config", None)
    if data is not None and hasattr(data, "train"):
        out["data_sha256"] = _digest(np.ascontiguousarray(data.train, dtype=np.uint8).tobytes(),
                                     np.ascontiguousarray(data.heldout, dtype=np.uint8).tobytes())
    if not isinstance(config, Mapping):
        return out
    if "files" in config:   # series_from_files
        files = [Path(f) for f in config["files"]]
        out["files"] = [f.name for f in files]
        out.update({k: config.get(k) for k in ("overrides", "ema", "parameterization")})
    else:
        out["config_sha256"] = run_config_digest(config, getattr(obj, "meta", None))
    if "denoiser" in config:   # --denoiser MODULE:FUNCTION (scoreprobe.loading.usercode), named as the user did
        out["denoiser"] = config["denoiser"]
    return out


def run_config_digest(config, meta=None):
    """The digest (16 hex digits) that names a run directory's settings in a store's `source`: of its
    run.json `config` with total_steps set to the first total of the run (run.json's `extended_from[0]`
    when it was extended). An extension (the same settings with a larger total_steps,
    `scoreprobe.training.extend`) keeps every checkpoint and so keeps the digest: the run's stores
    resume and measure only the new checkpoints. Which weights each step measured is checked per step
    (`scoreprobe.sweep.identity`). For a run never extended this is the digest of its config as is."""
    config = dict(config)
    first = (meta or {}).get("extended_from") if isinstance(meta, Mapping) else None
    if isinstance(first, list) and first and isinstance(first[0], int) and "total_steps" in config:
        config["total_steps"] = first[0]
    return _digest(config)


def dataset_and_rule(obj, dataset=None, rule=None, need_rule=True, who="this probe"):
    """(dataset, rule) for a probe: explicit arguments win, else the series' own; a Dataset also
    carries its rule. ConfigError naming `who` when the dataset (or, with need_rule, the rule) is missing."""
    dataset = dataset if dataset is not None else getattr(obj, "dataset", None)
    for source in (obj, dataset):
        rule = rule if rule is not None else getattr(source, "rule", None)
    if dataset is None or (need_rule and rule is None):
        wanted = "dataset= and rule=" if need_rule else "dataset="
        raise ConfigError(f"{who} needs the training and held-out data to compare with: pass {wanted} "
                          "(a CheckpointSeries carries both)")
    return dataset, rule


def select_steps(pairs, steps):
    """Keep the (step, getter) pairs whose step is in `steps` (all when None); ConfigError if missing."""
    if steps is None:
        return pairs
    want = sorted({int(s) for s in np.atleast_1d(steps)})
    have = {s for s, _ in pairs}
    if not want:
        raise ConfigError(f"no steps selected; choose one or more of {sorted(have)}")
    missing = [s for s in want if s not in have]
    if missing:
        raise ConfigError(f"steps {missing} are not in the series; available: {sorted(have)}")
    return [(s, g) for s, g in pairs if s in set(want)]


# ---------------------------------------------------------------------------------------------
# The sweep
# ---------------------------------------------------------------------------------------------


def concat_steps(parts):
    """Concatenate per-step Datasets (each with a length-1 `step` dim) along `step`."""
    out = xr.concat(parts, dim="step", data_vars="minimal", coords="minimal", compat="override",
                    join="exact", combine_attrs="override")
    out["step"].attrs.update(STEP_ATTRS)
    return out


def sweep(probe, obj, steps=None, out=None, config=None, device="cpu", progress=None, load=None,
          overwrite=False, static=None, scheduler=None, models_per_pass=1, model_id=None):
    """Run `probe` at every step of `obj`; return the cube with a leading `step` dimension.

    Parameters
    ----------
    probe : callable model -> xarray.Dataset (no `step` dim).
    obj : series, {step: model} mapping, or a single denoiser (step 0).
    steps : iterable of int, subset of the source's steps (default: all).
    out : path of a zarr store; each step is appended and committed as soon as it is computed,
        steps already in the store are skipped (resume) when they measured the same model (its
        weights digest, model_id or fingerprint: `scoreprobe.sweep.identity`, checked for every such step
        before computing anything; StoreError otherwise), damaged ones recomputed (with a
        StoreDamageWarning), a store holding another config is refused; one writer per store
        (a second one gets a StoreError before computing anything).
    config : dict describing the analysis (probe name, arguments, source), stored as JSON.
    device : device passed to the loader of a series.
    progress : None (a bar on a terminal or in a notebook, else one stderr line per step with the
        time left), True (a bar) or False (silent); see `scoreprobe.progress`.
    load : (series, step, device) -> model; default loads the denoiser.
    overwrite : replace an existing store at `out`; the new store is built beside it and swapped
        in only when every step is written (until then the old one stays intact).
    static : Dataset of step-independent variables (e.g. oracle reference curves), merged into
        the result without a `step` dimension (written once to the store).
    scheduler : None (here, one step after another; inside `scoreprobe.sweep.dask.using(s)`: s),
        a `distributed.Client`, an address "tcp://HOST:PORT" or ("local", n_workers): one dask
        task per step, loading its checkpoint on the worker (`probe` and `load` must pickle with
        cloudpickle); this process writes the results in step order, so the store is the local
        run's. Needs the dask extra (ConfigError without it). See `scoreprobe.sweep.dask`.
    models_per_pass : K >= 1, or "auto" (1 on CPU, where a stack is slower; on CUDA from free
        memory, at most 32): a probe marked `stackable` gets K checkpoints of one architecture at
        once as a `models.stack.StackedDenoiser` (one batched forward for all K) and returns K
        Datasets; the results equal the one-at-a-time path (except where a probe chains its steps:
        basins' warm-started refinement, `probes.warm`). Other probes, models that cannot be
        stacked and dask runs take one checkpoint at a time. Each probe call runs with
        `executor.PROBE_STEPS` set to the step(s) it measures.
    model_id : names a source without weights (a user function, an oracle): a str for every step,
        or {step: str}; recorded per step instead of the behavioural fingerprint (a module keeps its
        weights digest with it). The probe's attribute `n_bits` (D) lets the fingerprint be taken
        when the model has no `dim`. Limits: a model_id is taken at its word (two callables given one
        model_id are one model), and the fingerprint is taken on one call when the step is identified
        (a callable that changes on later calls resumes as the same model).

    Returns
    -------
    xarray.Dataset with dims (step, ...); read back from the store when `out` is given.
    """
    pairs = select_steps(as_steps(obj, device=device, load=load), steps)
    config = store.normalize_config(config)
    identify = identity.Identifier(getattr(probe, "n_bits", None), identity.model_ids(model_id, [s for s, _ in pairs]),
                                   device)
    scheduler = SCHEDULER.get() if scheduler is None else scheduler
    if scheduler is not None:   # a bad scheduler or an unpicklable probe fails before the store is opened
        from scoreprobe.sweep.dask import check_sendable
        check_sendable(scheduler, probe, pairs)
    k = _models_per_pass(models_per_pass, device, probe, len(pairs)) if scheduler is None else 1
    if out is None:
        with _step_results(probe, pairs, set(), scheduler, _desc(config), k) as results:
            return concat_steps(_compute(results, static, StepProgress(results, _desc(config), progress), set(), None))
    with StoreWriter(out, config, overwrite=overwrite) as writer:
        done = set(writer.done)
        writer.check_models({s: identify(g(), s) for s, g in pairs if s in done})   # before computing anything
        if done:   # the CLI's 'reused N steps', for the API as a log record (logging INFO, scoreprobe.sweep)
            reused = len(done & {s for s, _ in pairs})
            logger.info("%s: reused %d steps written by an earlier run, computing %d of the %d asked for", out,
                        reused, len(pairs) - reused, len(pairs))
        with _step_results(probe, pairs, done, scheduler, _desc(config), k, identify) as results:
            _compute(results, static, StepProgress(results, _desc(config), progress), done, writer)
        writer.finish()
    return store.open_store(out).sel(step=[s for s, _ in pairs])


def _desc(config):
    return str((config or {}).get("probe") or "steps")


@contextlib.contextmanager
def _step_results(probe, pairs, done, scheduler, name, k=1, identify=None):
    """[(step, fetch)] in step order, fetch() -> that step's Dataset: computed here when called
    (k > 1: K steps per stacked pass), or collected from the dask task submitted for it (steps in
    `done` are not submitted)."""
    if scheduler is None:
        yield (_stacked_results(probe, pairs, done, k, identify) if k > 1 else
               [(step, functools.partial(run_step, probe, getter, step, identify)) for step, getter in pairs])
        return
    from scoreprobe.sweep.dask import submitted
    with submitted(scheduler, probe, pairs, done, name, identify) as results:
        yield results


def _stacked_results(probe, pairs, done, k, identify=None):
    """[(step, fetch)] where the steps not in `done` go in groups of k: the first fetch of a group
    computes all of it in one stacked pass (`run_group`); the others return what it kept."""
    todo = [(step, getter) for step, getter in pairs if step not in done]
    kept, fetchers = {}, {}

    def fetch(group, step):
        if step not in kept:
            kept.update(run_group(probe, group, identify))
        return kept.pop(step)
    for i in range(0, len(todo), k):
        group = todo[i:i + k]
        fetchers.update({step: functools.partial(fetch, group, step) for step, _ in group})
    return [(step, fetchers.get(step, functools.partial(run_step, probe, getter, step, identify)))
            for step, getter in pairs]


def run_group(probe, group, identify=None):
    """{step: Dataset} of a group [(step, getter)]: one StackedDenoiser pass when the models stack,
    else one model after another; each model identified before stacking, as `run_step` does."""
    from scoreprobe.models.stack import StackedDenoiser, can_stack
    models = [getter() for _, getter in group]
    idents = [identify(m, step) if identify is not None else None for (step, _), m in zip(group, models)]
    if len(models) > 1 and can_stack(models):
        parts = call_probe(probe, StackedDenoiser(models), [step for step, _ in group])
    else:
        parts = [call_probe(probe, m, (step,)) for (step, _), m in zip(group, models)]
    return {step: identified(with_step(part, step), identify, ident)
            for (step, _), part, ident in zip(group, parts, idents)}


def _models_per_pass(k, device, probe, n_steps):
    """K for `sweep`: 1 for probes that cannot take a stack; "auto" -> 1 on CPU, else from free memory."""
    if not getattr(probe, "stackable", False):
        return 1
    if k == "auto":
        return _auto_models_per_pass(device, n_steps)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ConfigError(f"models_per_pass must be a positive integer or 'auto', got {k!r}")
    return int(k)


def _auto_models_per_pass(device, n_steps, per_model_bytes=256 << 20):
    """On CUDA: as many checkpoints as a quarter of the free memory holds at ~256 MB each, at most
    32 and the number of steps; on CPU 1 (a stack evaluates no faster there, bench/bench_basins.py)."""
    import torch
    device = torch.device(device)
    if device.type != "cuda":
        return 1
    free, _ = torch.cuda.mem_get_info(device)
    return max(1, min(32, n_steps, free // 4 // per_model_bytes))


def _compute(results, static, bar, done, writer):
    """Fetch each step's Dataset (see `_step_results`) not in `done`, reporting to the StepProgress
    `bar`; append each to `writer` (and return []) or return the per-step Datasets when `writer`
    is None. Locally one model is alive at a time."""
    parts, resumed = [], bool(done)
    for step, fetch in bar:
        if step in done:
            bar.skipped()
            continue
        part = fetch()
        model = part.attrs.pop(MODEL_ATTR, None)
        if static is not None:
            part = xr.merge([part, static], join="exact", combine_attrs="override")
        if writer is None:
            parts.append(part)
        else:
            writer.write(part, models=[model])
            if resumed:  # record in the CF history that this run added steps to an existing store
                writer.note_history()
                resumed = False
        bar.computed(step)
    return parts


def run_probe(probe, obj, config, steps=None, out=None, device="cpu", progress=None, overwrite=False,
              scheduler=None, models_per_pass=1, model_id=None):
    """probe(D) on one denoiser (a Dataset without `step`), or mapped over the steps of a series
    or {step: denoiser} mapping by `sweep` (with `step`; written to the zarr store `out`).
    `scheduler` is passed to `sweep` (None: local, or that of an enclosing
    `scoreprobe.sweep.dask.using` block); a single denoiser without `out` always runs here."""
    config = {**config, "source": source_identity(obj)}
    kw = dict(config=config, device=device, progress=progress, overwrite=overwrite, scheduler=scheduler,
              models_per_pass=models_per_pass, model_id=model_id)
    if is_multi(obj):
        ds = sweep(probe, obj, steps=steps, out=out, **kw)
    elif not callable(obj):
        raise ConfigError(f"expected a denoiser, a checkpoint series or a {{step: denoiser}} dict, "
                          f"got {type(obj).__name__}")
    elif steps is not None:
        raise ConfigError("steps= only applies to a checkpoint series or a {step: denoiser} mapping")
    elif out is not None:  # stored as step 0 so the store layout is the same as for a series
        ds = sweep(probe, obj, out=out, **kw).isel(step=0, drop=True)
    else:
        ds = probe(obj)
    ds.attrs["scoreprobe_config"] = json.dumps(store.normalize_config(config), sort_keys=True)
    return ds
