"""The training recipes the studies share: which TrainConfig a run of a rule, N, G, size and seed is, its
name and folder, and its estimated cost.

A run is a `Run` (name, TrainConfig, the folder under the runs directory, the configuration it belongs to,
its axes). Two studies that plan a run of the same TrainConfig plan the same Run (same name, same run
directory), so a run is trained once and its export reused: that is how the studies share runs without
importing each other.

The parity recipe (`parity_run`, the two_clocks recipe): parity on 6x6 in the offset layout, the DiT of
width `hidden_size` and depth 4 with 2x2 patches, lr 2e-3, `views` passes over each training image (at
least `min_steps` steps), log-spaced checkpoints from `first_checkpoint`, weights stored as float16. The
other recipes change one thing in it: the DiT's size (`sized_run`), the rule (`rule_run`), the network (a
GPT of the DiT's parameter count, `gpt_run`) or the data seed (`data_seed_run`). RECIPES holds each preset's
recipe settings (smoke: toy sizes; cpu: the 2-core sizes; gpu: larger batches and budgets).

Throughput on one idle thread of the 2-core machine (steps/s at batch 96), measured 2026-12-01 on a
loaded machine as ratios to the width-80 DiT in the same run (80/4: 17.7 and 13.9; 48/2: 58.4; 128/4:
9.6; Sudoku 4x4 80/4: 18.1; GPT tiny 0.20M: 6.95) and scaled to its idle 23 steps/s
(checkpoints/README.md); the 192x4 DiT: 6.4 steps/s at batch 96, one thread, idle (80x4 gave 22.0 in the
same run), 2026-12-05. DiTs on 4x4 puzzles (4 tokens, not 9) train PUZZLE_STEP_FACTOR faster: the
shipped Latin / Sudoku exports ran 7500 steps in 126-234 s, 6x6 g2-n120 15 000 in 505-695 s, all beside
a second run (≈ 1.8x). Clocks of one checkpoint, 1000 samples, one thread: DiT 80/4 22.5 s and matched
GPT 3.6 s on the loaded machine (same run, 2.2x slower than idle): ≈ 10 s and 1.6 s idle; other DiT
sizes scaled by their step rate.
"""
import dataclasses
import math
from types import SimpleNamespace

from scoreprobe.data.rules import rule_from_spec
from scoreprobe.models.gpt import PUZZLE_RULES
from scoreprobe.training.config import TrainConfig

PARITY = "parity"
GPT_RATE_TOKENS = 36   # the GPT rate below is for 6x6 bit images; a 16-token GPT ran 3000 steps in 178 s beside
# a DiT run (16.9 steps/s loaded) where 36 tokens would predict 5.7 idle
STEPS_PER_S = {("dit", 80, 4): 23.0, ("dit", 48, 2): 85.0, ("dit", 128, 4): 13.9, ("dit", 192, 4): 6.5,
               ("gpt", 100, 4): 5.7}
CLOCK_S_PER_CKPT = {"dit": 10.0, "gpt": 1.6}
PUZZLE_STEP_FACTOR = 1.8
PUZZLE_CLOCK_FACTOR = 0.55   # 4x4 puzzles (4 tokens): Sudoku 9.6 s vs ≈ 17 s for the 80/4 DiT on 6x6, same run

# The GPT's budget: a GPT step costs 4x a DiT step (36 tokens vs 9), so it trains 3000 steps on the CPU (lr 1e-3,
# not the DiT's 2e-3: on the g2-n120 split the patch-order GPT at 2e-3 sat at loss 0.48 from step 1200 to 2400)
_GPT_CPU = dict(total_steps=3000, first_checkpoint=50, lr=1e-3)
_GPT_GPU = dict(total_steps=8000, first_checkpoint=50, lr=1e-3)
RECIPES = {
    "smoke": dict(base=dict(views=60, min_steps=30, n_checkpoints=5, first_checkpoint=5, n_heldout=32,
                            batch_size=16, hidden_size=32), n_samples=32, n_steps=6, jobs=1, puzzle_N=8,
                  gpt_overrides={"patch": dict(hidden_size=16, depth=1)}),
    "cpu": dict(base=dict(views=12000, min_steps=3000, n_checkpoints=20, first_checkpoint=200, n_heldout=1024,
                          batch_size=96, hidden_size=80), n_samples=1000, n_steps=None, jobs=2, puzzle_N=60,
                gpt_overrides={o: dict(_GPT_CPU) for o in ("patch", "raster")}),
    "gpu": dict(base=dict(views=14000, min_steps=20000, n_checkpoints=24, first_checkpoint=200, n_heldout=1024,
                          batch_size=256, hidden_size=80), n_samples=2000, n_steps=None, jobs=1, puzzle_N=60,
                gpt_overrides={o: dict(_GPT_GPU) for o in ("patch", "raster")}),
}


@dataclasses.dataclass
class Run:
    name: str        # run directory name = export name
    folder: str      # folder of the run directory under the runs directory ("two_clocks", "scaling", ...)
    group: str       # the configuration without the seed, e.g. "g2-n240", "w48d2-g2-n120", "gpt-patch-g2-n120"
    seed: int
    cfg: object      # TrainConfig
    meta: dict       # rule label, G, N, model, width, depth, token_order
    axes: tuple = ()
    rank: tuple = ()

    @property
    def steps(self):
        return self.cfg.total_steps


# ---------------------------------------------------------------------------------------------
# The parity recipe
# ---------------------------------------------------------------------------------------------

def base_args(preset, **overrides):
    """The recipe's settings of `preset` (offset layout, DiT, lr 2e-3, the preset's sizes) as a namespace."""
    return SimpleNamespace(layout="offset", model="dit", size="tiny", lr=2e-3,
                           **{**RECIPES[preset]["base"], **overrides})


def run_name(G, N, seed):
    return f"g{G}-n{N}" + (f"-s{seed}" if seed else "")


def total_steps(args, N):
    """Training steps of a run with N items: `views` passes over each image, at least `min_steps`."""
    return max(args.min_steps, math.ceil(args.views * N / args.batch_size))


def train_config(args, G, N, seed):
    """The TrainConfig of the parity recipe (`args`: base_args or any namespace with its fields)."""
    rule = {"name": "parity", "G": G, "shape": [6, 6], "layout": args.layout, "seed": 0}
    return TrainConfig(rule=rule, n_train=N, n_heldout=args.n_heldout, seed=seed, model=args.model,
                       size=args.size, hidden_size=args.hidden_size, lr=args.lr, batch_size=args.batch_size,
                       total_steps=total_steps(args, N), n_checkpoints=args.n_checkpoints,
                       first_checkpoint=args.first_checkpoint, save_dtype="float16")


def closed_window_config(c):
    """The closed-window run of the mechanism studies: parity G = 2 at N = c["N"] with the recipe's DiT (offset
    layout, lr 2e-3), its sizes from `c` (n_heldout, hidden_size, batch_size, total_steps, n_checkpoints,
    first_checkpoint); training seed 0."""
    rule = {"name": "parity", "G": 2, "shape": [6, 6], "layout": "offset", "seed": 0}
    return TrainConfig(rule=rule, n_train=c["N"], n_heldout=c["n_heldout"], seed=0, model="dit", size="tiny",
                       hidden_size=c["hidden_size"], lr=2e-3, batch_size=c["batch_size"], total_steps=c["total_steps"],
                       n_checkpoints=c["n_checkpoints"], first_checkpoint=c["first_checkpoint"], save_dtype="float16")


def config_data(cfg):
    """What a run of TrainConfig `cfg` trains on, without a model: an object with .dataset (the trainer's
    make_dataset of cfg's sizes and data seed) and .rule."""
    from scoreprobe.data.datasets import make_dataset
    rule = rule_from_spec(cfg.rule)
    return SimpleNamespace(dataset=make_dataset(rule, cfg.n_train, cfg.n_heldout, cfg.data_seed), rule=rule)


def parity_run(args, G, N, seed):
    cfg = train_config(args, G, N, seed)
    meta = {"rule": PARITY, "G": G, "N": N, "model": "dit", "width": args.hidden_size, "depth": 4}
    return Run(run_name(G, N, seed), "two_clocks", run_name(G, N, 0), seed, cfg, meta)


def sized_run(args, G, N, seed, width, depth):
    """Parity with a DiT of `width` and `depth` (4 heads); the recipe's own size is the parity run itself."""
    if (width, depth) == (args.hidden_size, 4):
        return parity_run(args, G, N, seed)
    run = parity_run(args, G, N, seed)
    group = f"w{width}d{depth}-g{G}-n{N}"
    run.cfg = dataclasses.replace(run.cfg, hidden_size=width, depth=depth, num_heads=4)
    run.meta.update(width=width, depth=depth)
    return Run(f"{group}-s{seed}", "scaling", group, seed, run.cfg, run.meta)


def data_seed_run(args, G, N, data_seed, seed, shared=True):
    """The parity run at `data_seed` (which draws the N training images and the held-out set); data seed 0 is
    the parity run itself (its name and folder; meta "scaling_run" says so unless `shared` is False: a run of
    the same recipe that the scaling study does not plan)."""
    run = parity_run(args, G, N, seed)
    run.meta = {**run.meta, "data_seed": data_seed, "scaling_run": data_seed == 0 and shared}
    if data_seed == 0:
        return run
    cfg = dataclasses.replace(run.cfg, data_seed=data_seed)
    return Run(f"g{G}-n{N}-d{data_seed}-s{seed}", "data_draws", f"g{G}-n{N}", seed, cfg, run.meta)


def rule_label(spec):
    return spec["name"] + str(spec.get("k", spec.get("n", "")))


def rule_run(args, spec, N, seed):
    """Another rule (exact-K, row-K, Sudoku, Latin) at the recipe's DiT; held-out set within the valid set."""
    run = parity_run(args, 2, N, seed)
    rule = rule_from_spec(spec)
    spec = {**spec, **({"shape": [6, 6]} if spec["name"] in ("exactk", "rowk") else {})}
    n_heldout = int(min(args.n_heldout, rule.n_valid - N))
    run.cfg = dataclasses.replace(run.cfg, rule=spec, n_heldout=n_heldout)
    group = f"{rule_label(spec)}-n{N}"
    meta = {**run.meta, "rule": spec["name"], "rule_label": rule_label(spec), "G": None}
    return Run(f"{group}-s{seed}", "scaling", group, seed, run.cfg, meta)


def matched_gpt():
    """MATCHED_GPT: TrainConfig fields of a GPT within 10% of the recipe DiT's parameters (width 100, depth 4)."""
    from scoreprobe.training.config import MATCHED_GPT
    return dict(MATCHED_GPT)


def as_gpt(run, args, order, overrides):
    """(TrainConfig, meta) of `run` with the matched GPT reading pixels in `order` (lr: the recipe's, then
    `overrides`) instead of the DiT."""
    fields = {**matched_gpt(), "lr": args.lr, **overrides, "model": "gpt", "token_order": order}
    meta = {**run.meta, "model": "gpt", "token_order": order, "width": fields.get("hidden_size"),
            "depth": fields.get("depth")}
    return dataclasses.replace(run.cfg, **fields), meta


def gpt_run(args, G, N, seed, order, overrides):
    cfg, meta = as_gpt(parity_run(args, G, N, seed), args, order, overrides)
    group = f"gpt-{order}-g{G}-n{N}"
    return Run(f"{group}-s{seed}", "scaling", group, seed, cfg, meta)


# ---------------------------------------------------------------------------------------------
# What a run costs
# ---------------------------------------------------------------------------------------------

def _gpt_tokens(spec):
    """Tokens a GPT reads per image of rule `spec`: a token per cell of a one-hot puzzle, else per bit."""
    C, H, W = rule_from_spec(spec).image_shape
    return H * W if spec["name"] in PUZZLE_RULES else C * H * W


def run_seconds(run, n_samples=1000, trained=0):
    """Estimated one-thread seconds of a run: training at STEPS_PER_S (per token count: GPT_RATE_TOKENS,
    PUZZLE_STEP_FACTOR), clocks at CLOCK_S_PER_CKPT per checkpoint (scaled by n_samples / 1000 and, for DiT
    sizes, by their step rate; PUZZLE_CLOCK_FACTOR on 4x4 puzzles). `trained`: steps already trained (a run that
    resumes, `runner.trained_steps`): only the steps left count; the clocks all come after training."""
    m = run.meta
    rate = STEPS_PER_S.get((m["model"], m["width"], m["depth"]))
    if rate is None:   # a size not measured: cost ∝ width² · depth from the width-80 DiT
        rate = STEPS_PER_S[("dit", 80, 4)] * (80 / m["width"]) ** 2 * 4 / m["depth"]
    ref = STEPS_PER_S[("dit", 80, 4)] if m["model"] == "dit" else rate
    clock = CLOCK_S_PER_CKPT[m["model"]] * n_samples / 1000 * ref / rate
    clock *= PUZZLE_CLOCK_FACTOR if m["rule"] in PUZZLE_RULES else 1.0
    if m["model"] == "gpt":   # measured on 36 tokens; a step costs ∝ tokens (16 cell tokens of a 4x4 puzzle)
        rate *= GPT_RATE_TOKENS / _gpt_tokens(run.cfg.rule)
    elif m["rule"] in PUZZLE_RULES:
        rate *= PUZZLE_STEP_FACTOR
    return max(run.steps - trained, 0) / rate + run.cfg.n_checkpoints * clock


def budget(runs, jobs, n_samples=1000):
    """{"thread_s", "wall_h" (jobs one-thread runs at a time), "steps", per axis-of-first-listing hours}."""
    secs = [run_seconds(r, n_samples) for r in runs]
    by_axis = {}
    for r, s in zip(runs, secs):
        by_axis[r.axes[0]] = by_axis.get(r.axes[0], 0.0) + s / 3600 / jobs
    return {"thread_s": sum(secs), "wall_h": sum(secs) / 3600 / jobs, "steps": sum(r.steps for r in runs),
            "runs": len(runs), "wall_h_by_axis": by_axis}
