"""Extending a run: the same settings with a larger total_steps continue it past its old end.

What an extension keeps and adds (docs/definitions.md, "Extending a run"):
- Every checkpoint written before is kept as it is (the files are not rewritten), and training
  continues from the run's last state (`final_state.pt`, or `resume.pt` of an unfinished run), so
  the first part is bitwise the run that was never extended. The state must belong to the run and
  the thread count must be run.json's (`scoreprobe.training.guard`).
- The checkpoint schedule continues the first schedule's log grid: with r the ratio between its
  consecutive steps, (last / first)^(1 / (k − 1)) over its k nonzero steps (r = (36000/500)^(1/22)
  ≈ 1.215 for the shipped series), the new checkpoints are T·r, T·r², … (rounded, each at least one
  step after the one before) from the old total T, a grid point within half a grid step (a factor
  √r) of the new total gives way to it, and the new total is the last checkpoint. Extending again
  continues the same grid from the previous total. `n_checkpoints` keeps describing the first
  schedule; run.json's `checkpoint_steps` lists them all and `extended_from` the old totals the run
  reached (raising the target of an extension still under way replaces that target). A run's
  `extra_checkpoints` (steps off the grid, below its first total) are kept and take no part in r.
- The learning rate: constant and step schedules (and the warm-up) do not depend on total_steps,
  so the extended run follows the same trajectory as a run trained to the larger total from the
  start (equal weights at every step, an equal training log; bitwise on CPU for the same thread
  count); only the checkpoint steps differ. A cosine schedule decays to lr_min *at* total_steps: an
  extension could equal neither run, so it is refused.
"""
import json
import logging
import math
from pathlib import Path

from scoreprobe.errors import CheckpointError, ConfigError
from scoreprobe.training.config import FINAL_STATE, RESUME_STATE, checkpoint_steps, ckpt_path, stored_config

logger = logging.getLogger(__name__)


def describe_diff(old, new, keys):
    """'lr: 0.001 in the run, 0.0005 now' for each differing key (for a dict, its differing entries)."""
    out = []
    for k in keys:
        a, b = old.get(k), new.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            sub = sorted(set(a) | set(b), key=str)
            a, b = ({s: d.get(s) for s in sub if a.get(s) != b.get(s)} for d in (a, b))
        out.append(f"{k}: {a!r} in the run, {b!r} now")
    if "total_steps" in keys and new.get("total_steps", 0) < old.get("total_steps", 0):
        out.append("a run can be extended (a larger total_steps), not shortened: its checkpoints up to any "
                   "step are already there")
    return "; ".join(out)


def schedule_ratio(meta):
    """The ratio r between consecutive steps of the run's first checkpoint schedule (None when it
    has a single nonzero step)."""
    first_total = (meta.get("extended_from") or [meta["config"]["total_steps"]])[0]
    cfg = stored_config(meta["config"])
    if cfg["extra_checkpoints"]:   # the log grid alone (extra checkpoints are off the grid)
        steps = [s for s in checkpoint_steps(first_total, cfg["n_checkpoints"], cfg["first_checkpoint"]) if s > 0]
    else:
        steps = [s for s in meta["checkpoint_steps"] if 0 < s <= first_total]
    if len(steps) < 2:
        return None
    return (steps[-1] / steps[0]) ** (1 / (len(steps) - 1))


def extension_steps(last, total, ratio):
    """The checkpoint steps after `last` up to `total` (a list ending with total): last·r^j, rounded,
    each at least one step after the one before, while below total/√r."""
    out = []
    if ratio is not None and ratio > 1:
        j = 1
        while True:
            s = max(round(last * ratio ** j), (out[-1] if out else last) + 1)
            if s >= total / math.sqrt(ratio):
                break
            out.append(int(s))
            j += 1
    return out + [int(total)]


def finished(meta, run_dir):
    """True when every checkpoint of run.json `meta`'s schedule is written (the run reached its total)."""
    return all(ckpt_path(run_dir, s).exists() for s in meta["checkpoint_steps"])


def check_extension(meta, cfg, run_dir):
    """ConfigError / CheckpointError unless `cfg` (the run's settings with a larger total_steps) can
    extend the run of run.json `meta` in `run_dir`: a finished run with its training state, or an
    extension still under way (its target is raised; `extended_from` keeps only totals reached)."""
    old_total = meta["config"]["total_steps"]
    if cfg.lr_schedule == "cosine":
        raise ConfigError(f"{run_dir}: the cosine learning-rate schedule decays to lr_min at total_steps="
                          f"{old_total}, so the run cannot be extended to {cfg.total_steps} as the same "
                          "trajectory; train a new run (constant and step schedules extend)")
    run_dir = Path(run_dir)
    if not finished(meta, run_dir):
        if meta.get("extended_from"):
            return
        raise ConfigError(f"{run_dir} is unfinished (its first total_steps {old_total} is not reached yet): resume "
                          f"it with --total-steps {old_total} first, then extend it")
    if (run_dir / FINAL_STATE).exists() or (run_dir / RESUME_STATE).exists():
        return
    raise CheckpointError(f"{run_dir} finished at step {old_total} without keeping its training state "
                          f"({FINAL_STATE}: runs trained with --no-keep-state or before 2026-12-01 have "
                          "none), so it cannot be continued bitwise; train a new run with --total-steps "
                          f"{cfg.total_steps}")


def extend_run(cfg, run_dir, meta):
    """When `cfg` extends the run in `run_dir` (checked by check_extension): run.json gets the new total,
    the continued checkpoint schedule and, when the old total was reached, `extended_from`; training
    continues from final_state.pt (`scoreprobe.training.guard.state_file`). Nothing happens when
    run.json already has cfg's total_steps."""
    from scoreprobe.training.config import atomic_write_text
    run_dir = Path(run_dir)
    old_total = meta["config"]["total_steps"]
    if cfg.total_steps <= old_total:
        return
    reached = meta.get("extended_from", [])
    if finished(meta, run_dir):
        reached = [*reached, old_total]
    last = reached[-1]           # an unfinished extension: its unreached target is replaced, not recorded
    steps = [s for s in meta["checkpoint_steps"] if s <= last]
    new = extension_steps(last, cfg.total_steps, schedule_ratio(meta))
    first = meta["config"].get("first_checkpoint") if cfg.first_checkpoint is None else cfg.first_checkpoint
    meta = {**meta, "config": {**cfg.to_dict(), "first_checkpoint": first}, "checkpoint_steps": steps + new,
            "extended_from": reached}
    atomic_write_text(run_dir / "run.json", json.dumps(meta, indent=2))
    logger.info("extending %s from %d to %d steps; new checkpoints at %s", run_dir, last, cfg.total_steps,
                ", ".join(map(str, new)))
