"""The scaling claims as evidence (issue 25): seeds everywhere, the G, N and capacity axes, other rules,
constraint families, and a matched GPT; tables and figures that regenerate from shipped per-run results.

Trains every run of a preset with the project's trainer, `--jobs` runs at a time in one-thread worker
processes (or as stacked ensembles with --ensemble, the GPU default), measures the clocks of every
checkpoint (`grid.measured_clocks`, store <run dir>/clocks.zarr), exports each run's compact result
and, after every finished run, rewrites the tables from the exports:

  <out>/two_clocks/<name>/            parity DiT runs, two_clocks.py's own (reused both ways)
  <out>/scaling/<name>/               the other runs (capacity, exact-K, row-K, Sudoku, Latin, GPT)
  <results>/scaling_<preset>/<run>.npz  per run: config, parameters, steps, per-sample states (S, n) int8,
                                      constraint families (packed), novel_oracle, seconds (tens of KB)
  <results>/scaling_<preset>.md/.json every table (runs not yet done are listed as such)
  <results>/scaling_<preset>.png      τ vs G, N, parameters with seed-inclusive CIs, the paper's laws
  <results>/scaling_<preset>_curves.png  memorization curves of GPT vs DiT, family accuracies

Usage:
  python analyses/scaling --preset cpu --jobs 2      # the CPU preset: 51 runs, ≈ 5.9 h on 2 idle cores
                                                        # (estimated from one-thread rates measured here)
  python analyses/scaling --smoke                    # 7 toy runs, one of each axis: ≈ 30 s (load 7)
  python analyses/scaling --from-results             # every table and figure from the .npz files, seconds
  python analyses/scaling --only N,G --train-only    # some axes; train only
  python analyses/scaling --device cuda              # GPU preset: 125 runs (G up to 6, N up to 1024, five
                                                        # sizes, 5 seeds), DiT seeds as stacked ensembles; not
                                                        # timed (no GPU here)
  python analyses/scaling --plan                     # the run list, order and estimated time, nothing run

Statistics: τ per run with sample-level bootstrap draws (`stats.seeds.tau_draws`), pooled over seeds
by a hierarchical bootstrap (`pool_seeds`: seeds with replacement, then samples), fits across an axis
with seed-inclusive CIs (`seed_fit`), abruptness of memorization (`stats.abruptness`), why a window is
closed (`taus.window_status`), constraint-family clocks (`family_taus`). docs/definitions.md.

The CPU preset (grid.PRESETS["cpu"]; `--plan` prints the runs in order with the estimated time
by which each is done): the N axis (G = 2: N = 30…240; G = 3: N = 120, 240) and the G axis (N = 240:
G = 2, 3, 4) with two seeds first (≈ 2.0 h: b and the G factor with seed-inclusive CIs), then one seed of
exact-K, row-K, Sudoku, Latin, the GPTs and the capacity sizes (≈ 2.9 h: every table has numbers), then
the third seeds (≈ 5.9 h). The sizing choices and what each costs: grid.py's docstring.
"""
import argparse
import functools
import logging

from analyses.scaling import grid as grid_mod
from scoreprobe.cli import study as study_cli
from scoreprobe.cli.study import drive
from scoreprobe.studies import presets
from scoreprobe.studies.queue import run_queue, train_ensembles
from scoreprobe.studies.runner import run_dir, run_one, seconds_left
from analyses.scaling.tables import write_all as write_tables

logger = logging.getLogger("scaling")


def parse_args(argv=None):
    """The options every study has (scoreprobe.cli.study.parser), --only (axes) and --ensemble."""
    p = study_cli.parser(__doc__, grid_mod.PRESETS)
    p.add_argument("--only", default=",".join(grid_mod.AXES), help="axes, comma-separated: " + ", ".join(grid_mod.AXES))
    p.add_argument("--ensemble", action=argparse.BooleanOptionalAction, default=None,
                   help="train runs of one architecture and length as stacked ensembles (default: on CUDA)")
    args = study_cli.parse(p, argv, grid_mod.PRESETS)
    only = [a for a in args.only.split(",") if a]
    bad = sorted(set(only) - set(grid_mod.AXES))
    if bad:
        p.error(f"--only: unknown axes {bad}; choose from {', '.join(grid_mod.AXES)}")
    args.only = tuple(only)
    args.exports = args.results / f"scaling_{args.preset}"
    return args


def run_all(args, runs, on_done):
    """run_one over `runs` in order, `args.jobs` at a time in one-thread worker processes, or as dask tasks with
    --scheduler (scoreprobe.studies.queue.run_queue: a dead worker's run is run again and resumes); on_done(name)
    after each. A run or a table update that fails is logged and the others go on (an unattended preset must not
    stop on one). With --hours, no run starts that would not be done by then."""
    if args.ensemble:   # DiTs on 6x6 images (one architecture per group); GPTs and the 4x4 puzzles train alone
        stack = [r for r in runs if r.meta["model"] == "dit" and r.meta["rule"] not in ("sudoku", "latin")]
        train_ensembles([r.cfg for r in stack], [run_dir(args, r) for r in stack], args.device)
    run_queue(run_one, args, runs, on_done, functools.partial(seconds_left, args), args.hours,
              1 if args.ensemble else args.jobs, "scaling", args.scheduler)


def plan_lines(runs, args):
    """presets.plan_lines over the grid (runs exported already counted as done, a run that resumes by its steps left,
    `--jobs` sharing the cores), then the whole grid's cost: training steps and one-thread hours per axis."""
    b = grid_mod.budget(runs, 1, args.n_samples)   # at 1 job: one-thread hours
    lines = presets.plan_lines(runs, args, lambda r: args.exports, lambda r: f"{'(' + ', '.join(r.axes) + ')':30s}")
    axes = ", ".join(f"{axis} {h:.2f}" for axis, h in b["wall_h_by_axis"].items())
    return lines[:1] + [f"  the whole grid: {b['steps']} training steps, {b['thread_s'] / 3600:.1f} thread-hours "
                        f"({axes})"] + lines[1:]


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    runs = grid_mod.plan(args.preset, args.only)

    def train(on_done):
        args.exports.mkdir(parents=True, exist_ok=True)
        run_all(args, runs, on_done=on_done)
    drive(args, lambda: plan_lines(runs, args), train, lambda: write_tables(args, runs), logger)


if __name__ == "__main__":
    main()
