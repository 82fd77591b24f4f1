"""Seed-level intervals that hold their coverage at few seeds (S = 3 … 10), vectorized over replicates.

docs/definitions.md, "Pooling over training seeds". Each training seed's value (ln τ, or a window width,
an abruptness) already carries its own sampling noise, so the spread of the S seed values holds both the
seed-to-seed and the within-seed (sample) variance; a t interval with S − 1 degrees of freedom on them
is exact for normal values and keeps its coverage at S = 3 (tests/test_intervals.py measures it by
simulation: 0.93–0.97 at S = 3 and 5). A percentile bootstrap over 3 seeds is in effect [min, max] and
covers ≈ 0.75–0.88. Ratios of two configurations: Welch's t on the difference of ln values. Two levels
(data seed × initialisation seed, crossed): the two-way random-effects ANOVA, whose mean squares give
both variance components and a conservative variance of the grand mean (Satterthwaite degrees of
freedom; the unbiased one under-covers at 3 data seeds). Tests: Welch's two-sided p (`welch_p`, scipy's
`ttest_ind(equal_var=False)`) and the equivalence test TOST (`tost`) of a mean with a t standard error.
"""
import math

import numpy as np
import scipy.stats

T_METHOD = "t interval on the seed values (S − 1 df)"
WELCH_METHOD = "Welch t interval on the difference of the seed values"
FIT_METHOD = "least squares over every seed's value, t interval on the slope (n − 2 df)"
TWO_LEVEL_METHOD = ("two-way random effects (data seed × init seed), variance of the mean (MS_D + MS_I)/(DI), "
                    "Satterthwaite df")


def t_interval(values, ci=0.95):
    """Mean and t interval over the last axis. values (..., S) -> mean, lo, hi (...); NaN when S < 2."""
    v = np.asarray(values, dtype=np.float64)
    S = v.shape[-1]
    mean = v.mean(axis=-1)
    if S < 2:
        nan = np.full(mean.shape, np.nan)
        return mean, nan, nan
    half = scipy.stats.t.ppf(0.5 + ci / 2, S - 1) * v.std(axis=-1, ddof=1) / np.sqrt(S)
    return mean, mean - half, mean + half


def welch_interval(a, b, ci=0.95):
    """Difference mean(b) − mean(a) over the last axes with Welch's t interval: (diff, lo, hi, df) (...)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    na, nb = a.shape[-1], b.shape[-1]
    diff = b.mean(axis=-1) - a.mean(axis=-1)
    if min(na, nb) < 2:
        nan = np.full(diff.shape, np.nan)
        return diff, nan, nan, nan
    va, vb = a.var(axis=-1, ddof=1) / na, b.var(axis=-1, ddof=1) / nb
    se = np.sqrt(va + vb)
    with np.errstate(invalid="ignore", divide="ignore"):
        df = (va + vb) ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1))
    df = np.where(np.isfinite(df), df, na + nb - 2)
    half = scipy.stats.t.ppf(0.5 + ci / 2, df) * se
    return diff, diff - half, diff + half, df


def welch_p(a, b, log=True):
    """Two-sided Welch t-test p of ln b against ln a (of b against a: log False). a (n_a,), b (n_b,) -> float;
    NaN with fewer than 2 values on a side."""
    if min(len(a), len(b)) < 2:
        return math.nan
    f = np.log if log else np.asarray
    return float(scipy.stats.ttest_ind(f(b), f(a), equal_var=False).pvalue)


def tost(mean, se, df, margin):
    """p of |mean| < margin: two one-sided t tests (df degrees of freedom, standard error se), the larger p.
    se 0: 0 or 1 by whether |mean| < margin."""
    if se <= 0:
        return 0.0 if abs(mean) < margin else 1.0
    return float(max(scipy.stats.t.cdf((mean - margin) / se, df), scipy.stats.t.sf((mean + margin) / se, df)))


def slope_interval(x, y, ci=0.95):
    """Least-squares fit y = c + slope·x over (n,) points with t intervals (n − 2 df): dict slope,
    slope_ci, intercept, intercept_ci, n; NaN ends with fewer than 3 points."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    fit = scipy.stats.linregress(x, y)
    n = x.size
    t = scipy.stats.t.ppf(0.5 + ci / 2, n - 2) if n > 2 else np.nan
    return {"slope": float(fit.slope), "slope_ci": [float(fit.slope - t * fit.stderr), float(fit.slope + t * fit.stderr)],
            "intercept": float(fit.intercept), "n": int(n),
            "intercept_ci": [float(fit.intercept - t * fit.intercept_stderr),
                             float(fit.intercept + t * fit.intercept_stderr)]}


def two_level(values, ci=0.95):
    """Crossed two-level design: values (..., D, I), D data seeds × I initialisation seeds, one run each.

    Model v_di = μ + a_d + b_i + e_di (e: interaction and within-run sampling). The variance of the
    mean is (MS_D + MS_I) / (D·I), the residual counted twice (`crossed.crossed_mean`): the unbiased
    (MS_D + MS_I − MS_E) / (D·I) covers 0.71–0.77 at 3 × 2 and 3 × 3 where the residual dominates and
    is clipped to a zero-width interval in a quarter of such draws (tests/test_intervals.py). Returns a
    dict of (...) arrays: mean, lo, hi (t interval, Satterthwaite df of that sum), var_data (σ²_a),
    var_init (σ²_b), var_residual (σ²_e) (ANOVA estimates, negative ones clipped to 0), df, and
    p_data / p_init: the exact F tests of σ²_a = 0 (MS_D / MS_E on D − 1 and (D − 1)(I − 1) df) and of
    σ²_b = 0 (MS_I / MS_E), for normal e (NaN where MS_E is 0).
    """
    from scoreprobe.stats.crossed import crossed_from_squares, mean_squares
    D, I = np.shape(values)[-2:]
    mean, ms_d, ms_i, ms_e = mean_squares(values)
    r = crossed_from_squares(mean, ms_d, ms_i, ms_e, D, I, ci)
    with np.errstate(invalid="ignore", divide="ignore"):
        p_data = scipy.stats.f.sf(ms_d / ms_e, D - 1, (D - 1) * (I - 1))
        p_init = scipy.stats.f.sf(ms_i / ms_e, I - 1, (D - 1) * (I - 1))
    nan = ~(ms_e > 0)
    return {"mean": r["mean"], "lo": r["lo"], "hi": r["hi"], "df": r["df"], "var_data": r["var_models"],
            "var_init": r["var_units"], "var_residual": r["var_residual"],
            "p_data": np.where(nan, np.nan, p_data), "p_init": np.where(nan, np.nan, p_init)}
