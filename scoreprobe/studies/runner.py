"""One run of a study, start to end: train (or resume) it, measure the clocks of every checkpoint
(`queue.measured_clocks`, store <run dir>/clocks.zarr, resumed) and write its export (`export.export_run`,
<exports>/<run>.npz); a stage already done is skipped, and its time kept from the earlier export."""
import json
import logging
import time
from pathlib import Path

from scoreprobe.data.curriculum import piece_valid
from scoreprobe.data.rules import rule_from_spec
from scoreprobe.errors import CheckpointError, first_line
from scoreprobe.loading.series import load_series
from scoreprobe.models.build import param_count
from scoreprobe.studies.divergence import RECOVER, WINDOW, divergence, log_meta
from scoreprobe.studies.export import export_run, load_exports, read_export, set_meta
from scoreprobe.studies.queue import finished, measured_clocks
from scoreprobe.store import normalize_config
from scoreprobe.studies.recipes import run_seconds
from scoreprobe.training.config import RESUME_STATE, stored_config
from scoreprobe.training.guard import read_state
from scoreprobe.training.train import train_run

logger = logging.getLogger("scaling")


def run_dir(args, run):
    return Path(args.out) / run.folder / run.name


def trained_steps(args, run):
    """Steps the run's directory has already trained: the step of its resume.pt, 0 when it has none or it does
    not read as this run's training state (training then says why)."""
    path = run_dir(args, run) / RESUME_STATE
    if not path.exists():
        return 0
    try:
        return read_state(path, "cpu", run.steps)["step"]
    except CheckpointError:
        return 0


def seconds_left(args, run):
    """recipes.run_seconds of what is left of `run` (its steps after `trained_steps`, then all its clocks) at
    args.n_samples: what plans print and --hours checks."""
    return run_seconds(run, args.n_samples, trained_steps(args, run))


def _refuse_diverged(path, run, what):
    """CheckpointError when <path>'s finished training log shows a blow-up (`divergence.divergence`; a spike on its
    last line counts: nothing shows it recovered). When training started is not judged here: it goes into the
    export's meta."""
    blown = divergence(path)
    if blown is None:
        return
    after = ("nothing logged after it" if blown["after"] is None else
             f"no {WINDOW} lines after it with a median within {RECOVER:g}× the one before (lowest "
             f"{blown['after']:.3g})")
    raise CheckpointError(f"{run.name}: training diverged at step {blown['step']} (loss {blown['loss']:.3g}, "
                          f"{blown['loss'] / blown['median']:.0f}× the median {blown['median']:.3g} of the {WINDOW} log "
                          f"lines before; {after}); {what}: its τ would read a broken network (a lower learning rate "
                          "or a warm-up is needed)")


def run_one(args, run):
    """Train (or resume) one run, measure its clocks and export it; returns the run's name. A run whose training
    diverged (`divergence.divergence`: a loss spike it did not recover from by the end of training) is refused before
    its clocks: a CheckpointError, nothing exported; spikes it recovered from go into the export's meta."""
    path, t0 = run_dir(args, run), time.time()
    resumed = {}
    if not finished(path, run.cfg):   # a spike is judged once training is done: recovery may take a while
        step = trained_steps(args, run)
        resumed = {"train_s_from_step": step} if step else {}   # train_s then times the steps after it only
        train_run(run.cfg, path, device=args.device, progress=False)
    train_s = time.time() - t0
    logger.info("%s: trained (%.0f s)", run.name, train_s)
    _refuse_diverged(path, run, "not measured or exported")
    if args.train_only:
        return run.name
    t1 = time.time()
    kw = {} if args.n_steps is None else {"n_steps": args.n_steps}
    plan = run.cfg.curriculum_plan()   # a curriculum run keeps its samples: the rule clock beyond the pieces
    keep = plan is not None or getattr(args, "keep_bits", False)   # with the bits, the export holds each Σ bits
    ds = measured_clocks(load_series(path), path / "clocks.zarr", n_samples=args.n_samples, device=args.device,
                         keep_bits=keep, **kw)
    piece = None if plan is None else piece_valid(ds, rule_from_spec(run.cfg.rule), plan[0])
    clocks_s = time.time() - t1
    export = args.exports / f"{run.name}.npz"
    earlier = _previous(export, run) if min(train_s, clocks_s) <= 5 else {}   # a skipped stage keeps its time
    meta = with_device({**run.meta, **log_meta(path), **resumed}, args.device)   # its start, the spikes it recovered
    # from, and where train_s starts when it resumed
    export_run(ds, run.cfg, param_count(run.cfg), export, meta=meta,
               train_s=train_s if train_s > 5 else earlier.get("train_s"),
               clocks_s=clocks_s if clocks_s > 5 else earlier.get("clocks_s"), piece_valid=piece)
    logger.info("%s: clocks (%.0f s), exported to %s", run.name, clocks_s, export)
    return run.name


def record_log_meta(args, run, export):
    """Add what `run`'s training log says (`divergence.log_meta`) to the meta of its `export` made before the runner
    recorded it (or an older reading of it); returns the fields, or None when there is no log or the export has them.
    A CheckpointError when the run directory's TrainConfig is not the export's (another run's log is never recorded)."""
    path = run_dir(args, run)
    fields, info = log_meta(path), read_export(export)
    if not fields or all(info["meta"].get(k) == v for k, v in fields.items()):
        return None
    stored = normalize_config(stored_config(_run_config(path)))
    if stored != info["config"]:
        raise CheckpointError(f"{run.name}: the run directory {path} holds another TrainConfig than {export}")
    set_meta(export, fields)
    return fields


def _run_config(path):
    """The config of <path>/run.json; CheckpointError naming the file when it is not a JSON object with one."""
    try:
        meta = json.loads((path / "run.json").read_text())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise CheckpointError(f"{path / 'run.json'} is not readable JSON: {first_line(e)}") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("config", {}), dict):
        raise CheckpointError(f"{path / 'run.json'} is not a run's settings (a JSON object with a config object)")
    return meta.get("config", {})


def with_device(meta, device):
    """meta, plus {"device": "cuda: <its name>"} when the study ran on a device other than the CPU (a run's τ may
    differ in rounding between devices; exports made on the CPU, all before 2026-12-05, carry no field)."""
    if str(device) == "cpu":
        return meta
    import torch
    name = torch.cuda.get_device_name(torch.device(device)) if str(device).startswith("cuda") else str(device)
    return {**meta, "device": f"{device}: {name}"}


def _previous(export, run):
    """The earlier export of the same run as read by load_exports ({} when none, e.g. trained by two_clocks.py)."""
    done, _ = load_exports([run], export.parent)
    return done.get(run.name, {})
