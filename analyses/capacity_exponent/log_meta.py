"""Record in each export's meta what its run's training log says (when training started, the loss spikes it
recovered from: `scoreprobe.studies.divergence.log_meta`), for the exports made before the runner recorded it.

  python -m analyses.capacity_exponent.log_meta [--out runs] [--results analyses/results]

A run is patched only when its run directory is there and holds the export's TrainConfig; the 0.51M DiT's runs
(the scaling study's, trained in an earlier session) have no run directory left and keep no start step.
"""
import argparse

from analyses.capacity_exponent import grid as grid_mod
from scoreprobe.studies.runner import record_log_meta


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs", help="folder of the run directories")
    p.add_argument("--results", default="analyses/results", help="folder of the exports")
    p.add_argument("--preset", default="cpu", choices=sorted(grid_mod.PRESETS))
    args = p.parse_args(argv)
    from pathlib import Path
    args.results = Path(args.results)
    for run in grid_mod.plan(args.preset):
        export = grid_mod.export_folder(args.results, args.preset, run) / f"{run.name}.npz"
        if export.is_file():
            fields = record_log_meta(args, run, export)
            print(f"{run.name}: {fields if fields is not None else 'nothing to record'}")


if __name__ == "__main__":
    main()
