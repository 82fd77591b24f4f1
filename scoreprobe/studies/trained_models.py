"""The trained models several studies read beside their own grids, and the clocks each run directory keeps.

    shipped  the shipped recipe (parity G = 2, N = 120, 36 000 steps: its innovation window opens) at training
             seeds 0, 1, 2: checkpoints/parity-default and runs/shipped/s1, s2 (the command in
             checkpoints/README.md with `--seed 1` / `--seed 2`; same data).
    closed   the closed-window series (parity G = 2, N = 30, 3750 steps: τ_mem comes before any τ_rule) at training
             seeds 0, 1, 2 of the closed config (CLOSED_CONFIG), trained as one stacked
             ensemble under runs/closed-window/closed-s* (`train_closed`).

Paths are relative to the repository root. A run's clocks are its clocks.json (checkpoints/measure.py: τ with CIs,
the share of resamples reaching them, and a table of rule accuracy and memorization per checkpoint).
"""
import json
import logging
from pathlib import Path

from scoreprobe.errors import ConfigError

logger = logging.getLogger(__name__)

SHIPPED_RUNS = ("checkpoints/parity-default", "runs/shipped/s1", "runs/shipped/s2")
CLOSED_RUNS = tuple(f"runs/closed-window/closed-s{i}" for i in range(3))
CLOSED_CONFIG = dict(rule={"name": "parity", "G": 2, "shape": [6, 6], "layout": "offset", "seed": 0}, n_train=30,
                     n_heldout=1024, model="dit", size="tiny", hidden_size=80, lr=2e-3, batch_size=96,
                     total_steps=3750, n_checkpoints=20, first_checkpoint=200, extra_checkpoints=[50, 100, 200, 350],
                     save_dtype="float16")      # the mechanism-seeds grid's closed series config at each seed
TAU_KEYS = ("tau_rule", "tau_rule_ci", "tau_mem", "tau_mem_ci")


def clock_taus(run_dir, keys=TAU_KEYS):
    """{key: value} of the τ in a run's clocks.json (None for a key it lacks), None when there is no clocks.json."""
    f = Path(run_dir) / "clocks.json"
    if not f.is_file():
        return None
    t = json.loads(f.read_text())["taus"]
    return {k: t.get(k) for k in keys}


def clock_summary(run_dir):
    """τ_rule, τ_mem (CIs, share of resamples reaching them; None: not reached), the rule threshold and the largest
    and last rule accuracy from a run's clocks.json; ConfigError if absent."""
    f = Path(run_dir) / "clocks.json"
    if not f.is_file():
        raise ConfigError(f"{f} is missing: measure the clocks first (python checkpoints/measure.py {run_dir}; the "
                          "closed-window models: `train_closed` trains them and measures them)")
    c = json.loads(f.read_text())
    t = c["taus"]
    return {**{k: t.get(k) for k in ("tau_rule", "tau_rule_ci", "tau_rule_reached", "tau_mem", "tau_mem_ci",
                                     "tau_mem_reached", "rule_threshold")},
            "rule_acc_max": max(r["rule_acc"] for r in c["table"]), "rule_acc_last": c["table"][-1]["rule_acc"]}


def existing_series(root, models, steps):
    """{name: CheckpointSeries} of the models {name: run dir relative to root} whose run directory exists with every
    step of `steps`; the others are left out with a warning."""
    from scoreprobe.loading.series import load_series
    out = {}
    for name, rel in models.items():
        d = Path(root) / rel
        if not (d / "run.json").is_file():
            logger.warning("model %s: no run at %s, left out", name, d)
            continue
        s = load_series(str(d))
        have = {int(v) for v in s.steps}
        missing = [int(t) for t in steps if int(t) not in have]
        if missing:
            logger.warning("model %s: checkpoints %s missing, left out", name, missing)
            continue
        out[name] = s
    return out


def train_closed(root):
    """Train (or resume) the closed series' models as one ensemble and measure the clocks of those without a
    clocks.json (checkpoints/measure.py, 1000 samples, its own process) -> [run dir]."""
    import subprocess
    import sys

    from scoreprobe.training.config import TrainConfig
    from scoreprobe.training.ensemble import train_ensemble
    dirs = [Path(root) / rel for rel in CLOSED_RUNS]
    cfgs = [TrainConfig(**CLOSED_CONFIG, seed=i) for i in range(len(dirs))]
    train_ensemble(cfgs, dirs, device="cpu", progress=False)
    for d in dirs:
        if not (d / "clocks.json").is_file():
            subprocess.run([sys.executable, str(Path(root) / "checkpoints" / "measure.py"), str(d), "--out",
                            str(d / "clocks.zarr")], check=True, stdout=subprocess.DEVNULL)
    return dirs


def train_and_clock(models, n_samples, log=None):
    """Train (or resume) each run of `models` {name: (TrainConfig, run dir)} and write its clocks.json (τ with CIs,
    per-checkpoint rule accuracy and memorization; `n_samples` samples, seed 0) unless it is there
    -> {name: series}. `log(str)` hears of each run."""
    from scoreprobe.atomic import atomic_write_text
    from scoreprobe.loading.series import load_series
    from scoreprobe.stats.clocks import clocks
    from scoreprobe.store import normalize_config
    from scoreprobe.training.train import train_run
    out = {}
    for name, (cfg, d) in models.items():
        train_run(cfg, d, device="cpu", progress=False)
        series = load_series(d)
        f = d / "clocks.json"
        if not f.is_file():
            ds = clocks(series, n_samples=n_samples, seed=0, out=str(d / "clocks.zarr"), progress=False)
            taus = {k: v for k, v in ds.attrs.items() if k.startswith("tau_") or k in ("rule_threshold", "mem_threshold")}
            table = [{"step": int(st), "rule_acc": float(ds.rule_acc.sel(step=st)),
                      "mem_ratio": float(ds.mem_ratio.sel(step=st))} for st in ds.step.values]
            atomic_write_text(f, json.dumps(normalize_config({"n_samples": n_samples, "seed": 0, "taus": taus,
                                                              "table": table}), indent=1))
        if log is not None:
            log(f"{name}: trained, clocks in {f}")
        out[name] = series
    return out
