"""Running a study's runs on the shared study machinery (any study whose runs are parity runs of
`scoreprobe.studies.recipes`, some of them shared with another study's grid): each run trains and exports with
`run.run_one` into the export folder its study names for it (`folder_of(run)`: a run that *is* another study's
run keeps that study's folder, so it is
reused, never trained twice), runs already exported with the same TrainConfig are skipped, `--jobs` run at a
time (scoreprobe.studies.queue.run_queue: a run starts when a worker is free, none that would end past `--hours`), and
`--plan` prints the order with estimated times."""
import copy
import functools
from pathlib import Path

from scoreprobe.studies import recipes, runner
from scoreprobe.studies.export import load_exports
from scoreprobe.studies.queue import at_a_time, finish_times, run_queue, shared_cores, train_stacked


def run_one(args, run, folder):
    """scaling's run_one (train or resume, clocks, export) with the export folder `folder` (on one torch thread:
    run_queue gives one to the worker processes and to a run in this process)."""
    a = copy.copy(args)
    a.exports = folder
    return runner.run_one(a, run)


def _run_in(args, run, folders):
    return run_one(args, run, folders[run.name])


def exported(runs, folder_of):
    """Names of the runs whose export exists in folder_of(run) with the same TrainConfig."""
    return {r.name for r in runs if r.name in load_exports([r], folder_of(r))[0]}


def run_all(args, runs, folder_of, on_done):
    """run_one over the runs not yet exported, in plan order, `args.jobs` at a time; on_done(name) after each (a
    failure is logged, the rest go on). With args.hours, no run starts that would not be done by then
    (estimated rate × LOAD_FACTOR). Returns False when some run was not started for the deadline. With
    args.ensemble (a study's default on CUDA) and no scheduler, the runs train first as stacked ensembles
    (queue.train_stacked, `args.jobs` groups at a time, --hours not applied), then run_one measures and exports."""
    done = exported(runs, folder_of)
    todo = [r for r in runs if r.name not in done]
    scheduler = getattr(args, "scheduler", None)
    folders = {r.name: Path(folder_of(r)).resolve() if scheduler else folder_of(r)   # picklable, unlike folder_of,
               for r in todo}                                     # for the workers (absolute: a dask worker's cwd)
    if getattr(args, "ensemble", False) and scheduler is None and todo:   # on CUDA: stacked ensembles train first
        train_stacked([r.cfg for r in todo], [runner.run_dir(args, r) for r in todo], args.device, args.jobs)
    skipped = run_queue(functools.partial(_run_in, folders=folders), args, todo, on_done,
                        functools.partial(runner.seconds_left, args), getattr(args, "hours", None),
                        args.jobs, "presets", scheduler)
    return not skipped


def plan_lines(runs, args, folder_of, describe, pending=(), seconds=None):
    """The first line (runs, exported, estimated hours as run_all runs them, scoreprobe.studies.queue.finish_times) and one
    line per run: its name, describe(run), steps, estimated minutes, the time by which it is done and the step it
    resumes at. `pending`:
    runs whose settings wait on other runs' results, listed after at provisional settings; one already exported
    at them is counted as done, and the first line gives the time should none of them be. seconds(run): the
    estimate (default: runner.seconds_left's, recipes.run_seconds of what is left after the run's resume.pt)."""
    every = list(runs) + list(pending)
    done = exported(every, folder_of)
    todo = [r for r in every if r.name not in done]
    trained = {r.name: runner.trained_steps(args, r) for r in todo}      # each resume.pt read once
    seconds = seconds or (lambda r: recipes.run_seconds(r, args.n_samples, trained.get(r.name, 0)))
    secs = {r.name: seconds(r) for r in every}
    cores = shared_cores(args.device, args.jobs)
    ends, total = finish_times([secs[r.name] for r in todo], args.jobs, cores)
    worst = finish_times([secs[r.name] for r in every if r.name not in done or r in pending], args.jobs, cores)[1]
    finish = {r.name: e for r, e in zip(todo, ends)}
    gpu = "; GPU throughput is not measured here" if "gpu" in args.preset else ""
    lines = [f"{len(every)} runs, preset {args.preset} ({len(done)} exported already), "
             f"{at_a_time(args.jobs, cores)}: estimated "
             f"{total / 3600:.2f} h for the rest ({sum(secs[r.name] for r in todo) / 3600:.1f} thread-hours, one-thread "
             f"rates of scoreprobe/studies/recipes.py{gpu})" + (f"; {worst / 3600:.2f} h if no pending run is reused"
                                                           if worst > total else "")]
    for i, r in enumerate(every):
        state = "exported" if r.name in done else f"~{secs[r.name] / 60:5.1f} min, done by ~{finish[r.name] / 3600:4.2f} h"
        state += f" (resumes at step {trained[r.name]:,})" if trained.get(r.name) else ""
        lines.append(f"  {i + 1:3d} {r.name:40s} {describe(r)}  {r.steps:6d} steps  {state}"
                     + ("  (pending)" if i >= len(runs) else ""))
    return lines


# ---------------------------------------------------------------------------------------------
# Reading the exports back and writing the tables
# ---------------------------------------------------------------------------------------------

def collect(runs, folder_of, row_of):
    """rows [row_of(run, export)] of the planned `runs` exported in folder_of(run) with their TrainConfig, in plan
    order, and missing {run: why} for the others."""
    rows, missing = [], {}
    for run in runs:
        done, why = load_exports([run], folder_of(run))
        if run.name in done:
            rows.append(row_of(run, done[run.name]))
        missing.update(why)
    return rows, missing


def write_report(results, stem, text, rep):
    """Write <results>/<stem>.md (text) and .json (rep, JSON-able once keys are strings); returns the stem path
    (the study draws its .png beside them)."""
    import json
    from scoreprobe.atomic import atomic_write_text
    from scoreprobe.store import normalize_config
    path = results / stem
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path.with_suffix(".md"), text)
    atomic_write_text(path.with_suffix(".json"), json.dumps(normalize_config(keys_to_str(rep)), indent=1))
    return path


def keys_to_str(obj):
    """`obj` with every dict key a string (JSON objects have string keys), recursively."""
    if isinstance(obj, dict):
        return {str(k): keys_to_str(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [keys_to_str(v) for v in obj]
    return obj


def collect_stats(args, runs, export_folder, row_of=None):
    """rows, missing {run: why} of the planned `runs` (`collect`), each read from export_folder(args.results,
    args.preset, run) (a study's grid.export_folder); a row is `row_of`(run, export), by default the run's numbers
    of `scoreprobe.stats.runs.run_stats`."""
    from scoreprobe.stats.runs import run_stats
    return collect(runs, lambda run: export_folder(args.results, args.preset, run),
                   row_of or (lambda run, info: run_stats(run.name, run, info)[0]))


def runs_json(rows, drop=("curve", "curves")):
    """The per-run rows without their (long) curves, which the exports hold: the "runs" of a report's JSON."""
    return [{k: v for k, v in r.items() if k not in drop} for r in rows]


def report_json(args, runs, missing, rows, **parts):
    """The JSON report every study writes: preset, n_planned, missing, the study's `parts`, and "runs" (`runs_json`)."""
    return {"preset": args.preset, "n_planned": len(runs), "missing": missing, **parts, "runs": runs_json(rows)}


def write_tables(results, stem, text, rep, draw=None):
    """`write_report`, then draw(<stem>.png) (the study's figure, optional); returns the .md path."""
    path = write_report(results, stem, text, rep)
    if draw is not None:
        draw(path.with_suffix(".png"))
    return path.with_suffix(".md")


def collect_with_draws(runs, folder):
    """rows (per run, `scoreprobe.stats.runs.run_stats`, JSON-able), draws {run: {key: (point, draws)}} (its
    sample-level resamples), missing {run: why} of the planned `runs` exported in `folder`, in plan order."""
    from scoreprobe.stats.runs import run_stats
    done, missing = load_exports(runs, folder)
    rows, draws = [], {}
    for run in runs:
        if run.name in done:
            row, d = run_stats(run.name, run, done[run.name])
            rows.append(row)
            draws[run.name] = d
    return rows, draws, missing
