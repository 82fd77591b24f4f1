"""An exact-K ladder against parity (issue 36 item 4): exact-K k = 3, 9, 18 of the 36 pixels of 6×6 images and
parity G = 2, 3, 4 at the same N (240 on CPU) with the same model (the scaling study's 80×4 DiT recipe), with
the **count error** |Σ bits − k| of every sample at every checkpoint beside exact accuracy, and the chance
levels of every rule (uniformly random bits, exact) beside the measured accuracy at step 0.

Trains every run not yet exported (grid.py: the parity runs are the scaling study's own and are reused as
exported; the exact-K runs are new), `--jobs` at a time in one-thread worker processes (or as stacked
ensembles with --ensemble, the GPU default), measures the clocks of every checkpoint with the bits kept, and
exports each run (one .npz, tens of KB, with each sample's Σ bits: export version 2,
scoreprobe/studies/export.py); after every finished run the tables are rewritten from the exports:

  <results>/exactk_ladder_<preset>/<run>.npz   exact-K runs (parity: scaling_<preset>/, the scaling study's)
  <results>/exactk_ladder_<preset>.md/.json    every table (runs not yet done are listed as such)
  <results>/exactk_ladder_<preset>.png         accuracy per rule, count error per k, chance levels dashed

Usage:
  python analyses/exactk_ladder --jobs 2       # the CPU preset: 18 runs, 9 reused; 9 new ≈ 2.1 h on 2 idle cores
  python analyses/exactk_ladder --smoke        # 12 toy runs (N = 8, 2 seeds): ≈ 1 min
  python analyses/exactk_ladder --from-results # every table and figure from the .npz files, seconds
  python analyses/exactk_ladder --plan         # the run list, order and estimated time, nothing run
  python analyses/exactk_ladder --device cuda  # GPU preset: N = 256, 5 seeds, exact-K as stacked ensembles

The choice of N, the budget and what the other N would cost: grid.py's docstring. Statistics: τ over
thresholds (scoreprobe/stats/curves.py: pooled t intervals over training seeds, Welch ratios, verdicts that
hold at every readable threshold), the count error (`scoreprobe.probes.counts`, docs/definitions.md "Count
error and chance levels"), Clopper–Pearson intervals for the step-0 accuracy.
"""
import argparse
import copy
import functools
import importlib
import logging

from analyses.exactk_ladder import grid as grid_mod
from scoreprobe.cli import study as study_cli
from scoreprobe.cli.study import drive
from scoreprobe.studies import presets
from scoreprobe.studies import runner as scaling_run
from scoreprobe.studies.queue import run_queue, throttled, train_ensembles

logger = logging.getLogger("exactk_ladder")
WRITE_EVERY_S = 300   # rewrite the tables after a finished run at most this often (and always at the end): a
# CPU-preset run takes ≈ 25 min, so after every run there; a smoke run seconds: once, at the end


def parse_args(argv=None):
    p = study_cli.parser(__doc__, grid_mod.PRESETS)
    p.add_argument("--ensemble", action=argparse.BooleanOptionalAction, default=None,
                   help="train the runs as stacked ensembles (default: on CUDA)")
    return study_cli.parse(p, argv, grid_mod.PRESETS)


def run_one(args, run):
    """scaling's run_one (train or resume, clocks, export) into the run's own export folder; exact-K runs
    keep the bits, so that their export holds each sample's Σ bits."""
    a = copy.copy(args)
    a.keep_bits = grid_mod.has_counts(run)
    return presets.run_one(a, run, folder_of(args)(run))


def folder_of(args):
    """run -> the export folder it is written to (the first of grid.export_folders)."""
    return lambda run: grid_mod.export_folders(args.results, args.preset, run)[0]


def run_all(args, runs, on_done):
    """run_one over the runs not yet exported to their own folder with the same TrainConfig (an exact-K export of
    the scaling study, without Σ bits, is not: the run is measured again, its training skipped when its run
    directory is there), through scoreprobe.studies.queue.run_queue (`args.jobs` at a time, a run starting when a
    worker is free, none past --hours), or trained first as stacked ensembles with --ensemble; on_done(name) after
    each (a failure is logged, the rest go on)."""
    done = presets.exported(runs, folder_of(args))
    runs = [r for r in runs if r.name not in done]
    if args.ensemble and runs:
        train_ensembles([r.cfg for r in runs], [scaling_run.run_dir(args, r) for r in runs], args.device)
    return run_queue(run_one, args, runs, on_done, functools.partial(scaling_run.seconds_left, args), args.hours,
                     1 if args.ensemble else args.jobs, "exactk_ladder", args.scheduler)


def describe(run):
    return f"{grid_mod.label(run):16s} training seed {run.seed} data seed {run.cfg.data_seed}"


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    runs = grid_mod.plan(args.preset)

    def train(on_done):
        run_all(args, runs, throttled(on_done, WRITE_EVERY_S))
    plan = lambda: presets.plan_lines(runs, args, folder_of(args), describe)   # noqa: E731
    tables = lambda: importlib.import_module("analyses.exactk_ladder.tables")   # noqa: E731  (when first needed)
    drive(args, plan, train, lambda: tables().write_all(args, runs), logger)


if __name__ == "__main__":
    main()
