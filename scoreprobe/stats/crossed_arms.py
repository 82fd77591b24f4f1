"""Two arms, each a crossed design (data seeds × training seeds): the difference of their grand means with every
variance component in its interval, the two shortcuts it replaces, their coverage measured by simulation at a
design, a censored arm against a crossed one, and the power of the component F test after Holm.

Arm k's runs are v_di = μ_k + a_d + b_i + e_di (D data seeds × I training seeds, every pair run once; a, b, e
independent normal with variances σ²_a, σ²_b, σ²_e per arm; the arms independent). The estimate of μ_b − μ_a is
the difference of the grand means, whose variance is Σ_k (σ²_a/D + σ²_b/I + σ²_e/(DI)). `crossed_difference`
estimates each arm's part by (MS_D + MS_I)/(DI), whose expectation is σ²_a/D + σ²_b/I + 2σ²_e/(DI) (the residual
counted twice, as `scoreprobe.stats.crossed.crossed_mean` does for one arm), and uses a t interval with the
Satterthwaite df of the four mean squares (each D − 1 or I − 1 df). Whether that is conservative depends on the
components: `coverage` measures it at a design, beside the two shortcuts

    runs as units         Welch t over the D·I runs of each arm (ignores that runs share a data or training seed)
    data seeds as units   Welch t over each data seed's mean over its training seeds (ignores the training seeds,
                          which the data seeds of an arm share)

A censored arm (some runs never cross within their budget) has no crossed ANOVA: `censored_coverage` measures, at
a design with censoring, the coverage of `scoreprobe.stats.censored.censored_mean` over its runs (runs as units)
and of its difference to a crossed comparison arm by `mover` (Zou & Donner 2008: each side's own interval,
asymmetric or half-open, recovered into one for the difference).

`arm_coverage`: the same for one arm's crossed interval on its grand mean. `f_power`: the power of the exact F test of σ²_a = 0 (MS_D / MS_E) at level α/k, the first step of Holm over a
family of k tests of the same runs.
"""
import math

import numpy as np
import scipy.stats

from scoreprobe.errors import ConfigError
from scoreprobe.stats.crossed import mean_squares
from scoreprobe.stats.intervals import welch_interval

METHOD = ("two arms, each crossed (data seed × training seed): difference of grand means, variance Σ (MS_D + MS_I)/(DI), "
          "t with Satterthwaite df")
INTERVALS = ("two-level", "runs as units", "data seeds as units")


def crossed_difference(a, b, ci=0.95):
    """Grand mean of b minus grand mean of a, each (..., D, I) (finite; D, I ≥ 2; the two designs may differ).

    Returns a dict of (...) arrays: diff, lo, hi (t interval), se, df (Satterthwaite over the arms' MS_D and MS_I).
    """
    parts = []
    for v in (a, b):
        v = np.asarray(v, dtype=np.float64)
        mean, ms_d, ms_i, _ = mean_squares(v)
        D, I = v.shape[-2:]
        parts.append((mean, ms_d / (D * I), D - 1, ms_i / (D * I), I - 1))
    var = sum(p[1] + p[3] for p in parts)
    with np.errstate(invalid="ignore", divide="ignore"):
        df = var ** 2 / sum(p[1] ** 2 / p[2] + p[3] ** 2 / p[4] for p in parts)
    df = np.where(np.isfinite(df), df, min(min(p[2], p[4]) for p in parts))
    diff = parts[1][0] - parts[0][0]
    se = np.sqrt(var)
    half = scipy.stats.t.ppf(0.5 + ci / 2, df) * se
    return {"diff": diff, "lo": diff - half, "hi": diff + half, "se": se, "df": df}


def runs_interval(a, b, ci=0.95):
    """Welch over the runs: a, b (..., D, I) -> (diff, lo, hi, df) (...)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return welch_interval(a.reshape(*a.shape[:-2], -1), b.reshape(*b.shape[:-2], -1), ci)


def data_interval(a, b, ci=0.95):
    """Welch over the data seeds' means (over their training seeds): a, b (..., D, I) -> (diff, lo, hi, df) (...)."""
    return welch_interval(np.asarray(a, dtype=np.float64).mean(axis=-1), np.asarray(b, dtype=np.float64).mean(axis=-1), ci)


def simulate(rng, n, D, I, components, mean=0.0):
    """n draws of one arm: (n, D, I) values μ + a_d + b_i + e_di; components (σ²_a, σ²_b, σ²_e) ≥ 0."""
    sd = np.sqrt(_components(components))
    return (mean + rng.normal(0, sd[0], (n, D, 1)) + rng.normal(0, sd[1], (n, 1, I))
            + rng.normal(0, sd[2], (n, D, I)))


def coverage(components_a, components_b, D, I, n_rep=40000, seed=0, ci=0.95):
    """Share of n_rep simulated pairs of arms (D × I each, the given components, true difference 0) whose
    interval holds 0, for each of INTERVALS: {name: coverage}, and "zero_width": the two-level interval's share of
    zero-width intervals (it must be 0)."""
    rng = np.random.default_rng(seed)
    a, b = simulate(rng, n_rep, D, I, components_a), simulate(rng, n_rep, D, I, components_b)
    r = crossed_difference(a, b, ci)
    out = {"two-level": float(np.mean((r["lo"] <= 0) & (0 <= r["hi"])))}
    for name, fn in (("runs as units", runs_interval), ("data seeds as units", data_interval)):
        _, lo, hi, _ = fn(a, b, ci)
        out[name] = float(np.mean((lo <= 0) & (0 <= hi)))
    out["zero_width"] = float(np.mean(r["hi"] <= r["lo"]))
    return out


def arm_coverage(components, D, I, n_rep=40000, seed=0, ci=0.95):
    """Share of n_rep simulated arms (D × I, the given components, mean 0) whose crossed interval on the grand mean
    (`scoreprobe.stats.crossed.crossed_mean`, the one `pool_seeds` gives (D, I) points) holds 0."""
    from scoreprobe.stats.crossed import crossed_mean
    r = crossed_mean(simulate(np.random.default_rng(seed), n_rep, D, I, components), ci)
    return float(np.mean((r["lo"] <= 0) & (0 <= r["hi"])))


def mover(est_b, ci_b, est_a, ci_a):
    """est_b − est_a with the MOVER interval from each side's own interval (ends may be ±inf):
    [d − √((est_b − lo_b)² + (hi_a − est_a)²), d + √((hi_b − est_b)² + (est_a − lo_a)²)]. Returns (d, lo, hi);
    NaN everywhere when either estimate is NaN."""
    (lb, ub), (la, ua) = ci_b, ci_a
    if math.isnan(est_b) or math.isnan(est_a):
        return math.nan, math.nan, math.nan
    d = est_b - est_a
    return d, d - math.hypot(est_b - lb, ua - est_a), d + math.hypot(ub - est_b, est_a - la)


def censored_coverage(components_b, mean_b, budget, components_a, D, I, n_rep=400, seed=0, ci=0.95):
    """Coverage at a design with censoring: arm b (D × I, `components_b`, mean `mean_b`) censored at `budget`
    (ln scale: a run above it only says so) read by `censored_mean` over its runs; arm a (D × I, `components_a`,
    mean 0, uncensored) by its crossed interval (`scoreprobe.stats.crossed.crossed_mean`); their difference by
    `mover`. Replicates with no estimate (fewer than 2 runs crossed) count as misses and are left out of the
    `_defined` shares. Returns dict mean, mean_defined, difference, difference_defined, defined, censored_share
    (the simulated share of censored runs), n_rep."""
    from scoreprobe.stats.crossed import crossed_mean
    from scoreprobe.stats.censored import censored_mean
    rng = np.random.default_rng(seed)
    b = simulate(rng, n_rep, D, I, components_b, mean_b)
    a = crossed_mean(simulate(rng, n_rep, D, I, components_a), ci)
    hit_m = hit_d = defined = 0
    for k in range(n_rep):
        cens = b[k].ravel() > budget
        r = censored_mean(np.where(cens, budget, b[k].ravel()), cens, level=ci)
        if math.isnan(r["mean"]):
            continue
        defined += 1
        hit_m += r["lower"] <= mean_b <= r["upper"]
        _, lo, hi = mover(r["mean"], (r["lower"], r["upper"]), float(a["mean"][k]), (float(a["lo"][k]), float(a["hi"][k])))
        hit_d += lo <= mean_b <= hi
    nan = math.nan
    return {"mean": hit_m / n_rep, "difference": hit_d / n_rep, "defined": defined / n_rep, "n_rep": int(n_rep),
            "mean_defined": hit_m / defined if defined else nan, "difference_defined": hit_d / defined if defined else nan,
            "censored_share": float(np.mean(b > budget))}


def f_power(D, I, var_ratio, alpha=0.05, family=1):
    """Power of the exact F test of σ²_a = 0 (MS_D / MS_E, D − 1 and (D − 1)(I − 1) df) when σ²_a / σ²_e =
    var_ratio, at level alpha / family: Holm's first step over `family` tests, which is the whole test when the
    family repeats one test (thresholds read from the same runs). MS_D / MS_E is (1 + I·var_ratio)·F."""
    if D < 2 or I < 2 or var_ratio < 0 or family < 1:
        raise ConfigError(f"f_power: needs D, I ≥ 2, var_ratio ≥ 0, family ≥ 1 (got {D}, {I}, {var_ratio}, {family})")
    d1, d2 = D - 1, (D - 1) * (I - 1)
    crit = scipy.stats.f.isf(alpha / family, d1, d2)
    return float(scipy.stats.f.sf(crit / (1 + I * var_ratio), d1, d2))


def _components(c):
    c = np.asarray(c, dtype=np.float64)
    if c.shape != (3,) or not np.all(np.isfinite(c)) or np.any(c < 0):
        raise ConfigError(f"components must be (σ²_a, σ²_b, σ²_e), finite and ≥ 0, got {c!r}")
    return c
