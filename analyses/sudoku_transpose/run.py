"""Sudoku rows vs columns, decided (issue 36 item 2): is "rows before columns" a preference of the data or of
the architecture? The same 4×4 Sudoku runs with every training grid transposed, × data seeds × training seeds,
through a DiT that is symmetric under transposition (2×2 patches) and two models that are not (1×4 row patches;
the raster-order GPT).

Trains every run of a preset (grid.py) `--jobs` at a time in one-thread worker processes, measures the clocks of
every checkpoint with their constraint families and exports each run as analyses/scaling does (one .npz per run,
tens of KB); after every finished run the tables are rewritten from the exports:

  <results>/sudoku_transpose_<preset>/<run>.npz  every run but the scaling study's own (scaling_<preset>/)
  <results>/sudoku_transpose_<preset>.md/.json   the decision table, per-family τ curves, ratios, the runs
  <results>/sudoku_transpose_<preset>.png        τ_rows / τ_columns over thresholds, original and transposed

Families are named in image coordinates: "rows" are the rows of the images a model is trained on and
generates; on transposed data those are the columns of the grids as drawn.

Usage:
  python analyses/sudoku_transpose --jobs 2        # the CPU preset: 54 runs (3 reused), see --plan (≈ 3.4 h
                                                    # on 2 idle cores from the measured one-thread rates)
  python analyses/sudoku_transpose --smoke         # 6 toy runs (one of each model × orientation): < 1 min
  python analyses/sudoku_transpose --from-results  # every table and the figure from the .npz files
  python analyses/sudoku_transpose --plan          # the run list, order and estimated time, nothing run
  python analyses/sudoku_transpose --hours 3       # start no run that would not end within 3 h (resumable)

Statistics: analyses.sudoku_transpose.transpose_split (the ratio per run, pooled two-level over data seeds × training
seeds; its architecture's and data's parts per matched pair; per data seed); the verdicts over thresholds and
which seed sets the order: analyses.sudoku_transpose.transpose_split_md.
"""
import logging

from scoreprobe.cli import study as study_cli
from analyses.sudoku_transpose import grid as grid_mod

logger = logging.getLogger("sudoku_transpose")


def describe(run):
    return (f"{run.meta['arch']:10s} {'transposed' if run.meta['transposed'] else 'original  '} data seed "
            f"{run.meta['data_seed']} training seed {run.seed}")


def main(argv=None):
    study_cli.run_study(argv, __doc__, grid_mod, describe, "analyses.sudoku_transpose.tables", logger)


if __name__ == "__main__":
    main()
