"""Attractor basins of the probability-flow ODE on a plane (`basins`); per item: probes.retention.

`basins` starts the PF-ODE at every grid point of a plane, taken as a noisy sample at level
sigma_start, integrates it to σ = 0 and classifies where it lands.

`basins(..., check_convergence=True)` integrates the grid a second time with twice the steps and
stores the share of grid points whose label changes (`label_change`): a map is only as good as
its sampler is converged.
"""
import logging
import warnings

import numpy as np
import torch
import xarray as xr

from scoreprobe.errors import ConfigError, NonFiniteWarning, ScoreprobeWarning
from scoreprobe.limits import MAX_ODE_STEPS, check_grid, check_int, warn_nonfinite
from scoreprobe.models.hooked import windowed_probe
from scoreprobe.precision import with_autocast
from scoreprobe.defaults import DEFAULT_N_STEPS, DEFAULT_SOLVER, DEFINITIONS_VERSION
from scoreprobe.data.datasets import state_flag_attrs
from scoreprobe.probes.field import as_sigma_list, plane_coords
from scoreprobe.slices import classify
from scoreprobe.sweep import dataset_and_rule, run_probe

logger = logging.getLogger(__name__)

LABEL_CHANGE_TOL = 0.01   # check_convergence warns when more than this share of the grid changes label


@torch.no_grad()
def flow_to_zero(D, x0, sigma, n_steps, solver, chunk_size):
    """engine.EngineResult of the PF-ODE from x0 (B, D) at sigma down to 0 (basins and probes.retention)."""
    from scoreprobe.ode import integrate
    return integrate(D, x0, float(sigma), n_steps=n_steps, solver=solver, chunk_size=chunk_size, info=True)


# ---------------------------------------------------------------------------------------------
# Basin maps on a plane
# ---------------------------------------------------------------------------------------------

def basin_map(D, plane, sigma_starts, res, n_steps, dataset, rule, margin=0.5, solver=DEFAULT_SOLVER,
              chunk_size="auto", dtype=torch.float32, device="cpu", keep_bits=False, refine=None, warm=None):
    """Endpoints of the PF-ODE from every grid point of `plane`, for one denoiser.

    A `models.stack.StackedDenoiser` of K checkpoints integrates all K maps in one batched pass
    and gives a list of K such dicts (identical to K calls with the single models).
    refine : None (integrate every grid point) or a `probes.refine.RefineSettings`: integrate the
        boundary band and an audit sample, fill the rest (`probes.refine`).
    warm : None, or a `probes.warm.WarmChain` (with refine): each map starts from the chain's last finished map
        of the same sigma_start, and becomes the next one's seed (`probes.warm`).

    Returns
    -------
    dict name -> numpy array (S, res, res) over (sigma_start, v, u): state (int8), index,
    train_index, heldout_index, nearest_train_hamming (int64), anchor (int8), off_vertex (bool),
    decided_sigma (float64: σ where the engine decided the point, 0 when integrated to the end),
    nfe (int64: denoiser evaluations of the point), status (int8: codes of `ode.engine.STATUS`);
    with keep_bits, bits (S, res, res, D) uint8: the thresholded endpoint (meaningless where invalid).
    With refine also integrated (S, res, res) bool (filled pixels: nfe 0, decided_sigma NaN) and the
    (S,) summaries of `probes.refine.refine_steps` (outcome as a code of `probes.refine.OUTCOMES`); with warm
    also the (S,) warm_* of `probes.warm.warm_summary`.
    """
    from scoreprobe.models.stack import counted, stack_size

    k = stack_size(D)                          # K models of a stack
    points, _, _ = plane.grid(res, margin)
    points = torch.as_tensor(points, dtype=dtype, device=device)                 # (P, D)
    out, n_bad = [{} for _ in range(k)], [0]
    for si, s in enumerate(sigma_starts):
        def rows_of(idx, s=s):   # flat grid indices (n,) -> K dicts of (n, ...) arrays
            x0 = points[torch.as_tensor(idx, dtype=torch.long, device=device)]   # (n, D)
            return _endpoint_rows(D, x0, s, k, n_steps, solver, chunk_size, dataset, rule, plane, n_bad)
        if refine is None:
            maps = [{key: v.reshape((res, res) + v.shape[1:]) for key, v in m.items()}
                    for m in rows_of(np.arange(res * res))]
        else:
            maps = _refined(rows_of, res, k, refine, si, warm)
        for o, m in zip(out, maps):
            for key, v in m.items():
                if key != "bits" or keep_bits:
                    o.setdefault(key, []).append(v)
    warn_nonfinite(n_bad[0], len(sigma_starts) * res * res * k, "PF-ODE endpoints "
                   + counted("sigma_starts x grid points", k), "they are classified `invalid`")
    maps = [{key: np.stack(v) for key, v in m.items()} for m in out]
    return maps if k > 1 else maps[0]


def _refined(rows_of, res, k, refine, sigma_index, warm):
    """K refined maps at one sigma_start (`probes.refine`), started from the chain's last map with `warm`."""
    from scoreprobe.probes.refine import refined_maps
    from scoreprobe.probes.warm import warm_maps
    if warm is None:
        return refined_maps(rows_of, res, k, refine, sigma_index)
    plan = warm.plan(sigma_index, k)
    maps = warm_maps(rows_of, res, k, refine, sigma_index, plan)
    warm.keep(sigma_index, plan, maps)
    return maps


_MAP_KEYS = ("state", "index", "train_index", "heldout_index", "nearest_train_hamming", "anchor", "off_vertex",
             "bits")


def _endpoint_rows(D, x0, sigma, k, n_steps, solver, chunk_size, dataset, rule, plane, n_bad):
    """PF-ODE endpoints of x0 (n, D) for each of K stacked models: K dicts of (n, ...) arrays (the keys
    of `basin_map`, bits included); n_bad[0] counts the non-finite endpoints."""
    from scoreprobe.models.stack import chunk_rows, replicate, split
    with warnings.catch_warnings():   # non-finite endpoints: counted over all σ_start, warned once by basin_map
        warnings.simplefilter("ignore", NonFiniteWarning)
        r = flow_to_zero(D, replicate(x0, k), sigma, n_steps, solver, chunk_rows(chunk_size, k))   # (n*K, D)
    n_bad[0] += int((~torch.isfinite(r.x)).any(dim=1).sum())
    per_row = {"decided_sigma": r.decided_sigma.reshape(-1, k), "nfe": r.nfe.reshape(-1, k),
               "status": np.asarray(r.status, dtype=np.int8).reshape(-1, k)}                     # (n, K)
    out = []
    for i, xe in enumerate(split(r.x, k)):                                    # (n, D) per model
        c = classify(xe, dataset, rule, anchors=plane.anchors)
        out.append({**{key: c[key] for key in _MAP_KEYS}, **{key: np.asarray(v[:, i]) for key, v in per_row.items()}})
    return out


def label_change(a, b):
    """Share of grid points whose labels differ between two basin maps of the same grid.

    Parameters
    ----------
    a, b : dicts returned by `basin_map` for the same plane, grid and sigma_starts (arrays (S, res, res)).

    Returns
    -------
    dict of (S,) float64: `state`, the fraction whose endpoint state differs; `item`, the fraction
    whose endpoint state or endpoint item (`index`) differs (so item >= state). A point whose two
    endpoints are both off-vertex (e.g. on a saddle between vertices, where the thresholded bits
    follow rounding noise) is not counted: its label is not a basin.
    """
    if a["state"].shape != b["state"].shape:
        raise ConfigError(f"basin maps of different grids: {a['state'].shape} vs {b['state'].shape}")
    judged = ~(a["off_vertex"] & b["off_vertex"])                             # (S, res, res)
    state = (a["state"] != b["state"]) & judged                               # (S, res, res)
    item = state | ((a["index"] != b["index"]) & judged)                      # (S, res, res)
    return {"state": state.mean(axis=(1, 2), dtype=np.float64), "item": item.mean(axis=(1, 2), dtype=np.float64)}


def _convergence_vars(change, n_steps, solver):
    """Data variables of the convergence check: (S,) fractions -> {name: (dims, values, attrs)}."""
    from scoreprobe.ode import describe_solver, finer
    steps = "the solver and its finer setting (ode.finer)"
    comment = (f"{describe_solver(solver, n_steps)}; the grid is integrated again with "
               f"{describe_solver(*finer(solver, n_steps))}")
    what = {"state": "endpoint state", "item": "endpoint state or endpoint item (endpoint_index)"}
    return {name: (("sigma_start",), change[k], {"units": "1", "comment": comment, "long_name":
                   f"fraction of grid points whose {what[k]} differs between {steps}"})
            for name, k in (("label_change_fraction", "state"), ("label_change_fraction_item", "item"))}


def _warn_unconverged(ds, n_steps, solver, tol=LABEL_CHANGE_TOL):
    """ScoreprobeWarning when label_change_fraction ([step,] sigma_start) exceeds `tol` anywhere."""
    frac = ds["label_change_fraction"].load()
    bad = frac.values > tol
    if not bad.any():
        return
    worst = np.unravel_index(int(np.argmax(frac.values)), frac.shape)   # fractions of grid points: never NaN
                                                                        # (a NaN endpoint is the state `invalid`)
    at = ", ".join(f"{d} {frac[d].values[i]:g}" for d, i in zip(frac.dims, worst))
    from scoreprobe.ode import describe_solver, finer
    warnings.warn(f"basins not converged: {float(frac.values[worst]):.1%} of the grid (at {at}) ends in another "
                  f"state with {describe_solver(*finer(solver, n_steps))} instead of {describe_solver(solver, n_steps)}, "
                  f"more than {tol:.0%} in {int(bad.sum())} of {bad.size} ({', '.join(frac.dims)}) cells; "
                  "raise n_steps (fixed grid) or tighten the tolerances (engine)", ScoreprobeWarning, stacklevel=3)


def _basin_dataset(m, plane, sigma_starts, u, v):
    from scoreprobe.data.datasets import STATES
    from scoreprobe.ode.engine import STATUS
    dims = ("sigma_start", "v", "u")
    one = {"units": "1"}
    n_states = len(STATES)
    frac = np.stack([(m["state"] == c).mean(axis=(1, 2)) for c in range(n_states)], axis=1)  # (S, n_states)
    data = {
        "endpoint_state": (dims, m["state"], {**state_flag_attrs(), "long_name": "state of the PF-ODE endpoint"}),
        "endpoint_index": (dims, m["index"], {**one, "long_name": "item reached: training index if "
                           "valid_memorized, held-out index if valid_heldout, else -1"}),
        "endpoint_train_index": (dims, m["train_index"], {**one, "long_name": "training item reached (-1 none)"}),
        "endpoint_heldout_index": (dims, m["heldout_index"], {**one, "long_name": "held-out item reached (-1 none)"}),
        "endpoint_anchor": (dims, m["anchor"], {**one, "flag_values": [-1, 0, 1, 2],
                            "flag_meanings": "none anchor_a anchor_b anchor_c",
                            "long_name": "anchor vertex the endpoint equals (-1 none)"}),
        "endpoint_off_vertex": (dims, m["off_vertex"].astype(np.uint8), {
            **one, "flag_values": [0, 1], "flag_meanings": "on_vertex off_vertex",
            "long_name": "endpoint farther than 0.5 from ±1 in some coordinate (a flag, not a state)"}),
        "nearest_train_hamming": (dims, m["nearest_train_hamming"], {
            **one, "long_name": "Hamming distance of the endpoint to the nearest training item"}),
        "endpoint_decided_sigma": (dims, m["decided_sigma"], {
            **one, "long_name": "noise level at which the adaptive engine decided the endpoint's vertex "
            "(0: integrated to sigma = 0)"}),
        "nfe": (dims, m["nfe"], {**one, "long_name": "denoiser evaluations of the grid point's PF-ODE"}),
        "endpoint_status": (dims, m["status"], {
            **one, "flag_values": list(range(len(STATUS))), "flag_meanings": " ".join(STATUS),
            "long_name": "how the grid point's PF-ODE ended: success, max_steps (the engine's step budget spent) or "
            "non_finite (the denoiser returned NaN/inf at some evaluation; its state is invalid)"}),
        "fraction": (("sigma_start", "state"), frac, {
            **one, "long_name": "fraction of the plane ending in each state"}),
    }
    if "integrated" in m:   # basins(refine=...)
        data.update(_refine_vars(m))
    if "warm_start" in m:   # refined with warm_start
        data.update(_warm_vars(m))
    if "bits" in m:   # basins(keep_bits=True)
        data["endpoint_bits"] = (dims + ("bit",), m["bits"].astype(np.uint8), {
            **one, "long_name": "thresholded bits of the PF-ODE endpoint (meaningless where endpoint_state is invalid)"})
    coords = plane_coords(plane, u, v)
    if "bits" in m:
        coords["bit"] = ("bit", np.arange(m["bits"].shape[-1], dtype=np.int64), {**one, "long_name": "bit index"})
    coords["sigma_start"] = ("sigma_start", sigma_starts, {"units": "1", "long_name": "noise level the ODE starts at"})
    coords["state"] = ("state", np.array(STATES, dtype=object), {"long_name": "endpoint state"})
    return xr.Dataset(data, coords=coords)


def _refine_vars(m):
    """Data variables of a refined map: which pixels were integrated, and per sigma_start the integrated
    share, the audit's bound and the outcome (`probes.refine`)."""
    from scoreprobe.probes.refine import OUTCOMES
    one, s = {"units": "1"}, ("sigma_start",)
    return {
        "endpoint_integrated": (("sigma_start", "v", "u"), m["integrated"].astype(np.uint8), {
            **one, "flag_values": [0, 1], "flag_meanings": "filled integrated",
            "long_name": "grid point integrated (1) or filled with its cell's label (0; nfe 0, decided sigma NaN)"}),
        "integrated_fraction": (s, m["integrated_fraction"], {
            **one, "long_name": "share of the grid integrated (boundary band, lattice and audit)"}),
        "audit_bound": (s, m["audit_bound"], {
            **one, "long_name": "one-sided 95% upper bound on the share of filled grid points whose integrated "
            "label would differ (NaN: nothing filled)"}),
        "audit_points": (s, m["audit_points"], {**one, "long_name": "grid points integrated to audit filled cells"}),
        "audit_failures": (s, m["audit_failures"], {
            **one, "long_name": "audit rounds that found a filled cell ending elsewhere (2: dense)"}),
        "boundary_basin_entropy": (s, m["boundary_entropy"], {
            "units": "nat", "long_name": "boundary basin entropy S_bb of the map (NaN: no boundary box)"}),
        "boundary_dimension": (s, m["boundary_dimension"], {
            **one, "long_name": "box-counting dimension of the map's boundary, 2 - its uncertainty exponent "
            "(probes.fractal; NaN: one basin, or res < 32)"}),
        "refine_outcome": (s, m["outcome"], {
            **one, "flag_values": list(range(len(OUTCOMES))), "flag_meanings": " ".join(OUTCOMES),
            "long_name": "refined, or every point integrated after two failed audits (dense_audit), because "
            "S_bb > max_entropy (dense_entropy; ln 2 was the default before max_dimension) or because the "
            "boundary's dimension > max_dimension (dense_fractal)"}),
    }


def _warm_vars(m):
    """Data variables of a warm-started refinement (`probes.warm`): per sigma_start, what the map reused."""
    from scoreprobe.probes.warm import SEEDINGS, WARM_MARGIN
    one, s = {"units": "1"}, ("sigma_start",)
    return {
        "warm_start": (s, m["warm_start"], {
            **one, "flag_values": list(range(len(SEEDINGS))), "flag_meanings": " ".join(SEEDINGS),
            "long_name": "refined on its own (cold: no earlier map in this run), from the previous checkpoint's "
            "map (warm: the lattice, cells whose lattice points changed refined cold, the seed's boundary points "
            f"(dilated by {WARM_MARGIN}) integrated and changes followed point by point, the rest filled from the "
            "seed and audited), or with more than half the lattice cells changed (widespread: all refined cold)"}),
        "warm_seed_step": (s, m["warm_seed_step"], {
            **one, "long_name": "step whose finished map seeded this one (-1 cold)"}),
        "warm_changed_points": (s, m["warm_changed_points"], {
            **one, "long_name": "integrated grid points whose label differs from the seed map's (NaN cold)"}),
        "warm_reopened_fraction": (s, m["warm_reopened_fraction"], {
            **one, "long_name": "share of the lattice cells refined cold because a lattice point or an audited point "
            "in them changed label (NaN cold)"}),
    }


def _basin_config(plane, sigma_starts, res, n_steps, margin, solver, dtype, rule, check_convergence, keep_bits=False,
                  refine=None):
    """The store identity of a basins run (`check_convergence` and `keep_bits` are recorded only when True,
    `refine` only when the map is refined)."""
    from scoreprobe.ode import solver_config
    # "endpoint_status": 1 marks stores with the per-point status variable (older ones are refused as another config)
    config = {"probe": "basins", "definitions": DEFINITIONS_VERSION, "endpoint_status": 1, "plane": plane.spec(),
              "sigma_start": sigma_starts.tolist(), "res": int(res), **solver_config(solver, n_steps),
              "margin": float(margin), "dtype": str(dtype).replace("torch.", ""), "rule": rule.spec()}
    if check_convergence:
        config["check_convergence"] = True
    if keep_bits:
        config["keep_bits"] = True
    if refine is not None:
        config["refine"] = refine.spec()
    return config


def _warm_chains(refine):
    """{"map", "finer"} -> probes.warm.WarmChain when refining with warm_start, else {}."""
    if refine is None or not refine.warm_start:
        return {}
    from scoreprobe.probes.warm import WarmChain
    return {"map": WarmChain(), "finer": WarmChain()}


def basins(D_or_series, plane, sigma_start=(0.5, 1.0, 2.0), res=64, n_steps=DEFAULT_N_STEPS, *, dataset=None,
           rule=None, margin=0.5, solver=DEFAULT_SOLVER, chunk_size="auto", dtype=torch.float32, device="cpu", steps=None,
           out=None, progress=None, check_convergence=False, overwrite=False, models_per_pass=1, autocast=None,
           model_id=None, keep_bits=False, refine=None, fwd_hooks=None, sigma_window=None):
    """Basin map of the PF-ODE on a plane, for a denoiser or every checkpoint of a series.

    Every grid point x is taken as a noisy sample at level sigma_start: the ODE runs from
    (x, sigma_start) to σ = 0 (`ode.integrate` with `solver`: the adaptive engine by default, or
    `n_steps` fixed EDM steps with solver="heun") and the endpoint is classified.

    Parameters
    ----------
    D_or_series : a denoiser, a CheckpointSeries or a {step: denoiser} mapping.
    plane : slices.Plane.
    sigma_start : float or sequence of starting noise levels.
    res, margin : grid size and padding (see Plane.grid).
    dataset, rule : data the endpoints are classified against (taken from a series when omitted).
    steps, out, progress : for series: which steps, zarr store path, progress bar.
    overwrite : replace a store at `out` written with other settings (only once the new one is complete).
    models_per_pass : checkpoints integrated together as one stacked network (see `sweep`).
    chunk_size : rows per forward; "auto": 4096 on CPU, from the free memory on CUDA (`ode.auto_chunk_rows`).
    autocast : None (float32), "bf16" or "fp16": the network's matrix products in that dtype, the ODE
        in `dtype` (see `scoreprobe.precision`); recorded in the store's config.
    check_convergence : also integrate the same grid with the finer setting `ode.finer` (2·n_steps
        fixed steps; the engine's tolerances tightened) (about twice the cost of the map itself) and store the share of grid points whose label changes; a ScoreprobeWarning
        is issued when it exceeds LABEL_CHANGE_TOL. Recorded in the store's config when True.
    model_id : names a weightless source (a function, an oracle) for resuming `out` (see `sweep`).
    refine : None (the default: refine from res 32 on), True, False (integrate every grid point), or a
        `probes.refine.RefineSettings` (or a dict of its fields): integrate a coarse lattice and the
        boundary band between labels, fill the cells whose integrated pixels agree, audit each filled
        cell with a seeded random share of its pixels, and fall back to every point when the audit fails
        twice or the boundary looks fractal (`probes.fractal`; docs/definitions.md, "Basin maps"). Recorded in the
        store's config when on. Over a series, with RefineSettings.warm_start (the default; False: each map
        refined on its own, as before) each checkpoint's map starts from the previous one's finished map: its
        boundary band is integrated, the rest filled from it and audited, changes re-opened (`probes.warm`).
    keep_bits : also store each endpoint's thresholded bits, `endpoint_bits` ([step,] sigma_start, v, u,
        bit) uint8 (the report's gallery shows them); recorded in the store's config when True.
    fwd_hooks, sigma_window : hooks applied to the evaluations of D whose σ lies in the window, as `sp.sample` takes
        them (models.hooked.SigmaWindowHooks; one checkpoint at a time, in memory: no `out`); recorded in the config.

    Returns
    -------
    xarray.Dataset, dims ([step,] sigma_start, v, u): endpoint_state (flag attrs), endpoint_index,
    endpoint_train_index, endpoint_heldout_index, endpoint_anchor, nearest_train_hamming,
    endpoint_decided_sigma, nfe; fraction ([step,] sigma_start, state): share of the plane in each state; with
    check_convergence, label_change_fraction and label_change_fraction_item ([step,] sigma_start),
    float64 (see `label_change`); refined: endpoint_integrated, integrated_fraction, audit_bound,
    audit_points, audit_failures, boundary_basin_entropy, boundary_dimension, refine_outcome (see
    `_refine_vars`); with warm_start, warm_start (flag: cold, warm, widespread), warm_seed_step, warm_changed_points, warm_reopened_fraction
    ([step,] sigma_start; see `_warm_vars`).
    """
    from scoreprobe.probes.refine import resolve_refine
    dataset, rule = dataset_and_rule(D_or_series, dataset, rule, who="basins")
    res = check_grid(res, dataset.train.shape[1])   # before anything reads it: res = inf is a ConfigError
    refine = resolve_refine(refine, res)
    sigma_starts = as_sigma_list(sigma_start, "sigma_start")
    n_steps = check_int(n_steps, "n_steps", 1, MAX_ODE_STEPS)
    _, u, v = plane.grid(res, margin)
    config = _basin_config(plane, sigma_starts, res, n_steps, margin, solver, dtype, rule, check_convergence,
                           keep_bits, refine)

    chains = _warm_chains(refine)   # the maps that seed the next checkpoint's (probes.warm)

    def probe(D):   # a StackedDenoiser of K checkpoints gives K Datasets
        from scoreprobe.ode import finer

        def grid_map(solver_, n, chain):
            m = basin_map(D, plane, sigma_starts, res, n, dataset, rule, margin, solver_, chunk_size, dtype, device,
                          keep_bits, refine, chains.get(chain))
            return m if isinstance(m, list) else [m]
        maps = grid_map(solver, int(n_steps), "map")
        out = [_basin_dataset(m, plane, sigma_starts, u, v) for m in maps]
        if check_convergence:
            out = [ds.assign(_convergence_vars(label_change(m, m2), n_steps, solver))
                   for ds, m, m2 in zip(out, maps, grid_map(*finer(solver, n_steps), "finer"))]
        return out if len(out) > 1 else out[0]
    probe.stackable, probe.n_bits = True, dataset.train.shape[1]

    probe, config = windowed_probe(probe, config, fwd_hooks, sigma_window, out)
    probe, config = with_autocast(probe, config, autocast, device)
    ds = run_probe(probe, D_or_series, config, steps=steps, out=out, device=device, progress=progress,
                   overwrite=overwrite, models_per_pass=models_per_pass, model_id=model_id)
    if check_convergence:
        _warn_unconverged(ds, n_steps, solver)
    return ds
