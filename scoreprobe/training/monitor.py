"""Clocks in your own training loop: `Monitor(dataset, rule, out="monitor.zarr")`.

    monitor = sp.Monitor(data, rule, out="monitor.zarr", n_samples=1000)
    for step in range(total):
        ...                                  # your optimizer step
        monitor(step, denoiser)              # at step 0, 100, 126, 158, ...: sample, classify, record, update τ

At each step it is due (by default step 0 and 10 log-spaced steps per decade from 100, `log_steps`; or
step % every == 0; or the steps= given), the monitor samples the model exactly as `clocks` does with the
same sampler (by default the adaptive engine, `defaults.MONITOR_SAMPLER`; same seed: the same initial noise
at every step, so its τ are those `clocks(..., sampler=monitor's)` reads off the same checkpoints), classifies the endpoints and commits the step to a zarr store that is
resumable like every other (`scoreprobe.store`: one commit per step, keyed by step and by the
identity of the model measured, `scoreprobe.sweep.identity`). A step already in the store is
skipped when it holds the same model (a restarted loop) and refused with a StoreError when it
holds another. The model is put in eval mode for sampling and back after; the loop's random
streams (torch CPU and CUDA) are left exactly as they were. τ_rule, τ_novel, τ_mem and the window are
re-read from all steps so far after each one and logged (logger `scoreprobe.training.monitor`,
INFO); `monitor.result()` is the clocks Dataset so far. Definitions: docs/definitions.md ("Clocks").
"""
import json
import logging
import math
import numbers
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from scoreprobe import store
from scoreprobe.defaults import (DEFAULT_N_STEPS, DEFINITIONS_VERSION, MEM_THRESHOLD, MONITOR_SAMPLER, MONITOR_SCHEDULE,
                                 RULE_THRESHOLD)
from scoreprobe.errors import ConfigError, StoreError
from scoreprobe.limits import MAX_BOOT, MAX_MONITOR_STEPS, MAX_STEP, check_int, check_rows, check_seed
from scoreprobe.ode import integrator as ode, samplers
from scoreprobe.probes.clocks import AncestralSampler, _dataset_identity, clock_step, novel_oracle
from scoreprobe.stats.taus import tau_summary
from scoreprobe.stats.tidy import with_taus
from scoreprobe.sweep import concat_steps
from scoreprobe.sweep.executor import with_step
from scoreprobe.sweep.identity import model_identity, same, side_effect_free
from scoreprobe.training.live import LiveBoard

logger = logging.getLogger(__name__)
MAX_PENDING = 2   # background measurements waiting at once (each holds a copy of the model)


class Monitor:
    """The clocks of a model measured inside any training loop (see the module docstring).

    Parameters
    ----------
    dataset : the training data (`.train`, `.heldout` uint8 bits), e.g. `sp.make_dataset(...)`.
    rule : the rule of the data (default: `dataset.rule` when it has one).
    every : measure at the steps that are multiples of `every` (>= 1); default None: the log-spaced
        schedule `log_steps()` (step 0, then 10 per decade from 100: 27 measurements up to 36 000 steps,
        defaults.MONITOR_SCHEDULE), whose cost falls with the run's length.
    steps : instead of `every`, exactly these steps (e.g. `training.train.checkpoint_steps(total, 24)`).
    out : zarr store path (resumable), or None to keep the results in memory only.
    n_samples, seed, n_steps, device, chunk_size, keep_bits : as for `clocks`.
    sampler : as for `clocks`, but by default "adaptive" (defaults.MONITOR_SAMPLER: the engine from σ_max,
        2.3x cheaper than 32 Heun steps for as small a bias); "heun" measures what `clocks` does by default,
        and is the one setting for a GPT (it samples its tokens ancestrally).
    rule_threshold, mem_threshold, n_boot : as for `taus` (τ and CIs after each measured step).
    overwrite : replace an existing store at `out` (built beside it, swapped in at the first step).
    background : measure off the training thread: at a due step the model is copied (`copy.deepcopy`, in
        eval mode) and sampled on one worker thread while the loop goes on; the call returns None and
        the step is committed (store, τ, log) at a later call, in step order. At most MAX_PENDING
        measurements wait; a due step beyond them waits for the oldest. `wait()` (and `result()`,
        `steps`) commits every pending one. The results are those of the foreground monitor.
    tensorboard : a folder: live TensorBoard events of each measured step (the curves with their intervals as
        margin charts, τ, a grid of samples with keep_bits) at their real wall times (training/live.py); on disk
        within 2 s, and all of them after `close()`. A LiveBoard (training/live.py) is written to as it is (the
        training loop's own, so that losses and clocks share one event file).
    """

    def __init__(self, dataset, rule=None, every=None, out=None, n_samples=1000, seed=0, n_steps=DEFAULT_N_STEPS,
                 sampler=MONITOR_SAMPLER, device=None, chunk_size=None, keep_bits=False, rule_threshold=RULE_THRESHOLD,
                 mem_threshold=MEM_THRESHOLD, n_boot=1000, overwrite=False, steps=None, background=False,
                 tensorboard=None):
        rule = getattr(dataset, "rule", None) if rule is None else rule
        if rule is None or not hasattr(dataset, "train"):
            raise ConfigError("Monitor needs the training data (an object with .train and .heldout bits, e.g. "
                              "sp.make_dataset(...)) and its rule")
        if every is not None and (isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1):
            raise ConfigError(f"Monitor: every must be a positive integer, got {every!r}")
        if every is not None and steps is not None:
            raise ConfigError("Monitor: pass every= or steps=, not both")
        self.at = _step_set(steps) if steps is not None else log_steps() if every is None else None
        check_int(n_boot, "n_boot", 0, MAX_BOOT)
        check_rows(n_samples, rule.n_bits, "n_samples")
        check_seed(seed)
        ode.edm_sigmas(n_steps)
        self.dataset, self.rule, self.every, self.out = dataset, rule, every and int(every), out
        self.spec = samplers.as_sampler(sampler)
        self.kw = {"n_samples": int(n_samples), "seed": int(seed), "n_steps": int(n_steps), "device": device,
                   "chunk_size": chunk_size, "keep_bits": bool(keep_bits)}
        self.taus_kw = {"rule_threshold": rule_threshold, "mem_threshold": mem_threshold, "n_boot": int(n_boot)}
        self.config = store.normalize_config({
            "probe": "clocks", "definitions": DEFINITIONS_VERSION, "n_samples": int(n_samples), "seed": int(seed),
            "noise": ode.NOISE, "n_steps": int(n_steps), "keep_bits": bool(keep_bits), "sampler": self.spec.config(),
            "source": {"type": "monitor"}, "data": _dataset_identity(dataset, rule)})
        self.parts, self.models, self.tau = {}, {}, None
        self._overwrite = bool(overwrite)
        self.background, self._pool, self._pending = bool(background), None, {}   # pending: step -> (identity, future)
        live = tensorboard is None or isinstance(tensorboard, LiveBoard)
        self.board = tensorboard if live else LiveBoard(tensorboard)
        if out is not None:
            self._resume(out)

    # -- the store -------------------------------------------------------------------------------

    def _resume(self, out):
        """Load the steps an earlier run of this loop wrote (same config; StoreError otherwise)."""
        if self._overwrite:
            store.check_writable(out, overwrite=True)
            return
        with store.StoreWriter(out, self.config) as w:
            done, models = list(w.done), dict(zip(w.steps, w.models))
        if done:
            old = store.open_store(out).load()
            for step in done:
                self.parts[int(step)] = old.sel(step=[step])
                self.models[int(step)] = models.get(step)
            logger.info("monitor: resumed %s with %d measured steps (up to %d)", out, len(done), max(done))

    def _write(self, part, ident):
        overwrite, self._overwrite = self._overwrite, False   # only the first write replaces the store
        with store.StoreWriter(self.out, self.config, overwrite=overwrite) as w:
            w.write(part, models=[ident])
            w.finish()

    # -- measuring -------------------------------------------------------------------------------

    def due(self, step):
        """Whether `step` is one the monitor measures."""
        step = _step(step)
        return step in self.at if self.at is not None else step % self.every == 0

    def __call__(self, step, model):
        """Measure `model` at training step `step` when it is due; returns that step's clocks Dataset
        (dims step, sample) or None when the step is not due. A step measured before (in this run or a
        stored one) with the same model is returned as stored; with another model: StoreError."""
        step = _step(step)
        if not self.due(step):
            return None
        if self.spec != samplers.Sampler() and (isinstance(model, AncestralSampler) or callable(getattr(model, "sample", None))):
            raise ConfigError(f"Monitor: this model samples its tokens itself (a GPT), which the {self.spec.name!r} "
                              "sampler (the monitor's default for denoisers) cannot drive; create the monitor with "
                              "sampler='heun', the setting of token models")
        ident = model_identity(model, self.rule.n_bits)
        if step in self.parts:
            if not same(self.models.get(step), ident) or ident is None:
                raise StoreError(f"Monitor: step {step} was measured on another model (or one that cannot be "
                                 "identified); pass overwrite=True or another out= to start afresh")
            return self.parts[step]
        if self.background:
            self._submit(step, model, ident)
            return None
        with side_effect_free(model):   # eval mode, the loop's random streams untouched
            ds = clock_step(model, self.dataset, self.rule, sampler=self.spec, **self.kw)
        return self._commit(step, ds, ident)

    def _commit(self, step, ds, ident):
        """Record one measured step (ds: clock_step's Dataset): store, memory, τ and log; its Dataset."""
        part = with_step(ds, step)
        if self.out is not None:
            self._write(part, ident)
        self.parts[step], self.models[step] = part, ident
        self._update(step)
        return part

    # -- off the training thread (background=True) ------------------------------------------------

    def _submit(self, step, model, ident):
        """Copy `model` and sample the copy on the worker thread; commit what has finished first."""
        if step in self._pending:
            return
        self._collect()
        while len(self._pending) >= MAX_PENDING:
            self._collect(wait=1)
        copy = snapshot(model)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scoreprobe-monitor")
        self._pending[step] = (ident, self._pool.submit(self._measure, copy))

    def _measure(self, model):
        import torch
        with torch.no_grad():   # grad mode is per thread
            return clock_step(model, self.dataset, self.rule, sampler=self.spec, **self.kw)

    def _collect(self, wait=0):
        """Commit finished measurements in step order, waiting for the first `wait` (None: all) of them."""
        for i, step in enumerate(sorted(self._pending)):
            ident, future = self._pending[step]
            if not (wait is None or i < wait or future.done()):
                break
            del self._pending[step]
            self._commit(step, future.result(), ident)

    def wait(self):
        """Commit every pending background measurement (a no-op in the foreground); returns self."""
        self._collect(wait=None)
        return self

    def close(self):
        """Commit pending measurements and close the live TensorBoard writer (its last events reach the disk)."""
        self.wait()
        if self.board is not None:
            self.board.close()
        return self

    def _update(self, step):
        """Re-read τ from every step so far; log the step's values and the τ known now."""
        ds = self._concat()
        self.tau = tau_summary(ds, warn=False, **self.taus_kw)
        row = self.parts[step]
        logger.info("monitor: step %d: rule_acc %.3f, novel_valid %.3f, mem_ratio %.3f; %s", step,
                    float(row["rule_acc"].values[0]), float(row["novel_valid"].values[0]),
                    float(row["mem_ratio"].values[0]), describe_taus(self.tau))
        if self.out is not None:
            store.update_attrs(self.out, {"novel_oracle": ds.attrs["novel_oracle"], **self.tau})
        if self.board is not None:
            self.board.log_clocks(step, row, self.tau, getattr(self.rule, "image_shape", None))

    def _concat(self):
        ds = concat_steps([self.parts[s] for s in sorted(self.parts)])
        ds.attrs = {"novel_oracle": novel_oracle(self.dataset, self.rule),
                    "scoreprobe_config": json.dumps(self.config, sort_keys=True)}
        return ds

    @property
    def steps(self):
        """The measured steps, ascending (pending background measurements committed first)."""
        self.wait()
        return sorted(self.parts)

    def result(self):
        """The clocks Dataset of the steps measured so far (as `clocks` returns it: the curves, the
        per-sample states, τ with CIs and the window in attrs and as data variables)."""
        self.wait()
        if not self.parts:
            raise ConfigError("Monitor: no step measured yet")
        ds = self._concat()
        ds.attrs.update(self.tau if self.tau is not None else tau_summary(ds, warn=False, **self.taus_kw))
        return with_taus(ds)

    def __repr__(self):
        where = f", out={str(Path(self.out))!r}" if self.out is not None else ""
        when = f"every={self.every}" if self.every else "log-spaced steps" if self.at == log_steps() else "steps="
        return f"Monitor({when}, n_samples={self.kw['n_samples']}, steps measured={len(self.parts)}{where})"


def snapshot(model):
    """A copy of `model` to sample while the loop trains the original: `copy.deepcopy`, modules (and the
    module a wrapper names in `__wrapped__`) in eval mode without gradients. ConfigError when it cannot
    be copied."""
    import copy
    import torch
    try:
        out = copy.deepcopy(model)
    except Exception as exc:   # noqa: BLE001  (any object a user passes)
        raise ConfigError(f"Monitor(background=True) copies the model at each measured step, and this one "
                          f"({type(model).__name__}) cannot be copied ({exc}); use background=False") from exc
    for m in (out, getattr(out, "__wrapped__", None)):
        if isinstance(m, torch.nn.Module):
            m.eval()
            m.requires_grad_(False)
    return out


def log_steps(first=MONITOR_SCHEDULE["first"], per_decade=MONITOR_SCHEDULE["per_decade"]):
    """The monitor's default schedule: {0} ∪ {round(first · 10^(k / per_decade)) : k = 0, 1, ...} up to MAX_STEP
    (a frozenset of ints; 0, 100, 126, 158, 200, 251, ..., 31623, 39811, ...). It needs no total: a loop of
    36 000 steps is measured 27 times, one of 3 000 steps 16 times."""
    out, k = {0}, 0
    while (s := round(first * 10 ** (k / per_decade))) <= MAX_STEP:
        out.add(s)
        k += 1
    return frozenset(out)


def _step(step):
    """A training step as an int in [0, MAX_STEP]: an integer (python, numpy, or a 0-d integer tensor or array);
    ConfigError for a bool, a float (10.9 was stored as step 10), NaN, inf or a string, as for steps=."""
    if getattr(step, "ndim", None) == 0 and hasattr(step, "item") and not getattr(step, "is_floating_point",
                                                                                  lambda: False)():
        step = step.item()
    if isinstance(step, numbers.Integral) and not isinstance(step, bool) and step < 0:
        raise ConfigError(f"Monitor: training steps are >= 0, got {step}")
    return check_int(step, "Monitor: the training step", 0, MAX_STEP)


def _step_set(steps):
    """The set of steps= as ints in [0, MAX_STEP], at most MAX_MONITOR_STEPS of them (counted before any is
    read: a range of 10**10 is refused at once); ConfigError naming the first bad one otherwise (a bool, a float
    even when whole, a string, inf, a repeated step)."""
    if isinstance(steps, (str, bytes)) or not hasattr(steps, "__len__"):
        raise ConfigError("Monitor: steps= must be a list (or range) of training steps (integers >= 0)")
    if not 1 <= len(steps) <= MAX_MONITOR_STEPS:
        raise ConfigError(f"Monitor: steps= holds {len(steps)} steps; between 1 and {MAX_MONITOR_STEPS} "
                          "(scoreprobe.limits)")
    out = [check_int(s, "Monitor: a step of steps=", 0, MAX_STEP) for s in steps]
    if len(set(out)) != len(out):
        raise ConfigError("Monitor: steps= repeats a step")
    return set(out)


def describe_taus(t):
    """'τ_rule 1712, τ_novel 1718, τ_mem not yet, window open' from a tau_summary() dict."""
    def one(v):
        return "not yet" if v is None or not math.isfinite(v) else f"{v:.0f}"
    window = "open" if t.get("window_open") else "closed"
    return f"τ_rule {one(t['tau_rule'])}, τ_novel {one(t['tau_novel'])}, τ_mem {one(t['tau_mem'])}, window {window}"


def lightning_callback(monitor, use_ema=None):
    """A PyTorch Lightning callback calling `monitor(trainer.global_step, model)` after each training batch
    (model: the LightningModule, or its attribute named by `use_ema`, e.g. "ema"). Needs Lightning
    (`lightning` or `pytorch_lightning`) installed; ConfigError otherwise."""
    try:
        from lightning.pytorch import Callback
    except ImportError:
        try:
            from pytorch_lightning import Callback
        except ImportError:
            raise ConfigError("lightning_callback needs PyTorch Lightning (pip install lightning)") from None

    class MonitorCallback(Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            model = getattr(pl_module, use_ema) if use_ema else pl_module
            monitor(trainer.global_step, model)

    return MonitorCallback()


def live_monitor(cfg, run_dir, save_at, board, n_samples):
    """A Monitor of `n_samples` samples writing to `board` at the checkpoint steps `save_at`,
    or None for n_samples 0. cfg: the TrainConfig (its rule; a GPT samples with "heun"); run_dir: holds dataset.npz."""
    if not n_samples:
        return None
    if board is None:
        raise ConfigError("tensorboard_samples needs tensorboard= (the folder the sample grids go to)")
    from scoreprobe.data.datasets import load_dataset
    from scoreprobe.data.rules import rule_from_spec
    data = load_dataset(f"{run_dir}/dataset.npz", rule_from_spec(cfg.rule))
    sampler = "heun" if cfg.model == "gpt" else None
    kw = {} if sampler is None else {"sampler": sampler}
    return Monitor(data, steps=list(save_at), n_samples=n_samples, keep_bits=True, n_boot=0, tensorboard=board, **kw)
