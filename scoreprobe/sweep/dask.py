"""Run the steps of a sweep as tasks on a dask.distributed cluster; one process writes the store.

    sp.clocks(series, steps=some, out="c.zarr", ...)            # local, one step after another
    with scoreprobe.sweep.dask.using(("local", 4)):             # or "tcp://host:8786", or a Client
        sp.clocks(series, steps=some, out="c.zarr", ...)        # one dask task per checkpoint
        sp.basins(series, plane, out="b.zarr", ...)             # same cluster, started once
    sweep(probe, series, out="x.zarr", scheduler=client)        # the same, for one sweep

Install with ``pip install -e '.[dask]'``; nothing here imports dask until a scheduler is used.

Design: tasks compute, the caller writes
    The store's crash safety (`scoreprobe.store.writer`: one atomic commit record with checksums
    per step, a lock file admitting one writer per store, --overwrite built beside the old store
    and swapped in) rests on a single writer process, and dask workers on other machines need not
    share a file system with the caller. So workers do not write regions of a pre-sized store:
    `sweep` opens the store as before, submits one task per step that is not already in it
    (resume unchanged: written steps are skipped, damaged ones recomputed), and each task loads its
    checkpoint on the worker (the series object travels, holding paths; the files must be readable
    there at the same paths) and returns the step's Dataset. The caller waits for the results in
    step order and writes each through the same StoreWriter; a result that completes early waits
    on its worker until its turn (the buffer), while the other tasks keep running. The store's
    step order is therefore the local run's with no reorder pass (writing in completion order
    would need one, and an interrupted run would leave an order that depends on timing), and the
    store equals the local run's (up to its `history` line) whenever the workers compute what the
    caller would: same library versions and the same torch thread count (dask's worker processes
    run with OMP_NUM_THREADS=1; the tests run both sides with one).

Failures and warnings
    A task that raises a typed error (`scoreprobe.errors.ScoreprobeError`) returns it and the
    caller raises it as is (no worker traceback printed); any other exception in the task (a
    RuntimeError, a MemoryError) returns too, and the caller raises a `WorkerError` naming the step
    and that error. A worker that dies running a task, a cluster without workers and a lost
    scheduler end in a WorkerError too, each within a bound (`scoreprobe.sweep.dask_wait`). Steps
    before the failing one are written, later ones are cancelled: a rerun resumes. Warnings raised
    on a worker are raised again by the caller (our own at the caller's line, others at their
    original file and line); recording them assumes one task at a time per worker process, as in
    the LocalCluster started here (1 thread per worker).

The probe and the loader must be picklable with cloudpickle (closures and lambdas are; open files,
locks or generators are not): `sweep` checks this before it opens the store (ConfigError).
"""
import contextlib
import logging
import re
import signal
import threading
import uuid
import warnings

from scoreprobe.errors import (ConfigError, ScoreprobeError, ScoreprobeWarning, WorkerError, first_line,
                               user_stacklevel)
from scoreprobe.sweep import dask_wait
from scoreprobe.sweep.executor import SCHEDULER, run_step

INSTALL_HINT = "pip install -e '.[dask]'"
_ADDRESS = re.compile(r"[a-z][a-z0-9+.-]*://\S+|[^\s/:\[\]]+:\d+|\[[0-9a-fA-F:]+\]:\d+")  # proto://..., HOST:PORT
_REGISTRY = {}   # warnings already shown by `_reissue` ("default" action: once per text and place)


def require_dask():
    """The `distributed` module, or a ConfigError saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise ConfigError(f"running on a dask scheduler needs dask.distributed, which is not installed: "
                          f"{INSTALL_HINT}") from None
    return distributed


def check_scheduler(scheduler):
    """Check a `scheduler=` value without connecting; return it normalized.

    Parameters
    ----------
    scheduler : None (run here), a `distributed.Client`, an address string ("tcp://HOST:PORT"),
        or ("local", n_workers) to start a LocalCluster of n worker processes.

    Returns
    -------
    None, the Client, the stripped address, or ("local", int). ConfigError for anything else, or
    when dask is not installed.
    """
    if scheduler is None:
        return None
    distributed = require_dask()
    if isinstance(scheduler, distributed.Client):
        return scheduler
    if isinstance(scheduler, str):
        address = scheduler.strip()
        if not _ADDRESS.fullmatch(address):
            raise ConfigError(f"a scheduler address looks like tcp://HOST:PORT, got {scheduler!r}")
        from distributed.comm.registry import backends
        scheme = address.partition("://")[0] if "://" in address else "tcp"
        if scheme not in backends:
            raise ConfigError(f"dask has no {scheme!r} protocol (known: {', '.join(sorted(backends))}); "
                              f"a scheduler address looks like tcp://HOST:PORT, got {scheduler!r}")
        return address
    if (isinstance(scheduler, tuple) and len(scheduler) == 2 and scheduler[0] == "local"
            and isinstance(scheduler[1], int) and not isinstance(scheduler[1], bool)):
        if scheduler[1] < 1:
            raise ConfigError(f"a local dask cluster needs at least 1 worker, got {scheduler[1]}")
        return scheduler
    raise ConfigError("scheduler must be None, a distributed.Client, an address 'tcp://HOST:PORT' or "
                      f"('local', N_WORKERS), got {scheduler!r}")


@contextlib.contextmanager
def client_for(scheduler):
    """A Client for a checked `scheduler`: a given Client as is (left open); a connection to an
    address, or a new LocalCluster (one thread per worker process), closed on exit (bounded: see
    `dask_wait.close_quietly`). The 'distributed' logger says nothing meanwhile: what fails is
    reported as one typed error."""
    distributed = require_dask()
    scheduler = check_scheduler(scheduler)
    if isinstance(scheduler, distributed.Client):
        yield scheduler
        return
    with _quiet("distributed", logging.CRITICAL), contextlib.ExitStack() as stack:
        if isinstance(scheduler, str):
            client = _connect(distributed, scheduler)
        else:
            cluster = _local_cluster(distributed, scheduler[1])
            stack.callback(dask_wait.close_quietly, cluster)
            client = distributed.Client(cluster, set_as_default=False)
        stack.callback(dask_wait.close_quietly, client)
        yield client


def _connect(distributed, address):
    """A Client connected to `address`, or a ConfigError (and no half-made Client left to print a
    TimeoutError when it is garbage-collected)."""
    try:
        return distributed.Client(address, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        dask_wait.disarm(dask_wait.half_made_client(e.__traceback__, distributed.Client))
        raise ConfigError(f"cannot connect to the dask scheduler at {address}: {e}") from None


def _local_cluster(distributed, n_workers):
    """A LocalCluster of `n_workers` processes of one thread, its HTTP server on a free port (the
    default 8787 warns when another cluster holds it), workers logging nothing below CRITICAL and
    ignoring Ctrl-C (this process shuts them down); a task whose worker dies is retried on
    `dask_wait.ALLOWED_FAILURES` fresh workers."""
    import dask
    with _sigint_ignored(), dask.config.set({"distributed.scheduler.allowed-failures": dask_wait.ALLOWED_FAILURES}):
        try:
            return distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                            dashboard_address=None, scheduler_kwargs={"dashboard_address": ":0"},
                                            silence_logs=logging.CRITICAL)
        except RuntimeError as e:   # typically a script without a main guard: each worker re-imports it
            raise ConfigError(f"the local dask cluster did not start ({e}); in a script, start it under "
                              "`if __name__ == '__main__':`") from e


@contextlib.contextmanager
def _sigint_ignored():
    """SIGINT ignored meanwhile (processes started now inherit that), when this is the main thread.
    A Ctrl-C on a terminal reaches every process of the group; worker processes would each print a
    traceback, and this process cancels their tasks and stops them anyway."""
    try:
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:   # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@contextlib.contextmanager
def _quiet(name, level=logging.ERROR):
    """Only records of `level` and above from logger `name` and its children that set their own
    level (distributed's config gives 'distributed.client' one) meanwhile: a cluster started here
    is ours to run, and its INFO lines (or a nanny's benign WARNING when a worker process is slow
    to exit, which it then kills) would read as the analysis' own output; while a client is open,
    errors too (a failure is reported as one typed error)."""
    known = list(logging.root.manager.loggerDict.items())
    loggers = [logging.getLogger(name)] + [logging.getLogger(n) for n, lg in known
                                           if n.startswith(name + ".") and getattr(lg, "level", 0)]
    old = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(max(level, lg.level))
    try:
        yield
    finally:
        for lg, lv in zip(loggers, old):
            lg.setLevel(lv)


@contextlib.contextmanager
def using(scheduler):
    """Within the block, every sweep whose `scheduler=` is None (the probes' sweeps: clocks,
    basins, score_field, dsm_by_sigma, retention) runs on `scheduler` (see `check_scheduler`);
    a LocalCluster or connection is opened once for the block. `using(None)` runs locally.
    Yields the Client (None for local)."""
    local = check_scheduler(scheduler) is None
    with contextlib.nullcontext() if local else client_for(scheduler) as client:
        token = SCHEDULER.set(client)
        try:
            yield client
        finally:
            SCHEDULER.reset(token)


@contextlib.contextmanager
def submitted(scheduler, probe, pairs, done, name="steps", identify=None):
    """Submit one task per (step, getter) of `pairs` whose step is not in `done`.

    Yields [(step, fetch)] in the order of `pairs`: fetch() waits for that step's Dataset (with its
    `step` dimension), raises the warnings and the error its task raised, and returns it (None for
    steps in `done`). On exit, unfinished tasks are cancelled and a client opened here is closed.
    """
    todo = [(step, getter) for step, getter in pairs if step not in done]
    if not todo:   # everything is written already: no cluster to start
        yield [(step, None) for step, _ in pairs]
        return
    with client_for(scheduler) as client:
        tag = f"{re.sub(r'[^A-Za-z0-9_]', '_', name)}-{uuid.uuid4().hex[:8]}"
        futures = {step: client.submit(_task, probe, getter, step, identify, key=f"{tag}-step{step}",
                                       priority=len(todo) - i, pure=False)
                   for i, (step, getter) in enumerate(todo)}
        try:
            yield [(step, (lambda f=futures.get(step), s=step: None if f is None else _collect(f, client, s)))
                   for step, _ in pairs]
        finally:
            with contextlib.suppress(Exception):   # a lost scheduler: nothing left to cancel
                client.cancel([f for f in futures.values() if not f.done()])


def check_sendable(scheduler, probe, pairs):
    """Before any work: ConfigError for a bad `scheduler` (see `check_scheduler`) or when the probe
    or a step's getter (loader and source) does not pickle with cloudpickle, as dask needs."""
    check_scheduler(scheduler)
    import cloudpickle
    for what, obj in [("probe", probe)] + [(f"loader of step {s}", g) for s, g in pairs]:
        try:
            cloudpickle.dumps(obj)
        except Exception as e:   # pickling raises TypeError, PicklingError, AttributeError...
            raise ConfigError(f"the {what} cannot be sent to dask workers (cloudpickle: {type(e).__name__}: "
                              f"{e}); run it locally or make it picklable") from None


def _task(probe, getter, step, identify=None):
    """On a worker: (Dataset of the step, warnings raised [(category, message, file, line)], error):
    a typed error as is, any other exception as a WorkerError naming the step and it (an exception
    is returned, not raised: the worker prints no traceback, and a plain one is not retried); the
    Dataset carries the identity of the model it measured, as locally (see `executor.run_step`)."""
    _thread_lock_for_tqdm()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ScoreprobeWarning)   # the caller's filters decide about showing them
        try:
            part, error = run_step(probe, getter, step, identify), None
        except ScoreprobeError as e:
            part, error = None, e
        except Exception as e:  # noqa: BLE001  (MemoryError, RuntimeError... from the probe or the loader)
            part, error = None, WorkerError(f"step {step} failed on a dask worker ({first_line(e)}); "
                                            f"{dask_wait.RESUME}")
    return part, [(w.category, str(w.message), w.filename, w.lineno) for w in caught], error


def _thread_lock_for_tqdm():
    """In a worker process, before its first progress bar: tqdm's lock as a thread lock. Its default
    multiprocessing lock is a named semaphore that a worker stopped mid-task (after Ctrl-C) leaks,
    and the resource tracker then warns about it when the caller exits."""
    from tqdm.std import tqdm
    if "_lock" not in vars(tqdm):
        tqdm.set_lock(threading.RLock())


def _collect(future, client, step):
    part, caught, error = dask_wait.wait_result(future, client, step)
    _reissue(caught)
    if error is not None:
        raise error
    return part


def _reissue(caught):
    """Raise the warnings of a task here: ours at the user's line, others where they were raised."""
    for category, message, filename, lineno in caught:
        if issubclass(category, ScoreprobeWarning):
            warnings.warn(message, category, stacklevel=user_stacklevel())
        else:
            warnings.warn_explicit(message, category, filename, lineno, registry=_REGISTRY)
