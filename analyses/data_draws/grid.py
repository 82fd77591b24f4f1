"""The run grid of analyses/data_draws: parity DiT configurations × data seeds × training seeds.

Every run is the scaling study's parity run (`scoreprobe.studies.recipes.parity_run`: two_clocks' recipe, 12 000
views per image, 20 log-spaced checkpoints from step 200, 1000 samples per checkpoint) with its
`data_seed` (which draws the N training images and the held-out set) set. Data seed 0 *is* the scaling
run of the same training seed (same TrainConfig, same run directory <out>/two_clocks/<name>, same
export in <results>/scaling_<preset>/), so it is reused, never trained twice; the other data seeds
train to <out>/data_draws/<name> and export to <results>/data_draws_<preset>/<name>.npz.

The preset's `large_N` runs (data seed 0, every training seed) ask item 5's other question: does a larger N
let G = 3 reach the rule reliably? (G = 3 at N = 480 and 960: 60 000 and 120 000 steps, the recipe's 12 000
views per image; ≈ 45 and 90 min each on one idle thread.) They train after the grid and export to
data_draws_<preset>/ (they are not scaling runs). `large_N_draws` (G, N, data seed) at training seed 0 ask whether
the first large N's answer holds beyond data seed 0 (issue 54: N = 480's 3 of 3 rests on one draw of the training
set); they train after the first large N, before the larger one.

Order: by training seed, then configuration (N = 240 before N = 120: the G factor at N = 240 needs the
most runs), then data seed, so an interrupted preset has the widest data × seed grid it can. The CPU
preset: G = 2 and 3 at N = 240 (30 000 steps, ≈ 23 min on one idle thread) and G = 2 at N = 120
(15 000 steps, ≈ 14 min), 3 data seeds × 3 training seeds: 27 runs, 9 of them the scaling runs,
18 new ≈ 3.2 h on 2 idle cores; then the 6 large-N runs, ≈ 4.1 h more.
"""
from scoreprobe.studies import recipes as scaling_grid

PRESETS = {
    "smoke": dict(scaling="smoke", configs=[(2, 8), (3, 8)], data_seeds=[0, 1], seeds=[0, 1], jobs=1,
                  large_N=[(3, 16)], large_N_draws=[(3, 16, 1)]),
    "cpu": dict(scaling="cpu", configs=[(2, 240), (3, 240), (2, 120)], data_seeds=[0, 1, 2], seeds=[0, 1, 2], jobs=2,
                large_N=[(3, 480), (3, 960)], large_N_draws=[(3, 480, 1), (3, 480, 2)]),
    "gpu": dict(scaling="gpu", configs=[(2, 256), (3, 256), (2, 128)], data_seeds=[0, 1, 2, 3, 4],
                seeds=[0, 1, 2, 3, 4], jobs=1, large_N=[(3, 512), (3, 1024)],
                large_N_draws=[(3, 512, d) for d in (1, 2, 3, 4)]),
}


def group_name(G, N):
    return f"g{G}-n{N}"


def draw_run(args, G, N, data_seed, seed, scaling_run=True):
    """The parity run at `data_seed` (scoreprobe.studies.recipes.data_seed_run)."""
    return scaling_grid.data_seed_run(args, G, N, data_seed, seed, shared=scaling_run)


def plan(preset):
    """The runs of `preset` in the order they train (see the module docstring)."""
    p = PRESETS[preset]
    args = scaling_grid.base_args(p["scaling"])
    runs = []
    for s in p["seeds"]:
        for G, N in sorted(p["configs"], key=lambda c: (-c[1], c[0])):
            runs += [draw_run(args, G, N, d, s) for d in p["data_seeds"]]
    large = [draw_run(args, G, N, 0, s, scaling_run=False) for G, N in p["large_N"] for s in p["seeds"]]
    draws = [draw_run(args, G, N, d, p["seeds"][0]) for G, N, d in p["large_N_draws"]]
    first_N = p["large_N"][0][1]   # the other data seeds at the first large N train before the larger N
    runs += [r for r in large if r.meta["N"] == first_N] + draws + [r for r in large if r.meta["N"] != first_N]
    for r in runs:
        r.axes = ("data",)
    return runs


def export_folder(results, preset, run):
    """Where `run`'s export lives: the scaling study's folder for its own runs (data seed 0), else ours."""
    name = PRESETS[preset]["scaling"]
    return results / (f"scaling_{name}" if run.meta["scaling_run"] else f"data_draws_{name}")
