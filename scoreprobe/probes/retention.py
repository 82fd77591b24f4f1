"""Per-item basin retention: do noisy copies of an item flow back to it under the PF-ODE?

`retention` restarts from noisy copies x + σε of training and held-out items, integrates each to σ = 0
and counts how many return to the item itself, how many are captured by another training item, and how
many end on a valid non-training vertex or violate the rule (docs/definitions.md, "Per-item basins").
"""
import warnings

import numpy as np
import torch
import xarray as xr

from scoreprobe.errors import ConfigError, NonFiniteWarning
from scoreprobe.limits import MAX_SAMPLES, check_int, check_rows, warn_nonfinite
from scoreprobe.noise import NOISE
from scoreprobe.precision import with_autocast
from scoreprobe.defaults import DEFAULT_N_STEPS, DEFAULT_SOLVER, DEFINITIONS_VERSION
from scoreprobe.probes.basins import flow_to_zero
from scoreprobe.probes.capture import RETENTION_OUTCOMES, closer_to_nontrain, restart_outcomes
from scoreprobe.probes.field import as_sigma_list
from scoreprobe.sweep import dataset_and_rule, run_probe

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
            ends = flow_to_zero(D, replicate(x + float(s) * eps, k), s, n_steps, solver, chunk_rows(chunk_size, k)).x
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
    n_noise = check_int(n_noise, "n_noise", 1, MAX_SAMPLES)
    if points is None:
        points, split_, item = retention_points(dataset, n_train, n_heldout, seed)
    else:
        points = np.asarray(points.detach().cpu() if hasattr(points, "detach") else points, dtype=np.float32)
        if points.ndim != 2 or points.shape[1] != dataset.train.shape[1]:
            raise ConfigError(f"points must be (M, {dataset.train.shape[1]}) signed vertices, got {points.shape}")
        split_, item = _split_of(points, dataset)
    check_rows(len(points) * n_noise, points.shape[1], "points x n_noise (restarts)")   # before any is drawn
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
