"""A battery of probes over one series, as the mechanism studies measure it: basin maps on plane sets
(symmetric, train_heldout, random_valid; a local grid or the noise-reach grid), retention of training and
held-out items, and the DSM loss by σ, one store per series / probe / kind / seed named by a digest of its
settings (so a rerun resumes and a changed setting gets its own store); then the per-unit arrays the
reports read from those stores.

`args` is any namespace with the battery's settings: out, device, seeds, kinds, n_planes, max_hamming, res,
sigma_starts, reach_sigmas, n_steps, ret_items, ret_noise, ret_sigmas, dsm_sigmas, dsm_noise, dsm_heldout,
anim_res (analyses/mechanism's PRESETS hold them)."""
import hashlib
import json
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
