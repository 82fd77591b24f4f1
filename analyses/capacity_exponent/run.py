"""τ_mem ∝ N^b per model size (issue 54 item 6): does b fall toward the field's 1 as the DiT grows?

Trains every run of a preset (grid.py) `--jobs` at a time in one-thread worker processes, measures the
clocks of every checkpoint and exports each run as analyses/scaling does (one .npz per run, tens of KB);
after every finished run the tables are rewritten from the exports:

  <results>/capacity_exponent_<preset>/<run>.npz   runs the scaling study does not plan (its own: scaling_<preset>/)
  <results>/capacity_exponent_<preset>.md/.json    b per size over thresholds, with its interval
  <results>/capacity_exponent_<preset>.png         τ_mem vs N per size, the fitted lines, the field's b = 1

Usage:
  python analyses/capacity_exponent --jobs 2 --hours 2   # the CPU preset, the runs that fit in 2 h
  python analyses/capacity_exponent --smoke              # 4 toy runs: ≈ 30 s
  python analyses/capacity_exponent --from-results       # every table and figure from the .npz files, seconds
  python analyses/capacity_exponent --plan               # the run list, order and estimated time, nothing run
  python -m analyses.capacity_exponent.log_meta          # record each run's training start and recovered loss
                                                         # spikes (from its log) in exports made before the runner did

Statistics: b is the slope of ln τ_mem on ln N over every seed's run (a size's N with a censored seed are not
dropped: a normal likelihood with right-censoring at each run's budget, `scoreprobe.stats.censored.censored_fit`,
profile interval t-calibrated; with no censoring it is least squares with the t interval). docs/definitions.md.
"""
import logging

from analyses.capacity_exponent import grid as grid_mod
from scoreprobe.cli import study as study_cli

logger = logging.getLogger("capacity_exponent")


def describe(run):
    return f"DiT {run.meta['size']} N = {run.meta['N']} training seed {run.seed}"


def main(argv=None):
    study_cli.run_study(argv, __doc__, grid_mod, describe, "analyses.capacity_exponent.tables", logger)


if __name__ == "__main__":
    main()
