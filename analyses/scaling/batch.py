"""Running planned runs whose exports live in per-run folders (the studies built on analyses/scaling: data_draws,
sudoku_transpose): train or resume, measure and export each run not yet exported (`analyses.scaling.run.run_one`),
`--jobs` at a time in chunks, within `--hours`, rewriting the tables after each."""
import copy
import logging
import time

import torch

from analyses.grid import in_parallel
from analyses.scaling.export import load_exports
from analyses.scaling.grid import run_seconds
from analyses.scaling.run import run_one

logger = logging.getLogger("batch")


def exported(runs, folder_of):
    """Names of the `runs` whose export in folder_of(run) exists with the same TrainConfig (not run again)."""
    return {r.name for r in runs if r.name in load_exports([r], folder_of(r))[0]}


def export_one(args, run, folder_of):
    """analyses.scaling.run.run_one (train or resume, clocks, export) with the export in folder_of(run);
    None when it fails (logged: an unattended preset must not stop on one run)."""
    a = copy.copy(args)
    a.exports = folder_of(run)
    try:
        return run_one(a, run)
    except Exception as e:
        logger.error("%s failed: %s: %s", run.name, type(e).__name__, e)
        return None


def run_exports(args, runs, folder_of, on_done):
    """export_one over the `runs` not yet exported, `args.jobs` at a time in chunks (neighbours in the plan
    should have equal lengths); none started that would not end within `args.hours` (the estimated
    one-thread time of analyses.scaling.grid.run_seconds × 1.5, for load); on_done(name) after each.
    Every CPU run trains with one thread, --jobs 1 included (this process's count is restored after): a run
    is bitwise reproducible and resumable per thread count (training.train.check_threads)."""
    threads = torch.get_num_threads()
    if args.jobs <= 1 and str(args.device).startswith("cpu"):
        torch.set_num_threads(1)
    try:
        _run_chunks(args, runs, folder_of, on_done)
    finally:
        torch.set_num_threads(threads)


def _run_chunks(args, runs, folder_of, on_done):
    done = exported(runs, folder_of)
    runs = [r for r in runs if r.name not in done]
    jobs = max(args.jobs, 1)
    deadline = None if args.hours is None else time.time() + args.hours * 3600
    for start in range(0, len(runs), jobs):
        chunk = runs[start:start + jobs]
        need = 1.5 * max(run_seconds(r, args.n_samples) for r in chunk)
        if deadline is not None and time.time() + need > deadline:
            logger.info("stopping: %s would not be done within --hours %s", ", ".join(r.name for r in chunk), args.hours)
            return
        for name in in_parallel(export_one, [(args, r, folder_of) for r in chunk], args.jobs):
            if name:
                try:
                    on_done(name)
                except Exception as e:
                    logger.error("%s: tables not written: %s: %s", name, type(e).__name__, e)
