"""Training loop: one run directory per config (`training.run_dir`), log-spaced checkpoints, resumable.

A run directory holds `run.json` (every setting, versions, git commit, checkpoint steps), `dataset.npz`
(train and held-out bits), `ckpt/step_0001234.pt` (tensors and plain values only: loadable with
`torch.load(weights_only=True)`), `train_log.jsonl` (the loss and its σ buckets per logging interval,
`scoreprobe.training.trainlog`), while a run is unfinished `resume.pt` (model, EMA, optimizer and RNG state)
and, once it is finished, the same state of its last step in `final_state.pt` (unless keep_state=False).
Running the same config again on the same directory continues from `resume.pt` and reproduces an
uninterrupted run bitwise on CPU; the same config with a larger total_steps extends a finished run
(`scoreprobe.training.extend`). `scoreprobe.training.ensemble.train_ensemble` trains several runs at once and writes
each through the same `Run`.
"""
import copy
import json
import logging
import math
import os
from pathlib import Path

import numpy as np
import torch

# the config and the formats live in a leaf module (no torch): the CLI reads them at start-up
from scoreprobe.training.config import (CKPT_FORMAT, FINAL_STATE, LR_SCHEDULES, RESUME_STATE, RUN_FORMAT, TrainConfig,  # noqa: F401
                                       atomic_write_text, checkpoint_steps, ckpt_path, fsync_dir,
                                       stored_config)   # (re-exported)
from scoreprobe.atomic import full_disk_error
from scoreprobe.data.curriculum import curriculum_bits
from scoreprobe.data.datasets import to_signed
from scoreprobe.errors import ConfigError
from scoreprobe.models.build import build_model, check_training_size, model_arch
from scoreprobe.models.edm import dsm_loss, sample_sigmas
from scoreprobe.progress import CountProgress
from scoreprobe.data.rules import rule_from_spec
from scoreprobe.training.guard import (RunLock, load_state, read_meta, remove_stale_temps, run_digest, save_checkpoint,
                                       state_file)
from scoreprobe.training.run_dir import atomic_save, init_run_dir
from scoreprobe.limits import MAX_SAMPLES, check_int
from scoreprobe.training.live import LiveBoard
from scoreprobe.training.monitor import live_monitor
from scoreprobe.training.trainlog import (LOG_NAME, bucket_sums, heldout_bank, heldout_record, log_record,
                                         postfix, truncate_log)

logger = logging.getLogger(__name__)


def lr_at(cfg, step):
    """Learning rate of optimizer step `step` (0-based): linear warm-up, then constant, cosine decay,
    or a single drop to lr_min at lr_drop_step."""
    if cfg.warmup_steps and step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    if cfg.lr_schedule == "constant":
        return cfg.lr
    if cfg.lr_schedule == "step":
        return cfg.lr if step < cfg.lr_drop_step else cfg.lr_min
    frac = (step - cfg.warmup_steps) / max(1, cfg.total_steps - cfg.warmup_steps)   # 0 -> 1
    return cfg.lr_min + (cfg.lr - cfg.lr_min) * 0.5 * (1 + math.cos(math.pi * frac))


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------

class _State:
    """Everything that changes during training; saved whole in resume.pt."""

    def __init__(self, cfg, model, device, run_config=None):
        self.model = model
        self.ema = copy.deepcopy(model).requires_grad_(False)
        self.opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.gen = torch.Generator(device="cpu").manual_seed(cfg.seed + 1)
        # binds resume.pt / final_state.pt to this run (training.guard): the settings as run.json records
        # them (first_checkpoint resolved), so a resume that leaves an option to its default still matches
        self.run = run_digest(cfg.to_dict() if run_config is None else run_config)
        self.step = 0
        self.running = []   # losses since the last log line (so a resumed run logs the same means)
        self.parts = []     # their σ-bucket sums and counts (trainlog.bucket_sums), one list per step

    def state_dict(self):
        return {"format": CKPT_FORMAT, "run": self.run, "step": self.step, "model": self.model.state_dict(),
                "ema": self.ema.state_dict(), "opt": self.opt.state_dict(), "rng": self.gen.get_state(),
                "running": torch.tensor(self.running, dtype=torch.float64),
                "parts": torch.tensor(self.parts, dtype=torch.float64)}

    def load_state_dict(self, sd):
        self.model.load_state_dict(sd["model"])
        self.ema.load_state_dict(sd["ema"])
        self.opt.load_state_dict(sd["opt"])
        self.gen.set_state(sd["rng"])
        self.step = int(sd["step"])
        self.running = [float(v) for v in sd.get("running", torch.zeros(0)).reshape(-1)]   # older files: none
        self.parts = [[float(v) for v in row] for row in sd.get("parts", torch.zeros(0, 0))]


def draw_bits(cfg, train_bits, gen):
    """A step's first draw from `gen`: a minibatch (B, D) uint8 picked with replacement from train_bits (N, D)."""
    idx = torch.randint(len(train_bits), (cfg.batch_size,), generator=gen).numpy()
    return train_bits[idx]


def draw_mixed(cfg, train_bits, extra_bits, share, gen):
    """A minibatch (B, D) uint8 whose every item comes from extra_bits (M, D) with probability `share`, else
    from train_bits (N, D), each picked with replacement; draws from `gen`: the N indices, the M indices,
    then the B coin flips."""
    idx = torch.randint(len(train_bits), (cfg.batch_size,), generator=gen).numpy()
    extra = torch.randint(len(extra_bits), (cfg.batch_size,), generator=gen).numpy()
    pick = (torch.rand(cfg.batch_size, generator=gen) < share).numpy()
    return np.where(pick[:, None], extra_bits[extra], train_bits[idx])


def draw_inputs(cfg, batch_bits, gen, device):
    """A DiT step's next draws from `gen`: y (B, D) signed images of batch_bits (B, D), then σ (B,),
    then noise (B, D), each moved to `device` (drawn on the CPU generator, so equal on every device)."""
    y = to_signed(torch.from_numpy(batch_bits)).to(device)                 # (B, D)
    sigma = sample_sigmas(len(y), gen, p_mean=cfg.p_mean, p_std=cfg.p_std).to(device)
    noise = torch.randn(y.shape, generator=gen).to(device)
    return y, sigma, noise


def _loss(cfg, model, batch_bits, gen, device):
    """Per-sample training loss (B,) for a minibatch of bits (B, D) uint8, and the training σ (B,)
    of each sample (None for a GPT)."""
    if cfg.model == "gpt":
        return model.loss(torch.from_numpy(batch_bits).to(device)), None
    y, sigma, noise = draw_inputs(cfg, batch_bits, gen, device)
    return dsm_loss(model, y, sigma, noise), sigma


def set_lr(cfg, opt, step):
    """The learning rate of optimizer step `step` (0-based) on every parameter group of `opt`."""
    for g in opt.param_groups:
        g["lr"] = lr_at(cfg, step)


def ema_update(cfg, step, ema_params, params):
    """EMA after optimizer step `step` (1-based): decay min(ema_decay, (1+step)/(10+step)), in place."""
    decay = min(cfg.ema_decay, (1 + step) / (10 + step))
    with torch.no_grad():
        for pe, pm in zip(ema_params, params):
            pe.lerp_(pm, 1 - decay)


def loss_error(loss, step, where=""):
    """The ConfigError for a non-finite training loss at `step` (`where`: which run, for an ensemble)."""
    return ConfigError(f"training loss{where} became {loss} at step {step}; lower the learning rate "
                       "(the last good state is kept in resume.pt)")


def _save_step(cfg, run_dir, st, arch):
    dtype = getattr(torch, cfg.save_dtype)
    cast = lambda sd: {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in sd.items()}  # noqa: E731
    ck = {"format": CKPT_FORMAT, "step": st.step, "kind": cfg.model, "arch": arch,
          "ema": cast({k: v.cpu() for k, v in st.ema.state_dict().items()})}
    if cfg.save_model:
        ck["model"] = cast({k: v.cpu() for k, v in st.model.state_dict().items()})
    save_checkpoint(ck, ckpt_path(run_dir, st.step), atomic_save)


def _append_line(log, line):
    """Append one line to the open training log; a full disk names the log (a line it cuts short is dropped by
    the next run: trainlog.truncate_log)."""
    try:
        log.write(line)
        log.flush()
    except OSError as e:
        named = full_disk_error(e, getattr(log, "name", LOG_NAME))
        if named is None:
            raise
        raise named from e


class Run:
    """One run directory being trained: config, state (`_State`), training bits and checkpoint plan.

    Made by `open_run`; after each optimizer step `record` writes what falls on that step (log line,
    checkpoint, resume.pt) and `finish` removes resume.pt at the end. train_run and the ensemble
    trainer (scoreprobe.training.ensemble) share it, so both write the same files.
    """

    def __init__(self, cfg, run_dir, st, data, meta):
        self.cfg, self.dir, self.st, self.train_bits = cfg, Path(run_dir), st, data.train   # bits (N, D) uint8
        self.save_at, self.arch = sorted(meta["checkpoint_steps"]), meta["arch"]
        self.resume, self.final = self.dir / RESUME_STATE, self.dir / FINAL_STATE
        self.keep_state = True    # finish() keeps the last state in final_state.pt (to extend the run)
        self.lock = None          # the directory's RunLock (training.guard), released by close()
        self.monitor = None       # a live Monitor at the checkpoint steps (train_run's tensorboard_samples)
        plan, self.mix = cfg.curriculum_plan(), cfg.curriculum_mix()
        self.switch, self.first_bits = (plan[1], curriculum_bits(rule_from_spec(cfg.rule), plan[0], cfg.n_train,
                                                                 data.heldout, cfg.data_seed)) if plan else (0, None)
        if self.mix:
            self.switch = 0          # the curriculum's control: its images mixed in at every step, no first phase
        self.bank = heldout_bank(data.heldout, cfg.p_mean, cfg.p_std) if cfg.model == "dit" else None

    def bits_at(self, step):
        """The training items a step draws from: the curriculum's before its switch, else the run's."""
        return self.first_bits if step < self.switch else self.train_bits

    def draw_batch(self):
        """The minibatch (B, D) uint8 of the next step, the step's first draws from the run's generator:
        `draw_bits` from `bits_at`, or for a mixed curriculum (TrainConfig.curriculum_mix) `draw_mixed`."""
        if self.mix:
            return draw_mixed(self.cfg, self.train_bits, self.first_bits, self.mix, self.st.gen)
        return draw_bits(self.cfg, self.bits_at(self.st.step), self.st.gen)

    def writes_state(self, step):
        """Whether `record` at `step` writes the state (a checkpoint or resume.pt)."""
        return step in self.save_at or step % self.cfg.resume_every == 0

    def record(self, loss, log, parts=None):
        """After an optimizer step with loss `loss` (and its σ-bucket sums `parts`, a list, or None):
        the log line, checkpoint and resume.pt due at st.step. Returns the logged record
        (trainlog.log_record), or None when no line was due."""
        st, rec = self.st, None
        st.running.append(loss)
        if parts is not None:
            st.parts.append(parts)
        if st.step % self.cfg.log_every == 0:
            rec = log_record(st.step, st.running, st.parts if len(st.parts) == len(st.running) else None)
            if self.bank is not None:   # the held-out loss on a fixed bank (trainlog.heldout_bank)
                rec["heldout"] = heldout_record(st.model, self.bank)
            _append_line(log, json.dumps(rec) + "\n")
            st.running, st.parts = [], []
        if self.writes_state(st.step):    # first: a kill between the two leaves the state, which rewrites the checkpoint
            atomic_save(st.state_dict(), self.resume)
        if st.step in self.save_at:
            _save_step(self.cfg, self.dir, st, self.arch)
        return rec

    def checkpoint_label(self):
        """'checkpoint k of K' when st.step is a checkpoint step, else None."""
        step = self.st.step
        return f"checkpoint {self.save_at.index(step) + 1} of {len(self.save_at)}" if step in self.save_at else None

    def finish(self):
        """The run is complete: its last state (resume.pt, written at the last checkpoint) becomes
        final_state.pt, from which a larger total_steps continues it; removed when not keep_state."""
        if self.keep_state and self.resume.exists():
            os.replace(self.resume, self.final)
        elif not self.keep_state:        # an older final_state.pt (the total an extension started from) is stale
            self.final.unlink(missing_ok=True)
        self.resume.unlink(missing_ok=True)
        fsync_dir(self.dir)

    def close(self):
        """Release the run directory to other trainers (idempotent)."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None


def open_run(cfg, run_dir, device):
    """Create or reopen `run_dir` for `cfg`: a `Run` at step 0 (its step-0 checkpoint written) or at
    the step of its training state, or None when the run is already complete. ConfigError for another
    config or while another trainer holds the directory. The Run holds the directory's lock: close() it."""
    cfg.validate()
    check_training_size(cfg.model, model_arch(cfg, rule_from_spec(cfg.rule)), cfg.batch_size)   # before building
    run_dir = Path(run_dir)
    lock = RunLock(run_dir).acquire()
    try:
        run = _open_locked(cfg, run_dir, device)
    except BaseException:
        lock.release()
        raise
    if run is None:
        lock.release()
        return None
    run.lock = lock
    return run


def _open_locked(cfg, run_dir, device):
    remove_stale_temps(run_dir)
    ds = init_run_dir(cfg, run_dir, device)
    meta = read_meta(run_dir)
    torch.manual_seed(cfg.seed)
    model = build_model(meta["kind"], meta["arch"]).to(device)
    run = Run(cfg, run_dir, _State(cfg, model, device, meta["config"]), ds, meta)
    state = state_file(run_dir, meta)
    if state is None and all(ckpt_path(run_dir, s).exists() for s in run.save_at):
        logger.info("%s is complete (%d checkpoints); nothing to train", run_dir, len(run.save_at))
        return None
    if state is not None:
        load_state(run.st, state, device, cfg.total_steps, (run_dir, meta, cfg.save_dtype))
        logger.info("resuming %s from step %d (%s)", run_dir, run.st.step, state.name)
    if run.st.step in run.save_at and not ckpt_path(run_dir, run.st.step).exists():   # step 0, or a kill after the state
        _save_step(cfg, run_dir, run.st, run.arch)
    truncate_log(run_dir / LOG_NAME, run.st.step)   # also after a kill before the first resume.pt
    return run


def train_run(cfg, run_dir, device="cpu", progress=None, keep_state=True, tensorboard=None, tensorboard_samples=0):
    """Train, resume or extend the run described by `cfg` in `run_dir`; returns the run directory Path.

    keep_state: keep the last training state in final_state.pt (model, EMA, optimizer, RNG: about
    four times a float32 checkpoint), which a later call with a larger total_steps continues from.
    tensorboard: a folder: each logged record (loss, its σ buckets, the held-out loss) also as live TensorBoard
    events, as it is written (training/live.py).
    tensorboard_samples: with tensorboard, also measure the EMA model at each checkpoint step with this many samples
    (clocks with their intervals as margin charts, τ, a grid of samples: training/live.live_monitor); 0: none.
    """
    check_int(tensorboard_samples, "tensorboard_samples", 0, MAX_SAMPLES)
    if tensorboard_samples and tensorboard is None:
        raise ConfigError("tensorboard_samples needs tensorboard= (the folder the sample grids go to)")
    board = None if tensorboard is None else LiveBoard(tensorboard)     # tensorboardX checked before the run opens
    run = open_run(cfg, run_dir, device)
    if run is None:
        return Path(run_dir)
    run.keep_state = keep_state
    try:
        run.monitor = live_monitor(cfg, run.dir, run.save_at, board, tensorboard_samples)
        if run.monitor is not None and run.st.step in run.save_at:
            run.monitor(run.st.step, run.st.ema)                        # the checkpoint the run starts from
        _train_loop(cfg, run, device, progress, board)
        run.finish()
    finally:
        run.close()
        if board is not None:
            board.close()
    return run.dir


def _train_loop(cfg, run, device, progress, board=None):
    """The optimizer steps of `run` up to cfg.total_steps, each recorded (log, checkpoints, resume.pt)."""
    bar = CountProgress(cfg.total_steps, run.st.step, "train", progress)
    try:
        with open(run.dir / LOG_NAME, "a") as log:
            while run.st.step < cfg.total_steps:
                loss, parts = _train_step(cfg, run.st, run.draw_batch(), device)
                rec = run.record(loss, log, parts)
                if rec is not None:
                    bar.set_postfix_str(postfix(rec))
                    if board is not None:
                        board.log_record(rec)
                if run.checkpoint_label():
                    bar.mark(run.st.step, run.checkpoint_label())
                    if run.monitor is not None:
                        run.monitor(run.st.step, run.st.ema)
                bar.update(1)
    finally:
        bar.close()


def _train_step(cfg, st, batch, device):
    """One optimizer step on the minibatch `batch` (B, D) uint8 (Run.draw_batch); updates EMA. Returns the
    loss and its σ-bucket sums and counts (a list, trainlog.bucket_sums; None for a GPT)."""
    set_lr(cfg, st.opt, st.step)
    per_sample, sigma = _loss(cfg, st.model, batch, st.gen, device)      # (B,), (B,) or None
    loss = per_sample.mean()
    parts = None if sigma is None else bucket_sums(per_sample, sigma)     # (2K,)
    values = torch.cat([loss.detach().double().reshape(1), parts]) if parts is not None else loss.detach().reshape(1)
    values = values.tolist()                                              # one transfer from the device
    if not math.isfinite(values[0]):
        raise loss_error(values[0], st.step)
    st.opt.zero_grad(set_to_none=True)
    loss.backward()
    st.opt.step()
    st.step += 1
    ema_update(cfg, st.step, st.ema.parameters(), st.model.parameters())
    return values[0], (values[1:] if parts is not None else None)
