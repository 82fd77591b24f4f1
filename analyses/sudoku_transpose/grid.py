"""The run grid of analyses/sudoku_transpose: architectures × data orientation × data seeds × training seeds on
4×4 Sudoku at the scaling study's puzzle N.

Every run is the scaling study's Sudoku run (`scoreprobe.studies.recipes.rule_run`: the grid DiT, 12 000 views per
image, 20 log-spaced checkpoints from step 200, held-out = min(1024, 288 − N) other grids, 1000 samples per
checkpoint) with its data seed, `transpose` (TrainConfig: the same drawn grids, each transposed, in the
training and the held-out set) and one of three architectures:

  dit         the grid DiT with 2×2 patches: its 4 tokens are the 4 boxes. Symmetric under transposition
              (a transposed grid is processed as the grid itself by the network with transposed kernels
              and swapped position halves, tests/test_dit.py).
  dit-rows    the same DiT with 1×4 patches (`patch_shape` "1x4"): its 4 tokens are the 4 image rows, so a
              row is seen inside one token and a column only across tokens. Same parameters (508 656),
              same token count, same position code: only which cells share a token differs.
  gpt-raster  scaling's matched GPT (0.49M) reading the 16 cells in raster order (row by row), with the
              scaling GPT's schedule (lr 1e-3, checkpoints from step 50, its own step budget) and four
              early checkpoints (GPT_EARLY: 10, 20, 30, 40), where it crosses the low family thresholds.

The DiT at data seed 0, untransposed, *is* the scaling run `sudoku4-n<N>-s<seed>` (same TrainConfig, run
directory <out>/scaling/<name>, export <results>/scaling_<preset>/<name>.npz): reused, never trained twice.
The others train to <out>/sudoku_transpose/<name> and export to <results>/sudoku_transpose_<preset>/.

Order: by data seed, then architecture, then training seed, the untransposed and the transposed run of a
(data seed, training seed) side by side (equal lengths: they train together with --jobs 2), so an
interrupted preset has the whole decision at data seed 0 first. CPU preset: 54 runs, 3 of them the scaling
runs, 51 new ≈ 4.3 thread-hours, ≈ 2.2 h on 2 idle cores (`--plan`: scoreprobe/studies/recipes.py's measured
one-thread rates per token count: the GPT reads 16 cell tokens, not the parity GPT's 36 bits, and the 4-token
DiTs train 1.8× faster than on 6×6; the row-patch DiT ran as fast as the square one, 12–13 vs 10–17 steps/s in
one test of 2026-12-02).

Command for the CPU preset (resumable: a rerun skips every exported run; `--hours H` starts no run that
would not end within H hours): `nice -n 10 python analyses/sudoku_transpose --jobs 2`.
"""
import dataclasses

from scoreprobe.studies import recipes as scaling_grid

SUDOKU = {"name": "sudoku", "n": 4}
ARCHS = ("dit", "dit-rows", "gpt-raster")
ARCH_LABELS = {"dit": "DiT 2×2 patches (tokens = boxes; symmetric)",
               "dit-rows": "DiT 1×4 patches (tokens = image rows)",
               "gpt-raster": "GPT raster order (cells row by row)"}
TAGS = {"dit": "sudoku4", "dit-rows": "sudoku4-rowpatch", "gpt-raster": "sudoku4-gpt-raster"}
# families a model satisfies by construction: the GPT samples one symbol per cell (its tokens are cells), so every
# cell holds exactly one symbol from step 0 and its cells clock is 0 at every threshold
BY_CONSTRUCTION = {"gpt-raster": ("cells",)}
ROW_PATCH = "1x4"
# the GPT's checkpoints before its log grid (from 50): it reads 16 cell tokens and is at family accuracy ≈ 0.5 by
# step 50 (3 runs of 2026-12-02), so without these every family threshold up to 0.5 is crossed between step 0
# and 50 and is under-resolved (scoreprobe.stats.curves.mark_under_resolved); 4 more clock checkpoints, ≈ 1 s each
GPT_EARLY = [10, 20, 30, 40]
STUDY = "sudoku_transpose"

PRESETS = {
    "smoke": dict(scaling="smoke", data_seeds=[0], seeds=[0], jobs=1,
                  gpt=dict(hidden_size=16, depth=1)),
    "cpu": dict(scaling="cpu", data_seeds=[0, 1, 2], seeds=[0, 1, 2], jobs=2,
                gpt=scaling_grid.RECIPES["cpu"]["gpt_overrides"]["raster"]),
    "gpu": dict(scaling="gpu", data_seeds=[0, 1, 2, 3, 4], seeds=[0, 1, 2, 3, 4], jobs=1,
                gpt=scaling_grid.RECIPES["gpu"]["gpt_overrides"]["raster"]),
}


def puzzle_N(preset):
    """The scaling preset's puzzle N (60 on the CPU and GPU presets)."""
    return scaling_grid.RECIPES[PRESETS[preset]["scaling"]]["puzzle_N"]


def group_name(arch, N, transposed):
    return f"{TAGS[arch]}{'-T' if transposed else ''}-n{N}"


def sudoku_run(args, arch, N, data_seed, seed, transposed, gpt_overrides):
    """One run; the untransposed DiT at data seed 0 is scaling's own Sudoku run (its name and folder)."""
    base = scaling_grid.rule_run(args, SUDOKU, N, seed)
    meta = {**base.meta, "arch": arch, "data_seed": data_seed, "transposed": bool(transposed),
            "patch": "2x2" if arch == "dit" else ROW_PATCH if arch == "dit-rows" else None}
    base.meta = meta
    if arch == "dit" and data_seed == 0 and not transposed:
        return base
    base.cfg = dataclasses.replace(base.cfg, data_seed=data_seed, transpose=bool(transposed))
    cfg = base.cfg
    if arch == "dit-rows":
        cfg = dataclasses.replace(cfg, patch_shape=ROW_PATCH)
    elif arch == "gpt-raster":
        cfg, meta = scaling_grid.as_gpt(base, args, "raster", gpt_overrides)
        cfg = dataclasses.replace(cfg, extra_checkpoints=[s for s in GPT_EARLY if s < cfg.first_step()])
    group = group_name(arch, N, transposed)
    return scaling_grid.Run(f"{group}-d{data_seed}-s{seed}", STUDY, group, seed, cfg, meta)


def plan(preset):
    """The runs of `preset` in the order they train (see the module docstring)."""
    p = PRESETS[preset]
    args = scaling_grid.base_args(p["scaling"])
    runs = [sudoku_run(args, arch, puzzle_N(preset), d, s, t, p["gpt"])
            for d in p["data_seeds"] for arch in ARCHS for s in p["seeds"] for t in (False, True)]
    for r in runs:
        r.axes = (STUDY,)
    return runs


def export_folder(results, preset, run):
    """Where `run`'s export lives: the scaling study's folder for its own runs (reused), else ours."""
    return results / (f"scaling_{PRESETS[preset]['scaling']}" if run.folder == "scaling" else f"{STUDY}_{preset}")
