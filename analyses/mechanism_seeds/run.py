"""The mechanism on trained seeds (issue 36 item 3): analyses/mechanism's basins, retention and DSM split
on 3 training seeds of an open-window series (the shipped series' config) and a closed-window one, with
early checkpoints (0, 50, 100, 200, 350, then the log grid), trained models and units as the units of
every interval, the study's claims read over thresholds and corrected by Holm.

Trains every model of a preset (grid.py) `--jobs` at a time in one-thread worker processes (or resumes it),
measures its clocks and the probes (stores under <out>/mechanism_seeds/<model>/, resumed step by step) and
exports it (scoreprobe.studies.battery_export: one .npz per model); after every finished model the tables are rewritten from the
exports:

  <results>/mechanism_seeds[_<preset>]/<model>.npz   per model: clocks, per-plane / item / pair values
  <results>/mechanism_seeds[_<preset>].md/.json/.png  every table (models not yet done are listed as such)

Usage:
  python analyses/mechanism_seeds --jobs 2         # the CPU preset: 6 models, ≈ 2.2 h on 2 idle cores (--plan)
  python analyses/mechanism_seeds --preset gpu --device cuda   # 5 training seeds, 3 probe seeds, larger probes
  python analyses/mechanism_seeds --smoke          # 6 toy models: 68 CPU-s (2.4 min on 2 cores at load 7.5)
  python analyses/mechanism_seeds --from-results   # every table and the figure from the .npz files (15 s at smoke size)
  python analyses/mechanism_seeds --plan           # the models, their order and estimated time, nothing run
  python analyses/mechanism_seeds --jobs 2 --hours 1.5   # start only the models that fit in 1.5 h

Statistics: scoreprobe.stats.models_units, claims.py; docs/definitions.md "Trained models and units".
"""
import logging
from pathlib import Path

from scoreprobe.cli import study as study_cli
from scoreprobe.cli.study import drive
from scoreprobe.studies import battery
from scoreprobe.studies.queue import run_queue, shared_cores
from analyses.mechanism_seeds import grid as G
from scoreprobe.studies.battery_export import load_exports
from analyses.mechanism_seeds.measure import settings

logger = logging.getLogger("mechanism_seeds")


def parse_args(argv=None):
    p = study_cli.parser(__doc__, G.PRESETS, default_help="default: cpu", unit="models", train_only=False,
                         devices=["cpu", "cuda"])
    p.set_defaults(preset="cpu", device="cpu")
    args = p.parse_args(argv)
    args.scheduler = study_cli.scheduler_of(p, args.scheduler)
    args.preset = "smoke" if args.smoke else args.preset
    study_cli.check_budget(p, args)
    args.jobs = G.PRESETS[args.preset]["jobs"] if args.jobs is None else args.jobs
    args.results = Path(args.results or (args.out if args.preset == "smoke" else "analyses/results"))
    suffix = "" if args.preset == "cpu" else f"_{args.preset}"
    args.exports = args.results / f"mechanism_seeds{suffix}"
    args.stem = args.results / f"mechanism_seeds{suffix}"
    return args


def exported(args, models):
    return set(load_exports(models, args.exports, settings(args.preset))[0])


def plan_lines(args, models):
    p = G.PRESETS[args.preset]
    return battery.plan_lines(
        models, lambda m: G.model_seconds(args.preset, m), exported(args, models), args.jobs,
        f"{len(models)} models (2 series × training seeds {p['seeds']}, data seed 0), preset {args.preset}",
        lambda m: (f"{m.name:10s} training seed {m.seed} data seed {m.data_seed}  {m.cfg.total_steps:6d} steps, "
                   f"{len(m.cfg.checkpoint_schedule())} checkpoints, {len(G.measured_steps(m.cfg, p['n_grid']))} measured"),
        "at one CPU thread’s rates (GPU throughput is not measured here) " if args.preset == "gpu" else "",
        shared_cores(args.device, args.jobs))


def run_all(args, models, on_done):
    """measure_model for every model not yet exported, `args.jobs` at a time, each handed to the first free
    one-thread worker (scoreprobe.studies.queue.run_queue); on_done(name) after each (a failure is logged, the others go on)."""
    from analyses.mechanism_seeds.measure import measure_model
    done = exported(args, models)
    run_queue(measure_model, args, [m for m in models if m.name not in done], on_done,
              lambda m: sum(G.model_seconds(args.preset, m).values()), args.hours, args.jobs, "mechanism_seeds",
              args.scheduler)


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    models = G.plan(args.preset)
    from analyses.mechanism_seeds.report import write_all
    drive(args, lambda: plan_lines(args, models), lambda on_done: run_all(args, models, on_done),
          lambda: write_all(args, models), logger)


if __name__ == "__main__":
    main()
