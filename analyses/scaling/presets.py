"""Running another study's runs on the scaling study's machinery (analyses/data_draws, the remedies' G = 3
preset, analyses/gpt_dit_match): each run trains and exports with `run.run_one` into the export folder its
study names for it (`folder_of(run)`: a run that *is* a scaling run keeps scaling's folder, so it is
reused, never trained twice), runs already exported with the same TrainConfig are skipped, `--hours`
stops before a chunk that would not end in time, and `--plan` prints the order with estimated times."""
import copy
import logging
import time

from analyses.grid import in_parallel
from analyses.scaling import grid as scaling_grid
from analyses.scaling import run as scaling_run
from analyses.scaling.export import load_exports

logger = logging.getLogger("presets")


def run_one(args, run, folder):
    """scaling's run_one (train or resume, clocks, export) with the export folder `folder`, on one torch thread
    (as in the worker processes of --jobs > 1, whose rates grid.py measured; restored after)."""
    import torch
    a = copy.copy(args)
    a.exports = folder
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return scaling_run.run_one(a, run)
    finally:
        torch.set_num_threads(threads)


def exported(runs, folder_of):
    """Names of the runs whose export exists in folder_of(run) with the same TrainConfig."""
    return {r.name for r in runs if r.name in load_exports([r], folder_of(r))[0]}


def run_all(args, runs, folder_of, on_done):
    """run_one over the runs not yet exported, `args.jobs` at a time (neighbours in the plan should have
    equal lengths); on_done(name) after each (a failure is logged, the rest go on). With args.hours, no
    chunk starts that would not be done by then (estimated rate × 1.5, for load). Returns False when it
    stopped for the deadline."""
    done = exported(runs, folder_of)
    runs = [r for r in runs if r.name not in done]
    deadline = None if getattr(args, "hours", None) is None else time.time() + args.hours * 3600
    jobs = max(args.jobs, 1)
    for start in range(0, len(runs), jobs):
        chunk = runs[start:start + jobs]
        need = 1.5 * max(scaling_grid.run_seconds(r, args.n_samples) for r in chunk)
        if deadline is not None and time.time() + need > deadline:
            logger.info("stopping: %s would not be done within --hours %s", ", ".join(r.name for r in chunk), args.hours)
            return False
        for name in in_parallel(_guarded_one, [(args, r, folder_of(r)) for r in chunk], args.jobs):
            if name:
                scaling_run._guarded(lambda: on_done(name), name)
    return True


def _guarded_one(args, run, folder):
    try:
        return run_one(args, run, folder)
    except Exception as e:   # an unattended preset must not stop on one run
        logging.getLogger("presets").error("%s failed: %s: %s", run.name, type(e).__name__, e)
        return None


def plan_lines(runs, args, folder_of, describe, pending=()):
    """The first line (runs, exported, estimated hours at `args.jobs` one-thread runs at a time) and one line per
    run: its name, describe(run), steps, estimated minutes and the cumulative time. `pending`: runs whose
    settings wait on other runs' results, listed after at provisional settings; one already exported at them
    is counted as done, and the first line gives the time should none of them be."""
    every = list(runs) + list(pending)
    done = exported(every, folder_of)
    jobs = max(args.jobs, 1)
    secs = [scaling_grid.run_seconds(r, args.n_samples) for r in every]
    todo = sum(s for r, s in zip(every, secs) if r.name not in done)
    worst = todo + sum(s for r, s in zip(pending, secs[len(runs):]) if r.name in done)
    lines = [f"{len(every)} runs, preset {args.preset} ({len(done)} exported already), {args.jobs} at a time: estimated "
             f"{todo / 3600 / jobs:.2f} h for the rest ({todo / 3600:.1f} thread-hours, one-thread rates of "
             "analyses/scaling/grid.py" + ("; GPU throughput is not measured here" if "gpu" in args.preset else "") + ")" + (f"; {worst / 3600 / jobs:.2f} h if no pending run is reused" if worst > todo else "")]
    t = 0.0
    for i, (r, s) in enumerate(zip(every, secs)):
        if r.name not in done:
            t += s / jobs
        state = "exported" if r.name in done else f"~{s / 60:5.1f} min, all done by ~{t / 3600:4.2f} h"
        lines.append(f"  {i + 1:3d} {r.name:40s} {describe(r)}  {r.steps:6d} steps  {state}"
                     + ("  (pending)" if i >= len(runs) else ""))
    return lines
