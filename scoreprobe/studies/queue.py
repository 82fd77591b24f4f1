"""Shared by the studies: running a grid of training runs (one-thread worker processes, or stacked
ensembles on a GPU; unattended: in plan order, a failing run logged and skipped, none started past a
deadline, since a run cut off with its session is lost) and the extrapolated τ of a run that did not
reach the threshold."""
import contextlib
import json
import logging
import multiprocessing
import os
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import torch

from scoreprobe.loading.series import load_series
from scoreprobe.training.config import ENSEMBLE_VARIES, RESUME_STATE, ckpt_path, stored_config
from scoreprobe.training.ensemble import train_ensemble
from scoreprobe.errors import StoreError, first_line
from scoreprobe.stats.clocks import clocks

logger = logging.getLogger("grid")


def finished(run_dir, cfg):
    """True when `run_dir` holds this config's run with every planned checkpoint written (skip training).

    Whatever a kill leaves is not finished, so that training resumes or restarts it: no run.json yet, run.json
    without a checkpoint (killed before the first), a training state (resume.pt: killed mid-run, or after the last
    checkpoint and before the state was moved), a checkpoint missing (killed while writing it: only its temporary
    file exists). A planned checkpoint missing from a run that is otherwise done (deleted) is logged: training then
    runs again from its last state or from step 0 and writes it (the checkpoints still there are checked bit for
    bit, `training.guard.save_checkpoint`), so an export never holds fewer steps than planned. A damaged run.json
    is a CheckpointError naming the file."""
    from scoreprobe.loading.series import _read_run_json   # size, JSON, format, arch, the steps' types
    run_dir = Path(run_dir)
    if not (run_dir / "run.json").is_file() or (run_dir / RESUME_STATE).exists():
        return False
    meta = _read_run_json(run_dir)
    if stored_config(meta.get("config", {})) != cfg.to_dict():
        return False  # train_run explains the difference
    planned = meta.get("checkpoint_steps") or [cfg.total_steps]
    missing = [s for s in planned if not ckpt_path(run_dir, s).exists()]
    if missing and ckpt_path(run_dir, cfg.total_steps).exists():
        logger.warning("%s: the checkpoints of steps %s are missing (deleted?) from a finished run: training again "
                       "to write them", run_dir, ", ".join(map(str, missing[:5])) + (" ..." if len(missing) > 5 else ""))
    return not missing


def apply_preset(args, presets):
    """Resolve args.device, pick the preset (--smoke, --preset, else gpu on CUDA and cpu otherwise) and
    fill every argument left at None from it; returns the preset's name (also set as args.preset)."""
    from scoreprobe.probes.clocks import resolve_device
    args.device = resolve_device(args.device)
    preset = "smoke" if args.smoke else args.preset or ("gpu" if args.device.startswith("cuda") else "cpu")
    args.overrides = {}
    for key, value in presets[preset].items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
        elif getattr(args, key) != value:
            args.overrides[key] = getattr(args, key)   # given on the command line, unlike the preset
    args.preset = preset
    return preset


def add_overrides(p, presets):
    """--<key> on parser `p` for every setting of `presets` ({name: {key: value}}; a dict-valued setting is left
    out), default None so that apply_preset fills what the command line did not give: an int (or float) as the
    presets' first non-None value of that key is, or a comma-separated list of them as a list value is."""
    first = {}
    for preset in presets.values():
        for key, value in preset.items():
            if value is not None and not isinstance(value, dict):
                first.setdefault(key, value)
    for key, value in first.items():
        kind = (lambda s, t=type(value[0]): [t(v) for v in s.split(",")]) if isinstance(value, list) else type(value)
        p.add_argument("--" + key.replace("_", "-"), dest=key, type=kind, default=None)


def worker_init():
    torch.set_num_threads(1)   # one thread per run: two runs use both cores (checkpoints/README.md)
    logging.basicConfig(level=logging.INFO, format="%(message)s")


def in_parallel(fn, calls, jobs):
    """[fn(*c) for c in calls], `jobs` at a time in one-thread worker processes (jobs <= 1: here)."""
    if jobs <= 1:
        return [fn(*c) for c in calls]
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=ctx, initializer=worker_init) as pool:
        return [f.result() for f in [pool.submit(fn, *c) for c in calls]]


def ensemble_groups(cfgs):
    """Lists of positions in `cfgs` whose TrainConfigs can train as one ensemble (equal outside
    ENSEMBLE_VARIES: same architecture, steps and optimisation), in order of first appearance."""
    groups = {}
    for i, cfg in enumerate(cfgs):
        shared = json.dumps({k: v for k, v in cfg.to_dict().items() if k not in ENSEMBLE_VARIES}, sort_keys=True)
        groups.setdefault(shared, []).append(i)
    return list(groups.values())


def train_ensembles(cfgs, run_dirs, device):
    """Train (or resume) every unfinished run, one `train_ensemble` per group of `ensemble_groups`."""
    for group in ensemble_groups(cfgs):
        todo = [i for i in group if not finished(run_dirs[i], cfgs[i])]
        if todo:
            t0 = time.time()
            train_ensemble([cfgs[i] for i in todo], [run_dirs[i] for i in todo], device=device, progress=False)
            logger.info("ensemble of %d runs (%d steps) trained in %.0f s", len(todo), cfgs[todo[0]].total_steps,
                        time.time() - t0)


def _train_group(cfgs, run_dirs, device):
    """train_ensembles in a worker process; a group that raises is logged, not fatal (the others go on, and
    run_one then trains its runs alone)."""
    try:
        train_ensembles(cfgs, run_dirs, device)
    except Exception as e:   # noqa: BLE001
        logger.error("ensemble of %s failed: %s: %s", ", ".join(Path(d).name for d in run_dirs), type(e).__name__, e)


def train_stacked(cfgs, run_dirs, device, jobs):
    """Train (or resume) the runs as stacked ensembles (`ensemble_groups`: one per architecture and step count),
    `jobs` groups at a time in worker processes: on a GPU one process per run is bound by kernel launches, and a
    stacked group launches the kernels of one run for all its members."""
    groups = ensemble_groups(cfgs)
    calls = [([cfgs[i] for i in g], [run_dirs[i] for i in g], device) for g in groups]
    logger.info("training %d runs as %d stacked ensembles, %d at a time", len(cfgs), len(calls), min(jobs, len(calls)))
    in_parallel(_train_group, calls, min(jobs, len(calls)))


def measured_clocks(series, out, **kw):
    """sp.clocks(series, out=out, **kw) resumed from its store; a store with other settings (or sampled
    with other noise, before 2026-12-01) is replaced: it is derived from the run, which is kept."""
    try:
        return clocks(series, out=out, progress=False, **kw)
    except StoreError as e:
        logger.warning("%s; measuring again", first_line(e))
        return clocks(series, out=out, progress=False, overwrite=True, **kw)


def trained_with_clocks(run_dir, cfg, device, n_samples, n_steps=None):
    """(series, clocks Dataset, {"train", "clocks": seconds}) of the run of `cfg` in `run_dir`: trained (or resumed)
    unless finished, then its clocks at every checkpoint (measured_clocks, resumed from run_dir/clocks.zarr)."""
    from scoreprobe.training.train import train_run
    t0 = time.time()
    if not finished(run_dir, cfg):
        train_run(cfg, run_dir, device=device, progress=False)
    sec = {"train": time.time() - t0}
    series, t0 = load_series(run_dir), time.time()
    clocks = measured_clocks(series, Path(run_dir) / "clocks.zarr", n_samples=n_samples, device=device,
                             **({} if n_steps is None else {"n_steps": n_steps}))
    sec["clocks"] = time.time() - t0
    return series, clocks, sec


# ---------------------------------------------------------------------------------------------
# An unattended queue of runs
# ---------------------------------------------------------------------------------------------

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


def run_queue(fn, args, runs, on_done, estimate_s, hours=None, jobs=1, log_name="queue", scheduler=None,
              resources=None):
    """fn(args, run) (top-level, picklable; returns the run's name) over `runs` in order, `jobs` at a time: a run
    starts when a worker is free; on_done(name) after each success. With `hours`, a run whose estimate_s(run) ×
    LOAD_FACTOR (× jobs / cores where CPU workers outnumber the cores: `shared_cores`) would end past now + hours
    is not started (logged). A worker process that dies (SIGKILL, the out-of-memory killer) breaks its pool: the
    runs in flight then are run again one at a time, each in a fresh one-worker pool (a training run resumes from
    its last state), the one whose worker dies again is logged and skipped, and the queue goes on with a new pool.
    Returns the names not started.

    With `scheduler` (a distributed.Client, "tcp://HOST:PORT" or ("local", n)) each run is a dask task instead
    (scoreprobe.studies.distributed: a dead worker's run is run again elsewhere and resumes), `jobs` and `hours`
    unused: the cluster decides how many run at once, and every run is submitted; `resources`: the dask worker
    resources each run needs (e.g. {"GPU": 1})."""
    log = logging.getLogger(log_name)
    if scheduler is not None:
        from scoreprobe.studies.distributed import run_on_dask
        if hours is not None:
            log.info("--hours is not applied on a dask cluster: every run is submitted")
        return run_on_dask(scheduler, shared_paths(args), list(runs), lambda name: _done(on_done, name, log),
                           resources, fn=fn)
    deadline = None if hours is None else time.time() + hours * 3600
    skipped, todo, cores = [], list(runs), shared_cores(args.device, jobs)
    slow = jobs / cores if cores else 1.0

    def fits(run):
        ok = deadline is None or time.time() + LOAD_FACTOR * slow * estimate_s(run) <= deadline
        if not ok:
            log.info("not started: %s would not be done within --hours %s", run.name, hours)
            skipped.append(run.name)
        return ok

    if jobs <= 1:
        with one_thread(args.device, jobs):
            for run in todo:   # the deadline read when each run would start, not once for all at the start
                if fits(run):
                    _done(on_done, guarded(fn, args, run, log_name), log)
        return skipped
    queue = (fn, args, fits, on_done, log, log_name)
    while todo:
        suspects = _pool_pass(queue, todo, jobs)
        if suspects:
            log.warning("a worker process died with %s in flight: running each again alone",
                        ", ".join(r.name for r in suspects))
        for run in suspects:        # which of them killed its worker: each alone
            if _pool_pass(queue, [run], 1):
                log.error("%s failed: its worker process died (killed: out of memory?); skipped", run.name)
    return skipped


def shared_paths(args):
    """A copy of `args` with its folders (out, exports, results) absolute: a dask worker may run elsewhere, and
    the folders must be the same paths there (a shared file system)."""
    import copy
    a = copy.copy(args)
    for key in ("out", "exports", "results"):
        if getattr(a, key, None) is not None:
            setattr(a, key, type(getattr(a, key))(Path(getattr(a, key)).resolve()))
    return a


def _pool_pass(queue, todo, jobs):
    """Run the runs of `todo` (consumed in order) on a pool of `jobs` one-thread workers; returns the runs in
    flight when a worker died and broke the pool ([] when every run ended: done or logged as failed)."""
    fn, args, fits, on_done, log, log_name = queue
    ctx = multiprocessing.get_context("spawn")
    running = {}
    with ProcessPoolExecutor(jobs, mp_context=ctx, initializer=worker_init) as pool:
        while todo or running:
            while todo and len(running) < jobs:
                run = todo.pop(0)
                if not fits(run):
                    continue
                try:
                    running[pool.submit(guarded, fn, args, run, log_name)] = run
                except BrokenProcessPool:     # a worker died since the last wait
                    return [run, *running.values()]
            if not running:
                continue
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for f in finished:
                if not isinstance(f.exception(), BrokenProcessPool):
                    _done(on_done, f.result(), log)
                    del running[f]
            if running.keys() & finished:          # a broken future: every run still in flight is a suspect
                return list(running.values())
    return []


def _done(on_done, name, log):
    if name:
        try:
            on_done(name)
        except Exception as e:   # noqa: BLE001  a table update that fails must not stop the runs
            log.error("after %s: %s: %s", name, type(e).__name__, e)


def finish_times(seconds, jobs=1, cores=None):
    """When each of the runs with these estimated one-thread `seconds` is done (same order) and the total, as
    run_queue runs them: in order, each started on the first free of `jobs` workers. With `cores` fewer than the
    runs in flight, they share the cores equally (each at cores / in-flight of its one-thread rate); None: a core
    per worker."""
    jobs = max(jobs, 1)
    cores = jobs if cores is None else max(cores, 1)
    waiting, left, done, now = list(enumerate(seconds)), {}, [0.0] * len(seconds), 0.0
    while waiting or left:
        while waiting and len(left) < jobs:
            i, s = waiting.pop(0)
            left[i] = float(s)
        rate = min(1.0, cores / len(left))              # each run's share of a core
        first = min(left, key=left.get)
        dt = left.pop(first) / rate
        now, done[first] = now + dt, now + dt
        left = {i: s - dt * rate for i, s in left.items()}
    return done, now


def cpu_cores():
    """The CPU cores this process may run on (its affinity where the OS tells it, else os.cpu_count())."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:     # not on Linux
        return os.cpu_count() or 1


def shared_cores(device, jobs):
    """The CPU cores `jobs` one-thread runs share where they outnumber them (each then runs at cores / jobs of its
    one-thread rate), else None: a core each, and on CUDA, whose throughput is not modelled here."""
    if str(device).startswith("cuda") or (device == "auto" and torch.cuda.is_available()):
        return None
    cores = cpu_cores()
    return cores if jobs > cores else None


def at_a_time(jobs, cores):
    """How a plan names its parallelism: "3 at a time", with " sharing 2 cores" where `shared_cores` gave cores."""
    return f"{jobs} at a time" + (f" sharing {cores} cores" if cores else "")


def throttled(on_done, every_s):
    """on_done(name) after a finished run only when the last call is `every_s` seconds old (a study whose tables
    take long to rewrite: after every run of a long preset, once at the end of a fast one)."""
    last = [time.time()]

    def call(name):
        if time.time() - last[0] >= every_s:
            on_done(name)
            last[0] = time.time()
    return call
