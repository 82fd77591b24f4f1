"""The run grid of the remedies where the baseline learns (issue 36 item 6): parity G = 3 at the scaling
study's N and budget, the baseline and each remedy, training seeds.

Every run is the scaling study's parity run (`scoreprobe.studies.recipes.parity_run`: two_clocks' recipe, 12 000
views per image, 20 log-spaced checkpoints from step 200, 1000 samples per checkpoint) with one switch:

  baseline          none: it *is* the scaling run g3-n240(-s1, -s2) (same TrainConfig, run directory
                    <out>/two_clocks/<name>, export <results>/scaling_<preset>/<name>.npz), reused, never
                    trained twice
  global_token      TrainConfig.global_token (a register token broadcast to every token)
  multiplicative    TrainConfig.multiplicative (GLU MLPs at the plain MLP's parameter count)
  curriculum        curriculum "2:3:S": until step S = a quarter of the steps, the minibatches come from N
                    *other* images (`scoreprobe.data.curriculum.curriculum_bits`: every pair of each group of 3
                    even, its third pixel 0; none of them held out), then from the run's training set
  curriculum_mixed  the curriculum's control, curriculum "2:3:S:mixed": the same N extra images and, in
                    expectation, the same number of draws of each image of both sets (every minibatch item
                    from the extra images with probability S / total steps), at every step: the curriculum's
                    data and compute without its order (TrainConfig.curriculum_mix)

The curriculum changes the training data (N extra images, a quarter of the draws, and so 3/4 of the
baseline's views of each training image), not the loss: the DSM loss and its target are the baseline's.
Its control therefore keeps the data and the draws and removes only the ordering.

Order: by training seed, then variant, so an interrupted preset has whole seeds; each new run trains to
<out>/remedies/<name> and exports to <results>/remedies_<preset>/<name>.npz.
"""
import dataclasses

from scoreprobe.studies import recipes as scaling_grid

PRESETS = {
    "g3-smoke": dict(scaling="smoke", G=3, N=8, seeds=[0, 1], jobs=1),
    "g3": dict(scaling="cpu", G=3, N=240, seeds=[0, 1, 2], jobs=2),
    "g3-gpu": dict(scaling="gpu", G=3, N=256, seeds=[0, 1, 2, 3, 4], jobs=1),
}
VARIANTS = ("baseline", "global_token", "multiplicative", "curriculum", "curriculum_mixed")
CURRICULUM_G = 2          # pieces of 2 inside groups of 3 (the only tiling a group of 3 has)
CURRICULUM_SHARE = 0.25   # the first phase: a quarter of the steps (analyses/remedies' default)
# (variant, reference): the family of comparisons, Holm-adjusted together at each threshold (the curriculum from
# its switch: its τ less the first phase's steps, added after the first seed was read)
COMPARISONS = (("global_token", "baseline"), ("multiplicative", "baseline"), ("curriculum", "baseline"),
               ("curriculum_mixed", "baseline"), ("curriculum", "curriculum_mixed"),
               ("curriculum_since_switch", "baseline"))


def switch_step(total_steps):
    """The step at which the curriculum's first phase ends (CURRICULUM_SHARE of the steps)."""
    return max(1, int(total_steps * CURRICULUM_SHARE))


def switches(variant, cfg, G):
    """The TrainConfig fields `variant` sets on the baseline config `cfg` (parity with G)."""
    if variant == "baseline":
        return {}
    if variant in ("global_token", "multiplicative"):
        return {variant: True}
    switch = switch_step(cfg.total_steps)
    return {"curriculum": f"{CURRICULUM_G}:{G}:{switch}" + (":mixed" if variant == "curriculum_mixed" else "")}


def variant_run(args, G, N, variant, seed):
    """The scaling parity run with `variant`'s switch (baseline: the scaling run itself)."""
    run = scaling_grid.parity_run(args, G, N, seed)
    run.meta = {**run.meta, "variant": variant, "data_seed": run.cfg.data_seed}
    if variant == "baseline":
        return run
    group = f"g{G}-n{N}-{variant.replace('_', '-')}"
    cfg = dataclasses.replace(run.cfg, **switches(variant, run.cfg, G))
    return scaling_grid.Run(f"{group}-s{seed}", "remedies", group, seed, cfg, run.meta)


def plan(preset):
    """The runs of `preset` in the order they train (see the module docstring)."""
    p = PRESETS[preset]
    args = scaling_grid.base_args(p["scaling"])
    runs = [variant_run(args, p["G"], p["N"], v, s) for s in p["seeds"] for v in VARIANTS]
    for r in runs:
        r.axes = ("remedies",)
    return runs


def export_folder(results, preset, run):
    """Where `run`'s export lives: the scaling study's folder for the baseline (the same run), else ours."""
    return results / (f"scaling_{PRESETS[preset]['scaling']}" if run.meta["variant"] == "baseline"
                      else f"remedies_{preset}")
