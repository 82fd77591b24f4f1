"""Remedies where the baseline learns (issue 36 item 6): parity G = 3 at N = 240 and 30 000 steps, where the
baseline reaches rule accuracy ≈ 0.9, with the baseline (the scaling run, reused), --global-token,
--multiplicative, --curriculum and the curriculum's control (its extra images mixed in, no order), 3 training
seeds each; every τ ratio to the baseline over thresholds, Holm over the family.

Trains every run of a preset (g3_grid.py) `--jobs` at a time in one-thread worker processes, measures the
clocks of every checkpoint (a curriculum run and its control keep their samples: the rule clock beyond the
pieces) and exports each run as analyses/scaling does; after every finished run the tables are rewritten:

  <results>/remedies_<preset>/<run>.npz   the variants' runs (the baseline: scaling_<scaling preset>/)
  <results>/remedies_<preset>.md/.json    every table (runs not yet done are listed as such)
  <results>/remedies_<preset>.png         rule accuracy and memorized share per variant and seed

Usage (the presets g3-smoke, g3, g3-gpu belong to this study; analyses/remedies' own smoke, cpu, gpu to run.py):
  python analyses/remedies --preset g3 --jobs 2        # the CPU preset: 15 runs (3 reused), ≈ 2.5 h on 2 idle cores
  python analyses/remedies --preset g3 --smoke         # 10 toy runs: < 1 min, 28 s at load 7 (= --preset g3-smoke)
  python analyses/remedies --preset g3 --from-results  # every table and the figure from the .npz files, seconds
  python analyses/remedies --preset g3 --plan          # the run list, order and estimated time, nothing run
  python analyses/remedies --preset g3-gpu --device cuda   # G = 3, N = 256, 20 000 steps at batch 256, 5 seeds

The time estimates use the width-80 DiT's one-thread rate for every variant (scoreprobe/studies/recipes.py); the
global token adds a tenth token (+11% matmul FLOPs, scoreprobe.models.flops), the GLU MLP ≈ 0.
"""
import logging

from analyses.remedies import g3_grid as grid_mod
from scoreprobe.cli import study as study_cli

logger = logging.getLogger("remedies")


def describe(run):
    return f"{run.meta['variant']:16s} data seed {run.meta['data_seed']} training seed {run.seed}"


def main(argv=None):
    study_cli.run_study(argv, __doc__, grid_mod, describe, "analyses.remedies.g3_tables", logger, smoke="g3-smoke",
                      default=lambda device: "g3-gpu" if device.startswith("cuda") else "g3")
