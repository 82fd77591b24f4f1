"""Score field on a plane: what the denoiser's score looks like on a 2-D slice of R^D.

For every grid point x of a `Plane` and noise level σ the score s = (D(x, σ) - x)/σ² is split
into its in-plane components (score_u, score_v) and the norm of the rest (score_off_norm);
the denoiser output D(x, σ) is given in plane coordinates (denoised_u, denoised_v).
"""
import logging

import numpy as np
import torch
import xarray as xr

from scoreprobe.errors import ConfigError
from scoreprobe.limits import MAX_SIGMA, MAX_SIGMAS, warn_nonfinite
from scoreprobe.precision import with_autocast
from scoreprobe.sweep import dataset_and_rule, run_probe

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# Helpers shared by the plane probes (basins.py imports them)
# ---------------------------------------------------------------------------------------------

def plane_coords(plane, u, v):
    """Coordinates u, v and the anchors' plane positions, with CF attrs."""
    uv = plane.anchor_uv
    return {
        "u": ("u", u, {"units": "1", "long_name": "plane coordinate along anchor a -> b"}),
        "v": ("v", v, {"units": "1", "long_name": "plane coordinate toward anchor c"}),
        "anchor": ("anchor", np.arange(3, dtype=np.int64), {"units": "1", "long_name": "anchor id"}),
        "anchor_label": ("anchor", np.array(plane.labels, dtype=object), {"long_name": "anchor name"}),
        "anchor_u": ("anchor", uv[:, 0], {"units": "1", "long_name": "anchor u coordinate"}),
        "anchor_v": ("anchor", uv[:, 1], {"units": "1", "long_name": "anchor v coordinate"}),
    }


def as_sigma_list(sigmas, name="sigmas"):
    arr = np.atleast_1d(np.asarray(sigmas, dtype=np.float64))
    if arr.ndim != 1 or len(arr) == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ConfigError(f"{name} must be one or more positive finite numbers, got {_shown(sigmas)}")
    if len(arr) > MAX_SIGMAS or np.any(arr > MAX_SIGMA):
        raise ConfigError(f"{name} must be at most {MAX_SIGMAS} values of at most {MAX_SIGMA:g} "
                          f"(scoreprobe.limits.MAX_SIGMA), got {_shown(sigmas)}")
    return arr


# ---------------------------------------------------------------------------------------------
# Score field
# ---------------------------------------------------------------------------------------------

FIELD_VARS = {
    "score_u": "in-plane score component along e_u",
    "score_v": "in-plane score component along e_v",
    "score_off_norm": "norm of the score component orthogonal to the plane",
    "denoised_u": "plane coordinate u of the denoiser output D(x, sigma)",
    "denoised_v": "plane coordinate v of the denoiser output D(x, sigma)",
}


@torch.no_grad()
def plane_field(D, plane, sigmas, res=64, margin=0.5, chunk_size=4096, dtype=torch.float32, device="cpu"):
    """The field of one denoiser on the plane grid.

    A `models.stack.StackedDenoiser` of K checkpoints evaluates all K fields in one batched pass
    and gives a list of K such dicts.

    Returns
    -------
    dict name -> (S, res, res) float64 numpy arrays (dims sigma, v, u) for the FIELD_VARS. Grid points
    where D returns NaN/inf get NaN/inf values; one NonFiniteWarning gives their count.
    """
    from scoreprobe.models.stack import chunk_rows, counted, replicate, split, stack_size
    k = stack_size(D)                         # K models of a stack
    points, _, _ = plane.grid(res, margin)
    x = torch.as_tensor(points, dtype=dtype, device=device)                  # (P, D)
    basis = torch.as_tensor(plane.basis, dtype=dtype, device=device)         # (2, D)
    origin = torch.as_tensor(plane.origin, dtype=dtype, device=device)       # (D,)
    out = [{key: np.empty((len(sigmas), len(points))) for key in FIELD_VARS} for _ in range(k)]
    n_bad = 0
    for i, sigma in enumerate(sigmas):
        den_all = _denoise_rows(D, replicate(x, k), float(sigma), chunk_rows(chunk_size or len(x) * k, k))
        n_bad += int((~torch.isfinite(den_all)).any(dim=1).sum())
        for m, den in enumerate(split(den_all, k)):                          # (P, D) per model
            for key, val in _field_columns(den, x, float(sigma), basis, origin).items():
                out[m][key][i] = val.double().cpu().numpy()
    warn_nonfinite(n_bad, len(sigmas) * len(points) * k, "denoiser outputs on the plane grid "
                   + counted("points x sigmas", k), "their score-field values are NaN/inf")
    maps = [{key: a.reshape(len(sigmas), res, res) for key, a in o.items()} for o in out]
    return maps if k > 1 else maps[0]


def _denoise_rows(D, x, sigma, step):
    """D(x, σ) over the rows of x (N, D) in chunks of `step` rows -> (N, D)."""
    sig = torch.full((len(x),), sigma, dtype=x.dtype, device=x.device)      # (N,)
    return torch.cat([D(x[lo:lo + step], sig[lo:lo + step]) for lo in range(0, len(x), step)])


def _field_columns(den, x, sigma, basis, origin):
    """FIELD_VARS from denoiser outputs den (P, D) at points x (P, D): {name: (P,) tensor}."""
    score = (den - x) / sigma ** 2                                           # (P, D)
    s_uv = score @ basis.T                                                   # (P, 2)
    off = (score - s_uv @ basis).norm(dim=1)                                 # (P,)
    d_uv = (den - origin) @ basis.T                                          # (P, 2)
    return dict(zip(FIELD_VARS, (s_uv[:, 0], s_uv[:, 1], off, d_uv[:, 0], d_uv[:, 1])))


def _field_dataset(fields, plane, sigmas, u, v, prefix="", who="model"):
    data = {}
    for k, arr in fields.items():
        data[prefix + k] = (("sigma", "v", "u"), arr, {"units": "1", "long_name": f"{FIELD_VARS[k]} ({who})"})
    coords = plane_coords(plane, u, v)
    coords["sigma"] = ("sigma", sigmas, {"units": "1", "long_name": "noise level sigma"})
    return xr.Dataset(data, coords=coords)


def score_field(D_or_series, plane, sigmas, res=64, oracles=False, dataset=None, rule=None, *,
                margin=0.5, chunk_size=4096, dtype=torch.float32, device="cpu", steps=None, out=None,
                progress=None, overwrite=False, models_per_pass=1, autocast=None, model_id=None):
    """Score field of a denoiser (or of every checkpoint of a series) on a plane.

    Parameters
    ----------
    D_or_series : a denoiser D(x, sigma), a CheckpointSeries or a {step: denoiser} mapping.
    plane : slices.Plane.
    sigmas : float or sequence of noise levels.
    res : grid points per axis; margin : grid padding (see Plane.extent).
    oracles : also compute the memorizer's (`mem_*`) and the rule oracle's (`rule_*`) fields
        (no `step` dim); needs the data (dataset=, rule=, or from the series).
    steps, out, progress : for series: which steps, zarr store path, progress bar.
    overwrite : replace a store at `out` written with other settings (only once the new one is complete).
    models_per_pass : checkpoints evaluated together as one stacked network (see `sweep`).
    autocast : None (float32), "bf16" or "fp16": the network's matrix products in that dtype (see
        `scoreprobe.precision`); recorded in the store's config.
    model_id : names a weightless source (a function, an oracle) for resuming `out` (see `sweep`).

    Returns
    -------
    xarray.Dataset with dims ([step,] sigma, v, u): score_u, score_v, score_off_norm,
    denoised_u, denoised_v (plus mem_*/rule_* with dims (sigma, v, u) when oracles=True).
    """
    sigmas = as_sigma_list(sigmas)
    _, u, v = plane.grid(res, margin)
    config = {"probe": "score_field", "plane": plane.spec(), "sigmas": sigmas.tolist(), "res": int(res),
              "margin": float(margin), "dtype": str(dtype).replace("torch.", "")}

    def probe(D):   # a StackedDenoiser of K checkpoints gives K Datasets
        f = plane_field(D, plane, sigmas, res, margin, chunk_size, dtype, device)
        return [_field_dataset(fk, plane, sigmas, u, v) for fk in f] if isinstance(f, list) else \
            _field_dataset(f, plane, sigmas, u, v)
    probe.stackable, probe.n_bits = True, len(plane.origin)

    probe, config = with_autocast(probe, config, autocast, device)
    ds = run_probe(probe, D_or_series, config, steps=steps, out=out, device=device, progress=progress,
                   overwrite=overwrite, models_per_pass=models_per_pass, model_id=model_id)
    if oracles:
        ds = ds.merge(oracle_fields(D_or_series, plane, sigmas, res, margin, dataset, rule, device=device),
                      compat="override", join="exact", combine_attrs="override")
    return ds


def oracle_fields(obj, plane, sigmas, res=64, margin=0.5, dataset=None, rule=None, device="cpu"):
    """Fields of the memorizer (prefix mem_) and the rule oracle (prefix rule_), float64."""
    from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser

    dataset, rule = dataset_and_rule(obj, dataset, rule, who="score_field")
    _, u, v = plane.grid(res, margin)
    parts = []
    for prefix, who, D in (("mem_", "memorizer", EmpiricalDenoiser(dataset.train)),
                           ("rule_", "rule oracle", RuleDenoiser(rule))):
        f = plane_field(D, plane, sigmas, res, margin, dtype=torch.float64, device=device)
        parts.append(_field_dataset(f, plane, sigmas, u, v, prefix=prefix, who=who))
    return xr.merge(parts, compat="override", join="exact")


def _shown(value):
    """`value` as text on one line, at most 80 characters (an array's repr spans several)."""
    return " ".join(str(value).split())[:80]
