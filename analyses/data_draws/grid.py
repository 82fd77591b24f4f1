"""The run grid of analyses/data_draws: parity DiT configurations × data seeds × training seeds.

Every run is the scaling study's parity run (`analyses.scaling.grid.parity_run`: two_clocks' recipe, 12 000
views per image, 20 log-spaced checkpoints from step 200, 1000 samples per checkpoint) with its
`data_seed` (which draws the N training images and the held-out set) set. Data seed 0 *is* the scaling
run of the same training seed (same TrainConfig, same run directory <out>/two_clocks/<name>, same
export in <results>/scaling_<preset>/), so it is reused, never trained twice; the other data seeds
train to <out>/data_draws/<name> and export to <results>/data_draws_<preset>/<name>.npz.

Order: by training seed, then configuration (N = 240 before N = 120: the G factor at N = 240 needs the
most runs), then data seed, so an interrupted preset has the widest data × seed grid it can. The CPU
preset: G = 2 and 3 at N = 240 (30 000 steps, ≈ 23 min on one idle thread) and G = 2 at N = 120
(15 000 steps, ≈ 14 min), 3 data seeds × 3 training seeds: 27 runs, 9 of them the scaling runs,
18 new ≈ 3.2 h on 2 idle cores.
"""
import dataclasses
from types import SimpleNamespace

from analyses.scaling import grid as scaling_grid

PRESETS = {
    "smoke": dict(scaling="smoke", configs=[(2, 8), (3, 8)], data_seeds=[0, 1], seeds=[0, 1], jobs=1),
    "cpu": dict(scaling="cpu", configs=[(2, 240), (3, 240), (2, 120)], data_seeds=[0, 1, 2], seeds=[0, 1, 2], jobs=2),
    "gpu": dict(scaling="gpu", configs=[(2, 256), (3, 256), (2, 128)], data_seeds=[0, 1, 2, 3, 4],
                seeds=[0, 1, 2, 3, 4], jobs=1),
}


def group_name(G, N):
    return f"g{G}-n{N}"


def draw_run(args, G, N, data_seed, seed):
    """The scaling parity run at `data_seed` (data seed 0: the scaling run itself, its name and folder)."""
    run = scaling_grid.parity_run(args, G, N, seed)
    run.meta = {**run.meta, "data_seed": data_seed}
    if data_seed == 0:
        return run
    cfg = dataclasses.replace(run.cfg, data_seed=data_seed)
    return scaling_grid.Run(f"{group_name(G, N)}-d{data_seed}-s{seed}", "data_draws", group_name(G, N), seed, cfg,
                            run.meta)


def plan(preset):
    """The runs of `preset` in the order they train (see the module docstring)."""
    p = PRESETS[preset]
    args = scaling_grid.base_args(p["scaling"])
    runs = []
    for s in p["seeds"]:
        for G, N in sorted(p["configs"], key=lambda c: (-c[1], c[0])):
            runs += [draw_run(args, G, N, d, s) for d in p["data_seeds"]]
    for r in runs:
        r.axes = ("data",)
    return runs


def export_folder(results, preset, run):
    """Where `run`'s export lives: the scaling study's folder for data seed 0 (the same run), else ours."""
    name = PRESETS[preset]["scaling"]
    return results / (f"scaling_{name}" if run.meta["data_seed"] == 0 else f"data_draws_{name}")


def budget_lines(runs, jobs, n_samples):
    secs = [scaling_grid.run_seconds(r, n_samples) for r in runs]
    return SimpleNamespace(thread_s=sum(secs), per_run=secs)
