"""A battery of probes over one series, as the mechanism studies measure it: basin maps on plane sets
(symmetric, train_heldout, random_valid; a local grid or the noise-reach grid), retention of training and
held-out items, and the DSM loss by σ, one store per series / probe / kind / seed named by a digest of its
settings (so a rerun resumes and a changed setting gets its own store); then the per-unit arrays the
reports read from those stores.

For each series, at the chosen checkpoints, and for each seed of `seeds`:

  basins     planes of three kinds (slices.symmetric_planes, train_heldout_planes, random_valid_planes;
             docs/definitions.md, "Plane protocol"), each at `sigma_starts` on the local grid
             (margin 0.5) and on the noise-reach grid (slices.noise_reach_margin) at `reach_sigmas`
  retention  `ret_items` training + `ret_items` held-out items, `ret_noise` restarts at `ret_sigmas`
             (sp.retention, with its breakdown: other valid, violating, captured although closer)
  dsm        sp.dsm_by_sigma on the first items of each split, noise bank `seed`
  anim       one symmetric plane at a finer grid at every chosen checkpoint (the animation)

Stores: <out>/<series>/<probe>-s<seed>-<digest>.zarr (retention, DSM) and
<out>/<series>/basins-<kind>-<extent>-distinct-<digest>.zarr (each distinct plane of all seeds once),
named by a digest of their settings and resumed step by step (sp.sweep): a rerun reuses every step
already measured with the same settings and model.

`args` is any namespace with the battery's settings: out, device, seeds, kinds, n_planes, max_hamming, res,
sigma_starts, reach_sigmas, n_steps, ret_items, ret_noise, ret_sigmas, dsm_sigmas, dsm_noise, dsm_heldout,
anim_res (a study's presets hold them)."""
import hashlib
import json
import time
from pathlib import Path

import numpy as np

from scoreprobe.data.datasets import STATE_CODES
from scoreprobe.defaults import DEFINITIONS_VERSION
from scoreprobe.probes.basins import basins
from scoreprobe.probes.dsm import dsm_by_sigma
from scoreprobe.probes.retention import retention
from scoreprobe.slices import noise_reach_margin, random_valid_planes, symmetric_planes, train_heldout_planes
from scoreprobe.stats.timing import _quiet
from scoreprobe.store import normalize_config
from scoreprobe.studies.recipes import CLOCK_S_PER_CKPT, STEPS_PER_S
from scoreprobe.sweep import run_probe

KINDS = ("symmetric", "train_heldout", "random_valid")
RET_SIGMAS = [0.1, 0.2, 0.35, 0.5, 0.7, 1.0, 2.0, 5.0]
QUANTITIES = {"training": "valid_memorized", "heldout": "valid_heldout", "novel": "valid_novel",
              "violating": "rule_violating", "invalid": "invalid"}


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


def complete_dsm(args, name, series, steps):
    """{seed: DSM store at `steps`} when every seed's DSM store of series `name` (the settings of `args`) is there
    with every one of `steps`, else None (nothing is measured)."""
    out = {}
    for seed in args.seeds:
        ds = measure_dsm(args, name, series, steps, seed, run=False)
        if ds is None or not set(steps) <= set(int(v) for v in ds.step.values):
            return None
        out[seed] = ds.sel(step=steps)
    return out


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

# ---------------------------------------------------------------------------------------------
# Reading the stores: one unit per independent thing
# ---------------------------------------------------------------------------------------------

def strs(values):
    """An array of Python str (store string coordinates may come back as numpy StringDType)."""
    return np.array([str(v) for v in np.asarray(values).tolist()], dtype=object)


def plane_shares(ds, sigma):
    """{quantity: (planes, steps) float} of one basins store at σ_start `sigma`: the state shares, valid,
    off_vertex and the three anchors' own basins (anchor0..2)."""
    d = ds.sel(sigma_start=sigma)
    state, anchor = d.endpoint_state.values, d.endpoint_anchor.values                 # (S, P, V, U)
    share = {q: (state == STATE_CODES[c]).mean(axis=(2, 3)).T for q, c in QUANTITIES.items()}
    share["valid"] = share["training"] + share["heldout"] + share["novel"]
    share["off_vertex"] = d.endpoint_off_vertex.values.astype(float).mean(axis=(2, 3)).T
    for k in range(3):
        share[f"anchor{k}"] = (anchor == k).mean(axis=(2, 3)).T
    share["anchor_asymmetry"] = share["anchor0"] - share["anchor1"]
    return share


def item_table(col, split, sigma):
    """item_units with the items' indices in their split first: (keys [int], {outcome: (items, steps)},
    n_draws (items,)); (None, None, None) when nothing was measured."""
    rows = {}
    for seed, ds in col["retention"].items():
        d = ds.sel(sigma=sigma).isel(sample=np.flatnonzero(strs(ds.split.values) == split))
        for j, item in enumerate(d.item_index.values.tolist()):
            rows.setdefault(int(item), []).append({k: d[k].values[:, j] for k in d.data_vars
                                                   if d[k].dims == ("step", "sample")})
    if not rows:
        return None, None, None
    names = list(rows[next(iter(rows))][0])
    with _quiet():   # NaN only in capture_distance_ratio (a seed whose restarts of the item were never captured:
        # no ratio exists); the shares count non-finite restarts as their own outcome and are never NaN
        out = {k: np.stack([np.nanmean([r[k] for r in rs], axis=0) for rs in rows.values()]) for k in names}
    return list(rows), out, np.array([len(rs) for rs in rows.values()])


def dsm_pair_losses(col):
    """(loss (steps, σ, samples) averaged over the seeds' noise banks, the first store): each (training,
    held-out) pair is one unit, its loss the mean over the noise seeds (the same items under every seed)."""
    dss = list(col["dsm"].values())
    return np.mean([d.loss.values for d in dss], axis=0), dss[0]


def dsm_pairs(col):
    """(loss (steps, σ, samples), the first store, ti, hi, keys): the DSM pairs of `col`, a pair the training and
    the held-out item at the same position of their splits; ti / hi index their samples in position order, keys
    are the positions (ints) both splits have."""
    loss, d0 = dsm_pair_losses(col)
    split, pos = strs(d0.split.values), d0.item_index.values
    tr, ho = (np.flatnonzero(split == s) for s in ("train", "heldout"))
    common = np.intersect1d(pos[tr], pos[ho])
    ti = tr[np.isin(pos[tr], common)][np.argsort(pos[tr][np.isin(pos[tr], common)])]
    hi = ho[np.isin(pos[ho], common)][np.argsort(pos[ho][np.isin(pos[ho], common)])]
    return loss, d0, ti, hi, common


# ---------------------------------------------------------------------------------------------
# The whole battery of one series: measure every store, read them back
# ---------------------------------------------------------------------------------------------

def measure_all(args, name, series, steps):
    """Fill every store of the battery for series `name` at `steps` (resumable), the cheapest probes first so a
    run cut short keeps the most statistics: per seed the DSM then retention, then each plane set of
    args.kinds, then the animation when "anim" is among them. Returns {what: seconds}."""
    t = {}
    for seed in args.seeds:
        for probe, key in ((measure_dsm, "dsm"), (measure_retention, "retention")):
            t0 = time.time()
            probe(args, name, series, steps, seed)
            t[f"{key}_s{seed}"] = time.time() - t0
    for kind, extent in basin_sets(args):
        t0 = time.time()
        measure_basins(args, name, series, steps, kind, extent)
        t[f"basins_{kind}_{extent}"] = time.time() - t0
    if "anim" in args.kinds:
        t0 = time.time()
        measure_animation(args, name, series, steps)
        t["animation"] = time.time() - t0
    return t


def collect(args, name, series, steps):
    """Everything measured for series `name`, read from its stores at `steps` (nothing is measured):
    {"steps", "basins": {(kind, extent): (Dataset, planes)}, "retention": {seed: Dataset}, "dsm": {seed: Dataset},
    "anim": Dataset or None}; a store not there is left out (a plane kind with no plane in the dataset has none)."""
    out = {"steps": steps, "basins": {}, "retention": {}, "dsm": {}, "anim": None}
    for kind, extent in basin_sets(args):
        ds, planes = measure_basins(args, name, series, steps, kind, extent, run=False)
        if ds is not None:
            out["basins"][(kind, extent)] = (ds.sel(step=steps), planes)
    for seed in args.seeds:
        for probe, key in ((measure_retention, "retention"), (measure_dsm, "dsm")):
            ds = probe(args, name, series, steps, seed, run=False)
            if ds is not None:
                out[key][seed] = ds.sel(step=steps)
    anim = measure_animation(args, name, series, steps, run=False) if "anim" in args.kinds else None
    out["anim"] = None if anim is None else anim.sel(step=steps)
    return out


def measured_steps(cfg, n_grid):
    """Step 0, cfg's extra checkpoints and `n_grid` picks of its log grid nearest to log-spaced targets from the
    grid's first step to its last (sorted ints): the steps a battery measures on a trained model."""
    grid = np.array([s for s in cfg.checkpoint_schedule() if s >= cfg.first_step()])
    targets = np.geomspace(grid[0], grid[-1], min(n_grid, grid.size))
    picks = {int(grid[np.argmin(np.abs(np.log(grid) - np.log(t)))]) for t in targets}
    return sorted({0, *cfg.extra_checkpoints} | picks)


# ---------------------------------------------------------------------------------------------
# Time: the battery on one trained model
# ---------------------------------------------------------------------------------------------
# The measured rates of a CPU preset of the battery (the mechanism study's "cpu": 81 CPU-s per checkpoint and probe
# seed on the loaded 2 cores, 32 Heun steps; retention 65% of it over 64 items × 8 restarts × 8 σ, basins 33% over
# 11 planes × 8² points × 5 plane sets, the DSM the rest), scaled by the solves each model needs (planes counted
# as drawn, an upper bound: distinct planes are measured once).
MECHANISM_CPU_S = 81.0                                     # per checkpoint and probe seed, all probes
RET_S_PER_SOLVE = 0.65 * MECHANISM_CPU_S / (64 * 8 * 8)     # ≈ 12.9 ms per restart and σ
BASIN_S_PER_POINT = 0.33 * MECHANISM_CPU_S / (11 * 64 * 5)  # ≈ 7.6 ms per grid point
DSM_S_PER_SEED = 0.02 * MECHANISM_CPU_S                     # per checkpoint and noise bank


def _dit_rate(cfg):
    """Training steps per second of a DiT of cfg's width (depth 4) on one idle thread."""
    width = cfg.hidden_size or 80
    return STEPS_PER_S.get(("dit", width, 4)) or STEPS_PER_S[("dit", 80, 4)] * (80 / width) ** 2


def model_seconds(cfg, probes, n_probe_seeds, clock_samples, n_grid):
    """{"train", "clocks", "probes"}: estimated one-thread seconds of one DiT trained with `cfg`, its clocks at
    every checkpoint (recipes.CLOCK_S_PER_CKPT, `clock_samples` samples) and the battery with settings `probes`
    (n_planes, res, reach_sigmas, ret_items, ret_noise, ret_sigmas) and `n_probe_seeds` seeds at the
    measured_steps(cfg, n_grid); a smaller DiT trains and solves faster in proportion to its training rate."""
    pr, seeds, rate = probes, n_probe_seeds, _dit_rate(cfg)
    clocks = len(cfg.checkpoint_schedule()) * CLOCK_S_PER_CKPT["dit"] * clock_samples / 1000 \
        * STEPS_PER_S[("dit", 80, 4)] / rate
    n_sets = 3 + len(pr["reach_sigmas"])                       # three local plane kinds + reach per σ
    points = n_sets * pr["n_planes"] * seeds * pr["res"] ** 2
    restarts = seeds * (min(pr["ret_items"], cfg.n_train) + pr["ret_items"]) * pr["ret_noise"] * len(pr["ret_sigmas"])
    per_step = points * BASIN_S_PER_POINT + restarts * RET_S_PER_SOLVE + seeds * DSM_S_PER_SEED
    scale = STEPS_PER_S[("dit", 80, 4)] / rate                  # a smaller DiT solves faster
    return {"train": cfg.total_steps / rate, "clocks": clocks,
            "probes": per_step * scale * len(measured_steps(cfg, n_grid))}


def plan_lines(models, seconds, done, jobs, head, describe, note="", cores=None):
    """The plan of `models` (each with .name) with seconds(m) -> {"train", "clocks", "probes"} (model_seconds):
    `head` (what is planned), how many are exported already (`done`: their names), and the hours the rest take
    `jobs` at a time (queue.finish_times, sharing `cores` where given; `note` says whose rates), then one line per
    model: describe(m) and its estimated minutes and finish time, or "exported"."""
    from scoreprobe.studies.queue import at_a_time, finish_times
    secs = [seconds(m) for m in models]
    todo = [sum(s.values()) for m, s in zip(models, secs) if m.name not in done]
    part = {k: sum(s[k] for m, s in zip(models, secs) if m.name not in done) / 3600 for k in ("train", "clocks", "probes")}
    ends, total = finish_times(todo, jobs, cores)
    lines = [f"{head} ({len(done)} exported already), {at_a_time(jobs, cores)}: "
             f"estimated {note}{total / 3600:.2f} h for the rest ({sum(todo) / 3600:.1f} thread-hours: "
             f"training {part['train']:.1f}, clocks {part['clocks']:.1f}, probes {part['probes']:.1f})"]
    ends = iter(ends)
    for i, (m, s) in enumerate(zip(models, secs)):
        state = "exported" if m.name in done else f"~{sum(s.values()) / 60:5.1f} min, done by ~{next(ends) / 3600:4.2f} h"
        lines.append(f"  {i + 1:2d} {describe(m)}  {state}")
    return lines
