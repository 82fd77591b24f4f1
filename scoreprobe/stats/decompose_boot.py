"""Resampling a `decompose` result: a paired bootstrap over points, two-level over trained models.

`decompose` keeps, per (σ, split, point), the sufficient statistics of the fits (see
`scoreprobe.probes.decompose_fit`), so a resample of points is a weighted sum of them and no denoiser
is re-run. The scheme:

- one model: B resamples of the split's points with replacement (the noise draws of a point stay
  together); every oracle, the shrinkage baseline and the mixture are computed on the SAME resample
  (paired), so a lead best − runner-up is resampled as a difference;
- several models (a list of Datasets from trained models of one recipe, the same cells): a replicate draws
  m models with replacement, then, independently for each drawn model, its points with replacement; the
  replicate's value is the mean over the m drawn models of each model's value. The estimate is the mean
  over the models of each model's full-sample value. (The readings no longer use this over models: with
  3 models it cannot hold its level; `scoreprobe.stats.decompose_infer` takes the model as the unit.)

Intervals are percentile intervals at `level`.
"""
import warnings

import numpy as np
import xarray as xr

from scoreprobe.errors import ConfigError

STATS = ("gram", "xty", "yty", "ysum", "xx", "xy", "n_rows")
POINT_DIMS = ("point", "oracle", "oracle_b", "pixel")
_CHUNK = 2 ** 24               # floats of pooled Gram matrices held at once (cells × resamples × K²)


def as_list(ds_or_list, who, need=STATS):
    """[Dataset, ...] from one decompose Dataset or a list of them (the same cells and oracles), each holding the
    per-point statistics `need`."""
    items = list(ds_or_list) if isinstance(ds_or_list, (list, tuple)) else [ds_or_list]
    if not items or not all(isinstance(d, xr.Dataset) for d in items):
        raise ConfigError(f"{who} needs a Dataset from decompose() or a list of them (one per trained model)")
    missing = [v for v in need if v not in items[0]]
    if missing:
        raise ConfigError(f"{who} needs decompose()'s per-point statistics ({', '.join(need)}) to resample "
                          f"points; this Dataset lacks {', '.join(missing)} (written before they were kept, or "
                          "a hand-made table): re-run decompose")
    ref = items[0]
    for d in items[1:]:
        for dim in (set(ref.gram.dims) | set(ref.gram.coords)) - {"point"}:
            if dim not in d.coords or not np.array_equal(np.asarray(d[dim].values), np.asarray(ref[dim].values)):
                raise ConfigError(f"{who}: the models' Datasets differ in {dim!r}; give results over the same "
                                  "steps, σ, splits and oracles (select a common subset first)")
    return items


def cell_layout(ds):
    """(cell dims, cell coords, cell shape) of a decompose Dataset: its dims without the per-point ones."""
    dims = tuple(d for d in ds.gram.dims if d not in POINT_DIMS)
    coords = {k: v for k, v in ds.gram.coords.items() if not set(v.dims) & set(POINT_DIMS)}
    return dims, coords, tuple(ds.sizes[d] for d in dims)


def flat_stats(ds, oracles=None):
    """{name: (C, P, ...)} per-point statistics with the cells flattened (C = product of cell dims)."""
    dims = cell_layout(ds)[0]
    d = ds if oracles is None else ds.sel(oracle=list(oracles), oracle_b=list(oracles))
    out = {}
    for name in (*STATS, "affine"):
        if name not in d:
            continue
        v = d[name]
        rest = [x for x in POINT_DIMS if x in v.dims]
        arr = np.asarray(v.transpose(*dims, *rest).values, np.float64)
        out[name] = arr.reshape(-1, *[d.sizes[x] for x in rest])
    return out


def _pool(stats, cells, m):
    """Weighted sums over points for `cells` (index array) and multiplicities m (n, P): {k: (len(cells), n, ...)}."""
    return {k: np.einsum("np,cp...->cn...", m, v[cells]) for k, v in stats.items()}


def _groups(stats):
    """Cells grouped by the set of real points (n_rows > 0): [(cells, mask (P,))]."""
    masks = stats["n_rows"] > 0                                             # (C, P)
    uniq, inv = np.unique(masks, axis=0, return_inverse=True)
    return [(np.flatnonzero(inv.ravel() == g), uniq[g]) for g in range(len(uniq))]


def estimate(stats_list, fn, out_shape):
    """Mean over models of fn(pooled, cells, model index) on each model's full sample: (C, *out_shape)."""
    vals = []
    for j, stats in enumerate(stats_list):
        c = len(stats["yty"])
        v = np.full((c, 1, *out_shape), np.nan)
        for cells, mask in _groups(stats):
            v[cells] = fn(_pool(stats, cells, mask[None].astype(np.float64)), cells, j)
        vals.append(v[:, 0])
    return np.mean(vals, axis=0)


def replicates(stats_list, fn, out_shape, n_boot, seed):
    """B bootstrap replicates of the mean over models of fn: (C, B, *out_shape) (module docstring)."""
    rng = np.random.default_rng(seed)
    n_models = len(stats_list)
    picks = rng.integers(0, n_models, size=(n_boot, n_models)) if n_models > 1 else np.zeros((n_boot, 1), int)
    c = len(stats_list[0]["yty"])
    total = np.zeros((c, n_boot, *out_shape))
    for j, stats in enumerate(stats_list):
        slots = np.argwhere(picks == j)                                     # (n, 2): replicate, slot
        if not len(slots):
            continue
        for cells, mask in _groups(stats):
            real = np.flatnonzero(mask)
            m = np.zeros((len(slots), len(mask)))
            m[:, real] = rng.multinomial(len(real), np.full(len(real), 1.0 / len(real)), size=len(slots))
            k2 = stats["gram"].shape[-1] ** 2 + stats["ysum"].shape[-1]
            step = max(1, _CHUNK // max(1, len(slots) * k2))
            for start in range(0, len(cells), step):
                sub = cells[start:start + step]
                vals = fn(_pool(stats, sub, m), sub, j)                        # (len(sub), n, *out)
                np.add.at(total, (sub[:, None], slots[None, :, 0]), vals)
    return total / picks.shape[1]


def interval(reps, level):
    """Percentile interval over the replicate axis (axis 1): (lower, upper), NaN where any replicate is."""
    a = (1 - level) / 2
    bad = ~np.isfinite(reps).all(axis=1)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)                     # all-NaN cells: undefined
        lo, hi = np.nanquantile(np.where(np.isfinite(reps), reps, np.nan), [a, 1 - a], axis=1) \
            if reps.size else (reps[:, 0], reps[:, 0])
    return np.where(bad, np.nan, lo), np.where(bad, np.nan, hi)


def check_boot(level, n_boot, seed):
    """ConfigError for a level outside (0, 1), fewer than 20 resamples, or a bad seed."""
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) or not 0 < level < 1:
        raise ConfigError(f"level must be a number in (0, 1), got {level!r}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or not 20 <= n_boot <= 100_000:
        raise ConfigError(f"n_boot must be an integer in [20, 100000], got {n_boot!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
