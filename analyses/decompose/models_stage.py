"""Section 1 over trained models (issue 55 item 7): `sp.decompose` on 3 training seeds of the shipped recipe,
the calls made with a two-level bootstrap (models, then points within each) and the mixture weights with
intervals; per model as well, so that a call resting on one model shows.

Two series of 3 models each (SERIES):

  open    the shipped recipe, whose innovation window opens: checkpoints/parity-default (training seed 0) and
          runs/shipped/s1, runs/shipped/s2, trained by the command in checkpoints/README.md with `--seed 1` /
          `--seed 2` (same data, N = 120); measured at p["model_steps"].
  closed  the closed-window series (parity G = 2, N = 30, 3750 steps: τ_mem comes before any τ_rule), training
          seeds 0, 1, 2 of analyses/mechanism_seeds' closed config (CLOSED_CONFIG), trained here as one stacked
          ensemble under runs/closed-window/closed-s* and their clocks measured by checkpoints/measure.py
          (`train_closed`, run by the models stage when they are missing); measured at p["closed_steps"]. They are
          not the models behind mechanism_seeds' exports (those run directories are not kept, and an ensemble's
          kernels add in another order, so the weights part after a few hundred steps); their clocks agree with
          those exports' within the CIs.

Each model's decompose is a resumable store under <runs>/models/<model>.decompose.zarr (not committed); the
json keeps the calls, the intervals and the r² averaged over models — what the md is written from.
"""
import logging
from pathlib import Path

import numpy as np

logger = logging.getLogger("decompose.models")

SERIES = {"open": {"seed0": "checkpoints/parity-default", "seed1": "runs/shipped/s1", "seed2": "runs/shipped/s2"},
          "closed": {f"closed-s{i}": f"runs/closed-window/closed-s{i}" for i in range(3)}}
CLOSED_CONFIG = dict(rule={"name": "parity", "G": 2, "shape": [6, 6], "layout": "offset", "seed": 0}, n_train=30,
                     n_heldout=1024, model="dit", size="tiny", hidden_size=80, lr=2e-3, batch_size=96,
                     total_steps=3750, n_checkpoints=20, first_checkpoint=200, extra_checkpoints=[50, 100, 200, 350],
                     save_dtype="float16")      # analyses/mechanism_seeds grid.series_config("cpu", "closed", seed)
STEPS_KEY = {"open": "model_steps", "closed": "closed_steps"}


def _series(root, p, series):
    """{model: CheckpointSeries} of every model of `series` whose run directory exists (with all its steps)."""
    import scoreprobe as sp
    out = {}
    for name, rel in SERIES[series].items():
        d = Path(root) / rel
        if not (d / "run.json").is_file():
            logger.warning("model %s: no run at %s, left out", name, d)
            continue
        s = sp.load_series(str(d))
        have = {int(v) for v in s.steps}
        missing = [int(t) for t in p[STEPS_KEY[series]] if int(t) not in have]
        if missing:
            logger.warning("model %s: checkpoints %s missing, left out", name, missing)
            continue
        out[name] = s
    return out


def decompose_models(p, root, runs_dir, series="open"):
    """{model: decompose Dataset} of one series' models over its steps, resumed from the stores."""
    import scoreprobe as sp
    store = Path(runs_dir) / "models"
    store.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, s in _series(root, p, series).items():
        out[name] = sp.decompose(s, sigmas=p["sigmas"], n_points=p["n_points"], n_noise=p["n_noise"],
                                 steps=p[STEPS_KEY[series]], patch=tuple(p["model_patch"]), progress=False,
                                 out=str(store / f"{name}.decompose.zarr"))
        logger.info("decompose of %s done", name)
    return out


def _round(a, nd=4):
    a = np.asarray(a, dtype=float)
    return np.where(np.isfinite(a), np.round(a, nd), np.nan).tolist()


def _summary_json(s):
    keep = ("lead", "lead_lower", "lead_upper", "over_shrink_lower", "discriminability", "r2_shrink", "best_value")
    out = {"label": s.best_oracle.transpose("step", "sigma", "split").values.astype(str).tolist(),
           "leader": s.leader.transpose("step", "sigma", "split").values.astype(str).tolist()}
    out.update({k: _round(s[k].transpose("step", "sigma", "split").values) for k in keep if k in s})
    return out


def train_closed(root):
    """Train (or resume) the closed series' models as one ensemble and measure the clocks of those without a
    clocks.json (checkpoints/measure.py, 1000 samples, its own process) -> [run dir]."""
    import subprocess
    import sys

    from scoreprobe.training.config import TrainConfig
    from scoreprobe.training.ensemble import train_ensemble
    dirs = [Path(root) / rel for rel in SERIES["closed"].values()]
    cfgs = [TrainConfig(**CLOSED_CONFIG, seed=i) for i in range(len(dirs))]
    train_ensemble(cfgs, dirs, device="cpu", progress=False)
    for d in dirs:
        if not (d / "clocks.json").is_file():
            subprocess.run([sys.executable, str(Path(root) / "checkpoints" / "measure.py"), str(d), "--out",
                            str(d / "clocks.zarr")], check=True, stdout=subprocess.DEVNULL)
    return dirs


def _clock_taus(root, rel):
    """τ_rule and τ_mem with their CIs from a model's clocks.json (checkpoints/measure.py), None if absent."""
    import json
    f = Path(root) / rel / "clocks.json"
    if not f.is_file():
        return None
    t = json.loads(f.read_text())["taus"]
    return {k: t.get(k) for k in ("tau_rule", "tau_rule_ci", "tau_mem", "tau_mem_ci")}


def with_clocks(m, root, series):
    """The stage result `m` with its series' name and each model's τ from its clocks.json (read now, not cached:
    the clocks may be measured after the decompose)."""
    if not m:
        return m
    return {**m, "series": series, "taus": {n: _clock_taus(root, SERIES[series][n]) for n in m["models"]}}


def measure_models(p, root, runs_dir, series="open", train=False):
    """JSON-able, for one series: the calls pooled over models (two-level bootstrap) and per model, the mixture
    weights with intervals pooled over models, the r² of each oracle averaged over models, the best patch size
    per σ and each model's clocks."""
    import warnings

    import scoreprobe as sp
    if train and series == "closed":
        train_closed(root)
    dss = decompose_models(p, root, runs_dir, series)
    if not dss:
        return None
    names = list(dss)
    items = [dss[n] for n in names]
    boot = dict(n_boot=p["model_boot"], seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # undefined cells are kept as such in the labels
        pooled = sp.decompose_summary(items, **boot)
        per_model = {n: _summary_json(sp.decompose_summary(d, **boot)) for n, d in dss.items()}
        mix = sp.mixture_weights(items, **boot)
        best_p = sp.best_patch(items[0])
    first = items[0]
    r2 = np.mean([d.r2.transpose("step", "sigma", "split", "oracle").values for d in items], axis=0)
    return {"models": names, "model_dirs": {n: SERIES[series][n] for n in names},
            "steps": [int(s) for s in first.step.values], "sigma": [float(s) for s in first.sigma.values],
            "split": [str(s) for s in first.split.values], "oracle": [str(o) for o in first.oracle.values],
            "n_boot": p["model_boot"], "pooled": _summary_json(pooled), "per_model": per_model,
            "r2_mean": _round(r2),
            "mixture": {k: _round(mix[k].transpose("step", "sigma", "split", "oracle").values)
                        for k in ("weight", "lower", "upper")},
            "mixture_r2": _round(mix["r2_simplex"].transpose("step", "sigma", "split").values),
            "best_patch_seed0": {"family": [str(f) for f in best_p.family.values],
                                 "patch": _round(best_p.best_patch.transpose("step", "sigma", "split", "family")
                                                 .values, 0)}}
