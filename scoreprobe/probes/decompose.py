"""What kind of denoiser is it: the network's D against the exact oracles' outputs.

At each noise level σ and on each split of points (noised training items, noised held-out items,
noised fresh rule-valid images), with x = v + σε, the network's D(x, σ) is compared with

    memorizer          the empirical posterior mean of the training set (copies training items)
    rule               the exact posterior mean under the rule's distribution (generalizes)
    gaussian           the Wiener denoiser of the training set's mean and covariance (cannot copy)
    rule_gaussian      the Wiener denoiser of the rule distribution's exact mean and covariance
    local              per-position patch posterior (Kamb & Ganguli's locality, no equivariance)
    local_equivariant  all zero-padded patches pooled (today's ELS variant, a soft border penalty)
    local_boundary     the published boundary-aware ELS (candidates from the same position class)

with the local oracles per patch size when several are asked for (names local_p3, local_p5, …).
The target is D itself (the clean-image estimate), not D − x (Kamb & Ganguli 2025 compare denoiser
outputs). Per cell the probe keeps the fits' sufficient statistics per POINT (noise draws of a point
summed together; `scoreprobe.probes.decompose_fit`), so every reading can be resampled over points
(and over trained models) without re-running a denoiser:

- `r2` (oracle alone, no fit): 1 − ‖D_net − D_k‖² / ‖D_net − mean‖², the mean per coordinate over
  the split's rows; `r2_shrink`: the same for the best linear shrinkage c·x of the input (the
  untrained adaLN-Zero network is exactly x/(1+σ²): r2_shrink = 1);
- `weight`, `r2_joint`, `residual`, `condition`: the joint least-squares fit (minimum norm);
- `weight_simplex`, `r2_simplex`: the best mixture (weights ≥ 0 summing to 1);
- `r2_affine`: the network's own linear part as a baseline (Li et al. 2024's linearity): the affine map
  A·x + b fitted (ridge, penalty by generalized cross-validation) on one half of the split's points, scored
  on the other half (two folds).

Readings (`scoreprobe.stats.decompose_calls`): `mixture_weights` (the mixture with bootstrap
intervals: the primary attribution), `best_oracle` / `decompose_summary` (a call only where a paired
bootstrap excludes a tie, the network is not a shrinkage and the top two oracles differ), `best_patch`.
"""
import json
import warnings

import numpy as np
import torch
import xarray as xr

from scoreprobe.errors import ConfigError, DataError
from scoreprobe.noise import NOISE, randn_per_sample
from scoreprobe.ode import resolve_device
from scoreprobe.probes import decompose_fit as fit
from scoreprobe.sweep import dataset_and_rule, run_probe

ORACLES = ("memorizer", "rule", "gaussian", "rule_gaussian", "local", "local_equivariant", "local_boundary")
LOCAL = ("local", "local_equivariant", "local_boundary")         # the families that take a patch size
NEED_RULE = ("rule", "rule_gaussian")
SPLITS = ("train", "heldout", "random_valid")
DEFAULT_SIGMAS = (0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 3.0, 5.0)
NOISE_STRIDE = 1 << 16          # noise key = position · NOISE_STRIDE + draw, shared by the splits
CHUNK_ROWS = 4096               # denoiser rows per call


# ---------------------------------------------------------------------------------------------
# Inputs: oracles and points
# ---------------------------------------------------------------------------------------------

def _local(dataset, patch, shape, **kw):
    from scoreprobe.oracles import LocalDenoiser
    return LocalDenoiser(dataset.train, patch=patch, shape=shape, **kw)


def _boundary(dataset, patch, shape):
    """The published boundary-aware ELS (part of scoreprobe.oracles.local)."""
    import inspect

    from scoreprobe.oracles import LocalDenoiser
    if "boundary" not in inspect.signature(LocalDenoiser).parameters:
        raise ConfigError("local_boundary needs LocalDenoiser(boundary=...), which this version lacks; leave "
                          "'local_boundary' out of oracles=")
    return _local(dataset, patch, shape, equivariant=True, boundary="position_class")


def _gaussian(name):
    def make(dataset, rule):
        try:
            from scoreprobe.oracles import GaussianDenoiser
        except ImportError:
            raise ConfigError(f"{name} needs scoreprobe.oracles.GaussianDenoiser, which this version lacks; "
                              f"leave {name!r} out of oracles=") from None
        return GaussianDenoiser.from_bits(dataset.train) if name == "gaussian" else GaussianDenoiser.from_rule(rule)
    return make


def oracle_denoisers(dataset, rule, oracles=ORACLES, patch=3):
    """{name: denoiser} of the requested oracles for `dataset` (its training set) and `rule`; `patch` (int)
    is the window side of the local ones.

    ConfigError for an unknown name, or for "rule" / "rule_gaussian" when there is no rule (or no exact
    oracle or moments for it)."""
    from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
    oracles = tuple(oracles)
    bad = [o for o in oracles if o not in ORACLES]
    if bad or not oracles or len(set(oracles)) != len(oracles):
        raise ConfigError(f"oracles must be distinct names among {', '.join(ORACLES)}; got {list(oracles)}")
    shape = getattr(rule, "image_shape", None)
    make = {"memorizer": lambda: EmpiricalDenoiser(dataset.train),
            "rule": lambda: RuleDenoiser(rule),
            "gaussian": lambda: _gaussian("gaussian")(dataset, rule),
            "rule_gaussian": lambda: _gaussian("rule_gaussian")(dataset, rule),
            "local": lambda: _local(dataset, patch, shape),
            "local_equivariant": lambda: _local(dataset, patch, shape, equivariant=True),
            "local_boundary": lambda: _boundary(dataset, patch, shape)}
    needs = [o for o in oracles if o in NEED_RULE]
    if needs and rule is None:
        raise ConfigError(f"{', '.join(needs)} need(s) the rule: pass rule= (a series carries it) or leave "
                          f"{', '.join(map(repr, needs))} out of oracles=")
    return {name: make[name]() for name in oracles}


def _patches(patch):
    """Patch sizes as a tuple of distinct odd positive ints (ConfigError otherwise)."""
    ps = (patch,) if isinstance(patch, (int, np.integer)) and not isinstance(patch, bool) else tuple(patch)
    if not ps or len(set(ps)) != len(ps) or any(isinstance(p, bool) or int(p) != p or p < 1 or p % 2 == 0
                                                 for p in ps):
        raise ConfigError(f"patch must be an odd positive integer or a list of distinct ones, got {patch!r}")
    return tuple(int(p) for p in ps)


def named_oracles(dataset, rule, oracles=None, patch=3):
    """[(name, family, patch, denoiser)] for decompose: the local families once per patch size (named
    family_p<size> when several sizes are asked for). oracles=None: every oracle that applies (those
    needing the rule are left out without one, and one whose construction is refused is left out with a
    warning); explicit names are strict."""
    ps = _patches(patch)
    default = oracles is None
    names = [o for o in ORACLES if not (default and rule is None and o in NEED_RULE)] if default else list(oracles)
    bad = [o for o in names if o not in ORACLES]
    if bad or not names or len(set(names)) != len(names):
        raise ConfigError(f"oracles must be distinct names among {', '.join(ORACLES)}; got {names}")
    out = []
    for fam in names:
        for p in (ps if fam in LOCAL else (0,)):
            try:
                D = oracle_denoisers(dataset, rule, (fam,), p or ps[0])[fam]
            except ConfigError as e:
                if not default:
                    raise
                warnings.warn(f"decompose: {fam} left out of the default oracles: {e}", UserWarning, stacklevel=3)
                break
            out.append((f"{fam}_p{p}" if p and len(ps) > 1 else fam, fam, p, D))
    return out


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

def point_stats(y, outputs, x, n_noise):
    """Per-point sufficient statistics of one cell (`scoreprobe.probes.decompose_fit`).

    y, x: (P·n_noise, D) network outputs and inputs, rows point-major; outputs: (K, P·n_noise, D).
    Returns {gram (P, K, K), xty (P, K), yty (P,), ysum (P, D), xx (P,), xy (P,), n_rows (P,), affine (P,):
    `decompose_fit.affine_heldout_sse`}; a point
    whose network output is not finite gets NaN statistics (the cell is then undefined)."""
    n = int(n_noise)
    p, d = len(y) // n, y.shape[1]
    Y, X, V = y.reshape(p, n * d), outputs.reshape(len(outputs), p, n * d), x.reshape(p, n * d)
    bad = ~np.isfinite(Y).all(1)
    Y = np.where(bad[:, None], 0.0, Y)
    out = {"gram": np.einsum("kpd,lpd->pkl", X, X), "xty": np.einsum("kpd,pd->pk", X, Y),
           "yty": (Y ** 2).sum(1), "ysum": Y.reshape(p, n, d).sum(1), "xx": (V ** 2).sum(1), "xy": (V * Y).sum(1)}
    for v in out.values():
        v[bad] = np.nan
    out["n_rows"] = np.full(p, float(n))
    out["affine"] = fit.affine_heldout_sse(Y.reshape(p, n, d), V.reshape(p, n, d))
    out["affine"][bad] = np.nan
    return out


def cell_values(stats):
    """The cell's fits on all its points from per-point statistics: r2 (K,), weight (K,), weight_simplex (K,),
    r2_joint, r2_simplex, residual (RMS per coordinate of the joint fit), condition, r2_shrink, shrink_coef."""
    s = {k: v.sum(0) for k, v in stats.items()}          # a NaN point (undefined output) makes the cell NaN
    k = s["gram"].shape[-1]
    ss = fit.ss_total(s)
    if not (np.isfinite(s["gram"]).all() and np.isfinite(ss) and ss > 0):
        nan_k = np.full(k, np.nan)
        return {"r2": nan_k, "weight": nan_k, "weight_simplex": nan_k, **{v: np.nan for v in _CELL_SCALARS}}
    w, ws = fit.joint_fit(s["gram"], s["xty"]), fit.simplex_fit(s["gram"], s["xty"])
    err = lambda v: fit.fit_error(s["gram"], s["xty"], s["yty"], v)
    with np.errstate(invalid="ignore", divide="ignore"):
        coef = s["xy"] / s["xx"]
    return {"r2": fit.r2_alone(s, ss), "weight": w, "weight_simplex": ws, "r2_joint": 1 - err(w) / ss,
            "r2_simplex": 1 - err(ws) / ss, "residual": float(np.sqrt(err(w) / (s["n_rows"] * s["ysum"].size))),
            "condition": fit.condition(s["gram"]), "r2_shrink": float(fit.r2_shrink(s, ss)), "shrink_coef": coef,
            "r2_affine": float(fit.r2_affine(s, ss))}


def regress(y, outputs, x=None):
    """Decompose one cell from its rows. y: (M, D) network outputs; outputs: (K, M, D) oracle outputs; x:
    (M, D) inputs (for r2_shrink; NaN without). Returns `cell_values`' dict."""
    if x is None:
        x = np.zeros_like(y)
    return cell_values(point_stats(y, outputs, x, len(y)))


_CELL_SCALARS = ("r2_joint", "r2_simplex", "residual", "condition", "r2_shrink", "shrink_coef", "r2_affine")
_C, _O = ("sigma", "split"), ("sigma", "split", "oracle")
_VARS = {
    "r2": (_O, "1 − ‖D − D_k‖²/‖D − mean D‖² of the oracle alone, no fit"),
    "weight": (_O, "least-squares weight of the oracle in the joint fit (minimum norm)"),
    "weight_simplex": (_O, "mixture weight (≥ 0, summing to 1) of the oracle (intervals: mixture_weights)"),
    "r2_joint": (_C, "r² of the joint least-squares fit"),
    "r2_simplex": (_C, "r² of the best mixture of oracles"),
    "residual": (_C, "RMS residual of the joint fit per coordinate"),
    "condition": (_C, "condition number of the oracle-output matrix (large: weights not identified)"),
    "r2_shrink": (_C, "r² of the best linear shrinkage c·x of the input (1: the network is a shrinkage)"),
    "shrink_coef": (_C, "c of the best linear shrinkage c·x"),
    "r2_affine": (_C, "held-out r² of the network's own affine fit A·x + b (fitted on the other half of the points)"),
}
_STAT_DIMS = {"gram": ("point", "oracle", "oracle_b"), "xty": ("point", "oracle"), "yty": ("point",),
              "ysum": ("point", "pixel"), "xx": ("point",), "xy": ("point",), "n_rows": ("point",),
              "affine": ("point",)}
_STAT_NAMES = {"gram": "X_p'X_p: oracle outputs' Gram matrix of the point (draws summed)",
               "xty": "X_p'y_p: oracle outputs against the network's", "yty": "y_p'y_p",
               "ysum": "network output summed over the point's draws", "xx": "x_p'x_p (inputs)",
               "xy": "x_p'y_p", "n_rows": "noise draws of the point (0: padding, no point)",
               "affine": "‖y_p − (A x_p + b)‖²: the affine map fitted on the other half of the points"}


def _pad(v, n):
    """Pad the point axis (0) to n with zeros (n_rows 0: no point)."""
    return np.concatenate([v, np.zeros((n - len(v), *v.shape[1:]))]) if len(v) < n else v


def _cells_dataset(cells, stats, sigmas, splits, oracles):
    """Dataset over (sigma, split, [point,] oracle, …) from cells[i][j] (cell_values) and stats[i][j]."""
    data = {}
    for var, (dims, long_name) in _VARS.items():
        arr = np.array([[cells[i][j][var] for j in range(len(splits))] for i in range(len(sigmas))], np.float64)
        data[var] = (dims, arr, {"units": "1", "long_name": long_name})
    n = max(len(stats[i][j]["yty"]) for i in range(len(sigmas)) for j in range(len(splits)))
    for var, dims in _STAT_DIMS.items():
        arr = np.array([[_pad(stats[i][j][var], n) for j in range(len(splits))] for i in range(len(sigmas))])
        data[var] = (("sigma", "split", *dims), arr, {"long_name": _STAT_NAMES[var]})
    names = np.array([o[0] for o in oracles], dtype=object)
    return xr.Dataset(data, coords={
        "sigma": ("sigma", np.asarray(sigmas, np.float64), {"units": "1", "long_name": "noise level σ"}),
        "split": ("split", np.array(splits, dtype=object), {"long_name": "points: noised training items, held-out "
                                                                         "items or fresh valid images"}),
        "oracle": ("oracle", names, {"long_name": "exact oracle denoiser"}),
        "oracle_b": ("oracle_b", names.copy(), {"long_name": "exact oracle denoiser (second index of gram)"}),
        "family": ("oracle", np.array([o[1] for o in oracles], dtype=object), {"long_name": "oracle family"}),
        "patch": ("oracle", np.array([o[2] for o in oracles], np.int64), {"long_name": "patch side (0: not local)"}),
        "point": ("point", np.arange(n)), "pixel": ("pixel", np.arange(stats[0][0]["ysum"].shape[1]))})


def _resolve_sigmas(sigmas):
    s = np.atleast_1d(np.asarray(DEFAULT_SIGMAS if sigmas is None else sigmas, dtype=np.float64))
    if s.ndim != 1 or s.size == 0 or not np.all(np.isfinite(s)) or np.any(s <= 0) or s.size > 1000:
        raise ConfigError(f"sigmas must be 1 to 1000 positive finite noise levels, got {str(sigmas)[:80]}")
    return s


def decompose(D_or_series, dataset=None, rule=None, sigmas=None, n_points=64, n_noise=2, seed=0, *,
              oracles=None, patch=3, steps=None, out=None, device=None, dtype=torch.float32, progress=None,
              overwrite=False, model_id=None):
    """Compare the denoiser's output with the exact oracles' outputs, per σ and split (module docstring).

    Parameters
    ----------
    D_or_series : a denoiser, a CheckpointSeries or {step: denoiser}.
    dataset, rule : needed for a plain denoiser; a series brings its own.
    sigmas : noise levels (default DEFAULT_SIGMAS, 0.05 … 5).
    n_points : points per split (the first training / held-out items; fresh valid images drawn
        with `seed`); n_noise : noise draws per point, shared by every σ, split and step.
    oracles : names among ORACLES (default None: all that apply, `named_oracles`); patch : window side
        of the local oracles, or a list of them (e.g. (3, 5): each local family once per size, named
        local_p3, local_p5, …; `best_patch` reads the best size per σ).
    dtype : the network's input dtype (the oracles run in float64; the statistics in float64).
    steps, out, device, progress, overwrite, model_id : as for the other probes (`scoreprobe.sweep`).

    Returns
    -------
    xarray.Dataset over ([step], sigma, split, …): per cell (sigma, split, oracle) r2, weight,
    weight_simplex; per cell (sigma, split) r2_joint, r2_simplex, residual, condition, r2_shrink,
    shrink_coef; per point the statistics gram (point, oracle, oracle_b), xty (point, oracle), yty, xx,
    xy, n_rows (point) and ysum (point, pixel). Oracle coordinates `family` and `patch`. Read it with
    `mixture_weights`, `decompose_summary` / `best_oracle` (calls with intervals) and `best_patch`.
    """
    dataset, rule = dataset_and_rule(D_or_series, dataset, rule, need_rule=False, who="decompose")
    sig = _resolve_sigmas(sigmas)
    if isinstance(n_noise, bool) or int(n_noise) != n_noise or not 1 <= n_noise <= 1024:
        raise ConfigError(f"n_noise must be an integer in [1, 1024], got {n_noise!r}")
    bits, split, pos = decompose_points(dataset, rule, n_points, seed)
    named = named_oracles(dataset, rule, oracles, patch)
    n = int(n_noise)
    splits = [s for s in SPLITS if (split == s).any()]
    rows = {s: np.flatnonzero(np.repeat(split == s, n)) for s in splits}
    xs = [noised(bits, pos, s, n, seed) for s in sig]                             # per σ (M, D)
    ref = [np.stack([evaluate(o[3], x, s) for o in named]) for x, s in zip(xs, sig)]   # (K, M, D)
    config = {"probe": "decompose", "sigmas": [float(s) for s in sig], "n_points": int(n_points),
              "n_noise": n, "seed": int(seed), "oracles": [o[0] for o in named], "patch": list(_patches(patch)),
              "noise": NOISE, "dtype": str(dtype).replace("torch.", ""), "statistics": "per point",
              "rule": rule.spec() if hasattr(rule, "spec") else None}

    def probe(D):
        dev = resolve_device(device, D)
        cells, stats = [], []
        for x, s, r in zip(xs, sig, ref):
            y = evaluate(D, x, s, dtype, dev)                                     # (M, D)
            xn = x.numpy()
            stats.append([point_stats(y[rows[sp]], r[:, rows[sp]], xn[rows[sp]], n) for sp in splits])
            cells.append([cell_values(st) for st in stats[-1]])
        return _cells_dataset(cells, stats, sig, splits, named).assign_attrs(
            title="the denoiser against the exact oracles", scoreprobe_config=json.dumps(config, sort_keys=True))
    probe.n_bits = dataset.train.shape[1]
    sweep_device = "cpu" if device is None else str(resolve_device(device))
    return run_probe(probe, D_or_series, config, steps=steps, out=out, device=sweep_device, progress=progress,
                     overwrite=overwrite, model_id=model_id)

