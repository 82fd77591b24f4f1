"""Trained models × the units they share: intervals over training seeds and planes / items / pairs at
once (docs/definitions.md, "Trained models and units").

When every trained model of a configuration is measured on the same units (one data draw, the same
probe seeds: the same planes, retention items and DSM pairs), a per-unit value at one checkpoint is a
(models × units) table, y_mu = μ + a_m + b_u + e_mu. The mean over both varies as
σ²_a/M + σ²_b/U + σ²_e/(MU): a new trained model and new units would each move it. So:

- `crossed_mean` (means over models and units): the two-way random-effects ANOVA (models × units),
  the variance of the mean from MS_models + MS_units (the residual counted twice: conservative), t
  interval with Satterthwaite df, one-sided p-values, the variance components and how much a one-model
  interval (units only) understates the spread.
- `models_and_units` (a statistic computed per model from its units, e.g. a half-change step, then
  averaged over the models): SE² = s²_θ / M (the spread of the M model values: σ²_a and the residual)
  + V_u (the variance of the pooled statistic over resamples of the units, the same draw for every
  model: σ²_b and the residual again), t with Satterthwaite df from M − 1 and U − 1. It counts the
  residual twice, so it is conservative by that much.
- `two_level_bootstrap`: replicates of a statistic with the models resampled and then the units, ONE
  unit draw shared by the drawn models (resampling units separately inside each drawn model, a nested
  bootstrap, would divide the shared unit variance by M). With the models kept it gives V_u above. Its
  percentile interval is not used: with 3 models any resampling of models is close to [min, max] of
  them (tests/test_mechanism_seeds.py measures the coverage of all three).
"""
import numpy as np
import scipy.stats

from scoreprobe.errors import ConfigError

CROSSED_METHOD = ("models × units: two-way random effects, variance of the mean (MS_models + MS_units) / (M·U), "
                  "t interval with Satterthwaite df")
MODELS_UNITS_METHOD = ("per-model values: spread over models (t) + bootstrap of the shared units, "
                       "Satterthwaite df")


def _p_values(mean, se, df):
    """One-sided p-values of mean > 0 and of mean < 0 (t with df); se 0: 0 or 1 by the sign of mean."""
    with np.errstate(invalid="ignore", divide="ignore"):
        t = mean / se
    above = np.where(se > 0, scipy.stats.t.sf(t, df), np.where(mean > 0, 0.0, 1.0))
    below = np.where(se > 0, scipy.stats.t.cdf(t, df), np.where(mean < 0, 0.0, 1.0))
    return above, below


def mean_squares(values):
    """The two-way ANOVA of values (..., M, U): (grand mean, MS_models, MS_units, MS_residual), each (...);
    ConfigError with fewer than 2 models or units."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim < 2 or min(v.shape[-2:]) < 2:
        raise ConfigError(f"a crossed design needs (..., models, units) with at least 2 of each, got {v.shape}")
    M, U = v.shape[-2:]
    mean = v.mean(axis=(-2, -1))
    rows, cols = v.mean(axis=-1), v.mean(axis=-2)                          # (..., M), (..., U)
    ms_m = U * ((rows - mean[..., None]) ** 2).sum(axis=-1) / (M - 1)
    ms_u = M * ((cols - mean[..., None]) ** 2).sum(axis=-1) / (U - 1)
    resid = v - rows[..., :, None] - cols[..., None, :] + mean[..., None, None]
    return mean, ms_m, ms_u, (resid ** 2).sum(axis=(-2, -1)) / ((M - 1) * (U - 1))


def crossed_mean(values, ci=0.95):
    """Mean over models and units of values (..., M, U) (finite) with its crossed interval.

    The variance of the mean is estimated by (MS_models + MS_units) / (M·U), whose expectation is
    σ²_a/M + σ²_b/U + 2σ²_e/(MU): the residual counted twice (conservative; the unbiased
    (MS_m + MS_u − MS_e) / (MU) covers only 0.87–0.90 at 3 models when the residual
    dominates, tests/test_mechanism_seeds.py), t with the Satterthwaite df of that sum. Returns a dict
    of (...) arrays: mean, lo, hi, se, df, p_above / p_below (one-sided p of mean > 0 / < 0),
    var_models, var_units, var_residual (ANOVA estimates of σ²_a, σ²_b, σ²_e, clipped at 0),
    model_share (σ²_a/M over σ²_a/M + σ²_b/U + σ²_e/(MU)) and one_model_factor =
    sqrt(1 + σ²_a·U / (σ²_b + σ²_e)): how many times too narrow an interval over the units of ONE model
    is for the next trained model's mean.
    """
    v = np.asarray(values, dtype=np.float64)
    return crossed_from_squares(*mean_squares(v), *v.shape[-2:], ci)


def crossed_from_squares(mean, ms_m, ms_u, ms_e, M, U, ci=0.95):
    """`crossed_mean` from the design's `mean_squares` (each (...)) and its sizes M, U."""
    se = np.sqrt((ms_m + ms_u) / (M * U))
    with np.errstate(invalid="ignore", divide="ignore"):
        df = (ms_m + ms_u) ** 2 / (ms_m ** 2 / (M - 1) + ms_u ** 2 / (U - 1))
    df = np.where(np.isfinite(df), df, M - 1)
    half = scipy.stats.t.ppf(0.5 + ci / 2, df) * se
    p_above, p_below = _p_values(mean, se, df)
    va, vb, ve = np.maximum((ms_m - ms_e) / U, 0), np.maximum((ms_u - ms_e) / M, 0), ms_e
    with np.errstate(invalid="ignore", divide="ignore"):
        total = va / M + vb / U + ve / (M * U)
        share = np.where(total > 0, va / M / total, np.nan)
        factor = np.sqrt(1 + np.where(vb + ve > 0, va * U / np.where(vb + ve > 0, vb + ve, 1), np.inf))
    return {"mean": mean, "lo": mean - half, "hi": mean + half, "se": se, "df": df, "p_above": p_above,
            "p_below": p_below, "var_models": va, "var_units": vb, "var_residual": ve, "model_share": share,
            "one_model_factor": factor}


def _unit_draws(rng, n, U, strata):
    """(n, U) unit indices drawn with replacement, within each stratum (its positions kept)."""
    if strata is None:
        return rng.integers(U, size=(n, U))
    strata = np.asarray(strata)
    out = np.empty((n, U), np.int64)
    for s in dict.fromkeys(strata.tolist()):
        where = np.flatnonzero(strata == s)
        out[:, where] = where[rng.integers(where.size, size=(n, where.size))]
    return out


def pooled_mean(drawn):
    """The default statistic: mean over units, then over models, of drawn (B, M, U, ...) -> (B, ...)."""
    return drawn.mean(axis=2).mean(axis=1)


def two_level_bootstrap(values, stat=pooled_mean, n_boot=1000, seed=0, resample_models=True, strata=None, chunk=100):
    """Replicates of `stat` over resampled models and units.

    values (M, U, ...): per model and unit (finite); each replicate draws M models with replacement
    (or keeps them, resample_models=False) and then U units with replacement (within `strata` (U,)
    labels when given), one draw shared by the drawn models; stat(drawn (b, M, U, ...)) -> (b, ...).
    Returns (n_boot, ...).
    """
    v = np.asarray(values, dtype=np.float64)
    M, U = v.shape[:2]
    rng = np.random.default_rng(seed)
    out = []
    for start in range(0, int(n_boot), chunk):
        n = min(chunk, int(n_boot) - start)
        models = rng.integers(M, size=(n, M)) if resample_models else np.broadcast_to(np.arange(M), (n, M))
        units = _unit_draws(rng, n, U, strata)
        out.append(np.asarray(stat(v[models[:, :, None], units[:, None, :]])))
    return np.concatenate(out)


def models_and_units(theta, theta_units, n_units, ci=0.95):
    """Mean over models of per-model values theta (M, ...) with the models-and-units interval.

    theta_units (B, ...): the pooled statistic (mean over the M models) under B resamples of the shared
    units (`two_level_bootstrap(..., resample_models=False)`); non-finite replicates are left out (their
    share is `units_resolved`). Returns a dict of (...) arrays: mean, lo, hi, se, df, p_above, p_below,
    var_models (s²_θ / M), var_units (V_u), units_resolved; NaN interval when M < 2.
    """
    th = np.asarray(theta, dtype=np.float64)
    tu = np.asarray(theta_units, dtype=np.float64)
    M = th.shape[0]
    mean = th.mean(axis=0)
    fin = np.isfinite(tu)
    with np.errstate(invalid="ignore", divide="ignore"):
        n_fin = fin.sum(axis=0)
        mu = np.where(fin, tu, 0).sum(axis=0) / n_fin
        vu = (np.where(fin, tu - mu, 0) ** 2).sum(axis=0) / (n_fin - 1)
        vm = th.var(axis=0, ddof=1) / M if M >= 2 else np.full(mean.shape, np.nan)
        se = np.sqrt(vm + vu)
        df = (vm + vu) ** 2 / (vm ** 2 / max(M - 1, 1) + vu ** 2 / max(n_units - 1, 1))
    df = np.where(np.isfinite(df), df, max(M - 1, 1))
    half = scipy.stats.t.ppf(0.5 + ci / 2, df) * se
    p_above, p_below = _p_values(mean, se, df)
    return {"mean": mean, "lo": mean - half, "hi": mean + half, "se": se, "df": df, "p_above": p_above,
            "p_below": p_below, "var_models": vm, "var_units": vu, "units_resolved": n_fin / max(tu.shape[0], 1)}
