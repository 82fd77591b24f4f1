"""One model of analyses/mechanism_seeds: train (or resume) it, measure its clocks at every checkpoint and
the mechanism's probes at the measured steps (scoreprobe.studies.battery: stores under the run directory,
resumed step by step), and export its per-unit arrays (export.py)."""
import logging
import time
from pathlib import Path

import numpy as np

from scoreprobe.studies.queue import finished, measured_clocks
from scoreprobe.studies import battery as mech
from scoreprobe.studies.battery import dsm_pair_losses, item_table, plane_shares, strs as _strs
from analyses.mechanism_seeds import grid as G
from analyses.mechanism_seeds.export import BASIN_Q, RET_Q, export_model

logger = logging.getLogger("mechanism_seeds")


def run_dir(args, model):
    return Path(args.out) / "mechanism_seeds" / model.name


def settings(preset):
    """What an export must have been measured with to be reused (compared with its meta["settings"])."""
    p = G.PRESETS[preset]
    return {k: p[k] for k in ("probe_seeds", "extra", "n_grid", "clock_samples", "probes")} | {"kinds": G.KINDS}


def measure_model(args, model):
    """Train or resume `model`, its clocks and probes, then write its export; returns its name."""
    from scoreprobe.loading.series import load_series
    from scoreprobe.training.train import train_run
    p, d, sec = G.PRESETS[args.preset], run_dir(args, model), {}
    resumed = d.exists()   # an earlier invocation did part of the work: the seconds below are this one's only
    t0 = time.time()
    if not finished(d, model.cfg):
        train_run(model.cfg, d, device=args.device, progress=False)
    sec["train"] = time.time() - t0
    series = load_series(d)
    t0 = time.time()
    n_steps = p["probes"]["n_steps"]
    clocks = measured_clocks(series, d / "clocks.zarr", n_samples=p["clock_samples"], device=args.device,
                             **({} if n_steps is None else {"n_steps": n_steps}))
    sec["clocks"] = time.time() - t0
    t0 = time.time()
    pa, steps = G.probe_args(args.preset, d.parent, args.device), G.measured_steps(model.cfg, p["n_grid"])
    for seed in pa.seeds:
        mech.measure_dsm(pa, model.name, series, steps, seed)
        mech.measure_retention(pa, model.name, series, steps, seed)
    for kind, extent in mech.basin_sets(pa):
        mech.measure_basins(pa, model.name, series, steps, kind, extent)
    sec["probes"] = time.time() - t0
    col = collect(pa, model.name, series, steps)
    meta = {"name": model.name, "series": model.series, "training_seed": model.seed, "data_seed": model.data_seed,
            "settings": settings(args.preset), "seconds": {k: round(v, 1) for k, v in sec.items()},
            "resumed": resumed, "checkpoint_schedule": model.cfg.checkpoint_schedule()}
    export_model(Path(args.exports) / f"{model.name}.npz", model.cfg, meta, steps, clocks, basin_arrays(pa, col),
                 retention_arrays(pa, col), dsm_arrays(col))
    logger.info("%s: exported (%s)", model.name, ", ".join(f"{k} {v:.0f} s" for k, v in sec.items()))
    return model.name


def collect(pa, name, series, steps):
    """The stores of one model at `steps`, in analyses.mechanism.report's layout (nothing is measured)."""
    col = {"basins": {}, "retention": {}, "dsm": {}, "steps": steps}
    for kind, extent in mech.basin_sets(pa):
        ds, planes = mech.measure_basins(pa, name, series, steps, kind, extent, run=False)
        if ds is not None:   # None: no plane of the kind exists in this dataset
            col["basins"][(kind, extent)] = (ds.sel(step=steps), planes)
    for seed in pa.seeds:
        col["retention"][seed] = mech.measure_retention(pa, name, series, steps, seed, run=False).sel(step=steps)
        col["dsm"][seed] = mech.measure_dsm(pa, name, series, steps, seed, run=False).sel(step=steps)
    return col


def basin_arrays(pa, col):
    """{"kind/extent@σ": {"counts" (Q, P, S), "n_pixels", "keys", "clusters"}} of every plane set."""
    out = {}
    for (kind, extent), (ds, planes) in col["basins"].items():
        n_pix = int(ds.sizes["v"] * ds.sizes["u"])
        for sigma in (pa.sigma_starts if extent == "local" else pa.reach_sigmas):
            shares = plane_shares(ds, sigma)
            out[f"{kind}/{extent}@{sigma:g}"] = {
                "counts": np.rint(np.stack([shares[q] * n_pix for q in BASIN_Q])).astype(np.uint16),
                "n_pixels": n_pix, "keys": ["|".join(mech.plane_key(p)) for p in planes],
                "clusters": ["|".join(mech.plane_cluster(kind, p)) for p in planes]}
    return out


def retention_arrays(pa, col):
    """{(split, σ): {"values" (O, I, S), "outcomes", "keys"}}: each distinct item once (report.item_table)."""
    out = {}
    for split in ("train", "heldout"):
        for sigma in pa.ret_sigmas:
            keys, res, _ = item_table(col, split, sigma)
            if keys is not None:
                names = [o for o in RET_Q if o in res]
                out[(split, sigma)] = {"values": np.stack([res[o] for o in names]), "outcomes": names, "keys": keys}
    return out


def dsm_arrays(col):
    """{"gap" (P, S, σ) held-out − training loss per pair, "sigma", "train_loss" (S, σ), "keys"}: a pair is the
    training and the held-out item at the same position of their splits (as report.dsm_pair_gaps)."""
    if not col["dsm"]:
        return None
    loss, d0 = dsm_pair_losses(col)                                              # (S, σ, samples)
    split, pos = _strs(d0.split.values), d0.item_index.values
    tr, ho = (np.flatnonzero(split == s) for s in ("train", "heldout"))
    common = np.intersect1d(pos[tr], pos[ho])
    ti = tr[np.isin(pos[tr], common)][np.argsort(pos[tr][np.isin(pos[tr], common)])]
    hi = ho[np.isin(pos[ho], common)][np.argsort(pos[ho][np.isin(pos[ho], common)])]
    gap = np.moveaxis(loss[..., hi] - loss[..., ti], -1, 0)                     # (P, S, σ)
    return {"gap": gap, "sigma": d0.sigma.values, "train_loss": loss[..., ti].mean(axis=-1), "keys": common.tolist()}
