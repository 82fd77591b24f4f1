"""Running a Grid: train (or resume) every cell, measure its clocks and export it as each finishes.

    summary = run(grid, jobs=2)                         # here: 2 one-thread worker processes
    summary = run(grid, scheduler="tcp://host:8786")    # one dask task per run, on a cluster
    summary = run(grid, scheduler=("local", 4))         # a LocalCluster of 4 one-thread worker processes

Each cell goes through `scoreprobe.studies.runner.run_one`: training resumes from the run directory
(<out>/runs/<name>: resume.pt, checkpoints), the clocks of every checkpoint are measured into
<out>/runs/<name>/clocks.zarr (resumed) and the run's export is written to <out>/exports/<name>.npz
(atomically) when that run is done, so `collect` sees each run as soon as it finishes. A cell whose export
exists with the same TrainConfig is skipped (a rerun resumes the grid and rewrites nothing).

Locally (scheduler None) the runs go through `scoreprobe.studies.queue.run_queue`: in grid order, `jobs` at a
time in one-thread worker processes (jobs ≤ 1: in this process, one torch thread); a run that raises is
logged and the others go on; a worker process that dies (killed, out of memory) is retried alone once. With
a scheduler, the same queue hands each run to `scoreprobe.studies.distributed`. Nothing is printed: progress
goes to the "grid" logger.
"""
import dataclasses
import functools
import logging
from pathlib import Path
from types import SimpleNamespace

from scoreprobe.errors import ConfigError
from scoreprobe.studies import runner
from scoreprobe.studies.export import load_exports
from scoreprobe.studies.queue import run_queue

logger = logging.getLogger("grid")


@dataclasses.dataclass
class Summary:
    """What `run` did, by run name: done (trained / measured / exported now), skipped (exported before with
    the same TrainConfig), failed (raised, or its worker died every time: logged), not_started (past `hours`)."""
    done: list
    skipped: list
    failed: list
    not_started: list

    @property
    def complete(self):
        return not self.failed and not self.not_started


def _args(grid, device, n_samples, n_steps, jobs):
    """The namespace runner.run_one reads (absolute paths: a dask worker may run in another folder)."""
    return SimpleNamespace(out=Path(grid.out).resolve(), exports=Path(grid.exports).resolve(), device=device,
                           n_samples=int(n_samples), n_steps=n_steps, train_only=False, keep_bits=False, jobs=jobs)


def _check(jobs, n_samples, n_steps, hours, scheduler, device):
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise ConfigError(f"jobs must be a positive integer, got {jobs!r}")
    if not isinstance(n_samples, int) or n_samples < 1:
        raise ConfigError(f"n_samples must be a positive integer, got {n_samples!r}")
    if n_steps is not None and (not isinstance(n_steps, int) or n_steps < 1):
        raise ConfigError(f"n_steps must be None or a positive integer, got {n_steps!r}")
    if hours is not None and not hours > 0:
        raise ConfigError(f"hours must be positive, got {hours!r}")
    if hours is not None and scheduler is not None:
        raise ConfigError("hours= applies to local runs; on a cluster, size the grid to its walltime (a rerun "
                          "resumes the rest)")
    if not isinstance(device, str) or not device:
        raise ConfigError(f"device must be a string such as 'cpu' or 'cuda', got {device!r}")


def run(grid, jobs=1, scheduler=None, device="cpu", n_samples=1000, n_steps=None, hours=None, progress=None,
        resources=None):
    """Train (or resume), measure and export every cell of `grid` not yet exported with its TrainConfig.

    Parameters
    ----------
    grid : scoreprobe.studies.grid.Grid.
    jobs : runs at a time locally, one torch thread each (ignored with a scheduler: one task per worker thread).
    scheduler : None (here), a distributed.Client, an address "tcp://HOST:PORT" or ("local", n_workers)
        (`scoreprobe.sweep.dask.check_scheduler`). The grid's folder must be the same path on every worker.
    device : where training and the clocks run ("cpu", "cuda": on the workers with a scheduler).
    n_samples, n_steps : the clocks' samples per checkpoint and ODE steps (None: the default).
    hours : locally, start no run that would not be done by then (runner.seconds_left: what is left of each run, × 1.5).
    progress : None or a callable progress(name) called here as each run is exported.
    resources : with a scheduler, dask worker resources each run needs (e.g. {"GPU": 1}).

    Returns
    -------
    Summary (done, skipped, failed, not_started: lists of run names, in grid order).
    """
    _check(jobs, n_samples, n_steps, hours, scheduler, device)
    if scheduler is not None:
        from scoreprobe.sweep.dask import check_scheduler
        check_scheduler(scheduler)    # ConfigError before any work
    args = _args(grid, device, n_samples, n_steps, jobs)
    exported, _ = load_exports(grid.runs, args.exports)
    todo = [r for r in grid.runs if r.name not in exported]
    logger.info("grid %s: %d runs, %d exported already, %d to run", grid.name, len(grid), len(exported), len(todo))
    done = []

    def on_done(name):
        done.append(name)
        logger.info("grid %s: %s exported (%d of %d to run)", grid.name, name, len(done), len(todo))
        if progress is not None:
            progress(name)

    not_started = run_queue(runner.run_one, args, todo, on_done, functools.partial(runner.seconds_left, args), hours, jobs,
                            "grid", scheduler, resources)
    order = [r.name for r in grid.runs]
    failed = [n for n in order if n not in exported and n not in done and n not in not_started]
    summary = Summary([n for n in order if n in done], [n for n in order if n in exported], failed,
                      [n for n in order if n in not_started])
    logger.info("grid %s: %d done, %d skipped, %d failed, %d not started", grid.name, len(summary.done),
                len(summary.skipped), len(summary.failed), len(summary.not_started))
    return summary
