"""One model of analyses/mechanism_seeds: train (or resume) it, measure its clocks at every checkpoint and
the mechanism's probes at the measured steps (scoreprobe.studies.battery: stores under the run directory,
resumed step by step), and export its per-unit arrays (scoreprobe.studies.battery_export)."""
import logging
import time
from pathlib import Path

from scoreprobe.studies import battery
from scoreprobe.studies.battery_export import basin_arrays, dsm_arrays, export_model, retention_arrays
from scoreprobe.studies.queue import trained_with_clocks
from analyses.mechanism_seeds import grid as G

logger = logging.getLogger("mechanism_seeds")


def run_dir(args, model):
    return Path(args.out) / "mechanism_seeds" / model.name


def settings(preset):
    """What an export must have been measured with to be reused (compared with its meta["settings"])."""
    p = G.PRESETS[preset]
    return {k: p[k] for k in ("probe_seeds", "extra", "n_grid", "clock_samples", "probes")} | {"kinds": G.KINDS}


def measure_model(args, model):
    """Train or resume `model`, its clocks and probes, then write its export; returns its name."""
    p, d = G.PRESETS[args.preset], run_dir(args, model)
    resumed = d.exists()   # an earlier invocation did part of the work: the seconds below are this one's only
    series, clocks, sec = trained_with_clocks(d, model.cfg, args.device, p["clock_samples"], p["probes"]["n_steps"])
    t0 = time.time()
    pa, steps = G.probe_args(args.preset, d.parent, args.device), battery.measured_steps(model.cfg, p["n_grid"])
    battery.measure_all(pa, model.name, series, steps)
    sec["probes"] = time.time() - t0
    col = battery.collect(pa, model.name, series, steps)
    meta = {"name": model.name, "series": model.series, "training_seed": model.seed, "data_seed": model.data_seed,
            "settings": settings(args.preset), "seconds": {k: round(v, 1) for k, v in sec.items()},
            "resumed": resumed, "checkpoint_schedule": model.cfg.checkpoint_schedule()}
    export_model(Path(args.exports) / f"{model.name}.npz", model.cfg, meta, steps, clocks, basin_arrays(pa, col),
                 retention_arrays(pa, col), dsm_arrays(col))
    logger.info("%s: exported (%s)", model.name, ", ".join(f"{k} {v:.0f} s" for k, v in sec.items()))
    return model.name
