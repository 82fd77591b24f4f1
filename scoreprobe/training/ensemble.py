"""Ensemble training: M small DiTs of one architecture trained at once, one run directory each.

`train_ensemble(cfgs, run_dirs)` stacks the members' parameters (`torch.func.stack_module_state`),
runs the forward pass of all members as one batched call (`vmap` over `functional_call`) and the
backward pass through it, and steps one AdamW over the stacked tensors. AdamW is elementwise, so a
stacked tensor gets the update M separate optimizers would give. Each member keeps its own
generator (seeded as `train_run` seeds it) and draws its minibatch indices, noise levels and noise
from it in `train_run`'s order, so member m follows `train_run(cfgs[m], run_dirs[m])`: on CPU the
two agree to float32 rounding (the batched kernels may add in another order; tests/test_ensemble.py
states the measured difference).

Each member's directory is written by the same code as `train_run` (`scoreprobe.training.train.Run`):
run.json, dataset.npz, ckpt/step_*.pt, train_log.jsonl and, while unfinished, resume.pt. So every
member loads with `load_series`, and an interrupted ensemble resumes when called again (or each
member alone with `train_run`). Members may differ in ENSEMBLE_VARIES (seed, data, N, rule of the
same image shape, ...); everything else, architecture and optimisation loop, is shared.
"""
import copy
import json
import logging
import warnings
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import torch
from torch.func import functional_call, stack_module_state, vmap

from scoreprobe.training.config import ENSEMBLE_VARIES, TrainConfig
from scoreprobe.errors import ConfigError
from scoreprobe.limits import MAX_ENSEMBLE
from scoreprobe.models.edm import dsm_loss
from scoreprobe.progress import CountProgress
from scoreprobe.training.trainlog import bucket_sums
from scoreprobe.training.run_dir import check_run_dir
from scoreprobe.training.train import draw_inputs, ema_update, loss_error, open_run, set_lr

logger = logging.getLogger(__name__)


def check_ensemble(cfgs, run_dirs):
    """ConfigError unless `cfgs` (TrainConfig list) can train as one ensemble into `run_dirs`.

    The members must be valid DiT configs that are equal outside ENSEMBLE_VARIES, whose rules give the
    same image shape, with one distinct run directory each that is new or holds the same member's run.
    The error names the first differing field.
    """
    cfgs = list(cfgs)
    if not cfgs:
        raise ConfigError("an ensemble needs at least one member")
    if not all(isinstance(c, TrainConfig) for c in cfgs):
        raise ConfigError("ensemble members must be TrainConfig objects")
    if len(cfgs) > MAX_ENSEMBLE:
        raise ConfigError(f"an ensemble of {len(cfgs)} members is more than the limit {MAX_ENSEMBLE} "
                          "(scoreprobe.limits.MAX_ENSEMBLE); train it in parts")
    if len(run_dirs) != len(cfgs):
        raise ConfigError(f"{len(cfgs)} configs but {len(run_dirs)} run directories")
    if len({Path(d).resolve() for d in run_dirs}) != len(run_dirs):
        raise ConfigError("every ensemble member needs its own run directory; two are the same")
    for cfg in cfgs:
        cfg.validate()
    if cfgs[0].model != "dit":
        raise ConfigError(f"ensemble training trains DiTs only, got model={cfgs[0].model!r}")
    ref = cfgs[0].to_dict()
    for i, cfg in enumerate(cfgs[1:], 1):
        new = cfg.to_dict()
        diff = [k for k in ref if k not in ENSEMBLE_VARIES and new[k] != ref[k]]
        if diff:
            raise ConfigError(f"ensemble member {i} has {diff[0]}={new[diff[0]]!r} but member 0 has "
                              f"{ref[diff[0]]!r}; members share the architecture and the training loop and "
                              f"may differ only in {', '.join(ENSEMBLE_VARIES)}")
    _check_arch(cfgs)
    _check_distinct(cfgs)
    from scoreprobe.models.build import check_training_size, model_arch
    from scoreprobe.data.rules import rule_from_spec
    check_training_size("dit", model_arch(cfgs[0], rule_from_spec(cfgs[0].rule)), cfgs[0].batch_size, len(cfgs))
    for cfg, run_dir in zip(cfgs, run_dirs):   # a directory of another run: refused before any is written
        check_run_dir(cfg, run_dir, device=None)


def member_key(cfg):
    """What a member trains: its config with the rule's effective spec (arguments the rule ignores dropped)."""
    from scoreprobe.data.rules import rule_from_spec
    d = {**cfg.to_dict(), "rule": rule_from_spec(cfg.rule).effective_spec()}
    return json.dumps(d, sort_keys=True, default=str)


def _check_distinct(cfgs):
    """ConfigError when two members train the same: they would give identical runs."""
    seen = {}
    for i, cfg in enumerate(cfgs):
        key = member_key(cfg)
        if key in seen:
            raise ConfigError(f"ensemble members {seen[key]} and {i} have the same config (rule {cfg.rule}); they "
                              "would train identical runs")
        seen[key] = i


def _check_arch(cfgs):
    """ConfigError unless every member's rule gives member 0's architecture (the same image shape)."""
    from scoreprobe.models.build import model_arch
    from scoreprobe.data.rules import rule_from_spec
    archs = [model_arch(c, rule_from_spec(c.rule)) for c in cfgs]
    for i, arch in enumerate(archs):
        if arch != archs[0]:
            raise ConfigError(f"ensemble member {i}'s rule {cfgs[i].rule} gives images of shape "
                              f"{arch['image_shape']} but member 0's gives {archs[0]['image_shape']}; "
                              "members share the architecture")


def train_ensemble(cfgs, run_dirs, device="cpu", progress=None):
    """Train (or resume) M DiT runs at once, member m as `train_run(cfgs[m], run_dirs[m])` would.

    Parameters
    ----------
    cfgs : list of TrainConfig
        The members; equal outside ENSEMBLE_VARIES (see `check_ensemble`).
    run_dirs : list of path-like
        One run directory per member, written as `train_run` writes it.
    device : str or torch.device
        Where the stacked parameters live; the random draws are made on the CPU as in `train_run`.
    progress : bool or None
        As for `train_run`: None picks a bar or lines, False is silent.

    Returns
    -------
    list of Path
        The run directories, in the order of `cfgs`.

    Members already complete are skipped (so new members added to a finished grid train alone).
    Members that resume from different steps (an ensemble killed while it wrote the members'
    resume.pt files, a member finished or restarted on its own) train as one ensemble per step.
    """
    run_dirs = [Path(d) for d in run_dirs]
    check_ensemble(cfgs, run_dirs)
    runs = []
    try:
        for c, d in zip(cfgs, run_dirs):
            runs.append(open_run(c, d, device))
        runs = [r for r in runs if r is not None]
        starts = sorted({r.st.step for r in runs})
        if len(starts) > 1:
            logger.warning("ensemble members resume from different steps %s; training one ensemble per step", starts)
        for start in starts:
            _train_group([r for r in runs if r.st.step == start], device, progress)
    finally:
        for r in runs:
            if r is not None:
                r.close()
    return run_dirs


class _Stack:
    """The training state of M members (train.Run, all at one step) as stacked tensors, on their device.

    params, ema: {name: (M, ...) tensor} in `named_parameters` order; opt: one AdamW over `params`;
    base: member 0's module on the meta device, the function `functional_call` evaluates; step.
    """

    def __init__(self, runs):
        cfg, states = runs[0].cfg, [r.st for r in runs]
        self.base = copy.deepcopy(states[0].model).to("meta")
        self.params, _ = stack_module_state([st.model for st in states])   # {name: (M, ...)}, leaves
        self.ema, _ = stack_module_state([st.ema for st in states])
        self.opt = torch.optim.AdamW(list(self.params.values()), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.opt.load_state_dict(_stack_opt_state([st.opt.state_dict() for st in states]))
        self.step = states[0].step

    def unstack(self, runs):
        """Copy member m's slice of every stacked tensor into runs[m].st (before its files are written)."""
        sd = self.opt.state_dict()
        with torch.no_grad():
            for m, run in enumerate(runs):
                for stacked, net in ((self.params, run.st.model), (self.ema, run.st.ema)):
                    for name, p in net.named_parameters():
                        p.copy_(stacked[name][m])
                state = {i: {k: (v.clone() if k == "step" else v[m].clone()) for k, v in s.items()}
                         for i, s in sd["state"].items()}
                run.st.opt.load_state_dict({"state": state, "param_groups": copy.deepcopy(sd["param_groups"])})
                run.st.step = self.step


def _stack_opt_state(sds):
    """One AdamW state_dict over stacked parameters from the members' state_dicts (all at one step).

    Per parameter index i: exp_avg and exp_avg_sq (M, ...) stacked, the step counter shared.
    """
    state = {i: {k: (v.clone() if k == "step" else torch.stack([sd["state"][i][k] for sd in sds]))
                 for k, v in s.items()}
             for i, s in sds[0]["state"].items()}
    return {"state": state, "param_groups": copy.deepcopy(sds[0]["param_groups"])}


class _Member:
    """One member as a denoiser inside vmap: its params {name: tensor} applied to the base module."""

    def __init__(self, base, params):
        self.base, self.params = base, params

    def __call__(self, x, sigma):
        return functional_call(self.base, self.params, (x, sigma))    # (B, D)

    def loss_weight(self, sigma):
        return self.base.loss_weight(sigma)                           # (B,)


def _member_loss(base, params, y, sigma, noise):
    """Per-sample DSM loss (B,) of one member on y (B, D), sigma (B,), noise (B, D); vmap maps it over M."""
    return dsm_loss(_Member(base, params), y, sigma, noise)


def _ensemble_step(runs, stack, device):
    """One optimizer step of every member, each on its own minibatch; updates the EMAs.

    Returns the members' losses (list of M floats) and their σ-bucket sums (M lists, trainlog.bucket_sums).
    """
    cfg = runs[0].cfg
    draws = [draw_inputs(r.cfg, r.draw_batch(), r.st.gen, "cpu") for r in runs]
    y, sigma, noise = (torch.stack(t).to(device) for t in zip(*draws))   # (M, B, D), (M, B), (M, B, D)
    set_lr(cfg, stack.opt, stack.step)
    with warnings.catch_warnings():   # CPU attention has no vmap rule: torch loops over the members (same kernel)
        warnings.filterwarnings("ignore", message=".*batching rule", category=UserWarning)
        per_sample = vmap(_member_loss, in_dims=(None, 0, 0, 0, 0))(stack.base, stack.params, y, sigma, noise)
    losses = per_sample.mean(dim=1)                                                              # (M,)
    parts = [bucket_sums(ps, s).tolist() for ps, s in zip(per_sample, sigma)]                   # M x (2K,)
    bad = (~torch.isfinite(losses)).nonzero().flatten().tolist()
    if bad:
        raise loss_error(losses[bad[0]].item(), stack.step, f" of {runs[bad[0]].dir}")
    stack.opt.zero_grad(set_to_none=True)
    losses.sum().backward()          # member m's parameters get the gradient of its own loss only
    stack.opt.step()
    stack.step += 1
    ema_update(cfg, stack.step, stack.ema.values(), stack.params.values())
    return losses.tolist(), parts


def _train_group(runs, device, progress):
    """Train `runs` (train.Run, all at one step) to the end as one ensemble, writing each one's files."""
    cfg, stack = runs[0].cfg, _Stack(runs)
    bar = CountProgress(cfg.total_steps, stack.step, f"train {len(runs)} runs", progress)
    try:
        with ExitStack() as files:
            logs = [files.enter_context(open(r.dir / "train_log.jsonl", "a")) for r in runs]
            while stack.step < cfg.total_steps:
                losses, parts = _ensemble_step(runs, stack, device)
                if runs[0].writes_state(stack.step) or stack.step % cfg.log_every == 0:   # (log: held-out loss)
                    stack.unstack(runs)
                for r in runs:
                    r.st.step = stack.step
                recs = [r.record(loss, log, p) for r, loss, log, p in zip(runs, losses, logs, parts)]
                if recs[0] is not None:
                    bar.set_postfix_str(f"mean loss {np.mean([rec['loss'] for rec in recs]):.4f}")
                if runs[0].checkpoint_label():
                    bar.mark(stack.step, runs[0].checkpoint_label())
                bar.update(1)
    finally:
        bar.close()
    for r in runs:
        r.finish()
