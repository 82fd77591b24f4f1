"""Running a study's runs unattended: in plan order, `jobs` at a time in one-thread worker processes (or here,
with one torch thread, for jobs ≤ 1), a failing run logged and skipped, and no run started that would end
past a deadline (a session's end: a run cut off mid-way is lost with its machine)."""
import contextlib
import logging
import multiprocessing
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

from analyses.grid import worker_init

LOAD_FACTOR = 1.5   # estimates are idle one-thread rates; a deadline check allows this much slowing


@contextlib.contextmanager
def one_thread(device, jobs):
    """One torch thread for runs trained in this process on a CPU (jobs ≤ 1), as the worker processes have: the
    measured rates are one-thread rates, and on 2 shared, loaded cores two threads made a smoke run 9× slower."""
    import torch
    before = torch.get_num_threads()
    if device == "cpu" and jobs <= 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def guarded(fn, args, run, log_name):
    """fn(args, run), or None after logging its error (an unattended preset must not stop on one run)."""
    try:
        return fn(args, run)
    except Exception as e:   # noqa: BLE001
        logging.getLogger(log_name).error("%s failed: %s: %s", run.name, type(e).__name__, e)
        return None


def run_queue(fn, args, runs, on_done, estimate_s, hours=None, jobs=1, log_name="queue"):
    """fn(args, run) (top-level, picklable; returns the run's name) over `runs` in order, `jobs` at a time: a run
    starts when a worker is free; on_done(name) after each success. With `hours`, a run whose estimate_s(run) ×
    LOAD_FACTOR would end past now + hours is not started (logged). Returns the names not started."""
    log = logging.getLogger(log_name)
    deadline = None if hours is None else time.time() + hours * 3600
    skipped, todo = [], list(runs)

    def fits(run):
        ok = deadline is None or time.time() + LOAD_FACTOR * estimate_s(run) <= deadline
        if not ok:
            log.info("not started: %s would not be done within --hours %s", run.name, hours)
            skipped.append(run.name)
        return ok

    if jobs <= 1:
        with one_thread(args.device, jobs):
            for run in [r for r in todo if fits(r)]:
                _done(on_done, guarded(fn, args, run, log_name), log)
        return skipped
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=ctx, initializer=worker_init) as pool:
        running = set()
        while todo or running:
            while todo and len(running) < jobs:
                run = todo.pop(0)
                if fits(run):
                    running.add(pool.submit(guarded, fn, args, run, log_name))
            if running:
                finished, running = wait(running, return_when=FIRST_COMPLETED)
                for f in finished:
                    _done(on_done, f.result(), log)
    return skipped


def _done(on_done, name, log):
    if name:
        try:
            on_done(name)
        except Exception as e:   # noqa: BLE001  a table update that fails must not stop the runs
            log.error("after %s: %s: %s", name, type(e).__name__, e)


def finish_times(seconds, jobs=1):
    """When each of the runs with these estimated `seconds` is done (same order) and the total, as run_queue runs
    them: in order, each started on the first free of `jobs` workers."""
    free, done = [0.0] * max(jobs, 1), []
    for s in seconds:
        i = min(range(len(free)), key=free.__getitem__)
        free[i] += s
        done.append(free[i])
    return done, max(free)
