"""Data draws × training seeds (issue 36 items 1 and 5, issue 54): the variance of τ_rule and τ_mem split into the
training set's part (data seed) and the initialisation's part (training seed), and the G factor at
N = 240 over every (data seed, training seed) run with both variance components in its interval.

Trains every run of a preset (grid.py) `--jobs` at a time in one-thread worker processes, measures the
clocks of every checkpoint and exports each run as analyses/scaling does (one .npz per run, tens of KB);
after every finished run the tables are rewritten from the exports:

  <results>/data_draws_<preset>/<run>.npz   runs at data seeds ≥ 1 (data seed 0: scaling_<preset>/)
  <results>/data_draws_<preset>.md/.json    every table (runs not yet done are listed as such)
  <results>/data_draws_<preset>.png         τ per (data seed, training seed), pooled, per configuration

Usage:
  python analyses/data_draws --jobs 2         # the CPU preset: 33 runs (9 reused): the 3 grids ≈ 3.2 h on 2 idle
                                              # cores, G = 3 at N = 480 and 960 ≈ 3.4 h more (plan rates; ≈ 2×
                                              # that observed with two runs in parallel)
  python analyses/data_draws --smoke          # 10 toy runs: ≈ 1 min
  python analyses/data_draws --from-results   # every table and figure from the .npz files, seconds
  python analyses/data_draws --plan           # the run list, order and estimated time, nothing run

Statistics: docs/definitions.md and scoreprobe.stats.seeds.pool_seeds with (data seed × training seed)
points: a two-level random-effects split of ln τ (var_data, var_init); the G factor from
scoreprobe.stats.crossed_arms (both arms crossed, both components) with every interval's coverage simulated at this
design, its verdict from scoreprobe.stats.verdict (the paper's threshold first), bounds against the comparison
arm's CI end and the censored estimate (scoreprobe.stats.censored) where some runs do not cross.
"""
import logging

from analyses.data_draws import grid as grid_mod
from scoreprobe.cli import study as study_cli

logger = logging.getLogger("data_draws")


def describe(run):
    return f"data seed {run.meta['data_seed']} training seed {run.seed}"


def main(argv=None):
    study_cli.run_study(argv, __doc__, grid_mod, describe, "analyses.data_draws.tables", logger)


if __name__ == "__main__":
    main()
