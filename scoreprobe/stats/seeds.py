"""Pooling a statistic over training seeds, with intervals that keep their coverage at few seeds.

Definitions: docs/definitions.md ("Pooling over training seeds"). In short:

- `tau_draws(ds, key)`: the point value of one run and its sample-level bootstrap draws — the
  same joint resampling of sample indices as `tau_summary()` (same seed: the very draws it
  summarizes), in steps, +inf where a resample never reaches the threshold.
- `pool_seeds(points, draws)`: the pooled value over seeds is the geometric mean (mean of ln τ;
  `log=False`: the arithmetic mean). Its CI (method "t", the default) is a t interval on the seed
  values (ln τ) with S − 1 df: the seed values carry their own sampling noise, so their spread holds
  both variances (`stats.intervals`; coverage measured in tests/test_intervals.py). One seed: that
  seed's sample-level interval (no seed variance, said so). Points (D, I): data seed × init seed,
  both variance components. A censored seed (threshold not reached) makes the pooled value a lower
  bound at the run's budget (its last step) with no CI: a censored value never enters a mean as a number.
  method="hierarchical" keeps the earlier hierarchical bootstrap (seeds with replacement, then one
  sample-level draw per pick), which covers ≈ 0.75–0.88 at S = 3.
- `pool_ratio(a, b)`: configuration b against a (ratio of geometric means, Welch t on ln τ), only
  where every seed of both is reached; `ratio_curve(A, B, thresholds)`: the same at each threshold.
- `seed_fit(xs, points, draws)`: a power law ln τ = ln a + b ln x or an exponential
  ln τ = c + x ln f fitted by least squares over every seed's ln τ (t interval on the slope, n − 2
  df); an x with a censored seed is left out and reported as a bound.
- `pool_windows(open, widths, hi_censored)`: window widths censoring-aware: the share of seeds with
  an open window, and the widths among the open ones (median; a window still open at the last
  checkpoint is a lower bound); a closed window is not a width of 0.
"""
import math

import numpy as np

from scoreprobe.defaults import MEM_THRESHOLD, RULE_THRESHOLD
from scoreprobe.errors import ConfigError
from scoreprobe.stats import taus as taus_mod
from scoreprobe.stats.abruptness import abruptness, least_squares
from scoreprobe.stats.families import family_draws, interval, u_to_steps
from scoreprobe.stats.intervals import FIT_METHOD, T_METHOD, TWO_LEVEL_METHOD, WELCH_METHOD, slope_interval
from scoreprobe.stats.intervals import t_interval, two_level, welch_interval
from scoreprobe.stats.misfit import lack_of_fit, means_slope

DRAW_KEYS = ("tau_rule", "tau_mem", "tau_novel", "window_log10_width", "abruptness")
_THRESHOLD_OF = {"tau_rule": "rule", "tau_mem": "mem", "tau_novel": "novel"}


def tau_draws(ds, key, n_boot=1000, seed=0, threshold=None, definition=taus_mod.DEFAULT_DEFINITION):
    """Point value and sample-level bootstrap draws of one statistic of one clocks Dataset.

    Parameters
    ----------
    ds : clocks Dataset with `state` (step, sample) (`family_valid` for "tau_family:<family>").
    key : one of DRAW_KEYS or "tau_family:<family>".
    n_boot, seed : resamples and seed, as in taus() (same seed: the draws taus() summarizes).
    threshold : that statistic's threshold (default: taus()'s; for window width, the rule one).
    definition : how τ is read ("reliable" or "first_crossing", `stats.taus`).

    Returns
    -------
    (point: float, draws: (n_boot,) float64): τ in steps (+inf: not reached, point and draws alike);
    window_log10_width (0 when closed); abruptness (see `stats.abruptness`).
    """
    if key == "abruptness":
        a = abruptness(ds, n_boot=n_boot, seed=seed)
        return a["abruptness"], a["draws"]
    if key.startswith("tau_family:"):
        return family_draws(ds, key.split(":", 1)[1], threshold=threshold or RULE_THRESHOLD, n_boot=n_boot,
                            seed=seed, definition=definition)
    if key not in DRAW_KEYS:
        raise ConfigError(f"tau_draws: unknown key {key!r}; use one of {', '.join(DRAW_KEYS)} or tau_family:<name>")
    if "state" not in ds:
        raise ConfigError("tau_draws needs the per-sample `state` (step, sample) of the clocks Dataset")
    kw = {"rule_threshold": RULE_THRESHOLD, "mem_threshold": MEM_THRESHOLD, "novel_threshold": None}
    if threshold is not None:
        kw[_THRESHOLD_OF.get(key, "rule") + "_threshold"] = float(threshold)
    ds, _, u, n, th = taus_mod.setup(ds, **kw)
    point = taus_mod.point_values(ds, u, n, th, definition)[key]               # (1,)
    boot = taus_mod.bootstrap(ds, u, th, int(n_boot), seed, definition)[key]   # (n_boot,)
    if key == "window_log10_width":
        return float(point[0]), np.asarray(boot, dtype=np.float64)
    return float(u_to_steps(point)[0]), u_to_steps(boot)


# ---------------------------------------------------------------------------------------------
# Pooling
# ---------------------------------------------------------------------------------------------


def _check(points, draws, last_steps):
    points = np.asarray(points, dtype=np.float64)
    if points.ndim > 2 or points.size == 0:
        raise ConfigError(f"pool_seeds needs (S,) seed values or (D, I) data seed × init seed values, got shape "
                          f"{points.shape}")
    shape, points = points.shape, points.ravel()
    if draws is not None:
        if len(draws) != points.size:
            raise ConfigError(f"pool_seeds needs one draws array per seed, got {points.size} points and "
                              f"{len(draws)} draws")
        draws = [np.asarray(d, dtype=np.float64).ravel() for d in draws]
        draws = [np.where(np.isnan(d), np.inf, d) for d in draws]
        if any(d.size == 0 for d in draws):
            raise ConfigError("pool_seeds: every seed needs at least one bootstrap draw")
    if last_steps is not None and np.asarray(last_steps).size != points.size:
        raise ConfigError(f"last_steps must have one entry per seed, got {np.asarray(last_steps).size} for "
                          f"{points.size}")
    return np.where(np.isnan(points), np.inf, points), draws, shape


def _pool(values, log):
    """Pooled value over the last axis: geometric mean (log) or mean; inf stays inf."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.exp(np.mean(np.log(values), axis=-1)) if log else np.mean(values, axis=-1)


def hierarchical_replicates(draws, n_boot=2000, seed=0, log=True):
    """(n_boot,) pooled replicates: seeds picked with replacement, one sample-level draw per pick.

    The picks are rng.integers(0, S, (n_boot, S)) of np.random.default_rng(seed); the draws of a
    seed are used in the order of random permutations of them, one permutation after another, so
    a seed picked c times uses c distinct draws when c <= its number of draws (one seed with
    n_boot equal to its draws: the replicates are a permutation of its draws).
    """
    rng = np.random.default_rng(seed)
    S = len(draws)
    picks = rng.integers(0, S, size=(int(n_boot), S))                   # (B, S) seed indices
    values = np.empty(picks.shape, dtype=np.float64)
    for i, d in enumerate(draws):
        where = picks == i
        c = int(where.sum())
        order = np.concatenate([rng.permutation(d.size) for _ in range(-(-c // d.size))])[:c] if c else []
        values[where] = d[np.asarray(order, dtype=np.int64)]
    return _pool(values, log)


METHODS = ("t", "hierarchical")


def pool_seeds(points, draws=None, n_boot=2000, seed=0, ci=0.95, log=True, last_steps=None, method="t"):
    """Pool one statistic over training seeds, with a seed-level CI.

    Parameters
    ----------
    points : (S,) per-seed values (inf or NaN: not reached), or (D, I): data seed × init seed (one run
        each; both variance components are reported). draws : one array of sample-level bootstrap
        draws per seed (tau_draws; inf: not reached), in points' (row-major) order; needed for one
        seed, for method="hierarchical" and for the within-seed variance. last_steps : per seed, each
        run's last checkpoint (its budget): the pooled value of a censored configuration is the lower
        bound with unreached seeds at their budget (without last_steps: inf).
    log : geometric mean and intervals on ln (τ) or arithmetic (abruptness, window widths).
    method : "t" (default) or "hierarchical" (the earlier bootstrap; under-covers at few seeds).

    Returns
    -------
    dict: per_seed, pooled, ci [lo, hi] (NaN for a bound), method (words), n_seeds, n_reached,
    lower_bound (some seed censored), budget (the largest last step of a censored seed, or None),
    within_seed_var, seed_var (of ln τ when log: the mean sample-level variance, and the spread of the
    seed values beyond it), n_boot, ci_level, log; with (D, I) points also var_data, var_init,
    var_residual, df, p_data, p_init (F tests of each component = 0: `intervals.two_level`).
    """
    if method not in METHODS:
        raise ConfigError(f"pool_seeds: method must be one of {', '.join(METHODS)}, got {method!r}")
    n_boot, ci, seed = taus_mod.check_boot(n_boot, ci, seed)
    points, draws, shape = _check(points, draws, last_steps)
    if method == "hierarchical" and draws is None:
        raise ConfigError("pool_seeds: method='hierarchical' needs the sample-level draws")
    reached = np.isfinite(points)
    last = None if last_steps is None else np.asarray(last_steps, np.float64).ravel()
    out = {"per_seed": [float(p) for p in points], "n_seeds": int(points.size), "n_reached": int(reached.sum()),
           "lower_bound": bool(not reached.all()), "n_boot": int(n_boot), "ci_level": ci, "log": bool(log),
           "budget": None if reached.all() or last is None else float(np.max(last[~reached]))}
    out.update(_variances(points, draws, log))
    filled = points if last is None else np.where(reached, points, last)
    out["pooled"] = float(_pool(filled, log))
    if method != "hierarchical" and not reached.all():   # censored: a bound at the budget, no t interval
        out["censored_estimate"] = _censored_estimate(points, last, log, len(shape))
        return {**out, "ci": [math.nan, math.nan], "method": "lower bound: censored seeds at their last step"}
    if method == "hierarchical":
        reps = hierarchical_replicates(draws, n_boot, seed, log)
        return {**out, "ci": taus_mod._ci(reps, ci), "unreached_share": float(np.mean(~np.isfinite(reps))),
                "method": "hierarchical bootstrap (seeds with replacement, then samples)"}
    if points.size == 1 and draws is None:
        return {**out, "ci": [math.nan, math.nan], "method": "one seed without its draws: no interval"}
    if points.size == 1:
        return {**out, "ci": taus_mod._ci(draws[0], ci), "method": "sample-level bootstrap (one seed: no seed variance)"}
    v = np.log(points) if log else points
    back = np.exp if log else (lambda x: x)
    if len(shape) == 2 and min(shape) >= 2:
        r = two_level(v.reshape(shape), ci)
        extra = {k: float(r[k]) for k in ("var_data", "var_init", "var_residual", "df", "p_data", "p_init")}
        return {**out, **extra, "ci": [float(back(r["lo"])), float(back(r["hi"]))], "method": TWO_LEVEL_METHOD}
    _, lo, hi = t_interval(v, ci)
    return {**out, "ci": [float(back(lo)), float(back(hi))], "method": T_METHOD + (" on ln τ" if log else "")}


def _censored_estimate(points, last, log, ndim):
    """Where some seeds crossed and some did not: the censored-normal (Tobit) pooled τ with its profile interval
    (`scoreprobe.stats.censored.censored_mean` on ln τ, unreached seeds censored at their last step), as dict
    value, ci [lo, hi] (hi inf: bounded from below only), n_censored, method; None without budgets, on a linear
    scale, for (D, I) points (runs are not independent units there) or with fewer than 2 seeds crossed."""
    from scoreprobe.stats.censored import censored_mean
    reached = np.isfinite(points)
    if last is None or not log or ndim != 1 or reached.sum() < 2:
        return None
    r = censored_mean(np.log(np.where(reached, points, last)), ~reached)
    return {"value": float(np.exp(r["mean"])), "ci": [float(np.exp(r["lower"])), float(np.exp(r["upper"]))],
            "n_censored": int((~reached).sum()), "method": r["method"]}


def _variances(points, draws, log):
    """Mean within-seed (sample-level) variance and the seed variance beyond it, of ln values when log."""
    f = np.log if log else (lambda x: x)
    finite = np.isfinite(points)
    if draws is None or finite.sum() < 2:
        return {"within_seed_var": math.nan, "seed_var": math.nan}
    within = np.mean([np.var(f(d[np.isfinite(d)]), ddof=1) if np.isfinite(d).sum() > 1 else math.nan
                      for d, ok in zip(draws, finite) if ok])
    total = float(np.var(f(points[finite]), ddof=1))
    return {"within_seed_var": float(within), "seed_var": float(max(total - within, 0.0))}


def pool_ratio(points_a, points_b, ci=0.95, log=True):
    """Configuration b against a over seeds: b / a of geometric means (log) or b − a of means, Welch t.

    points_a, points_b : (S_a,), (S_b,) seed values (inf/NaN: not reached). Returns dict: value, ci,
    method, n_a, n_b, df; `censored` True (value and ci NaN) when any seed of either is not reached:
    a censored value never enters a ratio as a number.
    """
    a, b = (np.where(np.isnan(x), np.inf, np.asarray(x, np.float64).ravel()) for x in (points_a, points_b))
    out = {"n_a": int(a.size), "n_b": int(b.size), "ci_level": ci, "method": WELCH_METHOD + (" (ln)" if log else "")}
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return {**out, "value": math.nan, "ci": [math.nan, math.nan], "df": math.nan, "censored": True}
    f, back = (np.log, np.exp) if log else ((lambda x: x), (lambda x: x))
    d, lo, hi, df = welch_interval(f(a), f(b), ci)
    return {**out, "value": float(back(d)), "ci": [float(back(lo)), float(back(hi))], "df": float(df),
            "censored": False}


def ratio_curve(points_a, points_b, thresholds, ci=0.95, log=True):
    """`pool_ratio` of b against a at each threshold: the ratio curve of two configurations.

    points_a (S_a, T), points_b (S_b, T) : seed values at the T `thresholds` (inf/NaN: not reached).
    Returns [{"threshold", **pool_ratio}] (T,): censored where any seed of either is not reached.
    """
    A, B = np.asarray(points_a, np.float64), np.asarray(points_b, np.float64)
    return [{"threshold": float(t), **pool_ratio(A[:, j], B[:, j], ci=ci, log=log)} for j, t in enumerate(thresholds)]


def pool_windows(is_open, widths, hi_censored):
    """Window widths over seeds, censoring-aware: a closed window is no width, an open one still open at the
    last checkpoint is a lower bound. is_open, widths (log10), hi_censored : (S,). Returns dict n_seeds, n_open,
    widths_open (per open seed), median_open (NaN: none open), median_is_bound (a censored width at or below
    the median), censored (per open seed)."""
    from scoreprobe.limits import check_flags
    o = check_flags(is_open, "pool_windows: is_open")
    c = check_flags(hi_censored, "pool_windows: hi_censored")
    w = _reals(widths, "pool_windows: widths")
    if not o.size == w.size == c.size:
        raise ConfigError(f"pool_windows: is_open, widths and hi_censored must be one value per seed, got {o.size}, "
                          f"{w.size} and {c.size}")
    w, c = w[o], c[o]
    med = float(np.median(w)) if w.size else math.nan
    return {"n_seeds": int(o.size), "n_open": int(o.sum()), "widths_open": w.tolist(), "censored": c.tolist(),
            "median_open": med, "median_is_bound": bool(w.size and np.any(c & (w <= med)))}


def _reals(values, name):
    """(N,) float64 of `values`: numbers only (strings, complex numbers and bools refused; NaN kept, and None as
    NaN: a width stored as JSON null)."""
    raw = np.asarray(values) if not isinstance(values, (str, bytes)) else np.asarray([values])
    if raw.dtype == object:
        flat = [math.nan if v is None else v for v in raw.reshape(-1)]
        raw = np.asarray(flat) if all(isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_))
                                      for v in flat) else raw
    if raw.dtype.kind not in "iuf":
        raise ConfigError(f"{name} must be numbers, got {str(values)[:40]!r} ({raw.dtype})")
    return raw.astype(np.float64).reshape(-1)


# ---------------------------------------------------------------------------------------------
# Fits across an axis, with seed variance
# ---------------------------------------------------------------------------------------------

FITS = {"power": np.log, "exp": lambda x: x}


def seed_fit(xs, points, draws=None, kind="power", n_boot=2000, seed=0, ci=0.95, last_steps=None, method="t"):
    """Fit ln τ against x across runs with several seeds each; CIs include seed variance.

    Parameters
    ----------
    xs : (K,) axis values (N, parameters: kind="power"; G: kind="exp").
    points, draws : per x, the per-seed points and draws of pool_seeds (draws: only for "hierarchical").
        last_steps : per x, the per-seed last steps (for the lower bounds reported in left_out).
    method : "t" (default: least squares; with ≥ 3 x the slope and its t interval over the per-x means
        (K − 2 df: it keeps its coverage where each x deviates from the line, `stats.misfit.means_slope`), the
        fit over every seed's ln τ (n − 2 df) beside it as b_runs / b_ci_runs (factor_runs / factor_ci_runs),
        and `lack_of_fit` (the pure-error F test); with 2 x every seed's ln τ, n − 2 df; `method` says which) or
        "hierarchical" (refit on hierarchical-bootstrap replicates of the per-x pooled values; x number k is
        pooled with seed + k).

    Returns
    -------
    dict: kind, method, xs (used), pooled (per used x), left_out [{"x", "pooled", "lower_bound": True,
    "budget"}] (x with a censored seed: never fitted as a number), n_points, ci_level, and kind="power":
    a, b, b_ci, a_ci; kind="exp": factor (= f), factor_ci, c. Fewer than two usable x: NaN values,
    "note" says why.
    """
    if kind not in FITS:
        raise ConfigError(f"seed_fit: kind must be one of {', '.join(FITS)}, got {kind!r}")
    if method not in METHODS:
        raise ConfigError(f"seed_fit: method must be one of {', '.join(METHODS)}, got {method!r}")
    if len(xs) != len(points) or (draws is not None and len(draws) != len(xs)):
        raise ConfigError(f"seed_fit: xs, points and draws need one entry per x, got {len(xs)}, {len(points)}, "
                          f"{None if draws is None else len(draws)}")
    if method == "hierarchical" and draws is None:
        raise ConfigError("seed_fit: method='hierarchical' needs the sample-level draws")
    used, pooled, reps, left, pts = [], [], [], [], []
    for k, (x, p) in enumerate(zip(xs, points)):
        last = None if last_steps is None else last_steps[k]
        values = np.where(np.isnan(np.asarray(p, np.float64)), np.inf, np.asarray(p, np.float64))
        if not np.isfinite(values).all():
            bound = float(_pool(values if last is None else np.where(np.isfinite(values), values, last), True))
            left.append({"x": float(x), "pooled": bound, "lower_bound": True,
                         "budget": None if last is None else float(np.max(np.asarray(last)[~np.isfinite(values)]))})
            continue
        used.append(float(x))
        pooled.append(float(_pool(values, True)))
        pts.append(values)
        if method == "hierarchical":
            reps.append(hierarchical_replicates(_check(p, draws[k], None)[1], n_boot, seed + k))
    out = {"kind": kind, "method": FIT_METHOD if method == "t" else "hierarchical bootstrap refits", "xs": used,
           "pooled": pooled, "left_out": left, "n_boot": int(n_boot), "ci_level": ci,
           "n_points": int(sum(v.size for v in pts))}
    if method == "t":
        return _t_fit_report(out, kind, used, pts, ci)
    return _fit_report(out, kind, used, pooled, reps, ci)


def _nan_fit(out, kind, note):
    nan2 = [math.nan, math.nan]
    keys = {"power": {"a": math.nan, "b": math.nan, "b_ci": nan2, "a_ci": nan2},
            "exp": {"factor": math.nan, "factor_ci": nan2, "c": math.nan}}[kind]
    return {**out, **keys, "note": note}


def _t_fit_report(out, kind, used, pts, ci):
    if len(set(used)) < 2:
        return _nan_fit(out, kind, f"fewer than two distinct x with every seed reached ({len(set(used))})")
    X = np.concatenate([np.full(v.size, FITS[kind](np.float64(x))) for x, v in zip(used, pts)])
    y = np.log(np.concatenate(pts))
    r = slope_interval(X, y, ci)
    lof, m = lack_of_fit(X, y), means_slope(X, y, level=ci)
    slope, lo, hi = (r["slope"], *r["slope_ci"]) if m["why"] else (m["slope"], m["lower"], m["upper"])
    lof_text = (f"lack of fit F({lof['df'][0]}, {lof['df'][1]}) = {lof['F']:.2f}, p = {lof['p']:.3f}" if not lof["why"]
                else f"lack of fit not read: {lof['why']}")
    out.update(lack_of_fit=lof, method=f"{FIT_METHOD}; {m['why']}" if m["why"] else
               f"the slope over the per-x means, t on {m['df']} df (each x's deviation from the line in its error; "
               f"{lof_text})")
    if kind == "power":
        return {**out, "a": float(np.exp(r["intercept"])), "b": slope, "b_ci": [lo, hi],
                "a_ci": [float(np.exp(v)) for v in r["intercept_ci"]], "b_runs": r["slope"], "b_ci_runs": r["slope_ci"]}
    return {**out, "factor": float(np.exp(slope)), "factor_ci": [float(np.exp(lo)), float(np.exp(hi))],
            "c": r["intercept"], "factor_runs": float(np.exp(r["slope"])),
            "factor_ci_runs": [float(np.exp(v)) for v in r["slope_ci"]]}


def _fit_report(out, kind, used, pooled, reps, ci):
    if len(set(used)) < 2:
        return _nan_fit(out, kind, f"fewer than two distinct x with every seed reached ({len(set(used))})")
    X = FITS[kind](np.asarray(used, dtype=np.float64))                 # (K,)
    with np.errstate(divide="ignore"):
        slope, icpt = least_squares(X, np.log(np.asarray(pooled)))
        r_slope, r_icpt = least_squares(X, np.log(np.stack(reps, axis=1)))    # (B,) each
    if kind == "power":
        return {**out, "a": float(np.exp(icpt)), "b": float(slope), "b_ci": interval(r_slope, ci),
                "a_ci": [float(np.exp(v)) for v in interval(r_icpt, ci)]}
    return {**out, "factor": float(np.exp(slope)), "factor_ci": [float(np.exp(v)) for v in interval(r_slope, ci)],
            "c": float(icpt)}
