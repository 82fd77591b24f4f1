"""The command line every study shares (`python analyses/<study>`): --preset, --smoke, --jobs, --device,
--train-only, --from-results, --plan, --hours, --out, --results; `drive` runs the plan, trains what is not
exported yet and prints the tables. The only part of the studies that prints."""
import functools

from scoreprobe.studies import recipes
from scoreprobe.studies.presets import plan_lines, run_all


def drive(args, plan, train, write, log):
    """The command every study shares: --plan prints plan() (its lines) and runs nothing; otherwise, unless
    --from-results, logs the plan's first line and calls train(on_done) (on_done(name) rewrites the tables
    with write(), none with --train-only, which then stops; a train that returns False stops too: what its
    tables need is not done); then write() (the .md path) and the tables printed with the files written."""
    if args.plan:
        print("\n".join(plan()))
        return
    train_only = getattr(args, "train_only", False)
    if not args.from_results:
        log.info(plan()[0])
        if train(lambda name: None if train_only else write()) is False or train_only:
            return
    md = write()
    print(md.read_text())
    print("wrote " + ", ".join(str(p) for p in (md, md.with_suffix(".json"), md.with_suffix(".png")) if p.exists()))


def parser(doc, choices, smoke="smoke", default_help="default: gpu on CUDA, else cpu", unit="runs", train_only=True,
           devices=None):
    """The options of a study on this machinery: --preset (choices), --smoke, --jobs, --device, --train-only,
    --from-results, --plan, --hours, --out, --results, --scheduler; a study adds its own before parse_args.
    unit: what a study runs ("runs", "models"); train_only: offer --train-only; devices: the --device choices
    (default: any of cpu, cuda, auto)."""
    import argparse
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--preset", choices=sorted(choices), default=None, help=default_help)
    p.add_argument("--smoke", action="store_true", help=f"same as --preset {smoke}")
    p.add_argument("--jobs", type=int, default=None, help=f"{unit} at a time, one thread each (default: the preset's)")
    p.add_argument("--device", default="auto", choices=devices,
                   help=" or ".join(devices) if devices else "cpu, cuda or auto")
    if train_only:
        p.add_argument("--train-only", action="store_true", help="train (or resume) the runs, measure nothing")
    p.add_argument("--from-results", action="store_true", help="tables and figures from the .npz exports only")
    p.add_argument("--plan", action="store_true",
                   help=f"print the {unit} in order with their estimated time, run nothing")
    p.add_argument("--hours", type=float, default=None, help=f"start no {unit[:-1]} that would not be done within this "
                   "many hours (estimated rate × 1.5, for load; a killed one resumes)")
    p.add_argument("--out", default="runs", help="folder of the run directories")
    p.add_argument("--results", default=None, help="folder of the tables, figures and exports (default: "
                   "analyses/results, or --out for the smoke preset)")
    add_scheduler(p)
    return p


def add_scheduler(p):
    """--scheduler ADDRESS: every run a task on a dask.distributed cluster (docs/studies.md, "On a cluster")."""
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run each run as a task on this dask scheduler (tcp://HOST:PORT), or local:N for a local "
                        "cluster of N one-thread workers; the run and results folders must be shared with the workers")


def scheduler_of(p, value):
    """The scheduler `--scheduler` names, checked before any work (one line and exit 2 when it is malformed)."""
    if value is None:
        return None
    from scoreprobe.errors import ConfigError
    from scoreprobe.sweep.dask import check_scheduler
    try:
        if value.startswith("local:"):
            n = value.split(":", 1)[1]
            if not n.isdigit():
                raise ConfigError(f"local:N needs a number of workers, got {value!r}")
            return check_scheduler(("local", int(n)))
        return check_scheduler(value)
    except ConfigError as e:
        p.error(f"--scheduler: {e}")


def check_budget(p, args):
    """--jobs at least 1 and --hours positive (when given), else one line and exit 2."""
    if args.jobs is not None and args.jobs < 1:
        p.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.hours is not None and not args.hours > 0:
        p.error(f"--hours must be positive, got {args.hours}")


def names(p, option, text, allowed=None):
    """The comma-separated names of `option` ("--kinds") as a list; a name not in `allowed` (when given) is one
    line and exit 2."""
    out = [k.strip() for k in text.split(",") if k.strip()]
    bad = sorted(set(out) - set(allowed)) if allowed is not None else []
    if bad:
        p.error(f"unknown {option} {bad}: use {','.join(allowed)}")
    return out


def command_line(base, overrides):
    """`base` followed by --key value for each of `overrides` ({key: value}; a list as comma-separated values): the
    command that gives those settings (queue.add_overrides reads them back)."""
    def text(v):
        return ",".join(str(x) for x in v) if isinstance(v, list) else str(v)
    return base + "".join(f" --{k.replace('_', '-')} {text(v)}" for k, v in overrides.items())


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
    args.scheduler = scheduler_of(p, args.scheduler)
    args.device = resolve_device(args.device)
    auto = default(args.device) if default else ("gpu" if args.device.startswith("cuda") else "cpu")
    args.preset = smoke if args.smoke else args.preset or auto
    preset = presets[args.preset]
    scaling = recipes.RECIPES[preset["scaling"]]
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
