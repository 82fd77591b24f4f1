"""The run grid of the GPT–DiT match: a learning-rate sweep of each model on the tuning split, then training
seeds at each model's chosen rate on the evaluation split.

Models: the grid's DiT (width 80, depth 4, `scoreprobe.studies.recipes.parity_run`: two_clocks' recipe) and the
matched GPT (MATCHED_GPT, `scoreprobe.studies.recipes.gpt_run`, the scaling study's GPT budget: 3000 steps,
checkpoints from step 50) in patch, raster and random token order; every GPT order is its own model here and
gets its own sweep. Splits: the same rule, N and held-out size, drawn with another data seed (TrainConfig
.data_seed: the N training images and the held-out set):

  tuning split      data seed 1, training seed 0: the sweep (3 learning rates per model); the choice
                    (`choices`, analyses.gpt_dit_match.lr_choice) reads these runs only
  evaluation split  data seed 0 (the scaling study's split): the chosen rate, the preset's training seeds

A run whose TrainConfig equals a run of another study *is* that run (same name, run directory and export
folder), reused, never trained twice: the DiT at lr 2e-3 on the evaluation split is the scaling parity run
(g2-n120, -s1, -s2), the patch- and raster-order GPTs at lr 1e-3 there are the scaling GPT runs, and the DiT
at lr 2e-3 on the tuning split is the data_draws run g2-n120-d1-s0. Others train to <out>/gpt_dit_match/<name>
and export to <results>/gpt_dit_match_<preset>/<name>.npz.

The evaluation runs depend on the choice: before the sweep is exported, `plan` lists them at the middle rate
of each sweep, marked pending (their cost does not depend on the rate).
"""
import dataclasses

from analyses.gpt_dit_match import lr_choice
from scoreprobe.studies import recipes as scaling_grid

MODELS = ("dit", "gpt-patch", "gpt-raster", "gpt-random")
LABELS = {"dit": "DiT", "gpt-patch": "GPT patch order", "gpt-raster": "GPT raster order", "gpt-random": "GPT random order"}
# the learning-rate criterion (stated before any run): τ_rule at rule accuracy 0.8, not the paper's 0.9: the DiT at
# G = 2, N = 120 peaks at 0.89–0.96 over seeds (analyses/results/scaling_cpu.md), so 0.9 would leave its sweep to
# the tie rule (analyses.gpt_dit_match.lr_choice)
TUNE_THRESHOLD = 0.8
DIT_LRS, GPT_LRS = [1e-3, 2e-3, 4e-3], [5e-4, 1e-3, 2e-3]   # factors of 2 around each model's rate so far
PRESETS = {
    "smoke": dict(scaling="smoke", G=2, N=8, models=["dit", "gpt-patch", "gpt-random"], lrs={"dit": DIT_LRS[:2],
                  "gpt": GPT_LRS[1:]}, tune_data_seed=1, tune_seed=0, eval_data_seed=0, seeds=[0, 1], jobs=1,
                  dense_checkpoints=8),
    "cpu": dict(scaling="cpu", G=2, N=120, models=list(MODELS), lrs={"dit": DIT_LRS, "gpt": GPT_LRS},
                tune_data_seed=1, tune_seed=0, eval_data_seed=0, seeds=[0, 1, 2], jobs=2, dense_checkpoints=48),
    "gpu": dict(scaling="gpu", G=2, N=256, models=list(MODELS), lrs={"dit": DIT_LRS, "gpt": GPT_LRS},
                tune_data_seed=1, tune_seed=0, eval_data_seed=0, seeds=[0, 1, 2, 3, 4], jobs=1, n_checkpoints=48),
}
# n_checkpoints (gpu): twice the scaling grid's, so that the common memorization band (stats.COMMON_BAND) holds
# more than the 1–4 checkpoints per run that the CPU preset's 20 give; the CPU preset keeps 20 to reuse runs.
# dense_checkpoints: the evaluation runs trained again with this many checkpoints (dense_runs), for the
# abruptness over the common band alone: at 20 checkpoints (×1.26 apart from step 50) the GPT's memorized
# share crosses 0.02–0.2 between two checkpoints in 3 of 6 patch/random-order runs, and the DiT's (×1.27 apart
# from step 200) holds 2–3 checkpoints there per seed; at 48 both are ×1.09–1.10 apart.


def lrs_of(p, model):
    return p["lrs"]["dit" if model == "dit" else "gpt"]


def gpt_overrides(p):
    """The scaling preset's GPT settings (budget, first checkpoint, size) without its learning rate."""
    over = scaling_grid.RECIPES[p["scaling"]]["gpt_overrides"].get("patch", {})
    return {k: v for k, v in over.items() if k != "lr"}


def _candidates(args, p, model, data_seed, seed):
    """Runs of other studies this one may be: the scaling run (its split) and the data_draws run (others)."""
    G, N = p["G"], p["N"]
    if model == "dit":
        return [scaling_grid.parity_run(args, G, N, seed), scaling_grid.data_seed_run(args, G, N, data_seed, seed)]
    order = model.split("-", 1)[1]
    scaling_gpt = scaling_grid.RECIPES[p["scaling"]]["gpt_overrides"].get(order, {})
    return [scaling_grid.gpt_run(args, G, N, seed, order, scaling_gpt)]


def match_run(args, p, model, lr, data_seed, seed, split):
    """One run: `model` at learning rate `lr` on data seed `data_seed` with training seed `seed`; the other
    study's own Run when a candidate has the same TrainConfig."""
    G, N = p["G"], p["N"]
    if model == "dit":
        run = scaling_grid.parity_run(args, G, N, seed)
        cfg = dataclasses.replace(run.cfg, lr=lr, data_seed=data_seed)
    else:
        run = scaling_grid.gpt_run(args, G, N, seed, model.split("-", 1)[1], {**gpt_overrides(p), "lr": lr})
        cfg = dataclasses.replace(run.cfg, data_seed=data_seed)
    if p.get("n_checkpoints"):
        cfg = dataclasses.replace(cfg, n_checkpoints=p["n_checkpoints"])
    meta = {**run.meta, "match_model": model, "lr": lr, "data_seed": data_seed, "split": split}
    for other in _candidates(args, p, model, data_seed, seed):
        if other.cfg == cfg:
            other.meta = meta
            return other
    prefix = "tune-" if split == "tuning" else ""
    group = f"{prefix}{model}-lr{lr:g}-g{G}-n{N}" + (f"-d{data_seed}" if data_seed else "")
    return scaling_grid.Run(f"{group}-s{seed}", "gpt_dit_match", group, seed, cfg, meta)


def tuning_runs(preset):
    """The sweep: every model at every rate of its grid, on the tuning split, training seed tune_seed."""
    p = PRESETS[preset]
    args = scaling_grid.base_args(p["scaling"])
    runs = [match_run(args, p, m, lr, p["tune_data_seed"], p["tune_seed"], "tuning") for m in p["models"]
            for lr in lrs_of(p, m)]
    return _tag(runs)


def eval_runs(preset, chosen):
    """Every model at its chosen rate (`chosen` {model: lr}; a model not in it: the middle of its grid, for
    --plan) on the evaluation split, by training seed then model."""
    p = PRESETS[preset]
    args = scaling_grid.base_args(p["scaling"])
    pick = {m: chosen.get(m, lrs_of(p, m)[len(lrs_of(p, m)) // 2]) for m in p["models"]}
    runs = [match_run(args, p, m, pick[m], p["eval_data_seed"], s, "evaluation") for s in p["seeds"]
            for m in p["models"]]
    return _tag(runs)


def dense_runs(preset, chosen):
    """The evaluation runs at a chosen rate (`chosen` {model: lr}, or {model: (lr, sweep rows)} as `choices`
    gives it) again, with the preset's dense_checkpoints (none when it has none): their own runs (name suffix
    -c<n>, split "dense"), read for the abruptness only. The GPT orders' first, then the DiT's (added after the
    GPT's were done: its 20 checkpoints left 2–3 in the band per seed)."""
    chosen = {m: v[0] if isinstance(v, tuple) else v for m, v in chosen.items()}
    p = PRESETS[preset]
    n = p.get("dense_checkpoints")
    if not n:
        return []
    out = []
    for run in eval_runs(preset, chosen):
        if run.meta["match_model"] not in chosen:
            continue
        cfg = dataclasses.replace(run.cfg, n_checkpoints=n)
        group = f"{run.meta['match_model']}-lr{run.meta['lr']:g}-g{p['G']}-n{p['N']}-c{n}"
        out.append(scaling_grid.Run(f"{group}-s{run.seed}", "gpt_dit_match", group, run.seed, cfg,
                                    {**run.meta, "split": "dense"}))
    return _tag(sorted(out, key=lambda r: r.meta["match_model"] == "dit"))


def _tag(runs):
    for r in runs:
        r.axes = ("gpt_dit_match",)
    return runs


def export_folder(results, preset, run):
    """Where `run`'s export lives: the folder of the study whose run it is."""
    name = PRESETS[preset]["scaling"]
    return results / {"two_clocks": f"scaling_{name}", "scaling": f"scaling_{name}",
                      "data_draws": f"data_draws_{name}"}.get(run.folder, f"gpt_dit_match_{preset}")


def choices(results, preset):
    """{model: (lr, sweep rows)} of every model whose whole sweep is exported under `results`, read from the
    tuning runs' exports only (analyses.gpt_dit_match.lr_choice.choices)."""
    p = PRESETS[preset]
    runs = {m: [r for r in tuning_runs(preset) if r.meta["match_model"] == m] for m in p["models"]}
    return lr_choice.choices(runs, lambda r: export_folder(results, preset, r), p["tune_data_seed"], TUNE_THRESHOLD)


def phases(results, preset):
    """(tuning runs, evaluation runs at a chosen rate, pending evaluation runs of the models whose sweep is not
    done, dense runs, the choices {model: (lr, sweep rows)}) as the sweep's exports under `results` have them now."""
    chosen = choices(results, preset)
    runs = eval_runs(preset, {m: lr for m, (lr, _) in chosen.items()})
    ready = [r for r in runs if r.meta["match_model"] in chosen]                  # a chosen rate
    pending = [r for r in runs if r.meta["match_model"] not in chosen]            # their sweep is not done
    return tuning_runs(preset), ready, pending, dense_runs(preset, chosen), chosen
