"""A study's runs measured again with another sampler (analyses/sampler_scaling): each run regenerated from its
TrainConfig (its checkpoints are not shipped), checked against its shipped export (the last checkpoint's Heun
states: identical states name the same model), then measured with the other sampler and exported; a run whose
states differ is measured with Heun too, so that the comparison stays paired on its own checkpoints."""
import logging
import time

from scoreprobe.loading.series import load_series
from scoreprobe.models.build import param_count
from scoreprobe.ode.samplers import Sampler
from scoreprobe.studies import runner
from scoreprobe.studies.export import export_run, load_exports
from scoreprobe.studies.queue import finished, measured_clocks
from scoreprobe.training.train import train_run

logger = logging.getLogger("remeasure")


def identity_check(series, path, reference, args):
    """The last checkpoint's Heun states of the regenerated run against the shipped export's: (share equal, n)."""
    last = int(series.steps[-1])
    kw = {} if args.n_steps is None else {"n_steps": args.n_steps}
    ds = measured_clocks(series, path / "clocks_check.zarr", n_samples=args.n_samples, device=args.device,
                         steps=[last], **kw)
    ref = reference["ds"]
    if int(ref.step.values[-1]) != last or ref.sizes["sample"] != ds.sizes["sample"]:
        return 0.0, 0
    same = ds.state.values[-1] == ref.state.values[-1]
    return float(same.mean()), int(same.size)


def remeasure(args, run, sampler, label, shipped, exports):
    """Regenerate (or find) one run, check it is the shipped one (its export in the folder `shipped`), measure it
    with `sampler` (Sampler fields; its stores and files named by `label`) and export to <exports>/<run>.npz; a run
    whose states differ is measured with Heun too (<exports>/heun/<run>.npz). Returns the run's name."""
    reference = load_exports([run], shipped)[0].get(run.name)
    if reference is None:
        raise RuntimeError(f"no shipped export of {run.name} with this TrainConfig in {shipped}")
    path, t0 = runner.run_dir(args, run), time.time()
    if not finished(path, run.cfg):
        train_run(run.cfg, path, device=args.device, progress=False)
    train_s, series = time.time() - t0, load_series(path)
    share, n = identity_check(series, path, reference, args)
    meta = {**run.meta, "identity_share": share, "identity_n": n, "identical": bool(n and share == 1.0)}
    kw = {} if args.n_steps is None else {"n_steps": args.n_steps}
    if not meta["identical"]:   # another model: Heun on it too, so that the comparison stays paired
        logger.warning("%s: the regenerated run's states differ from the shipped export (%.3f equal)", run.name, share)
        heun = measured_clocks(series, path / "clocks.zarr", n_samples=args.n_samples, device=args.device, **kw)
        export_run(heun, run.cfg, param_count(run.cfg), exports / "heun" / f"{run.name}.npz", meta=meta)
    t1 = time.time()
    ds = measured_clocks(series, path / f"clocks_{label}.zarr", n_samples=args.n_samples, device=args.device,
                         sampler=Sampler(**sampler), **kw)
    export_run(ds, run.cfg, param_count(run.cfg), exports / f"{run.name}.npz", meta=meta,
               train_s=train_s if train_s > 5 else None, clocks_s=time.time() - t1)
    logger.info("%s: identical to the shipped run: %s; %s clocks exported", run.name, meta["identical"], label)
    return run.name


def collect_pairs(runs, exports, shipped, label="stochastic"):
    """Read `remeasure`'s exports back: ({"heun": rows, label: rows} (scoreprobe.stats.runs.run_stats, paired by
    run), identity rows {run, N, seed, identical, identity_share, identity_n, heun_from}, missing {run: why}) of
    every run with an export in `exports` and its Heun result (its own heun/<run>.npz, else the shipped export)."""
    from scoreprobe.stats.runs import run_stats
    from scoreprobe.studies.export import read_export
    done, missing = load_exports(runs, exports)
    rows = {s: [] for s in ("heun", label)}
    identity = []
    for run in runs:
        if run.name not in done:
            continue
        info = done[run.name]
        own = exports / "heun" / f"{run.name}.npz"
        heun = read_export(own) if own.is_file() else load_exports([run], shipped)[0].get(run.name)
        if heun is None:
            missing[run.name] = "no Heun result of the same model"
            continue
        rows[label].append(run_stats(run.name, run, info)[0])
        rows["heun"].append(run_stats(run.name, run, heun)[0])
        identity.append({"run": run.name, "N": run.meta["N"], "seed": run.seed, **{k: info["meta"].get(k) for k in (
            "identical", "identity_share", "identity_n")}, "heun_from": "own" if own.is_file() else "scaling export"})
    return rows, identity, missing
