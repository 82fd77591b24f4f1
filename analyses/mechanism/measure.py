"""The mechanism study's measurements: presets, the two series, one store per probe / kind / seed (run.py)."""
import argparse
import hashlib
import json
import logging
import time
from pathlib import Path

import numpy as np

from scoreprobe.studies.queue import apply_preset, finished, measured_clocks
from scoreprobe.defaults import DEFINITIONS_VERSION
from scoreprobe.loading.series import load_series
from scoreprobe.probes.basins import basins
from scoreprobe.probes.retention import retention
from scoreprobe.probes.dsm import dsm_by_sigma
from scoreprobe.slices import noise_reach_margin, random_valid_planes, symmetric_planes, train_heldout_planes
from scoreprobe.store import normalize_config
from scoreprobe.sweep import run_probe
from scoreprobe.training.train import TrainConfig, train_run

logger = logging.getLogger("mechanism")

SHIPPED = Path(__file__).resolve().parents[2] / "checkpoints" / "parity-default"
KINDS = ("symmetric", "train_heldout", "random_valid")
ALL_KINDS = KINDS + ("reach", "anim")   # reach: the symmetric planes on the noise-reach grid; anim: the animation
RET_SIGMAS = [0.1, 0.2, 0.35, 0.5, 0.7, 1.0, 2.0, 5.0]

PRESETS = {
    "smoke": dict(n_planes=2, seeds=[0, 1], res=4, sigma_starts=[1.0], reach_sigmas=[1.0], n_ckpt=3,
                  ret_items=3, ret_noise=2, ret_sigmas=[1.0, 2.0], dsm_sigmas=5, dsm_noise=2, dsm_heldout=6,
                  n_steps=4, anim_res=6, max_hamming=6, n_boot=50, clock_samples=32, jobs=1,
                  closed=dict(N=8, n_heldout=32, total_steps=40, hidden_size=32, batch_size=16,
                              n_checkpoints=4, first_checkpoint=5)),
    # 11 planes per kind per seed (33 per kind), 8×8 local grids at σ = 1, noise-reach grids at σ = 1, 2
    # on the symmetric planes, 32 + 32 items × 8 restarts × 8 σ, 10 checkpoints; one series per core.
    # Measured (2026-12-01, load ≈ 17 on the 2 cores, 32 Heun steps): one checkpoint × one seed of all
    # probes costs 81 CPU-s (retention 65%, basins 33%), the animation 4 CPU-s per checkpoint; so
    # ≈ 2 480 CPU-s for the open series and ≈ 2 900 for the closed one (+ training 3 750 steps ≈ 165 s,
    # clocks 1000 samples × 21 checkpoints ≈ 290 s): ≈ 48 min on 2 idle cores (CPU time under load
    # overstates idle CPU time, if anything).
    "cpu": dict(n_planes=11, seeds=[0, 1, 2], res=8, sigma_starts=[1.0], reach_sigmas=[1.0, 2.0], n_ckpt=10,
                ret_items=32, ret_noise=8, ret_sigmas=RET_SIGMAS, dsm_sigmas=24, dsm_noise=4, dsm_heldout=128,
                n_steps=None, anim_res=24, max_hamming=6, n_boot=1000, clock_samples=1000, jobs=2,
                closed=dict(N=30, n_heldout=1024, total_steps=3750, hidden_size=80, batch_size=96,
                            n_checkpoints=20, first_checkpoint=200)),
    # The full size: >= 32 planes per kind per seed, 256 + 256 items, 16 restarts.
    "gpu": dict(n_planes=32, seeds=[0, 1, 2], res=32, sigma_starts=[0.5, 1.0, 2.0], reach_sigmas=[0.5, 1.0, 2.0],
                n_ckpt=16, ret_items=256, ret_noise=16, ret_sigmas=RET_SIGMAS + [3.0], dsm_sigmas=40, dsm_noise=16,
                dsm_heldout=512, n_steps=None, anim_res=64, max_hamming=6, n_boot=2000, clock_samples=1000, jobs=1,
                closed=dict(N=30, n_heldout=1024, total_steps=3750, hidden_size=80, batch_size=96,
                            n_checkpoints=20, first_checkpoint=200)),
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="runs/mechanism", help="stores and the closed-window run (git-ignored runs/)")
    p.add_argument("--results", default=None, help="md / json / figures (default analyses/results; --out for --smoke)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    p.add_argument("--preset", choices=sorted(PRESETS), default=None, help="default: gpu on CUDA, else cpu")
    p.add_argument("--smoke", action="store_true", help="same as --preset smoke")
    p.add_argument("--series", default="open,closed", help="which series: open, closed or both")
    p.add_argument("--open-series", default=str(SHIPPED), help="the open-window series (default: shipped)")
    p.add_argument("--measure-only", action="store_true", help="fill the stores, write no report")
    p.add_argument("--report-only", action="store_true", help="report from the stores, measure nothing new")
    p.add_argument("--no-figures", action="store_true", help="write the md and json only")
    p.add_argument("--rereport", default=None, metavar="JSON",
                   help="re-report a shipped mechanism json with the issue-35 statistics (no stores needed)")
    p.add_argument("--suffix", default=None, help="file stem suffix (default '' for cpu, _<preset> otherwise)")
    p.add_argument("--kinds", default=",".join(ALL_KINDS),
                   help=f"basin plane sets to measure and report, of {','.join(ALL_KINDS)} (default: all)")
    ints = lambda s: [int(v) for v in s.split(",")]             # noqa: E731
    floats = lambda s: [float(v) for v in s.split(",")]         # noqa: E731
    for key, kind in (("seeds", ints), ("sigma_starts", floats), ("reach_sigmas", floats), ("ret_sigmas", floats)):
        p.add_argument("--" + key.replace("_", "-"), dest=key, type=kind, default=None)
    for key in ("n_planes", "res", "n_ckpt", "ret_items", "ret_noise", "dsm_sigmas", "dsm_noise", "dsm_heldout",
                "n_steps", "anim_res", "max_hamming", "n_boot", "clock_samples", "jobs"):
        p.add_argument("--" + key.replace("_", "-"), dest=key, type=int, default=None)
    args = p.parse_args(argv)
    preset = apply_preset(args, PRESETS)
    args.series = [s.strip() for s in args.series.split(",") if s.strip()]
    args.kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    bad = sorted(set(args.kinds) - set(ALL_KINDS))
    if bad:
        p.error(f"unknown --kinds {bad}: use {','.join(ALL_KINDS)}")
    args.results = args.results or (args.out if preset == "smoke" else "analyses/results")
    args.suffix = ("" if preset == "cpu" else f"_{preset}") if args.suffix is None else args.suffix
    return args


# ---------------------------------------------------------------------------------------------
# The two series
# ---------------------------------------------------------------------------------------------

def closed_config(args):
    """The closed-window run: G = 2, N = 30, the two_clocks CPU settings (offset layout, width 80)."""
    c = args.closed
    rule = {"name": "parity", "G": 2, "shape": [6, 6], "layout": "offset", "seed": 0}
    return TrainConfig(rule=rule, n_train=c["N"], n_heldout=c["n_heldout"], seed=0, model="dit", size="tiny",
                       hidden_size=c["hidden_size"], lr=2e-3, batch_size=c["batch_size"], total_steps=c["total_steps"],
                       n_checkpoints=c["n_checkpoints"], first_checkpoint=c["first_checkpoint"], save_dtype="float16")


def open_series(args, name):
    """(series, clocks summary dict) of series `name`; trains / measures the closed one if needed."""
    if name == "open":
        series = load_series(args.open_series)
        clocks_json = Path(args.open_series) / "clocks.json"
        if clocks_json.is_file():
            return series, {**json.loads(clocks_json.read_text())["taus"], "source": str(clocks_json)}
        run_dir = Path(args.out) / "open"
    elif name == "closed":
        run_dir = Path(args.out) / "closed"
        cfg = closed_config(args)
        if not finished(run_dir, cfg):
            if args.report_only:
                raise SystemExit(f"--report-only: the closed-window run {run_dir} is not trained yet")
            t0 = time.time()
            train_run(cfg, run_dir, device=args.device, progress=False)
            logger.info("closed: trained %d steps in %.0f s", cfg.total_steps, time.time() - t0)
        series = load_series(run_dir)
    else:
        raise SystemExit(f"unknown series {name!r}: use open and/or closed")
    ds = measured_clocks(series, run_dir / "clocks.zarr", n_samples=args.clock_samples, device=args.device,
                         **({} if args.n_steps is None else {"n_steps": args.n_steps}))
    keep = [k for k in ds.attrs if k.startswith(("tau_", "window_")) or k in ("under_resolved", "log10_ratio")]
    return series, {**{k: ds.attrs[k] for k in keep}, "source": str(run_dir / "clocks.zarr")}


def chosen_steps(series, n):
    """`n` checkpoints (or all) nearest to log-spaced targets between the first positive step and the last."""
    steps = np.array([s for s in series.steps if s > 0])
    if len(steps) <= n:
        return [int(s) for s in steps]
    targets = np.geomspace(steps[0], steps[-1], n)
    picked = {int(steps[np.argmin(np.abs(np.log(steps) - np.log(t)))]) for t in targets}
    return sorted(picked)


def basin_sets(args):
    """[(kind, extent)] of the plane sets chosen by --kinds."""
    return [(k, "local") for k in KINDS if k in args.kinds] + ([("symmetric", "reach")] if "reach" in args.kinds else [])


def plane_key(plane):
    """A plane's identity: its three anchor vertices as bit strings (two seeds can draw the same plane)."""
    return tuple("".join("1" if v > 0 else "0" for v in np.ravel(a)) for a in np.asarray(plane.anchors))


def plane_cluster(kind, plane):
    """The independent unit a plane belongs to: the (training, held-out) pair of a symmetric plane (its
    first two anchors; planes sharing a pair differ only in the violating corner), else the plane."""
    key = plane_key(plane)
    return key[:2] if kind == "symmetric" else key


def distinct_planes(kind, series, args):
    """(planes, seeds) of `kind`: the planes of every seed of args.seeds, each distinct plane once (in
    order of first draw), with the seeds that drew it."""
    planes, seeds = {}, {}
    for seed in args.seeds:
        for p in planes_of(kind, series, args, seed):
            k = plane_key(p)
            planes.setdefault(k, p)
            seeds.setdefault(k, []).append(seed)
    return list(planes.values()), list(seeds.values())


def planes_of(kind, series, args, seed):
    ds, rule = series.dataset, series.rule
    if kind == "symmetric":
        return symmetric_planes(ds, rule, args.n_planes, seed=seed, max_hamming=args.max_hamming)
    if kind == "train_heldout":
        return train_heldout_planes(ds, args.n_planes, seed=seed)
    return random_valid_planes(ds, rule, args.n_planes, seed=seed)


# ---------------------------------------------------------------------------------------------
# Stores: one per series / probe / kind / seed, named by a digest of the settings
# ---------------------------------------------------------------------------------------------

def store_path(args, series_name, probe, settings):
    digest = hashlib.sha256(json.dumps(normalize_config(settings), sort_keys=True).encode()).hexdigest()[:10]
    return Path(args.out) / series_name / f"{probe}-{digest}.zarr"


def _ode_kw(args):
    return {} if args.n_steps is None else {"n_steps": args.n_steps}


def plane_set_probe(planes, extent, sigmas, res, dataset, rule, ode_kw):
    """probe(D) -> Dataset (plane, sigma_start, v, u) of sp.basins on every plane: endpoint_state,
    endpoint_anchor, endpoint_off_vertex, endpoint_index; grids at margin 0.5 ("local") or at
    noise_reach_margin(plane, σ) ("reach", one basins call per σ)."""
    import xarray as xr

    def one(D, plane):
        if extent == "local":
            return basins(D, plane, sigma_start=sigmas, res=res, dataset=dataset, rule=rule, margin=0.5, **ode_kw)
        parts = [basins(D, plane, sigma_start=[s], res=res, dataset=dataset, rule=rule,
                        margin=noise_reach_margin(plane, s), **ode_kw) for s in sigmas]
        return xr.concat([p.drop_vars(["u", "v"]) for p in parts], dim="sigma_start")

    keep = ["endpoint_state", "endpoint_anchor", "endpoint_off_vertex", "endpoint_index"]

    def probe(D):
        maps = [one(D, p)[keep] for p in planes]
        maps = [m.drop_vars([c for c in m.coords if c != "sigma_start"]) for m in maps]
        return xr.concat(maps, dim="plane")
    return probe


def plane_static(planes):
    """Per-plane coordinates: labels and anchor bits (JSON-able in the config too)."""
    return {"labels": [list(p.labels) for p in planes], "anchors": [p.spec()["anchors"] for p in planes]}


def _stored(out, compute, run):
    """compute() (which fills the store `out`), or with run=False the store as it is (None: absent)."""
    if run:
        return compute()
    from scoreprobe.store import open_store
    return open_store(out) if Path(out).exists() else None


def measure_basins(args, name, series, steps, kind, extent, run=True):
    """Basin maps of the distinct `kind` planes over all seeds (store dims step, plane, sigma_start, v, u)
    and the planes (each distinct plane is measured once, however many seeds drew it)."""
    planes, drawn_by = distinct_planes(kind, series, args)
    if not planes:
        return None, planes
    sigmas = args.sigma_starts if extent == "local" else args.reach_sigmas
    config = {"probe": "mechanism_basins", "definitions": DEFINITIONS_VERSION, "kind": kind, "seeds": args.seeds,
              "extent": extent, "sigma_start": sigmas, "res": args.res, "n_steps": args.n_steps or "library default",
              "planes": plane_static(planes), "drawn_by_seeds": drawn_by, "rule": series.rule.spec()}
    out = store_path(args, name, f"basins-{kind}-{extent}-distinct", config)
    probe = plane_set_probe(planes, extent, sigmas, args.res, series.dataset, series.rule, _ode_kw(args))
    return _stored(out, lambda: run_probe(probe, series, config, steps=steps, out=out, device=args.device,
                                          progress=False), run), planes


def measure_series(args, name):
    """Fill every store of series `name` (resumable); returns {what: seconds}."""
    t = {"start": time.time()}
    series, _ = open_series(args, name)
    t["series_and_clocks"] = time.time() - t.pop("start")
    steps = chosen_steps(series, args.n_ckpt)
    for seed in args.seeds:             # the cheapest first: a run cut short keeps the most statistics
        t0 = time.time()
        measure_dsm(args, name, series, steps, seed)
        t[f"dsm_s{seed}"] = time.time() - t0
        t0 = time.time()
        measure_retention(args, name, series, steps, seed)
        t[f"retention_s{seed}"] = time.time() - t0
    for kind, extent in basin_sets(args):
        t0 = time.time()
        measure_basins(args, name, series, steps, kind, extent)
        t[f"basins_{kind}_{extent}"] = time.time() - t0
    if "anim" in args.kinds:
        t0 = time.time()
        measure_animation(args, name, series, steps)
        t["animation"] = time.time() - t0
    logger.info("%s: measured in %s", name, {k: round(v) for k, v in t.items()})
    return t


def retention_settings(args, seed, n_train=None):
    """Retention settings of one seed; `ret_items` training items, or all of them when the series has
    fewer (n_train: its training set size; the closed-window series has 30)."""
    items = args.ret_items if n_train is None else min(args.ret_items, n_train)
    return {"sigmas": args.ret_sigmas, "n_noise": args.ret_noise, "seed": seed, "n_train": items,
            "n_heldout": args.ret_items, **_ode_kw(args)}


def measure_retention(args, name, series, steps, seed, run=True):
    kw = retention_settings(args, seed, n_train=len(series.dataset.train))
    out = store_path(args, name, f"retention-s{seed}", {**kw, "definitions": DEFINITIONS_VERSION})
    return _stored(out, lambda: retention(series, steps=steps, out=out, device=args.device, progress=False, **kw), run)


def dsm_settings(args, series, seed):
    n_train = len(series.dataset.train)
    return {"sigmas": args.dsm_sigmas, "n_noise": args.dsm_noise, "seed": seed, "n_train": n_train,
            "n_heldout": min(args.dsm_heldout, len(series.dataset.heldout))}


def measure_dsm(args, name, series, steps, seed, run=True):
    kw = dsm_settings(args, series, seed)
    out = store_path(args, name, f"dsm-s{seed}", kw)
    return _stored(out, lambda: dsm_by_sigma(series, steps=steps, out=out, device=args.device, progress=False, **kw),
                   run)


def animation_plane(args, series):
    """The representative symmetric plane: the first of seed 0 (a distance-2 pair when there is one)."""
    planes = symmetric_planes(series.dataset, series.rule, 1, seed=args.seeds[0], max_hamming=args.max_hamming)
    return planes[0] if planes else None


def measure_animation(args, name, series, steps, run=True):
    plane = animation_plane(args, series)
    if plane is None:
        return None
    kw = {"sigma_start": [1.0], "res": args.anim_res, **_ode_kw(args)}
    out = store_path(args, name, "anim", {**kw, "plane": plane.spec(), "definitions": DEFINITIONS_VERSION})
    return _stored(out, lambda: basins(series, plane, steps=steps, out=out, device=args.device, progress=False, **kw),
                   run)


