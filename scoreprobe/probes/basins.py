"""Attractor basins of the probability-flow ODE: on a plane (`basins`) and per item (`retention`).

`basins` starts the PF-ODE at every grid point of a plane, taken as a noisy sample at level
sigma_start, integrates it to σ = 0 and classifies where it lands. `retention` restarts from
noisy copies x + σε of training and held-out items and measures how many flow back to the
item itself and how many are captured by another training item.

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
from scoreprobe.limits import warn_nonfinite
from scoreprobe.noise import NOISE
from scoreprobe.precision import with_autocast
from scoreprobe.defaults import DEFAULT_N_STEPS, DEFAULT_SOLVER, DEFINITIONS_VERSION
from scoreprobe.data.datasets import state_flag_attrs
from scoreprobe.probes.capture import RETENTION_OUTCOMES, closer_to_nontrain, restart_outcomes
from scoreprobe.probes.field import as_sigma_list, plane_coords
from scoreprobe.sweep import dataset_and_rule, run_probe

logger = logging.getLogger(__name__)

LABEL_CHANGE_TOL = 0.01   # check_convergence warns when more than this share of the grid changes label


@torch.no_grad()
def _endpoints(D, x0, sigma, n_steps, solver, chunk_size):
    """engine.EngineResult of the PF-ODE from x0 (B, D) at sigma."""
    from scoreprobe.ode import integrate
    return integrate(D, x0, float(sigma), n_steps=n_steps, solver=solver, chunk_size=chunk_size, info=True)


# ---------------------------------------------------------------------------------------------
# Basin maps on a plane
# ---------------------------------------------------------------------------------------------

def basin_map(D, plane, sigma_starts, res, n_steps, dataset, rule, margin=0.5, solver=DEFAULT_SOLVER,
              chunk_size="auto", dtype=torch.float32, device="cpu", keep_bits=False):
    """Endpoints of the PF-ODE from every grid point of `plane`, for one denoiser.

    A `models.stack.StackedDenoiser` of K checkpoints integrates all K maps in one batched pass
    and gives a list of K such dicts (identical to K calls with the single models).

    Returns
    -------
    dict name -> numpy array (S, res, res) over (sigma_start, v, u): state (int8), index,
    train_index, heldout_index, nearest_train_hamming (int64), anchor (int8), off_vertex (bool),
    decided_sigma (float64: σ where the engine decided the point, 0 when integrated to the end),
    nfe (int64: denoiser evaluations of the point), status (int8: codes of `ode.engine.STATUS`);
    with keep_bits, bits (S, res, res, D) uint8: the thresholded endpoint (meaningless where invalid).
    """
    from scoreprobe.models.stack import chunk_rows, counted, replicate, split, stack_size
    from scoreprobe.slices import classify

    k = stack_size(D)                          # K models of a stack
    points, _, _ = plane.grid(res, margin)
    x0 = replicate(torch.as_tensor(points, dtype=dtype, device=device), k)   # (P*K, D)
    keys = ("state", "index", "train_index", "heldout_index", "nearest_train_hamming", "anchor", "off_vertex") + \
        (("bits",) if keep_bits else ())
    out, n_bad = [{key: [] for key in keys + ("decided_sigma", "nfe", "status")} for _ in range(k)], 0
    for s in sigma_starts:
        with warnings.catch_warnings():   # non-finite endpoints: counted over all σ_start, warned once below
            warnings.simplefilter("ignore", NonFiniteWarning)
            r = _endpoints(D, x0, s, n_steps, solver, chunk_rows(chunk_size, k))   # (P*K, D)
        n_bad += int((~torch.isfinite(r.x)).any(dim=1).sum())
        per_row = {"decided_sigma": r.decided_sigma.reshape(-1, k), "nfe": r.nfe.reshape(-1, k),
                   "status": np.asarray(r.status, dtype=np.int8).reshape(-1, k)}                 # (P, K)
        for i, xe in enumerate(split(r.x, k)):                                # (P, D) per model
            c = classify(xe, dataset, rule, anchors=plane.anchors)
            for key in keys:
                out[i][key].append(c[key].reshape(res, res, -1) if key == "bits" else c[key].reshape(res, res))
            for key, v in per_row.items():
                out[i][key].append(v[:, i].reshape(res, res))
    warn_nonfinite(n_bad, len(sigma_starts) * len(x0), "PF-ODE endpoints "
                   + counted("sigma_starts x grid points", k), "they are classified `invalid`")
    maps = [{key: np.stack(v) for key, v in m.items()} for m in out]
    return maps if k > 1 else maps[0]


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
    worst = np.unravel_index(int(np.argmax(frac.values)), frac.shape)
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
    if "bits" in m:   # basins(keep_bits=True)
        data["endpoint_bits"] = (dims + ("bit",), m["bits"].astype(np.uint8), {
            **one, "long_name": "thresholded bits of the PF-ODE endpoint (meaningless where endpoint_state is invalid)"})
    coords = plane_coords(plane, u, v)
    if "bits" in m:
        coords["bit"] = ("bit", np.arange(m["bits"].shape[-1], dtype=np.int64), {**one, "long_name": "bit index"})
    coords["sigma_start"] = ("sigma_start", sigma_starts, {"units": "1", "long_name": "noise level the ODE starts at"})
    coords["state"] = ("state", np.array(STATES, dtype=object), {"long_name": "endpoint state"})
    return xr.Dataset(data, coords=coords)


def _basin_config(plane, sigma_starts, res, n_steps, margin, solver, dtype, rule, check_convergence, keep_bits=False):
    """The store identity of a basins run (`check_convergence` and `keep_bits` are recorded only when True)."""
    from scoreprobe.ode import solver_config
    # "endpoint_status": 1 marks stores with the per-point status variable (older ones are refused as another config)
    config = {"probe": "basins", "definitions": DEFINITIONS_VERSION, "endpoint_status": 1, "plane": plane.spec(),
              "sigma_start": sigma_starts.tolist(), "res": int(res), **solver_config(solver, n_steps),
              "margin": float(margin), "dtype": str(dtype).replace("torch.", ""), "rule": rule.spec()}
    if check_convergence:
        config["check_convergence"] = True
    if keep_bits:
        config["keep_bits"] = True
    return config


def basins(D_or_series, plane, sigma_start=(0.5, 1.0, 2.0), res=64, n_steps=DEFAULT_N_STEPS, *, dataset=None,
           rule=None, margin=0.5, solver=DEFAULT_SOLVER, chunk_size="auto", dtype=torch.float32, device="cpu", steps=None,
           out=None, progress=None, check_convergence=False, overwrite=False, models_per_pass=1, autocast=None,
           model_id=None, keep_bits=False):
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
    keep_bits : also store each endpoint's thresholded bits, `endpoint_bits` ([step,] sigma_start, v, u,
        bit) uint8 (the report's gallery shows them); recorded in the store's config when True.

    Returns
    -------
    xarray.Dataset, dims ([step,] sigma_start, v, u): endpoint_state (flag attrs), endpoint_index,
    endpoint_train_index, endpoint_heldout_index, endpoint_anchor, nearest_train_hamming,
    endpoint_decided_sigma, nfe; fraction ([step,] sigma_start, state): share of the plane in each state; with
    check_convergence, label_change_fraction and label_change_fraction_item ([step,] sigma_start),
    float64 (see `label_change`).
    """
    dataset, rule = dataset_and_rule(D_or_series, dataset, rule, who="basins")
    sigma_starts = as_sigma_list(sigma_start, "sigma_start")
    if int(n_steps) < 1:
        raise ConfigError(f"n_steps must be >= 1, got {n_steps}")
    _, u, v = plane.grid(res, margin)
    config = _basin_config(plane, sigma_starts, res, n_steps, margin, solver, dtype, rule, check_convergence,
                           keep_bits)

    def probe(D):   # a StackedDenoiser of K checkpoints gives K Datasets
        from scoreprobe.ode import finer

        def grid_map(solver_, n):
            m = basin_map(D, plane, sigma_starts, res, n, dataset, rule, margin, solver_, chunk_size, dtype, device,
                          keep_bits)
            return m if isinstance(m, list) else [m]
        maps = grid_map(solver, int(n_steps))
        out = [_basin_dataset(m, plane, sigma_starts, u, v) for m in maps]
        if check_convergence:
            out = [ds.assign(_convergence_vars(label_change(m, m2), n_steps, solver))
                   for ds, m, m2 in zip(out, maps, grid_map(*finer(solver, n_steps)))]
        return out if len(out) > 1 else out[0]
    probe.stackable, probe.n_bits = True, dataset.train.shape[1]

    probe, config = with_autocast(probe, config, autocast, device)
    ds = run_probe(probe, D_or_series, config, steps=steps, out=out, device=device, progress=progress,
                   overwrite=overwrite, models_per_pass=models_per_pass, model_id=model_id)
    if check_convergence:
        _warn_unconverged(ds, n_steps, solver)
    return ds


# ---------------------------------------------------------------------------------------------
# Per-item retention
# ---------------------------------------------------------------------------------------------

def retention_points(dataset, n_train=32, n_heldout=32, seed=0):
    """A seeded subset of training and held-out items.

    Returns
    -------
    points : (n_train + n_heldout, D) float32 signed; split : (M,) str; item_index : (M,) int64.
    """
    from scoreprobe.data.datasets import to_signed
    rng = np.random.default_rng(seed)
    parts, split, index = [], [], []
    for name, bits, n in (("train", dataset.train, n_train), ("heldout", dataset.heldout, n_heldout)):
        if n > len(bits):
            raise ConfigError(f"asked for {n} {name} items but the dataset has {len(bits)}")
        idx = np.sort(rng.choice(len(bits), size=n, replace=False)).astype(np.int64)
        parts.append(bits[idx])
        split += [name] * n
        index.append(idx)
    return to_signed(np.concatenate(parts)), np.array(split), np.concatenate(index)


def _split_of(points, dataset):
    bits = (np.asarray(points) > 0).astype(np.uint8)
    ti, hi = dataset.train_index.lookup(bits), dataset.heldout_index.lookup(bits)
    split = np.where(ti >= 0, "train", np.where(hi >= 0, "heldout", "other"))
    return split, np.where(ti >= 0, ti, hi).astype(np.int64)


@torch.no_grad()
def retention_counts(D, points, sigmas, n_noise, seed, n_steps, dataset, rule, solver=DEFAULT_SOLVER,
                     chunk_size="auto", dtype=torch.float32, device="cpu"):
    """Fractions of noisy restarts that return, are captured, or end valid, for one denoiser.

    Restart k of point m at level σ is x_m + σ ε_{m,k} with ε_{m,k} = randn_per_sample(seed,
    m * n_noise + k): the same noise at every σ and every checkpoint. A `models.stack.StackedDenoiser`
    of K checkpoints runs all K in one batched pass and gives a list of K such dicts.

    Returns
    -------
    dict name -> (S, M) float64, the outcomes of RETENTION_VARS (probes.capture.restart_outcomes): retained,
    captured, valid, other_valid, violating, closer_nontrain, captured_closer, captured_nearer_own,
    capture_distance_ratio (a mean over the item's captured restarts only). Non-finite endpoints count as
    none of them (except closer_nontrain, a property of the start); one NonFiniteWarning gives their number.
    """
    from scoreprobe.models.stack import chunk_rows, counted, replicate, split, stack_size
    from scoreprobe.ode import randn_per_sample
    from scoreprobe.slices import classify

    (m, d), k = points.shape, stack_size(D)
    split_, item = _split_of(points, dataset)
    own_train = np.repeat(np.where(split_ == "train", item, -1), n_noise)                   # (M*R,)
    own = np.repeat((np.asarray(points) > 0).astype(np.uint8), n_noise, axis=0)             # (M*R, D)
    x = torch.as_tensor(np.repeat(points, n_noise, axis=0), dtype=dtype, device=device)   # (M*R, D), R restarts
    eps = randn_per_sample(seed, torch.arange(m * n_noise), d, dtype=dtype, device=device)  # (M*R, D)
    res = [{name: np.empty((len(sigmas), m)) for name in RETENTION_VARS} for _ in range(k)]
    n_bad = 0
    for i, s in enumerate(sigmas):
        starts = (x + float(s) * eps).double().cpu().numpy()                                   # (M*R, D)
        closer = closer_to_nontrain(starts, dataset, rule)                                     # (M*R,)
        with warnings.catch_warnings():   # counted here and reported once below
            warnings.simplefilter("ignore", NonFiniteWarning)
            ends = _endpoints(D, replicate(x + float(s) * eps, k), s, n_steps, solver, chunk_rows(chunk_size, k)).x
        for j, xe in enumerate(split(ends, k)):                                             # (M*R, D) per model
            hits = restart_outcomes(classify(xe, dataset, rule), own, own_train, closer, starts, dataset.train)
            n_bad += hits.pop("invalid")
            for name, hit in hits.items():
                res[j][name][i] = _per_item(hit, m, n_noise)
    warn_nonfinite(n_bad, len(sigmas) * m * n_noise * k, "retention restarts' endpoints "
                   + counted("sigmas x points x restarts", k), "they count as neither retained, captured nor valid")
    return res if k > 1 else res[0]


def _per_item(hit, m, n_noise):
    """(M,) mean over each item's restarts of (M·R,) flags or values; NaN values (a ratio of an uncaptured
    restart) are left out, NaN when all of an item's are."""
    v = np.asarray(hit, dtype=np.float64).reshape(m, n_noise)
    ok = np.isfinite(v)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, v, 0.0).sum(axis=1) / ok.sum(axis=1)


RETENTION_VARS = RETENTION_OUTCOMES   # name -> long_name of every retention outcome (probes.capture)


def retention(D_or_series, points=None, sigmas=(0.1, 0.2, 0.5, 1.0, 2.0), n_noise=16, seed=0, *,
              n_train=32, n_heldout=32, split=None, n_steps=DEFAULT_N_STEPS, dataset=None, rule=None, solver=DEFAULT_SOLVER,
              chunk_size="auto", dtype=torch.float32, device="cpu", steps=None, out=None, progress=None,
              models_per_pass=1, autocast=None, model_id=None):
    """Per-item basin retention: do noisy copies of an item flow back to it?

    For every point p_m, level σ and restart k the PF-ODE runs from x = p_m + σ ε_{m,k} at σ to 0.
    `retained` is the fraction of restarts ending exactly on p_m, `captured` the fraction ending
    on a training item other than p_m, `other_valid` on a valid vertex that is neither p_m nor a training
    item, `violating` on a rule-violating vertex (with the non-finite ones these four and `retained` add up
    to 1); `captured_closer`: the start is nearer to a valid non-training vertex than to every training
    item (`closer_nontrain`) and the endpoint is a training item (docs/definitions.md, "Per-item
    basins"; NaN for rules without an exact nearest-valid search); `captured_nearer_own`: captured although
    the start is nearer its own item than the capturing training item, `capture_distance_ratio` the mean
    of d(start, own) / d(start, capturer) over the item's captured restarts (NaN: none captured). The noise bank depends only on
    (seed, m, k), so it is the same at every σ and every checkpoint.

    Parameters
    ----------
    D_or_series : a denoiser, a CheckpointSeries or a {step: denoiser} mapping.
    points : (M, D) signed vertices; default: `n_train` training and `n_heldout` held-out items
        drawn with `seed` from the dataset.
    sigmas : noise levels of the restarts.
    split : (M,) labels for `points`; default: "train"/"heldout"/"other" by lookup in the dataset.
    models_per_pass, autocast, model_id : as for `basins`.

    Returns
    -------
    xarray.Dataset, dims ([step,] sigma, sample): the RETENTION_VARS outcomes; coordinates
    split (sample) and item_index (sample; index within its split, -1 for "other").
    """
    from scoreprobe.ode import solver_config
    dataset, rule = dataset_and_rule(D_or_series, dataset, rule, who="retention")
    sigmas = as_sigma_list(sigmas)
    if int(n_noise) < 1:
        raise ConfigError(f"n_noise must be >= 1, got {n_noise}")
    if points is None:
        points, split_, item = retention_points(dataset, n_train, n_heldout, seed)
    else:
        points = np.asarray(points.detach().cpu() if hasattr(points, "detach") else points, dtype=np.float32)
        if points.ndim != 2 or points.shape[1] != dataset.train.shape[1]:
            raise ConfigError(f"points must be (M, {dataset.train.shape[1]}) signed vertices, got {points.shape}")
        split_, item = _split_of(points, dataset)
    split_ = np.asarray(split if split is not None else split_, dtype=str)
    config = {"probe": "retention", "definitions": DEFINITIONS_VERSION, "sigmas": sigmas.tolist(),
              "n_noise": int(n_noise), "seed": int(seed), "noise": NOISE,
              **solver_config(solver, n_steps), "dtype": str(dtype).replace("torch.", ""),
              "points": ["".join("1" if x > 0 else "0" for x in p) for p in points], "rule": rule.spec()}

    coords = {"sigma": ("sigma", sigmas, {"units": "1", "long_name": "noise level of the restarts"}),
              "sample": ("sample", np.arange(len(points), dtype=np.int64), {"units": "1", "long_name": "item"}),
              "split": ("sample", split_.astype(object), {"long_name": "which set the item belongs to"}),
              "item_index": ("sample", item, {"units": "1", "long_name": "index of the item in its split"})}
    config["outcomes"] = sorted(RETENTION_VARS)   # stores made before the breakdown lack some: refused

    def probe(D):   # a StackedDenoiser of K checkpoints gives K Datasets
        r = retention_counts(D, points, sigmas, n_noise, seed, n_steps, dataset, rule, solver,
                             chunk_size, dtype, device)
        parts = [xr.Dataset({k: (("sigma", "sample"), rk[k], {"units": "1", "long_name": RETENTION_VARS[k]})
                             for k in rk}, coords=coords) for rk in (r if isinstance(r, list) else [r])]
        return parts if len(parts) > 1 else parts[0]
    probe.stackable, probe.n_bits = True, dataset.train.shape[1]

    probe, config = with_autocast(probe, config, autocast, device)
    return run_probe(probe, D_or_series, config, steps=steps, out=out, device=device, progress=progress,
                     models_per_pass=models_per_pass, model_id=model_id)
