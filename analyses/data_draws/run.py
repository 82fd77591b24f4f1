"""Data draws × training seeds (issue 36 items 1 and 5): the variance of τ_rule and τ_mem split into the
training set's part (data seed) and the initialisation's part (training seed), and the G factor at
N = 240 over every (data seed, training seed) run.

Trains every run of a preset (grid.py) `--jobs` at a time in one-thread worker processes, measures the
clocks of every checkpoint and exports each run as analyses/scaling does (one .npz per run, tens of KB);
after every finished run the tables are rewritten from the exports:

  <results>/data_draws_<preset>/<run>.npz   runs at data seeds ≥ 1 (data seed 0: scaling_<preset>/)
  <results>/data_draws_<preset>.md/.json    every table (runs not yet done are listed as such)
  <results>/data_draws_<preset>.png         τ per (data seed, training seed), pooled, per configuration

Usage:
  python analyses/data_draws --jobs 2         # the CPU preset: 27 runs (9 reused), ≈ 3.2 h on 2 idle cores
  python analyses/data_draws --smoke          # 8 toy runs: ≈ 1 min
  python analyses/data_draws --from-results   # every table and figure from the .npz files, seconds
  python analyses/data_draws --plan           # the run list, order and estimated time, nothing run

Statistics: docs/definitions.md and scoreprobe.probes.seeds.pool_seeds with (data seed × training seed)
points: a two-level random-effects split of ln τ (var_data, var_init) and a t interval over data seeds.
"""
import argparse
import logging

from analyses.data_draws import grid as grid_mod
from analyses.scaling import grid as scaling_grid
from analyses.scaling import presets
from scoreprobe.probes.clocks import resolve_device

logger = logging.getLogger("data_draws")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", choices=sorted(grid_mod.PRESETS), default=None, help="default: gpu on CUDA, else cpu")
    p.add_argument("--smoke", action="store_true", help="same as --preset smoke")
    p.add_argument("--jobs", type=int, default=None, help="runs at a time, one thread each (default: the preset's)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto")
    p.add_argument("--train-only", action="store_true", help="train (or resume) the runs, measure nothing")
    p.add_argument("--from-results", action="store_true", help="tables and figures from the .npz exports only")
    p.add_argument("--plan", action="store_true", help="print the runs in order with their estimated time, run nothing")
    p.add_argument("--hours", type=float, default=None,
                   help="start no run that would not be done within this many hours (estimated rate × 1.5, for load)")
    p.add_argument("--out", default="runs", help="folder of the run directories (two_clocks/, data_draws/)")
    p.add_argument("--results", default=None, help="folder of the tables, figures and exports (default: "
                   "analyses/results, or --out for --smoke)")
    args = p.parse_args(argv)
    args.device = resolve_device(args.device)
    args.preset = "smoke" if args.smoke else args.preset or ("gpu" if args.device.startswith("cuda") else "cpu")
    preset = grid_mod.PRESETS[args.preset]
    scaling = scaling_grid.PRESETS[preset["scaling"]]
    args.jobs = preset["jobs"] if args.jobs is None else args.jobs
    args.ensemble = False
    from pathlib import Path
    args.results = Path(args.results or (args.out if args.preset == "smoke" else "analyses/results"))
    args.n_samples, args.n_steps = scaling["n_samples"], scaling["n_steps"]
    return args


def folder_of(args):
    """run -> its export folder (grid.export_folder: scaling's for data seed 0)."""
    return lambda run: grid_mod.export_folder(args.results, args.preset, run)


def describe(run):
    return f"data seed {run.meta['data_seed']} training seed {run.seed}"


def _write(args, runs):
    from analyses.data_draws.tables import write_all   # imported when first needed
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


if __name__ == "__main__":
    main()
