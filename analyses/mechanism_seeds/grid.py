"""The models of analyses/mechanism_seeds: two series × training seeds, their checkpoints, the steps
measured and the estimated time.

A series is one TrainConfig up to its training seed: `open` is the shipped series' own config
(checkpoints/parity-default/run.json: parity G = 2, N = 120, 36 000 steps, its window opens), `closed`
the mechanism study's closed-window run (G = 2, N = 30, 3750 steps; scoreprobe.studies.recipes.
closed_window_config). Every model adds the early checkpoints `extra` (TrainConfig.extra_checkpoints: 50, 100,
200, 350) to the series' log grid, so the shipped checkpoints (grid from 500, trained before the trainer
changed: this trainer's step 500 of the shipped config differs from the shipped one in 504 356 of
507 124 weights, step 0 is equal) cannot be reused: every model, seed 0 too, is trained here. All models
of a series share data seed 0 (one training set) and the probe seeds (the same planes, items and DSM
pairs): trained models and units are crossed.

Measured steps: step 0, the extra steps and `n_grid` log-spaced picks of the grid (`measured_steps`).

Time (`model_seconds`): scoreprobe.studies.battery.model_seconds (training and clocks at the recipes' rates,
the probes at the mechanism CPU preset's measured rates, scaled by the solves each model needs).
"""
import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

from scoreprobe.studies import battery
from scoreprobe.studies.battery import RET_SIGMAS, measured_steps  # noqa: F401  (the steps a model is measured at)
from scoreprobe.studies.recipes import closed_window_config
from scoreprobe.training.config import TrainConfig, stored_config

SHIPPED_RUN = Path(__file__).resolve().parents[2] / "checkpoints" / "parity-default" / "run.json"
SERIES = ("closed", "open")      # the order they train: the short series first
KINDS = ["symmetric", "train_heldout", "random_valid", "reach"]

PRESETS = {
    "smoke": dict(seeds=[0, 1, 2], probe_seeds=[0], extra=[2, 5], n_grid=3, clock_samples=32, n_boot=100, jobs=1,
                  open=dict(n_train=16, n_heldout=32, total_steps=60, hidden_size=32, batch_size=16,
                            n_checkpoints=5, first_checkpoint=10),
                  closed=dict(N=8, n_heldout=32, total_steps=40, hidden_size=32, batch_size=16, n_checkpoints=4,
                              first_checkpoint=10),
                  probes=dict(n_planes=2, res=4, sigma_starts=[1.0], reach_sigmas=[1.0], ret_items=3, ret_noise=2,
                              ret_sigmas=[1.0, 2.0], dsm_sigmas=5, dsm_noise=2, dsm_heldout=6, n_steps=4,
                              max_hamming=36)),   # N = 8, 16: no training/held-out pair is within 6 bits
    # 6 models; the mechanism CPU preset's probes with 2 probe seeds (not 3: the trained models are now the
    # top level), retention at σ 0.5, 1, 2 (not 8 σ: 65% of its cost) and the reach planes at σ 1.
    "cpu": dict(seeds=[0, 1, 2], probe_seeds=[0, 1], extra=[50, 100, 200, 350], n_grid=10, clock_samples=1000,
                n_boot=1000, jobs=2, open=dict(), closed=dict(N=30, n_heldout=1024, total_steps=3750, hidden_size=80,
                                                              batch_size=96, n_checkpoints=20, first_checkpoint=200),
                probes=dict(n_planes=11, res=8, sigma_starts=[1.0], reach_sigmas=[1.0], ret_items=32, ret_noise=8,
                            ret_sigmas=[0.5, 1.0, 2.0], dsm_sigmas=24, dsm_noise=4, dsm_heldout=128, n_steps=None,
                            max_hamming=6)),
    # Where 3 seeds per series stay undecided: 5 training seeds, 3 probe seeds, the mechanism GPU preset's
    # plane and retention sizes (32 planes per kind, 16² grids, 128 + 128 items × 16 restarts × 9 σ), 16 grid
    # checkpoints; one model at a time on the device (--device cuda). Estimated at CPU rates (--plan).
    "gpu": dict(seeds=[0, 1, 2, 3, 4], probe_seeds=[0, 1, 2], extra=[50, 100, 200, 350], n_grid=16,
                clock_samples=1000, n_boot=2000, jobs=1, open=dict(),
                closed=dict(N=30, n_heldout=1024, total_steps=3750, hidden_size=80, batch_size=96, n_checkpoints=20,
                            first_checkpoint=200),
                probes=dict(n_planes=32, res=16, sigma_starts=[0.5, 1.0, 2.0], reach_sigmas=[1.0, 2.0], ret_items=128,
                            ret_noise=16, ret_sigmas=RET_SIGMAS + [3.0], dsm_sigmas=40, dsm_noise=16,
                            dsm_heldout=512, n_steps=None, max_hamming=6)),
}


@dataclasses.dataclass
class Model:
    name: str        # run directory and export name, e.g. "open-s1"
    series: str      # "open" or "closed"
    seed: int        # training seed (weights, minibatches, noise); the data seed is cfg.data_seed
    cfg: object      # TrainConfig

    @property
    def data_seed(self):
        return self.cfg.data_seed


def series_config(preset, series, seed):
    """The TrainConfig of `series` at training `seed`, with the preset's early checkpoints."""
    p = PRESETS[preset]
    if series == "open":
        base = TrainConfig.from_dict(stored_config(json.loads(SHIPPED_RUN.read_text())["config"]))
        base = dataclasses.replace(base, **p["open"])
    else:
        base = closed_window_config(p["closed"])
    extra = [s for s in p["extra"] if s < base.total_steps]
    return dataclasses.replace(base, seed=seed, extra_checkpoints=extra)


def plan(preset):
    """The models of `preset` in the order they train (the closed series first: it is short)."""
    return [Model(f"{s}-s{seed}", s, seed, series_config(preset, s, seed))
            for s in SERIES for seed in PRESETS[preset]["seeds"]]


def probe_args(preset, out, device="cpu"):
    """The namespace scoreprobe.studies.battery's probe functions read (stores under <out>/<model name>/)."""
    p = PRESETS[preset]
    return SimpleNamespace(out=str(out), device=device, seeds=list(p["probe_seeds"]), kinds=list(KINDS),
                           **p["probes"])


def model_seconds(preset, model):
    """{"train", "clocks", "probes"}: estimated one-thread seconds of one model (battery.model_seconds)."""
    p = PRESETS[preset]
    return battery.model_seconds(model.cfg, p["probes"], len(p["probe_seeds"]), p["clock_samples"], p["n_grid"])
