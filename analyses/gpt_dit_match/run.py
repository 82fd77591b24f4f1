"""A fair GPT–DiT match (issue 36 item 7): each model's learning rate chosen on a tuning split (another data
seed), then training seeds at that rate on the evaluation split; the GPT in patch, raster and random token
order; τ_rule and τ_mem over thresholds per step and per training FLOP; abruptness of memorization over one
common band.

Phase 1 trains the sweep (grid.tuning_runs: 3 rates per model on data seed 1); grid.choices chooses each model's
rate from those exports alone (the earliest τ_rule at 0.8); phase 2 trains the chosen rates' seeds on the
evaluation split (data seed 0); phase 3 trains the evaluation runs again with denser checkpoints
(grid.dense_runs), read for the abruptness over the common band alone. Runs train `--jobs` at a time in
one-thread worker processes and export as analyses/scaling does; the tables are rewritten after every
finished run:

  <results>/gpt_dit_match_<preset>/<run>.npz   runs of this study (reused runs: scaling_<p>/, data_draws_<p>/)
  <results>/gpt_dit_match_<preset>.md/.json    the FLOP count, the sweep and its choice, every table
  <results>/gpt_dit_match_<preset>.png         rule accuracy and memorized share per step and per FLOP

Usage:
  python analyses/gpt_dit_match --jobs 2        # the CPU preset: 36 runs, ≈ 2.7 h on 2 idle cores when the
                                                # chosen rates are those used so far (9 evaluation runs are then
                                                # the scaling runs), 3.6 h otherwise (--plan); of them the 12
                                                # dense runs (9 GPT, 3 DiT) ≈ 1.5 h
  python analyses/gpt_dit_match --smoke         # 18 toy runs (2 rates, 2 GPT orders, dense runs): ≈ 1 min
  python analyses/gpt_dit_match --from-results  # every table and the figure from the .npz files, seconds
  python analyses/gpt_dit_match --plan          # the runs in order with their estimated time, nothing run
  python analyses/gpt_dit_match --device cuda   # the GPU preset: N = 256, 8000 GPT steps, 5 seeds

Training FLOPs: scoreprobe.models.flops (matmuls of one forward from the architecture, × 3 for forward and
backward, × batch), checked against torch's FlopCounterMode in tests/test_flops.py.
"""
import importlib
import logging

from analyses.gpt_dit_match import grid as grid_mod
from scoreprobe.cli.study import drive
from scoreprobe.studies import presets
from scoreprobe.cli import study as study_cli

logger = logging.getLogger("gpt_dit_match")


def parse_args(argv=None):
    return study_cli.parse(study_cli.parser(__doc__, grid_mod.PRESETS, "smoke"), argv, grid_mod.PRESETS, "smoke")


def describe(run):
    m = run.meta
    return f"{m['split']:10s} {m['match_model']:10s} lr {m['lr']:<7g} data seed {m['data_seed']} training seed {run.seed}"


def plan_lines(args):
    tuning, ready, pending, dense, _ = grid_mod.phases(args.results, args.preset)
    lines = presets.plan_lines(tuning + ready + dense, args, study_cli.folder(grid_mod, args), describe, pending)
    return lines + (["  pending: the evaluation runs of " + ", ".join(sorted({r.meta["match_model"] for r in pending}))
                     + ", listed at the middle rate of their sweep: their rate is chosen once the sweep is exported"]
                    if pending else [])


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    tables = lambda: importlib.import_module("analyses.gpt_dit_match.tables")   # noqa: E731  (when first needed)

    def train(on_done):   # False (no tables) when --hours left part of the sweep undone
        if not presets.run_all(args, grid_mod.tuning_runs(args.preset), study_cli.folder(grid_mod, args), on_done):
            return False
        if not args.train_only:   # the chosen rates are read from the sweep's exports
            _, ready, _, dense, _ = grid_mod.phases(args.results, args.preset)
            presets.run_all(args, ready + dense, study_cli.folder(grid_mod, args), on_done)
    drive(args, lambda: plan_lines(args), train, lambda: tables().write_all(args), logger)
