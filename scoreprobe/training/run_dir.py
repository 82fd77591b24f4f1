"""The run directory of a training run: create it, or check that it holds a run of this config.

`init_run_dir` writes `run.json` (every setting, versions, git commit, checkpoint steps, thread count) and
`dataset.npz`; `check_run_dir` tells a run to resume or to extend from one with other settings (refused).
The layout of the whole directory: `scoreprobe.training.train`.
"""
import json
import platform
import subprocess
from pathlib import Path

import numpy as np
import torch

from scoreprobe.training.config import FINAL_STATE, RUN_FORMAT, atomic_write, atomic_write_text, stored_config
from scoreprobe.data.datasets import load_dataset, make_dataset, transposed_dataset
from scoreprobe.errors import ConfigError
from scoreprobe.models.build import model_arch
from scoreprobe.data.rules import rule_from_spec
from scoreprobe.training.guard import check_threads, read_meta, read_state, state_file
from scoreprobe.training.trainlog import LOG_NAME, check_log


def _git_commit():
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _versions():
    import scoreprobe
    return {"scoreprobe": scoreprobe.__version__, "torch": torch.__version__, "numpy": np.__version__,
            "python": platform.python_version()}


def atomic_save(obj, path):
    """torch.save through config.atomic_write: a kill leaves the old file or the new one, whole. Serialized in
    memory first: torch's zip writer turns a write error (a full disk) into a RuntimeError on its way out,
    while a plain write keeps it the OSError (ENOSPC) it is."""
    import io
    buf = io.BytesIO()
    torch.save(obj, buf)
    atomic_write(path, lambda f: f.write(buf.getbuffer()))


def check_run_dir(cfg, run_dir, device=None):
    """The checked run.json (dict) when `run_dir` holds a run of `cfg` (to resume) or one that `cfg` extends
    (the same settings but a larger total_steps, `scoreprobe.training.extend`), None when it holds none;
    ConfigError when it holds a run with different settings or (`device` on the CPU) another thread count,
    CheckpointError when its run.json is damaged or a finished run cannot be extended."""
    from scoreprobe.training.extend import check_extension
    if not (Path(run_dir) / "run.json").exists():
        return None
    old = read_meta(run_dir)
    check_log(Path(run_dir) / LOG_NAME)
    old_cfg = stored_config(old.get("config", {}))  # settings added later: defaults
    new_cfg = cfg.to_dict()
    if new_cfg["first_checkpoint"] is None:   # not named: the run's own (whatever default made it)
        new_cfg["first_checkpoint"] = old_cfg.get("first_checkpoint")
    diff = sorted(k for k in new_cfg if old_cfg.get(k) != new_cfg[k])
    if diff == ["total_steps"] and new_cfg["total_steps"] > old_cfg["total_steps"]:
        check_extension(old, cfg, run_dir)
    elif diff:
        raise ConfigError(_conflict_message(run_dir, old_cfg, new_cfg, diff))
    if device is not None:
        check_threads(old, device, run_dir)
    return old


def _conflict_message(run_dir, old_cfg, new_cfg, diff):
    """The refusal of a run directory holding a run with other settings. A larger total_steps is no
    conflict (it extends the run once the rest match), so it is not listed among them."""
    from scoreprobe.training.extend import describe_diff
    growing = "total_steps" in diff and new_cfg["total_steps"] > old_cfg["total_steps"]
    listed = [k for k in diff if not (growing and k == "total_steps")]
    text = f"{run_dir} already holds a run with different settings ({describe_diff(old_cfg, new_cfg, listed)}); "
    if growing:
        return text + (f"to extend it to {new_cfg['total_steps']} steps, give the run's own settings (run.json's "
                       "config, `scoreprobe info RUN_DIR`) with the larger total_steps, or use another directory")
    return text + "use another directory or the same settings to resume"


def init_run_dir(cfg, run_dir, device=None):
    """Create (or check) the run directory; returns the Dataset. Refuses a different config."""
    run_dir = Path(run_dir)
    meta_path = run_dir / "run.json"
    rule = rule_from_spec(cfg.rule)
    old = check_run_dir(cfg, run_dir, device)
    if old is not None:
        from scoreprobe.training.extend import extend_run
        state = state_file(run_dir, old) or run_dir / FINAL_STATE
        if cfg.total_steps > old["config"]["total_steps"] and state.exists():   # the state an extension continues:
            read_state(state, "cpu", old["config"]["total_steps"], (run_dir, old, cfg.save_dtype))   # before run.json
        extend_run(cfg, run_dir, old)     # a larger total_steps: the schedule continued (else nothing)
        return load_dataset(run_dir / "dataset.npz", rule)
    (run_dir / "ckpt").mkdir(parents=True, exist_ok=True)
    ds = make_dataset(rule, cfg.n_train, cfg.n_heldout, cfg.data_seed)
    if cfg.transpose:   # the same draw, every grid transposed (train and held-out alike)
        ds = transposed_dataset(ds)
    ds.save(run_dir / "dataset.npz")
    meta = {"format": RUN_FORMAT, "config": {**cfg.to_dict(), "first_checkpoint": cfg.first_step()}, "kind": cfg.model,
            "arch": model_arch(cfg, rule),
            "checkpoint_steps": cfg.checkpoint_schedule(),
            "versions": _versions(), "git_commit": _git_commit(),
            "torch_threads": torch.get_num_threads()}   # CPU results are bitwise reproducible per thread count
    atomic_write_text(meta_path, json.dumps(meta, indent=2))
    return ds
