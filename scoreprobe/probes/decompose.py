"""What kind of denoiser is it: the network's D regressed on the exact oracles' outputs.

At each noise level σ and on each split of points (noised training items, noised held-out items,
noised fresh rule-valid images), with x = v + σε,

    D_net(x, σ) ≈ Σ_k w_k · D_k(x, σ)        k ∈ {memorizer, rule, local, local_equivariant}

fitted over every (point, noise draw, coordinate) of the split by least squares without an
intercept. The target is D itself (the clean-image estimate), not D − x: D − x = σ²·score is
dominated by the noise σε at small σ, where every denoiser agrees, and the literature's r²
(Kamb & Ganguli 2025) compares denoiser outputs. Reported (see `decompose`):

- `r2` (oracle alone, no fit): 1 − ‖D_net − D_k‖² / ‖D_net − mean‖², the mean taken per coordinate
  over the split's points. This is the score of "which oracle describes the network".
- `weight`, `r2_joint`, `residual`: the joint least-squares fit. Where the oracles coincide (small
  σ on training items: all of them return the item) the weights are not identified; directions
  with singular value below RCOND = 1e-6 of the largest are dropped (minimum-norm weights: two
  equal oracles share the weight), and `condition` says how collinear the cell is.
- `weight_simplex`, `r2_simplex`: the fit with weights ≥ 0 summing to 1 (a mixture of oracles),
  solved exactly by enumerating supports (at most 2^K − 1 equality-constrained problems).

Summaries (`best_oracle`, `decompose_summary`): per cell the oracle with the highest r², its lead
over the runner-up, "tie" where the lead is below TIE_MARGIN, "undefined" where any oracle's r² is
NaN (never a name there).
"""
import itertools
import json

import numpy as np
import torch
import xarray as xr

from scoreprobe.errors import ConfigError, DataError
from scoreprobe.noise import NOISE, randn_per_sample
from scoreprobe.ode import resolve_device
from scoreprobe.sweep import dataset_and_rule, run_probe

ORACLES = ("memorizer", "rule", "local", "local_equivariant")
SPLITS = ("train", "heldout", "random_valid")
DEFAULT_SIGMAS = (0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 3.0, 5.0)
NOISE_STRIDE = 1 << 16          # noise key = position · NOISE_STRIDE + draw, shared by the splits
CHUNK_ROWS = 4096               # denoiser rows per call
RCOND = 1e-6                    # joint fit: directions with singular value < RCOND·largest are dropped


# ---------------------------------------------------------------------------------------------
# Inputs: oracles and points
# ---------------------------------------------------------------------------------------------

def oracle_denoisers(dataset, rule, oracles=ORACLES, patch=3):
    """{name: denoiser} of the requested oracles for `dataset` (its training set) and `rule`.

    ConfigError for an unknown name, or for "rule" when the rule has no exact oracle."""
    from scoreprobe.oracles import EmpiricalDenoiser, LocalDenoiser, RuleDenoiser
    oracles = tuple(oracles)
    bad = [o for o in oracles if o not in ORACLES]
    if bad or not oracles or len(set(oracles)) != len(oracles):
        raise ConfigError(f"oracles must be distinct names among {', '.join(ORACLES)}; got {list(oracles)}")
    shape = getattr(rule, "image_shape", None)
    make = {"memorizer": lambda: EmpiricalDenoiser(dataset.train),
            "rule": lambda: RuleDenoiser(rule),
            "local": lambda: LocalDenoiser(dataset.train, patch=patch, shape=shape),
            "local_equivariant": lambda: LocalDenoiser(dataset.train, patch=patch, equivariant=True, shape=shape)}
    if "rule" in oracles and rule is None:
        raise ConfigError("the rule oracle needs the rule: pass rule= (a series carries it) or leave 'rule' "
                          "out of oracles=")
    return {name: make[name]() for name in oracles}


def decompose_points(dataset, rule, n_points=64, seed=0):
    """The clean points of each split: the first n_points training and held-out items and
    n_points fresh valid images rule.sample(n_points, seed) (none without a rule).

    Returns bits (S, D) uint8, split (S,) object, position (S,) int64 (row inside its split = noise key).
    """
    if isinstance(n_points, bool) or int(n_points) != n_points or n_points < 1:
        raise ConfigError(f"n_points must be a positive integer, got {n_points!r}")
    n = int(n_points)
    parts = [("train", dataset.train[:n]), ("heldout", dataset.heldout[:n])]
    if rule is not None:
        parts.append(("random_valid", np.asarray(rule.sample(n, seed=seed), np.uint8)))
    parts = [(name, b) for name, b in parts if len(b)]
    bits = np.concatenate([b for _, b in parts]).astype(np.uint8)
    split = np.concatenate([[name] * len(b) for name, b in parts]).astype(object)
    position = np.concatenate([np.arange(len(b)) for _, b in parts]).astype(np.int64)
    return bits, split, position


def noised(bits, position, sigma, n_noise, seed):
    """x = v + σε for every (point, draw): (S·n_noise, D) float64, row = point·n_noise + draw."""
    v = torch.as_tensor(bits, dtype=torch.float64).repeat_interleave(n_noise, 0) * 2 - 1
    keys = np.repeat(position * NOISE_STRIDE, n_noise) + np.tile(np.arange(n_noise), len(bits))
    return v + float(sigma) * randn_per_sample(seed, keys, bits.shape[1], dtype=torch.float64)


@torch.no_grad()
def evaluate(D, x, sigma, dtype=torch.float64, device="cpu"):
    """D(x, σ) in chunks of CHUNK_ROWS: x (M, D) float64 -> (M, D) float64 numpy."""
    out = []
    for start in range(0, len(x), CHUNK_ROWS):
        xs = x[start:start + CHUNK_ROWS].to(device=device, dtype=dtype)
        y = D(xs, torch.full((len(xs),), float(sigma), dtype=dtype, device=device))
        if not torch.is_tensor(y) or tuple(y.shape) != tuple(xs.shape):
            raise DataError(f"denoiser returned {getattr(y, 'shape', type(y))}, expected {tuple(xs.shape)}")
        out.append(y.detach().to("cpu", torch.float64).numpy())
    return np.concatenate(out)


# ---------------------------------------------------------------------------------------------
# The regression
# ---------------------------------------------------------------------------------------------

def _simplex_fit(X, y):
    """min ‖y − X w‖² over w ≥ 0, Σ w = 1: the best feasible equality-constrained solution over all
    supports (the optimum's support is among them). X (M, K), y (M,) -> w (K,)."""
    k = X.shape[1]
    gram, xty = X.T @ X, X.T @ y
    best, best_w = np.inf, None
    for size in range(1, k + 1):
        for support in itertools.combinations(range(k), size):
            s = list(support)
            kkt = np.zeros((size + 1, size + 1))
            kkt[:size, :size], kkt[:size, size], kkt[size, :size] = gram[np.ix_(s, s)], 1.0, 1.0
            sol = np.linalg.lstsq(kkt, np.append(xty[s], 1.0), rcond=None)[0][:size]
            if sol.min() < -1e-12:
                continue
            w = np.zeros(k)
            w[s] = np.clip(sol, 0, None) / np.clip(sol, 0, None).sum()
            err = float(((y - X @ w) ** 2).sum())
            if err < best - 1e-15 * max(1.0, best if np.isfinite(best) else 1.0):
                best, best_w = err, w
    return best_w


def regress(y, outputs):
    """Decompose one cell. y: (M, D) network outputs; outputs: (K, M, D) oracle outputs.

    Returns dict: r2 (K,), weight (K,), weight_simplex (K,), r2_joint, r2_simplex, residual (RMS
    of the joint fit per coordinate), condition (of the (M·D, K) oracle matrix)."""
    if not np.isfinite(y).all():
        nan_k = np.full(len(outputs), np.nan)
        return {"r2": nan_k, "weight": nan_k, "weight_simplex": nan_k, "r2_joint": np.nan,
                "r2_simplex": np.nan, "residual": np.nan, "condition": np.nan}
    ss_tot = float(((y - y.mean(0)) ** 2).sum())
    X = outputs.reshape(len(outputs), -1).T                                      # (M·D, K)
    target = y.reshape(-1)                                                       # (M·D,)

    def r2_of(pred):
        return 1.0 - float(((target - pred) ** 2).sum()) / ss_tot if ss_tot > 0 else np.nan
    w = np.linalg.lstsq(X, target, rcond=RCOND)[0]
    ws = _simplex_fit(X, target)
    return {"r2": np.array([r2_of(X[:, k]) for k in range(X.shape[1])]), "weight": w, "weight_simplex": ws,
            "r2_joint": r2_of(X @ w), "r2_simplex": r2_of(X @ ws),
            "residual": float(np.sqrt(((target - X @ w) ** 2).mean())), "condition": float(np.linalg.cond(X))}


_VARS = {
    "r2": (("sigma", "split", "oracle"), "1", "r² of the oracle alone, no fit: 1 − ‖D − D_k‖²/‖D − mean D‖²"),
    "weight": (("sigma", "split", "oracle"), "1", "least-squares weight of the oracle in the joint fit (minimum norm)"),
    "weight_simplex": (("sigma", "split", "oracle"), "1", "mixture weight (≥ 0, summing to 1) of the oracle"),
    "r2_joint": (("sigma", "split"), "1", "r² of the joint least-squares fit"),
    "r2_simplex": (("sigma", "split"), "1", "r² of the best mixture of oracles"),
    "residual": (("sigma", "split"), "1", "RMS residual of the joint fit per coordinate"),
    "condition": (("sigma", "split"), "1", "condition number of the oracle-output matrix (large: weights not identified)"),
}


def _cells_dataset(cells, sigmas, splits, names):
    """Dataset (sigma, split, oracle) from cells[i][j] = regress(...) dicts."""
    data = {}
    for var, (dims, units, long_name) in _VARS.items():
        arr = np.array([[cells[i][j][var] for j in range(len(splits))] for i in range(len(sigmas))], np.float64)
        data[var] = (dims, arr, {"units": units, "long_name": long_name})
    return xr.Dataset(data, coords={
        "sigma": ("sigma", np.asarray(sigmas, np.float64), {"units": "1", "long_name": "noise level σ"}),
        "split": ("split", np.array(splits, dtype=object), {"long_name": "points: noised training items, held-out "
                                                                         "items or fresh valid images"}),
        "oracle": ("oracle", np.array(names, dtype=object), {"long_name": "exact oracle denoiser"})})


def _resolve_sigmas(sigmas):
    s = np.atleast_1d(np.asarray(DEFAULT_SIGMAS if sigmas is None else sigmas, dtype=np.float64))
    if s.ndim != 1 or s.size == 0 or not np.all(np.isfinite(s)) or np.any(s <= 0) or s.size > 1000:
        raise ConfigError(f"sigmas must be 1 to 1000 positive finite noise levels, got {str(sigmas)[:80]}")
    return s


def decompose(D_or_series, dataset=None, rule=None, sigmas=None, n_points=64, n_noise=2, seed=0, *,
              oracles=ORACLES, patch=3, steps=None, out=None, device=None, dtype=torch.float32, progress=None,
              overwrite=False, model_id=None):
    """Regress the denoiser's output on the exact oracles' outputs, per σ and split (module docstring).

    Parameters
    ----------
    D_or_series : a denoiser, a CheckpointSeries or {step: denoiser}.
    dataset, rule : needed for a plain denoiser; a series brings its own.
    sigmas : noise levels (default DEFAULT_SIGMAS, 0.05 … 5).
    n_points : points per split (the first training / held-out items; fresh valid images drawn
        with `seed`); n_noise : noise draws per point, shared by every σ, split and step.
    oracles : names among ORACLES; patch : window side of the local oracles.
    dtype : the network's input dtype (the oracles run in float64; the regression in float64).
    steps, out, device, progress, overwrite, model_id : as for the other probes (`scoreprobe.sweep`).

    Returns
    -------
    xarray.Dataset over ([step], sigma, split, oracle): r2, weight, weight_simplex (sigma, split,
    oracle); r2_joint, r2_simplex, residual, condition (sigma, split). `decompose_summary(ds)` (or
    `best_oracle(ds)`) says per cell which oracle describes the network best, by what lead, and
    where that is a tie or undefined.
    """
    dataset, rule = dataset_and_rule(D_or_series, dataset, rule, need_rule=False, who="decompose")
    sig = _resolve_sigmas(sigmas)
    if isinstance(n_noise, bool) or int(n_noise) != n_noise or not 1 <= n_noise <= 1024:
        raise ConfigError(f"n_noise must be an integer in [1, 1024], got {n_noise!r}")
    named = oracle_denoisers(dataset, rule, oracles, patch)
    bits, split, pos = decompose_points(dataset, rule, n_points, seed)
    splits = [s for s in SPLITS if (split == s).any()]
    rows = {s: np.flatnonzero(np.repeat(split == s, int(n_noise))) for s in splits}
    xs = [noised(bits, pos, s, int(n_noise), seed) for s in sig]                  # per σ (M, D)
    ref = [np.stack([evaluate(o, x, s) for o in named.values()]) for x, s in zip(xs, sig)]   # (K, M, D)
    config = {"probe": "decompose", "sigmas": [float(s) for s in sig], "n_points": int(n_points),
              "n_noise": int(n_noise), "seed": int(seed), "oracles": list(named), "patch": int(patch),
              "noise": NOISE, "dtype": str(dtype).replace("torch.", ""),
              "rule": rule.spec() if hasattr(rule, "spec") else None}

    def probe(D):
        dev = resolve_device(device, D)
        cells = []
        for x, s, r in zip(xs, sig, ref):
            y = evaluate(D, x, s, dtype, dev)                                     # (M, D)
            cells.append([regress(y[rows[sp]], r[:, rows[sp]]) for sp in splits])
        return _cells_dataset(cells, sig, splits, list(named)).assign_attrs(
            title="the denoiser regressed on the exact oracles", scoreprobe_config=json.dumps(config, sort_keys=True))
    probe.n_bits = dataset.train.shape[1]
    sweep_device = "cpu" if device is None else str(resolve_device(device))
    return run_probe(probe, D_or_series, config, steps=steps, out=out, device=sweep_device, progress=progress,
                     overwrite=overwrite, model_id=model_id)


TIE_MARGIN = 0.01              # best_oracle: "tie" when the best r² leads the runner-up by less
UNDEFINED = "undefined"        # best_oracle: a cell where any oracle's value is NaN (NaN or constant network output)
TIE = "tie"


def _ranked(ds, var):
    """(values (…, K) float64, undefined (…,) bool, order (…, K) indices best first, coords/dims of a cell)."""
    if "oracle" not in getattr(ds, "dims", ()) or var not in ds:
        raise ConfigError(f"best_oracle / decompose_summary need a Dataset from decompose() with {var!r} over "
                          f"'oracle'; got {type(ds).__name__} with {sorted(map(str, getattr(ds, 'data_vars', ())))}")
    vals = ds[var].transpose(..., "oracle")
    arr = np.asarray(vals.values, np.float64)
    undefined = ~np.isfinite(arr).all(axis=-1)
    order = np.argsort(-np.where(np.isfinite(arr), arr, -np.inf), axis=-1, kind="stable")
    coords = {k: v for k, v in vals.coords.items() if "oracle" not in v.dims}
    return arr, undefined, order, coords, vals.dims[:-1]


def _check_margin(margin):
    if isinstance(margin, bool) or not isinstance(margin, (int, float, np.floating, np.integer)) \
            or not np.isfinite(margin) or margin < 0:
        raise ConfigError(f"margin must be a finite number >= 0, got {margin!r}")
    return float(margin)


def best_oracle(ds, var="r2", margin=TIE_MARGIN):
    """The oracle that describes the network best, per cell of a `decompose` result.

    Parameters
    ----------
    ds : Dataset from `decompose` (dims ([step,] sigma, split, oracle)), or a selection of it that
        keeps the `oracle` dim (e.g. ds.sel(split="heldout")).
    var : which variable ranks the oracles: "r2" (default), "weight" or "weight_simplex".
    margin : the lead (best − runner-up) below which the cell is a "tie" (default TIE_MARGIN = 0.01).

    Returns
    -------
    DataArray of str over the dims of `ds[var]` without `oracle` (e.g. (step, sigma, split)): the
    oracle's name; "tie" where it leads the runner-up by less than `margin` (the oracles agree there,
    e.g. small σ on training items); "undefined" where the value of any oracle is NaN/inf (a NaN or
    constant network output makes r² 0/0). A cell with only some oracles undefined is "undefined"
    too: the undefined one might be the best, so naming another would be a guess. attrs:
    `flag_meanings` lists the labels. `decompose_summary` adds the lead and the tied oracles.
    """
    margin = _check_margin(margin)
    arr, undefined, order, coords, dims = _ranked(ds, var)
    names = _names(ds)
    lead = _lead(arr, order, undefined)
    with np.errstate(invalid="ignore"):
        tie = lead < margin
    label = np.where(tie, TIE, names[order[..., 0]])
    label = np.where(undefined, UNDEFINED, label).astype(object)
    attrs = {"long_name": f"oracle with the highest {var} ({TIE}: lead < {margin}; {UNDEFINED}: {var} NaN for "
                          "some oracle)", "flag_meanings": " ".join([*names, TIE, UNDEFINED])}
    return xr.DataArray(label, dims=dims, coords=coords, name="best_oracle", attrs=attrs)


def _names(ds):
    return np.asarray([str(n) for n in ds.oracle.values], dtype=object)


def _lead(arr, order, undefined):
    """Best minus runner-up per cell (…,); NaN where undefined or with a single oracle (no runner-up)."""
    if arr.shape[-1] < 2:
        return np.full(arr.shape[:-1], np.nan)
    top = np.take_along_axis(arr, order[..., :2], axis=-1)
    return np.where(undefined, np.nan, top[..., 0] - top[..., 1])


def decompose_summary(ds, var="r2", margin=TIE_MARGIN):
    """Per cell of a `decompose` result: which oracle describes the network best, and by how much.

    Parameters
    ----------
    ds, var, margin : as for `best_oracle`.

    Returns
    -------
    xarray.Dataset over the dims of `ds[var]` without `oracle` (e.g. (step, sigma, split)):
    - best_oracle (str): the oracle's name, "tie" or "undefined" (`best_oracle`);
    - best_value (float): the highest `var` (NaN where undefined);
    - lead (float): the highest minus the runner-up's (NaN where undefined, or with one oracle: there
      is no runner-up to lead); a tie is lead < margin;
    - within_margin (str): the oracles within `margin` of the highest, joined by "+" (one name where
      the best leads; several in a tie; "" where undefined: no oracle is named there);
    - n_undefined_oracles (int): oracles whose `var` is NaN/inf in the cell.
    attrs: var, margin, and `sentence`: the counts of named, tied and undefined cells in words.
    """
    margin = _check_margin(margin)
    arr, undefined, order, coords, dims = _ranked(ds, var)
    names = _names(ds)
    label = best_oracle(ds, var, margin)
    lead = _lead(arr, order, undefined)
    best = np.where(undefined, np.nan, np.take_along_axis(arr, order[..., :1], axis=-1)[..., 0])
    with np.errstate(invalid="ignore"):
        close = arr >= best[..., None] - margin                        # (…, K); False where best is NaN
    within = np.array(["+".join(names[close[idx]]) for idx in np.ndindex(close.shape[:-1])],
                      dtype=object).reshape(close.shape[:-1])
    n_bad = (~np.isfinite(arr)).sum(axis=-1)

    def var_(values, long_name, units=None):
        return xr.DataArray(values, dims=dims, coords=coords, attrs={"long_name": long_name,
                                                                      **({"units": units} if units else {})})
    lab = label.values
    n, n_tie, n_undef = lab.size, int((lab == TIE).sum()), int((lab == UNDEFINED).sum())
    sentence = (f"{n - n_tie - n_undef} of {n} cells name one oracle (it leads the runner-up's {var} by at least "
                f"{margin}); {n_tie} are ties; {n_undef} are {UNDEFINED} ({var} NaN for some oracle: no oracle "
                "is named there)")
    return xr.Dataset({
        "best_oracle": label,
        "best_value": var_(best, f"highest {var} over the oracles (NaN: undefined)", "1"),
        "lead": var_(lead, f"highest {var} minus the runner-up's (NaN: undefined or no runner-up)", "1"),
        "within_margin": var_(within, f"oracles within {margin} of the highest {var}, joined by '+' "
                                      "('': undefined)"),
        "n_undefined_oracles": var_(n_bad.astype(np.int64), f"oracles whose {var} is NaN or infinite"),
    }, attrs={"var": var, "margin": margin, "sentence": sentence})
