"""The run grid of analyses/capacity_exponent: parity G = 2 DiTs of three sizes × N × training seeds.

Every run is the scaling study's parity recipe (`scoreprobe.studies.recipes.sized_run`: two_clocks' 12 000 views
per training image, 20 log-spaced checkpoints from step 200, 1000 samples per checkpoint, data seed 0) with
the DiT's width and depth set. A run the scaling study plans (the 80×4 DiT at every N, the 128×4 DiT at
N = 120) *is* that run: same TrainConfig, its export in <results>/scaling_<preset>/ is reused, never trained
twice; the others train to <out>/scaling/<name> and export to <results>/capacity_exponent_<preset>/.

The question (issue 54 item 6): b of τ_mem ∝ N^b is 1.30 [1.20, 1.40] for the 0.51M DiT at N = 30…120,
while Bonnaire et al. 2025 and Favero et al. 2025 report b = 1. If b > 1 comes from capacity (N near the
size n* above which a model can no longer memorize), b should fall toward 1 as the model grows.

Order (an interrupted preset has the most informative grid it can): the 1.27M DiT at N = 30 and 60 (its
N = 120 runs are the scaling study's), every seed: b for a second size over the same N; then the 2.83M
DiT at N = 30, 60, 120 seed by seed; then N = 240 for both new sizes (30 000 steps each, the longest).
CPU preset: 27 runs, 5 reused; ≈ 17 thread-hours at the plan's rates (`--plan`), i.e. ≈ 9 h on 2 cores:
more than one session: a session starts only the runs it can finish (`--hours`); a run cut off resumes from its
run directory in runs/ (kept between sessions here, not guaranteed elsewhere). The GPU preset extends it: the
scaling GPU recipe (batch 256, 14 000 views per image), N = 32…512, four sizes up to 5.0M, 5 seeds (not timed: no
GPU here).
"""
from scoreprobe.studies import recipes as scaling_grid
from scoreprobe.studies.export import load_exports

PRESETS = {
    "smoke": dict(scaling="smoke", G=2, Ns=[8, 16], sizes=[[32, 4], [16, 1]], seeds=[0], long_N=[], jobs=1),
    "cpu": dict(scaling="cpu", G=2, Ns=[30, 60, 120], sizes=[[80, 4], [128, 4], [192, 4]], seeds=[0, 1, 2],
                long_N=[240], jobs=2),
    "gpu": dict(scaling="gpu", G=2, Ns=[32, 64, 128, 256], sizes=[[80, 4], [128, 4], [192, 4], [256, 4]],
                seeds=[0, 1, 2, 3, 4], long_N=[512], jobs=1),
}


# Runs of a preset whose training blows up under its recipe: not trained again, never exported, excluded from every
# fit and named in the tables (scoreprobe.studies.divergence finds them: a spike training does not recover from; a
# spike it recovers from, as the 1.27M DiT's at N = 240, seed 1, is kept and named in the md).
DIVERGED = {"cpu": {"w192d4-g2-n120-s2": (
    "diverged at step 10,700 (loss 0.105, then 1.1, 14, 214 and 1.0: a network that predicts nothing, still at 1.0 "
    "when its training ended at step 15,000, so it never recovered); an "
    "uninterrupted retrain from scratch (2026-12-05) repeated the first 12,200 steps of its log bit for bit, the "
    "blow-up included, so it comes from the recipe (lr 2e-3 without warm-up at 2.83M parameters), not from the "
    "resume at step 10,000")}}


def group_name(width, depth, N):
    return f"w{width}d{depth}-n{N}"


def _run(args, G, N, seed, width, depth):
    run = scaling_grid.sized_run(args, G, N, seed, width, depth)
    run.meta = {**run.meta, "size": f"{width}x{depth}"}
    run.axes = ("capacity_exponent",)
    return run


def plan(preset):
    """The runs of `preset` in the order they train (see the module docstring), less those that diverged."""
    p = PRESETS[preset]
    args = scaling_grid.base_args(p["scaling"])
    (w0, d0), *bigger = p["sizes"]
    first = [_run(args, p["G"], N, s, w0, d0) for N in p["Ns"] for s in p["seeds"]]   # mostly the scaling runs
    runs = list(first)
    for k, (w, d) in enumerate(bigger):
        if k == 0:   # the second size: every seed at the small N first
            runs += [_run(args, p["G"], N, s, w, d) for N in p["Ns"] for s in p["seeds"]]
        else:
            runs += [_run(args, p["G"], N, s, w, d) for s in p["seeds"] for N in p["Ns"]]
    runs += [_run(args, p["G"], N, s, w, d) for N in p["long_N"] for w, d in p["sizes"] for s in p["seeds"]]
    seen, out = set(DIVERGED.get(preset, {})), []
    for r in runs:
        if r.name not in seen:
            seen.add(r.name)
            out.append(r)
    return out


def export_folder(results, preset, run):
    """Where `run`'s export lives: the scaling study's folder for a run it shares with it (the recipe's own
    parity runs, and any run whose export with this TrainConfig is there already), else ours."""
    name = PRESETS[preset]["scaling"]
    shared = results / f"scaling_{name}"
    if run.folder == "two_clocks" or run.name in load_exports([run], shared)[0]:
        return shared
    return results / f"capacity_exponent_{name}"
