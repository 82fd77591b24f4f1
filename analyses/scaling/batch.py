"""Running planned runs whose exports live in per-run folders (the studies built on analyses/scaling: data_draws,
sudoku_transpose): train or resume, measure and export each run not yet exported (`analyses.scaling.run.run_one`),
`--jobs` at a time (analyses.queue.run_queue), within `--hours`, rewriting the tables after each."""
import copy
import functools

from analyses.queue import run_queue
from analyses.scaling.export import load_exports
from analyses.scaling.grid import run_seconds
from analyses.scaling.run import run_one


def exported(runs, folder_of):
    """Names of the `runs` whose export in folder_of(run) exists with the same TrainConfig (not run again)."""
    return {r.name for r in runs if r.name in load_exports([r], folder_of(r))[0]}


def export_one(args, run, folder_of):
    """analyses.scaling.run.run_one (train or resume, clocks, export) with the export in folder_of(run)."""
    a = copy.copy(args)
    a.exports = folder_of(run)
    return run_one(a, run)


def run_exports(args, runs, folder_of, on_done):
    """export_one over the `runs` not yet exported, in plan order, `args.jobs` at a time (a run starts when a worker
    is free); none started that would not end within `args.hours` (analyses.scaling.grid.run_seconds × 1.5, for
    load); on_done(name) after each. Every CPU run trains with one thread, --jobs 1 included: a run is bitwise
    reproducible and resumable per thread count (training.train.check_threads). Returns the names not started."""
    done = exported(runs, folder_of)
    return run_queue(functools.partial(export_one, folder_of=folder_of), args, [r for r in runs if r.name not in done],
                     on_done, lambda r: run_seconds(r, args.n_samples), args.hours, args.jobs, "batch")
