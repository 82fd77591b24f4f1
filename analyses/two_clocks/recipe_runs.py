"""The runs of two_clocks' recipe (scoreprobe.studies.recipes: train_config, run_name; analyses/two_clocks):
each trained (or resumed) in its run directory <args.out>/<run name>, its clocks measured (`queue.measured_clocks`,
resumable) and read into one row of the study's table; `args.jobs` at a time, or trained first as stacked
ensembles with args.ensemble."""
import functools
import logging
import time
from pathlib import Path

import numpy as np

from scoreprobe.loading.series import load_series
from scoreprobe.stats.extrapolate import extrapolate_tau
from scoreprobe.studies.queue import finished, in_parallel, measured_clocks, train_ensembles
from scoreprobe.studies.recipes import run_name, total_steps, train_config
from scoreprobe.training.train import train_run

logger = logging.getLogger("two_clocks")


def plan_runs(args):
    """[(G, N, seed)] for the G sweep at N_fixed and the N sweep at G_fixed, each seed, without
    duplicates, longest first."""
    grid = list(dict.fromkeys([(G, args.N_fixed) for G in args.Gs] + [(args.G_fixed, N) for N in args.Ns]))
    return sorted([(G, N, s) for G, N in grid for s in args.seeds], key=lambda r: -total_steps(args, r[1]))


def run_one(args, G, N, seed, figure=None):
    """Train (or resume) one run and measure its clocks; returns the row of the table (None: train only)."""
    name = run_name(G, N, seed)
    run_dir = Path(args.out) / name
    cfg = train_config(args, G, N, seed)
    t0 = time.time()
    if not finished(run_dir, cfg):
        train_run(cfg, run_dir, device=args.device, progress=False)
    t1 = time.time()
    logger.info("%s: trained (%.0f s)", name, t1 - t0)
    if args.train_only:
        return None
    return measure_run(args, run_dir, name, G, N, seed, train_s=t1 - t0, figure=figure)


def run_all(args, runs, figure=None):
    """run_one over `runs` ([(G, N, seed)]; rows in `runs` order): `args.jobs` at a time in one-thread worker
    processes, or, with args.ensemble, training first as stacked ensembles (`queue.train_ensembles`); figure(ds,
    args, name, G, N) after each run's clocks (module-level: it goes to the workers)."""
    if args.ensemble:
        train_ensembles([train_config(args, *r) for r in runs], [Path(args.out) / run_name(*r) for r in runs],
                        args.device)
    return in_parallel(functools.partial(run_one, args, figure=figure), runs, 1 if args.ensemble else args.jobs)


def measure_run(args, run_dir, name, G, N, seed, train_s, figure=None):
    """Clocks of one trained run (resumable store in the run directory); the row of the table: the τ with their
    CIs, the window, the accuracies, the times, and an extrapolated τ_rule where it is not reached."""
    t0 = time.time()
    kw = {} if args.n_steps is None else {"n_steps": args.n_steps}
    ds = measured_clocks(load_series(run_dir), run_dir / "clocks.zarr", n_samples=args.n_samples, device=args.device,
                         **kw)
    if figure is not None:
        figure(ds, args, name, G, N)
    a = ds.attrs
    keys = ("tau_rule", "tau_rule_ci", "tau_novel", "tau_novel_ci", "tau_mem", "tau_mem_ci", "window_open",
            "window_intervals", "window_log10_width", "window_log10_width_ci", "window_hi_censored",
            "under_resolved", "log10_ratio")
    row = {"run": name, "G": G, "N": N, "seed": seed, "steps": int(ds.step.max()), **{k: a.get(k) for k in keys},
           "peak_rule_acc": float(ds.rule_acc.max()), "final_rule_acc": float(ds.rule_acc[-1]),
           "final_mem_ratio": float(ds.mem_ratio[-1]), "train_s": round(train_s, 1),
           "clocks_s": round(time.time() - t0, 1)}
    if not np.isfinite(row["tau_rule"]):
        row["tau_rule_extrapolated"] = extrapolate_tau(ds)
    logger.info("%s: τ_rule=%s τ_mem=%s (clocks %.0f s)", name, row["tau_rule"], row["tau_mem"], row["clocks_s"])
    return row
