"""The run grid of analyses/scaling: presets, the runs of every axis, their order and their budget.

A run is a `scoreprobe.studies.recipes.Run` (name, TrainConfig, the folder under --out, the configuration it
belongs to, its axes), made by the shared recipes (`parity_run`, `sized_run`, `rule_run`, `gpt_run`). Parity
DiT runs are the two_clocks recipe's (run directories <out>/two_clocks/<name>), so the runs two_clocks trained
are reused; the others go to <out>/scaling/<name>. Runs are ordered by `Run.rank`: the N axis at G = 2 and the G axis first (every
seed), then one round per seed of the remaining configurations, most important claim first, so an
interrupted preset has already produced the tables that matter most.

SIZING of the CPU preset (51 runs, 3 seeds of every configuration, ≈ 5.9 h on 2 idle cores, two one-thread
runs at a time; `budget` at the rates below: the 42 exports with both times recorded took 0.96× their
estimate; the rates: scoreprobe/studies/recipes.py) — each choice and what it costs:
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
from scoreprobe.studies.recipes import (RECIPES, Run, base_args, budget, gpt_run, parity_run,  # noqa: F401
                                        rule_run, run_seconds, sized_run)

AXES = ("N", "G", "rules", "puzzles", "gpt", "capacity")
# the CPU preset on 2 cores. Issue 25 item 9 asks ≈ 5 h; item 1 asks ≥ 3 seeds for every configuration. Two
# seeds for G = 4, the 1.27M DiT, exact-K, row-K and Latin would fit 5.0 h; their third seeds cost 0.9 h more.
CPU_BUDGET_H = 5.9


def _preset(recipe, **axes):
    """A preset: the shared recipe's settings (scoreprobe.studies.recipes.RECIPES, named by "scaling" as every
    study's preset names its recipe) and this study's axes."""
    r = RECIPES[recipe]
    return dict(scaling=recipe, base=r["base"], n_samples=r["n_samples"], n_steps=r["n_steps"], jobs=r["jobs"], **axes)


PRESETS = {
    "smoke": _preset("smoke", seeds=[0], G_axis=dict(N=8, Gs=[2, 3]), N_axis=dict(G=2, Ns=[8, 16], G3_Ns=[]),
                     capacity=dict(N=8, Gs=[2], sizes=[[16, 1], [32, 4]], seeds=[0]),
                     rules=dict(N=8, rules=[{"name": "exactk", "k": 18}]),
                     puzzles=dict(N=RECIPES["smoke"]["puzzle_N"], rules=[{"name": "sudoku", "n": 4}]),
                     gpt=dict(N=8, G=2, orders=["patch"], overrides=RECIPES["smoke"]["gpt_overrides"], seeds=[0])),
    "cpu": _preset("cpu", seeds=[0, 1, 2], G_axis=dict(N=240, Gs=[2, 3, 4]),
                   N_axis=dict(G=2, Ns=[30, 60, 120, 240], G3_Ns=[120, 240]),
                   capacity=dict(N=120, Gs=[2, 3], sizes=[[48, 2], [80, 4], [128, 4]], seeds=[0, 1, 2]),
                   rules=dict(N=120, rules=[{"name": "exactk", "k": 18}, {"name": "rowk", "k": 3}]),
                   puzzles=dict(N=RECIPES["cpu"]["puzzle_N"], rules=[{"name": "sudoku", "n": 4}, {"name": "latin", "n": 4}]),
                   gpt=dict(N=120, G=2, orders=["patch", "raster"], seeds=[0, 1, 2],
                            overrides=RECIPES["cpu"]["gpt_overrides"])),
    "gpu": _preset("gpu", seeds=[0, 1, 2, 3, 4], G_axis=dict(N=256, Gs=[2, 3, 4, 6]),
                   N_axis=dict(G=2, Ns=[32, 64, 128, 256, 512, 1024], G3_Ns=[128, 256, 512]),
                   capacity=dict(N=256, Gs=[2, 3], sizes=[[48, 2], [64, 4], [80, 4], [128, 4], [192, 6]],
                                 seeds=[0, 1, 2, 3, 4]),
                   rules=dict(N=256, rules=[{"name": "exactk", "k": 18}, {"name": "rowk", "k": 3}]),
                   puzzles=dict(N=RECIPES["gpu"]["puzzle_N"], rules=[{"name": "sudoku", "n": 4}, {"name": "latin", "n": 4}]),
                   gpt=dict(N=256, G=2, orders=["patch", "raster"], seeds=[0, 1, 2, 3, 4],
                            overrides=RECIPES["gpu"]["gpt_overrides"])),
}


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
