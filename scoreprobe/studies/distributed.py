"""A Grid's runs as dask.distributed tasks: one task per run, each trains, measures and exports on its worker.

`execute.run(grid, scheduler=...)` lands here. The scheduler is what `scoreprobe.sweep.dask.check_scheduler`
takes (a Client, "tcp://HOST:PORT", or ("local", n): a LocalCluster of n one-thread worker processes, each
under a nanny). Every task calls the function it is given (`scoreprobe.studies.runner.run_one` for a Grid; a
study's own through `queue.run_queue(..., scheduler=)`) on its worker and returns the run's name; the caller
logs each run as its task completes (in completion order) and calls on_done.

Shared files. Workers write the run directories (<out>/runs/<name>) and exports (<out>/exports) themselves,
at the absolute path of the grid's folder on the caller: that folder must be the same path on every worker
(a shared file system), and scoreprobe installed there.

Failures (dask.distributed 2026.8, read in its scheduler: `TaskState.retries` is spent only on a task that
*raises*; a worker that *dies* makes the scheduler release its tasks and run them again elsewhere, counting
`distributed.scheduler.allowed-failures` before it gives up with KilledWorker):
- a run that raises (a bad checkpoint, out of disk) is caught in its task and returned as text: logged as
  failed, not retried (it would raise again), the other runs go on;
- a run whose worker process dies (killed, out of memory, a preempted node) is run again by the scheduler on
  another (or the restarted) worker, and since training resumes from the run directory's resume.pt and
  checkpoints and the clocks from their store, the retry continues where the dead worker stopped. A LocalCluster
  started here allows `scoreprobe.sweep.dask_wait.ALLOWED_FAILURES` deaths per task; a remote scheduler its own
  setting (dask's default 3). After that the run is logged as failed; a rerun of the grid resumes it;
- no worker for NO_WORKER_S, or a scheduler that stops answering: every run still pending is logged as failed
  (`scoreprobe.sweep.dask_wait` bounds).

What the caller logs (logger "grid"): the scheduler's address and dashboard link; each run as it starts on a worker
(looked up every REPORT_S), each death of the worker running it (the scheduler's count) and where it runs again, and
each run as it completes or fails.
"""
import contextlib
import logging
import time
import uuid

from scoreprobe.errors import WorkerError, first_line

logger = logging.getLogger("grid")
TICK_S = 0.1   # how often the caller looks for completed runs
REPORT_S = 0.5   # how often it asks the scheduler which runs started and which lost their worker


def run_task(args, run, fn):
    """On a worker: (name, None) after fn(args, run) (e.g. runner.run_one), or (None, "Type: message") when it
    raised (returned, not raised: the worker prints no traceback and dask does not retry a deterministic failure)."""
    import torch
    torch.set_num_threads(1)   # one thread per run, as the local worker processes
    try:
        return fn(args, run), None
    except Exception as e:   # noqa: BLE001  (reported by the caller, the other runs go on)
        return None, f"{type(e).__name__}: {first_line(e)}"


def run_on_dask(scheduler, args, runs, on_done, resources=None, fn=None):
    """run_task over `runs` on `scheduler`, all submitted at once (priority in grid order); on_done(name) here as
    each completes; fn(args, run): what a task runs (top-level and picklable; required). Returns []
    (nothing is held back for a deadline on a cluster)."""
    if not runs:
        return []
    if fn is None:
        raise TypeError("run_on_dask: fn (what each task runs, e.g. scoreprobe.studies.runner.run_one) is required")
    from scoreprobe.sweep.dask import client_for
    with client_for(scheduler) as client:
        tag = uuid.uuid4().hex[:8]
        futures = {client.submit(run_task, args, run, fn, key=f"grid-{run.name}-{tag}", pure=False,
                                 priority=len(runs) - i, resources=resources): run for i, run in enumerate(runs)}
        logger.info("submitted %d runs to %s%s", len(futures), client.scheduler.address, _dashboard(client))
        try:
            _wait_all(client, futures, on_done)
        finally:   # an interrupted caller leaves no task running on a cluster it does not own
            with contextlib.suppress(Exception):
                client.cancel([f for f in futures if not f.done()])
    return []


def _dashboard(client):
    """'; dashboard: http://...' when the scheduler serves its dashboard (bokeh installed), else ''."""
    try:
        return f"; dashboard: {client.dashboard_link}"
    except Exception:   # noqa: BLE001  (no dashboard service: nothing to link)
        return ""


def _wait_all(client, futures, on_done):
    """Handle each future as it completes (polled every TICK_S); while none does, dask_wait's watch bounds the
    wait (asked every POLL_S: no worker for NO_WORKER_S, a silent scheduler) and on its error the runs still
    pending are logged as failed and cancelled."""
    from scoreprobe.sweep import dask_wait
    pending, where = dict(futures), {}
    watch, last, reported = dask_wait._Watch(client, "of the grid"), time.monotonic(), 0.0
    while pending:
        done = [f for f in pending if f.done()]
        for f in done:
            _settle(f, pending.pop(f), on_done)
        if time.monotonic() - reported >= REPORT_S:
            reported = time.monotonic()
            with contextlib.suppress(Exception):   # a report only: the watch below judges a silent scheduler
                _report(client, pending, where)
        if done or time.monotonic() - last < dask_wait.POLL_S:
            time.sleep(0 if done else TICK_S)
            continue
        last = time.monotonic()
        try:
            watch.check()
        except WorkerError as e:
            for run in pending.values():
                logger.error("%s failed: %s", run.name, first_line(e))
            client.cancel(list(pending))
            return


def _report(client, pending, seen):
    """Log each pending run when it starts on a worker, and each death of a worker that was running it (the
    scheduler's count of them, TaskState.suspicious) with the retry that follows; `seen` ({key: (worker, deaths)})
    carries what was logged."""
    running = {key: w for w, keys in client.processing().items() for key in keys}
    deaths = client.run_on_scheduler(_suspicious, keys=[f.key for f in pending])
    for future, run in pending.items():
        key = future.key
        worker, dead = seen.get(key, (None, 0))
        if deaths.get(key, 0) > dead:
            logger.warning("%s: the worker running it died (%d time(s)); the scheduler runs it again, resuming from "
                           "its files", run.name, deaths[key])
            dead = deaths[key]
        now = running.get(key)
        if now is not None and now != worker:
            logger.info("%s %s on %s", run.name, "started" if worker is None and not dead else "running again", now)
            worker = now
        seen[key] = (worker, dead)


def _suspicious(dask_scheduler, keys):
    """On the scheduler: {key: how many workers died while running it}."""
    return {k: dask_scheduler.tasks[k].suspicious for k in keys if k in dask_scheduler.tasks}


def _settle(future, run, on_done):
    """Log one completed task; on_done(name) for a run exported."""
    import distributed
    try:
        name, error = future.result()
    except distributed.KilledWorker:
        logger.error("%s failed: the worker process running it died every time it ran (killed, out of memory); "
                     "a rerun resumes it", run.name)
        return
    except Exception as e:   # noqa: BLE001  (cancelled, lost scheduler: one line)
        logger.error("%s failed on the dask cluster: %s", run.name, first_line(e))
        return
    if error is not None:
        logger.error("%s failed: %s", run.name, error)
        return
    on_done(name)
