"""The units of inference behind the decompose calls: points within a model, models within a recipe.

Every comparison a call makes is between two denoisers j and k fitted to the network in one cell (two oracles,
an oracle and the shrinkage c·x, an oracle and the network's own held-out affine fit). Their r² differ by a sum
over points of per-point residual differences,

    r²_k − r²_j = Σ_p (res_j,p − res_k,p) / ss_tot,    res_k,p = ‖y_p − D_k(x_p)‖² over the point's draws,

so a comparison is tested with the unit it is a mean over:

- points (any number of models): u_p = P·(res_j,p − res_k,p − margin·tot_p)/ss_tot, averaged over the models
  (tot_p: the point's share of ss_tot, so Σ_p tot_p = ss_tot); the p-value of a tie is a sign-flip
  randomization test over the P points (exact for a difference symmetric about 0; N_FLIPS random flips with
  the observed one counted, so the smallest attainable p is 1/(N_FLIPS + 1), and never below 2^(1 − P)): a t
  test over points is anti-conservative when a few points carry the difference (a planted tie at 32 points
  was called in 11 of 100 one-model recipes); the interval reported is the t interval (P − 1 df);
- models (m ≥ 2 trained models of one recipe): each model's own difference on its own points, L_m; a t interval
  over the m models (m − 1 df). Over trained models the model is the unit: a two-level bootstrap with 3
  top-level units cannot hold its level (issue 73: ties called in 13–14 of 40 planted recipes), t with 2 df can.

With several models a comparison holds only where BOTH units exclude a tie (intersection–union: its p-value is
the larger of the two, so the test keeps its level whichever source of variation dominates).
"""
import numpy as np

from scoreprobe.probes import decompose_fit as fit
from scoreprobe.stats.unit_intervals import t_summary

N_FLIPS = 4000          # random sign flips of the points' differences per cell (seeded: the result is reproducible)


def residuals(stats):
    """Per-point residuals of one model: (res (C, P, K + 2), tot (C, P), ss (C,), real (C, P) bool).

    res's columns: the K oracles, the best shrinkage c·x (c fitted on all the cell's points), the held-out affine
    fit. tot: each point's share of ss_tot around the cell's mean output. stats: `flat_stats` (C, P, …)."""
    real = stats["n_rows"] > 0
    s = {k: v.sum(1) for k, v in stats.items()}                   # padding points are zeros; a NaN point: NaN
    ss = fit.ss_total(s)
    diag = np.diagonal(stats["gram"], axis1=-2, axis2=-1)                               # (C, P, K)
    res_k = stats["yty"][..., None] - 2 * stats["xty"] + diag
    with np.errstate(invalid="ignore", divide="ignore"):
        c = (s["xy"] / s["xx"])[:, None]
        mean = s["ysum"] / s["n_rows"][:, None]                                         # (C, D)
    res_s = stats["yty"] - 2 * c * stats["xy"] + c ** 2 * stats["xx"]
    tot = stats["yty"] - 2 * np.einsum("cpd,cd->cp", stats["ysum"], mean) \
        + stats["n_rows"] * (mean ** 2).sum(-1)[:, None]
    res = np.concatenate([res_k, res_s[..., None], stats["affine"][..., None]], axis=-1)
    res = np.where(real[..., None], res, 0.0)
    return res, np.where(real, tot, 0.0), ss, real


def r2_columns(model_res):
    """Mean over models of each column's r²: (C, K + 2) from [`residuals`] per model."""
    with np.errstate(invalid="ignore", divide="ignore"):
        vals = [np.where(ss[:, None] > 0, 1 - res.sum(1) / ss[:, None], np.nan) for res, _, ss, _ in model_res]
    return np.mean(vals, axis=0)


def _t_test(x, level, axis):
    """Mean, two-sided p-value of mean = 0, and the t interval of the mean along `axis` (NaN where n < 2):
    `unit_intervals.t_summary` with `axis` as the units."""
    m, lo, hi, p = t_summary(np.moveaxis(x, axis, 0), level)
    return m, p, lo, hi


def sign_flip_p(u):
    """Two-sided sign-flip p-value of mean(u) = 0 over the last axis: (…, n) -> (…,).
    (1 + #{|Σ s·u| ≥ |Σ u|}) / (N_FLIPS + 1) over N_FLIPS random sign vectors s (seed 0; a tolerance of 1e-12 relative counts ties)."""
    n = u.shape[-1]
    signs = np.random.default_rng(0).choice([-1.0, 1.0], size=(n, N_FLIPS))
    obs = np.abs(u.sum(-1))
    flipped = np.abs(u @ signs)                                                         # (…, N_FLIPS)
    tol = 1e-12 * np.abs(u).sum(-1)
    with np.errstate(invalid="ignore"):
        count = (flipped >= (obs - tol)[..., None]).sum(-1)
    return np.where(np.isfinite(obs), (1 + count) / (N_FLIPS + 1), np.nan)


def compare(model_res, best, other, level, margin=0.0):
    """r²_best − r²_other per cell with its tests (module docstring).

    model_res: [`residuals`] per model; best, other (C,) column indices (NaN-free), margin: subtracted from the
    difference (a lead must exceed it). Returns {diff (C,) the mean over models, p (C,) the two-sided p-value of a
    tie (the larger of the points' sign-flip test and, with m ≥ 2 models, the models' t test), lower, upper (C,)
    the t interval at
    `level` over the unit of inference (models when m ≥ 2, else points), p_points, p_models (NaN for m = 1)}."""
    rows = np.arange(len(best))
    per_point, per_model = [], []
    for res, tot, ss, real in model_res:
        d = res[rows, :, other] - res[rows, :, best] - margin * tot                      # (C, P)
        with np.errstate(invalid="ignore", divide="ignore"):
            per_model.append(d.sum(1) / ss)
            per_point.append(d * real.sum(1, keepdims=True) / ss[:, None])
    real = model_res[0][3]
    u = np.mean(per_point, axis=0)
    out = np.full((4, len(best)), np.nan)
    for n_real in np.unique(real.sum(1)):                                               # cells with n_real points
        cells = np.flatnonzero(real.sum(1) == n_real)
        idx = np.argsort(~real[cells], axis=1, kind="stable")[:, :n_real]               # the real points first
        pts = np.take_along_axis(u[cells], idx, 1)
        out[:, cells] = _t_test(pts, level, 1)
        out[1, cells] = sign_flip_p(pts)
    m, p_points, lo, hi = out
    diff = np.mean(per_model, axis=0) + margin
    p_models = np.full(len(best), np.nan)
    if len(model_res) > 1:
        _, p_models, lo, hi = _t_test(np.array(per_model), level, 0)
    p = np.fmax(p_points, p_models) if len(model_res) > 1 else p_points
    p = np.where(np.isfinite(diff), p, np.nan)
    return {"diff": diff, "p": p, "lower": lo + margin, "upper": hi + margin, "p_points": p_points,
            "p_models": p_models}


def t_over_models(values, level):
    """Mean over models (axis 0) and its t interval with m − 1 df: (mean, lower, upper); values (m, …), m ≥ 2."""
    m, _, lo, hi = _t_test(np.asarray(values, np.float64), level, 0)
    return m, lo, hi
