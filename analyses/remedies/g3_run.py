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

The time estimates use the width-80 DiT's one-thread rate for every variant (analyses/scaling/grid.py); the
global token adds a tenth token (+11% matmul FLOPs, scoreprobe.models.flops), the GLU MLP ≈ 0.
"""
import argparse
import logging
from pathlib import Path

from analyses.remedies import g3_grid as grid_mod
from analyses.scaling import grid as scaling_grid
from analyses.scaling import presets
from scoreprobe.probes.clocks import resolve_device

logger = logging.getLogger("remedies")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", choices=sorted(grid_mod.PRESETS), required=True)
    p.add_argument("--smoke", action="store_true", help="same as --preset g3-smoke")
    p.add_argument("--jobs", type=int, default=None, help="runs at a time, one thread each (default: the preset's)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto")
    p.add_argument("--train-only", action="store_true", help="train (or resume) the runs, measure nothing")
    p.add_argument("--from-results", action="store_true", help="tables and figure from the .npz exports only")
    p.add_argument("--plan", action="store_true", help="print the runs in order with their estimated time, run nothing")
    p.add_argument("--hours", type=float, default=None,
                   help="start no run that would not be done within this many hours (estimated rate × 1.5, for load)")
    p.add_argument("--out", default="runs", help="folder of the run directories (two_clocks/, remedies/)")
    p.add_argument("--results", default=None, help="folder of the tables, figure and exports (default: "
                   "analyses/results, or --out for the smoke preset)")
    args = p.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        p.error("--jobs must be at least 1")
    args.device = resolve_device(args.device)
    args.preset = "g3-smoke" if args.smoke else args.preset
    preset = grid_mod.PRESETS[args.preset]
    scaling = scaling_grid.PRESETS[preset["scaling"]]
    args.jobs = preset["jobs"] if args.jobs is None else args.jobs
    args.ensemble = False
    args.results = Path(args.results or (args.out if args.preset == "g3-smoke" else "analyses/results"))
    args.n_samples, args.n_steps = scaling["n_samples"], scaling["n_steps"]
    return args


def folder_of(args):
    return lambda run: grid_mod.export_folder(args.results, args.preset, run)


def describe(run):
    return f"{run.meta['variant']:16s} data seed {run.meta['data_seed']} training seed {run.seed}"


def _write(args, runs):
    from analyses.remedies.g3_tables import write_all   # imported when first needed
    return write_all(args, runs)


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    runs = grid_mod.plan(args.preset)
    if args.plan:
        print("\n".join(presets.plan_lines(runs, args, folder_of(args), describe)))
        return
    if not args.from_results:
        logger.info(presets.plan_lines(runs, args, folder_of(args), describe)[0])
        presets.run_all(args, runs, folder_of(args), on_done=lambda name: None if args.train_only else _write(args, runs))
        if args.train_only:
            return
    md = _write(args, runs)
    print(md.read_text())
    print(f"wrote {md}, {md.with_suffix('.json')}, {md.with_suffix('.png')}")
