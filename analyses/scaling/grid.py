"""The run grid of analyses/scaling: presets, the runs of every axis, their order and their budget.

A run is a `Run` (name, TrainConfig, the folder under --out, the configuration it belongs to, its
axes). Parity DiT runs are two_clocks' own (`two_clocks.train_config`, `run_name`, run directories
<out>/two_clocks/<name>), so the runs two_clocks.py trained are reused; the others go to
<out>/scaling/<name>. Runs are ordered by `Run.rank`: the N axis at G = 2 and the G axis first (every
seed), then one round per seed of the remaining configurations, most important claim first, so an
interrupted preset has already produced the tables that matter most.

SIZING of the CPU preset (51 runs, 3 seeds of every configuration, ≈ 5.9 h on 2 idle cores, two one-thread
runs at a time; `budget` at the rates below: the 42 exports with both times recorded took 0.96× their
estimate) — each choice and what it costs:
- 3 seeds everywhere (issue 25 item 1). Two seeds for G = 4, the 1.27M DiT, exact-K, row-K and Latin
  would fit the issue's ≈ 5 h; their third seeds cost 0.9 h (51 runs instead of 45).
- every DiT run is two_clocks' recipe: 12 000 views per training image (steps = views·N/96, at least
  3000), 20 log-spaced checkpoints from step 200, 1000 samples per checkpoint. Larger N (480+) would
  test b over a wider range but costs 60 000 steps per run; b rests on N = 30…240 (one decade).
- G axis at N = 240 only (G = 2, 3, 4). G = 4 is expected not to reach rule accuracy 0.9 in 30 000
  steps: its τ_rule is a lower bound, and the factor per unit G above G = 3 only a bound.
- N axis G = 2 at N = 30, 60, 120, 240 and G = 3 at N = 120, 240, 3 seeds each.
- capacity at N = 120 (where G = 2 reaches the rule well before memorization): DiT 48×2 (0.10M
  parameters), 80×4 (0.51M, the grid's own runs), 128×4 (1.27M). 128×4 costs 1.7× a width-80 run; a factor
  12 in parameters.
- exact-K (k = 18: C(36, 18) valid images) and row-K (k = 3: 20^6) at N = 120 with the 80×4 DiT, against
  parity G = 2, 3 at N = 120.
- Sudoku 4×4 and Latin 4×4 at N = 60 (not 120: with 288 Sudoku grids, N = 120 would make 42% of a perfect
  generalizer's samples copies; at 60 it is 21% for Sudoku, 10% for Latin, so τ_mem of these rules reads
  chance copies and is not comparable to parity's); held-out = the rest of the valid set (≤ 1024).
  The family clocks (rows, columns, boxes, cells) are the point of these runs.
- matched GPT (MATCHED_GPT: width 100, depth 4, 0.49M parameters, -3.5% vs the DiT) on the g2-n120 data,
  patch order (locality comparable to the DiT's patches) and raster order (17 of 18 pairs adjacent
  tokens), 3 seeds each, checkpoints from step 50. lr 1e-3, not the DiT's 2e-3: on this split the patch-
  order GPT at 2e-3 sits at loss 0.48 (rule accuracy 0.007, no copies) from step 1200 to 2400, while at
  1e-3 its loss is 0.32 by step 200 and 0.18 by 600 (checks of 2026-12-01, seed 0); the gpt branch found
  2e-3 stable but behind 1e-3 in patch order. A GPT step costs 4× a DiT step (36 tokens vs 9), so the
  GPT trains 3000 steps (2400 views; the 0.20M GPT of gpt_clocks.py at 1e-3 memorized at 654 views), not
  the DiT's 15 000: a GPT that memorizes after 3000 steps would show τ_mem as a lower bound.
"""
import dataclasses
from types import SimpleNamespace

from analyses.two_clocks import run as two_clocks
from scoreprobe.data.rules import rule_from_spec
from scoreprobe.models.gpt import PUZZLE_RULES

AXES = ("N", "G", "rules", "puzzles", "gpt", "capacity")
PARITY = "parity"

# Throughput on one idle thread of these 2 cores (steps/s at batch 96), measured 2026-12-01 on a
# loaded machine as ratios to the width-80 DiT in the same run (80/4: 17.7 and 13.9; 48/2: 58.4;
# 128/4: 9.6; Sudoku 4x4 80/4: 18.1; GPT tiny 0.20M: 6.95) and scaled to its idle 23 steps/s
# (checkpoints/README.md). Keyed by (model, width, depth). DiTs on 4x4 puzzles (4 tokens, not 9) train
# PUZZLE_STEP_FACTOR faster: the shipped Latin / Sudoku exports ran 7500 steps in 126-234 s, 6x6 g2-n120 15 000 in
# 505-695 s, all beside a second run (≈ 1.8x).
GPT_RATE_TOKENS = 36   # the GPT rate below is for 6x6 bit images; sudoku_transpose's 16-token GPT ran 3000 steps in
# 178 s beside a DiT run (16.9 steps/s loaded) where 36 tokens would predict 5.7 idle
STEPS_PER_S = {("dit", 80, 4): 23.0, ("dit", 48, 2): 85.0, ("dit", 128, 4): 13.9, ("dit", 192, 4): 6.5,
               ("gpt", 100, 4): 5.7}
# the 192x4 DiT: 6.4 steps/s at batch 96, one thread, idle (80x4 gave 22.0 in the same run), 2026-12-05
# clocks of one checkpoint, 1000 samples, one thread: DiT 80/4 22.5 s and matched GPT 3.6 s on the loaded
# machine (same run, 2.2x slower than idle): ≈ 10 s and 1.6 s idle; other DiT sizes scaled by their step rate
CLOCK_S_PER_CKPT = {"dit": 10.0, "gpt": 1.6}
PUZZLE_STEP_FACTOR = 1.8
PUZZLE_CLOCK_FACTOR = 0.55   # 4x4 puzzles (4 tokens): Sudoku 9.6 s vs ≈ 17 s for the 80/4 DiT on 6x6, same run
# the CPU preset on 2 cores. Issue 25 item 9 asks ≈ 5 h; item 1 asks ≥ 3 seeds for every configuration. Two
# seeds for G = 4, the 1.27M DiT, exact-K, row-K and Latin would fit 5.0 h; their third seeds cost 0.9 h more.
CPU_BUDGET_H = 5.9

PRESETS = {
    "smoke": dict(base=dict(views=60, min_steps=30, n_checkpoints=5, first_checkpoint=5, n_heldout=32,
                            batch_size=16, hidden_size=32), n_samples=32, n_steps=6, seeds=[0], jobs=1,
                  G_axis=dict(N=8, Gs=[2, 3]), N_axis=dict(G=2, Ns=[8, 16], G3_Ns=[]),
                  capacity=dict(N=8, Gs=[2], sizes=[[16, 1], [32, 4]], seeds=[0]),
                  rules=dict(N=8, rules=[{"name": "exactk", "k": 18}]),
                  puzzles=dict(N=8, rules=[{"name": "sudoku", "n": 4}]),
                  gpt=dict(N=8, G=2, orders=["patch"], overrides={"patch": dict(hidden_size=16, depth=1)}, seeds=[0])),
    "cpu": dict(base=dict(views=12000, min_steps=3000, n_checkpoints=20, first_checkpoint=200, n_heldout=1024,
                          batch_size=96, hidden_size=80), n_samples=1000, n_steps=None, seeds=[0, 1, 2], jobs=2,
                G_axis=dict(N=240, Gs=[2, 3, 4]), N_axis=dict(G=2, Ns=[30, 60, 120, 240], G3_Ns=[120, 240]),
                capacity=dict(N=120, Gs=[2, 3], sizes=[[48, 2], [80, 4], [128, 4]], seeds=[0, 1, 2]),
                rules=dict(N=120, rules=[{"name": "exactk", "k": 18}, {"name": "rowk", "k": 3}]),
                puzzles=dict(N=60, rules=[{"name": "sudoku", "n": 4}, {"name": "latin", "n": 4}]),
                gpt=dict(N=120, G=2, orders=["patch", "raster"], seeds=[0, 1, 2],
                         overrides={o: dict(total_steps=3000, first_checkpoint=50, lr=1e-3) for o in ("patch", "raster")})),
    "gpu": dict(base=dict(views=14000, min_steps=20000, n_checkpoints=24, first_checkpoint=200, n_heldout=1024,
                          batch_size=256, hidden_size=80), n_samples=2000, n_steps=None, seeds=[0, 1, 2, 3, 4],
                jobs=1, G_axis=dict(N=256, Gs=[2, 3, 4, 6]), N_axis=dict(G=2, Ns=[32, 64, 128, 256, 512, 1024],
                                                                           G3_Ns=[128, 256, 512]),
                capacity=dict(N=256, Gs=[2, 3], sizes=[[48, 2], [64, 4], [80, 4], [128, 4], [192, 6]],
                              seeds=[0, 1, 2, 3, 4]),
                rules=dict(N=256, rules=[{"name": "exactk", "k": 18}, {"name": "rowk", "k": 3}]),
                puzzles=dict(N=60, rules=[{"name": "sudoku", "n": 4}, {"name": "latin", "n": 4}]),
                gpt=dict(N=256, G=2, orders=["patch", "raster"], seeds=[0, 1, 2, 3, 4],
                         overrides={o: dict(total_steps=8000, first_checkpoint=50, lr=1e-3) for o in ("patch", "raster")})),
}


@dataclasses.dataclass
class Run:
    name: str        # run directory name = export name
    folder: str      # "two_clocks" or "scaling" (under --out)
    group: str       # the configuration without the seed, e.g. "g2-n240", "w48d2-g2-n120", "gpt-patch-g2-n120"
    seed: int
    cfg: object      # TrainConfig
    meta: dict       # rule label, G, N, model, width, depth, token_order
    axes: tuple = ()
    rank: tuple = ()

    @property
    def steps(self):
        return self.cfg.total_steps


def base_args(preset, **overrides):
    """The namespace two_clocks.train_config reads (offset layout, DiT, lr 2e-3, the preset's sizes)."""
    p = PRESETS[preset]
    return SimpleNamespace(layout="offset", model="dit", size="tiny", lr=2e-3, **{**p["base"], **overrides})


def parity_run(args, G, N, seed):
    cfg = two_clocks.train_config(args, G, N, seed)
    meta = {"rule": PARITY, "G": G, "N": N, "model": "dit", "width": args.hidden_size, "depth": 4}
    return Run(two_clocks.run_name(G, N, seed), "two_clocks", two_clocks.run_name(G, N, 0), seed, cfg, meta)


def sized_run(args, G, N, seed, width, depth):
    """Parity with a DiT of `width` and `depth` (4 heads); the grid's own size is the parity run itself."""
    if (width, depth) == (args.hidden_size, 4):
        return parity_run(args, G, N, seed)
    run = parity_run(args, G, N, seed)
    group = f"w{width}d{depth}-g{G}-n{N}"
    run.cfg = dataclasses.replace(run.cfg, hidden_size=width, depth=depth, num_heads=4)
    run.meta.update(width=width, depth=depth)
    return Run(f"{group}-s{seed}", "scaling", group, seed, run.cfg, run.meta)


def rule_label(spec):
    return spec["name"] + str(spec.get("k", spec.get("n", "")))


def rule_run(args, spec, N, seed):
    """Another rule (exact-K, row-K, Sudoku, Latin) at the grid's DiT; held-out set within the valid set."""
    run = parity_run(args, 2, N, seed)
    rule = rule_from_spec(spec)
    spec = {**spec, **({"shape": [6, 6]} if spec["name"] in ("exactk", "rowk") else {})}
    n_heldout = int(min(args.n_heldout, rule.n_valid - N))
    run.cfg = dataclasses.replace(run.cfg, rule=spec, n_heldout=n_heldout)
    group = f"{rule_label(spec)}-n{N}"
    meta = {**run.meta, "rule": spec["name"], "rule_label": rule_label(spec), "G": None}
    return Run(f"{group}-s{seed}", "scaling", group, seed, run.cfg, meta)


def matched_gpt():
    """MATCHED_GPT: TrainConfig fields of a GPT within 10% of the grid DiT's parameters (width 100, depth 4)."""
    from scoreprobe.training.config import MATCHED_GPT
    return dict(MATCHED_GPT)


def as_gpt(run, args, order, overrides):
    """(TrainConfig, meta) of `run` with the matched GPT reading pixels in `order` (lr: the grid's, then
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
# The plan: every axis' runs, merged by name, in order of importance
# ---------------------------------------------------------------------------------------------

CORE = ("N", "G")   # the headline claims: b of τ_mem ∝ N^b and the per-unit-G factor
# training rounds: (core?, seed position) -> round. The core's first two seeds first (seed-inclusive CIs for the
# headline claims), then the first seed of every other configuration (every table has numbers), then the
# core's third seed, then the other configurations' second and third seeds.
ROUNDS = {(True, 0): 0, (True, 1): 0, (False, 0): 1, (True, 2): 2, (False, 1): 3, (False, 2): 4}


def axis_runs(p, args):
    """{axis: [Run]} of a preset `p` (PRESETS entry); each axis lists the runs its tables read."""
    g, n, cap, gpt = p["G_axis"], p["N_axis"], p["capacity"], p["gpt"]
    seeds = p["seeds"]
    return {
        "N": [parity_run(args, G, N, s) for G, Ns in ((n["G"], n["Ns"]), (3, n["G3_Ns"])) for N in Ns
              for s in seeds],
        "G": [parity_run(args, G, g["N"], s) for G in g["Gs"] for s in seeds],
        "rules": [rule_run(args, spec, p["rules"]["N"], s) for spec in p["rules"]["rules"] for s in seeds]
        + [parity_run(args, G, p["rules"]["N"], s) for G in (2, 3) for s in seeds],
        "puzzles": [rule_run(args, spec, p["puzzles"]["N"], s) for spec in p["puzzles"]["rules"] for s in seeds],
        "gpt": [gpt_run(args, gpt["G"], gpt["N"], s, order, gpt["overrides"].get(order, {})) for order in gpt["orders"]
                for s in gpt["seeds"]] + [parity_run(args, gpt["G"], gpt["N"], s) for s in gpt["seeds"]],
        "capacity": [sized_run(args, G, cap["N"], s, w, d) for G in cap["Gs"] for w, d in cap["sizes"]
                     for s in cap["seeds"]],
    }


def plan(preset, only=AXES, args=None):
    """The runs of `only` (axes) in the order they train: Runs merged by name (axes joined), sorted by rank =
    (ROUNDS round, seed position, importance = first listing, longer first)."""
    p, args = PRESETS[preset], args or base_args(preset)
    runs, importance = {}, {}
    for axis, rs in axis_runs(p, args).items():
        for r in rs:
            run = runs.setdefault(r.name, r)
            importance.setdefault(r.group, len(importance))   # first axis, first listed: most important
            if axis in only:
                run.axes += (axis,)
    out = [r for r in runs.values() if r.axes]
    core_groups = {x.group for a, rs in axis_runs(p, args).items() if a in CORE for x in rs}
    seeds = sorted({r.seed for r in out})
    for r in out:
        pos = seeds.index(r.seed)
        r.rank = (ROUNDS.get((r.group in core_groups, pos), 5 + pos), pos, importance[r.group], -r.steps)
    return sorted(out, key=lambda r: r.rank)


def _gpt_tokens(spec):
    """Tokens a GPT reads per image of rule `spec`: a token per cell of a one-hot puzzle, else per bit."""
    C, H, W = rule_from_spec(spec).image_shape
    return H * W if spec["name"] in PUZZLE_RULES else C * H * W


def run_seconds(run, n_samples=1000):
    """Estimated one-thread seconds of a run: training at STEPS_PER_S (per token count: GPT_RATE_TOKENS,
    PUZZLE_STEP_FACTOR), clocks at CLOCK_S_PER_CKPT per checkpoint (scaled by n_samples / 1000 and, for DiT
    sizes, by their step rate; PUZZLE_CLOCK_FACTOR on 4x4 puzzles)."""
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
    return run.steps / rate + run.cfg.n_checkpoints * clock


def budget(runs, jobs, n_samples=1000):
    """{"thread_s", "wall_h" (jobs one-thread runs at a time), "steps", per axis-of-first-listing hours}."""
    secs = [run_seconds(r, n_samples) for r in runs]
    by_axis = {}
    for r, s in zip(runs, secs):
        by_axis[r.axes[0]] = by_axis.get(r.axes[0], 0.0) + s / 3600 / jobs
    return {"thread_s": sum(secs), "wall_h": sum(secs) / 3600 / jobs, "steps": sum(r.steps for r in runs),
            "runs": len(runs), "wall_h_by_axis": by_axis}
