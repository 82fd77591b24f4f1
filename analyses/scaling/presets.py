"""Running another study's runs on the scaling study's machinery (analyses/data_draws, sudoku_transpose, the
remedies' G = 3 preset, gpt_dit_match): each run trains and exports with `run.run_one` into the export folder
its study names for it (`folder_of(run)`: a run that *is* a scaling run keeps scaling's folder, so it is
reused, never trained twice), runs already exported with the same TrainConfig are skipped, `--jobs` run at a
time (analyses.grid.run_queue: a run starts when a worker is free, none that would end past `--hours`), and
`--plan` prints the order with estimated times."""
import copy
import functools

from analyses.grid import drive, finish_times, run_queue
from analyses.scaling import grid as scaling_grid
from analyses.scaling import run as scaling_run
from analyses.scaling.export import load_exports


def run_one(args, run, folder):
    """scaling's run_one (train or resume, clocks, export) with the export folder `folder` (on one torch thread:
    run_queue gives one to the worker processes and to a run in this process)."""
    a = copy.copy(args)
    a.exports = folder
    return scaling_run.run_one(a, run)


def _run_in(args, run, folders):
    return run_one(args, run, folders[run.name])


def exported(runs, folder_of):
    """Names of the runs whose export exists in folder_of(run) with the same TrainConfig."""
    return {r.name for r in runs if r.name in load_exports([r], folder_of(r))[0]}


def run_all(args, runs, folder_of, on_done):
    """run_one over the runs not yet exported, in plan order, `args.jobs` at a time; on_done(name) after each (a
    failure is logged, the rest go on). With args.hours, no run starts that would not be done by then
    (estimated rate × LOAD_FACTOR). Returns False when some run was not started for the deadline."""
    done = exported(runs, folder_of)
    todo = [r for r in runs if r.name not in done]
    folders = {r.name: folder_of(r) for r in todo}   # picklable, unlike folder_of, for the worker processes
    skipped = run_queue(functools.partial(_run_in, folders=folders), args, todo, on_done,
                        lambda r: scaling_grid.run_seconds(r, args.n_samples), getattr(args, "hours", None),
                        args.jobs, "presets")
    return not skipped


def plan_lines(runs, args, folder_of, describe, pending=(), seconds=None):
    """The first line (runs, exported, estimated hours as run_all runs them, analyses.grid.finish_times) and one
    line per run: its name, describe(run), steps, estimated minutes and the time by which it is done. `pending`:
    runs whose settings wait on other runs' results, listed after at provisional settings; one already exported
    at them is counted as done, and the first line gives the time should none of them be. seconds(run): the
    estimate (default analyses.scaling.grid.run_seconds at args.n_samples)."""
    every = list(runs) + list(pending)
    done = exported(every, folder_of)
    seconds = seconds or (lambda r: scaling_grid.run_seconds(r, args.n_samples))
    secs = {r.name: seconds(r) for r in every}
    todo = [r for r in every if r.name not in done]
    ends, total = finish_times([secs[r.name] for r in todo], args.jobs)
    worst = finish_times([secs[r.name] for r in every if r.name not in done or r in pending], args.jobs)[1]
    finish = {r.name: e for r, e in zip(todo, ends)}
    gpu = "; GPU throughput is not measured here" if "gpu" in args.preset else ""
    lines = [f"{len(every)} runs, preset {args.preset} ({len(done)} exported already), {args.jobs} at a time: estimated "
             f"{total / 3600:.2f} h for the rest ({sum(secs[r.name] for r in todo) / 3600:.1f} thread-hours, one-thread "
             f"rates of analyses/scaling/grid.py{gpu})" + (f"; {worst / 3600:.2f} h if no pending run is reused"
                                                           if worst > total else "")]
    for i, r in enumerate(every):
        state = "exported" if r.name in done else f"~{secs[r.name] / 60:5.1f} min, done by ~{finish[r.name] / 3600:4.2f} h"
        lines.append(f"  {i + 1:3d} {r.name:40s} {describe(r)}  {r.steps:6d} steps  {state}"
                     + ("  (pending)" if i >= len(runs) else ""))
    return lines


# ---------------------------------------------------------------------------------------------
# The command line every such study shares
# ---------------------------------------------------------------------------------------------

def parser(doc, choices, smoke="smoke", default_help="default: gpu on CUDA, else cpu"):
    """The options of a study on this machinery: --preset (choices), --smoke, --jobs, --device, --train-only,
    --from-results, --plan, --hours, --out, --results; a study adds its own before parse_args."""
    import argparse
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--preset", choices=sorted(choices), default=None, help=default_help)
    p.add_argument("--smoke", action="store_true", help=f"same as --preset {smoke}")
    p.add_argument("--jobs", type=int, default=None, help="runs at a time, one thread each (default: the preset's)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto")
    p.add_argument("--train-only", action="store_true", help="train (or resume) the runs, measure nothing")
    p.add_argument("--from-results", action="store_true", help="tables and figures from the .npz exports only")
    p.add_argument("--plan", action="store_true", help="print the runs in order with their estimated time, run nothing")
    p.add_argument("--hours", type=float, default=None, help="start no run that would not be done within this many "
                   "hours (estimated rate × 1.5, for load)")
    p.add_argument("--out", default="runs", help="folder of the run directories")
    p.add_argument("--results", default=None, help="folder of the tables, figures and exports (default: "
                   "analyses/results, or --out for the smoke preset)")
    return p


def parse(p, argv, presets, smoke="smoke", default=None):
    """Parse and resolve: --jobs ≥ 1 and --hours > 0 (else one line, exit 2), the device, the preset (--smoke;
    else `default`(device) or gpu on CUDA and cpu otherwise), --jobs from it, the results folder, and n_samples /
    n_steps from the scaling preset it names (`presets[preset]["scaling"]`)."""
    from pathlib import Path
    from scoreprobe.probes.clocks import resolve_device
    args = p.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        p.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.hours is not None and not args.hours > 0:
        p.error(f"--hours must be positive, got {args.hours}")
    args.device = resolve_device(args.device)
    auto = default(args.device) if default else ("gpu" if args.device.startswith("cuda") else "cpu")
    args.preset = smoke if args.smoke else args.preset or auto
    preset = presets[args.preset]
    scaling = scaling_grid.PRESETS[preset["scaling"]]
    args.jobs = preset["jobs"] if args.jobs is None else args.jobs
    ensemble = getattr(args, "ensemble", False)   # a study's own --ensemble: None means on CUDA
    args.ensemble = args.device.startswith("cuda") if ensemble is None else ensemble
    args.results = Path(args.results or (args.out if args.preset == smoke else "analyses/results"))
    args.n_samples, args.n_steps = scaling["n_samples"], scaling["n_steps"]
    return args


def folder(grid_mod, args):
    """run -> its export folder, grid_mod.export_folder(args.results, args.preset, run) (picklable)."""
    return functools.partial(grid_mod.export_folder, args.results, args.preset)


def run_study(argv, doc, grid_mod, describe, tables, log, smoke="smoke", default=None):
    """A study's whole command: parse (parser, parse), then `main` over grid_mod.plan(preset) with its runs'
    export folders from grid_mod.export_folder; `tables` names the module whose write_all(args, runs) writes
    the tables, returning the .md path (imported when first needed: --plan does not load it)."""
    import importlib
    import logging
    args = parse(parser(doc, grid_mod.PRESETS, smoke), argv, grid_mod.PRESETS, smoke, default)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    def write(args, runs):
        return importlib.import_module(tables).write_all(args, runs)
    main(args, grid_mod.plan(args.preset), folder(grid_mod, args), describe, write, log)


def main(args, runs, folder_of, describe, write, log):
    """--plan prints the plan; otherwise train, measure and export what is not exported yet (tables rewritten
    by write(args, runs) after each run), then the tables from the exports, printed."""
    def train(on_done):   # the tables are written at the end even when --hours left runs out
        run_all(args, runs, folder_of, on_done)
    drive(args, lambda: plan_lines(runs, args, folder_of, describe), train, lambda: write(args, runs), log)


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
    from analyses.scaling.tables import _keys_to_str
    from scoreprobe.atomic import atomic_write_text
    from scoreprobe.store import normalize_config
    path = results / stem
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path.with_suffix(".md"), text)
    atomic_write_text(path.with_suffix(".json"), json.dumps(normalize_config(_keys_to_str(rep)), indent=1))
    return path
