"""Pooling a statistic over training seeds, with a hierarchical bootstrap that includes seed variance.

Definitions: docs/definitions.md ("Pooling over training seeds"). In short:

- `tau_draws(ds, key)`: the point value of one run and its sample-level bootstrap draws — the
  same multinomial-per-checkpoint resampling as `taus()` (same seed: the very draws `taus()`
  summarizes), in steps, +inf where a resample never reaches the threshold.
- `pool_seeds(points, draws)`: the pooled value over seeds is the geometric mean (mean of ln τ;
  `log=False`: the arithmetic mean). Its CI is a hierarchical bootstrap: each replicate picks
  S seeds with replacement, and for every pick one sample-level draw of that seed; the pooled
  value of the picked draws is one replicate. Percentile interval as in taus(): an unreached
  draw is +inf, so the upper end is inf when more than (1 − ci)/2 of the replicates are.
- `seed_fit(xs, points, draws)`: a power law ln τ = ln a + b ln x or an exponential
  ln τ = c + x ln f fitted (least squares) to the per-x pooled ln τ; the CI of b (of f) comes
  from refitting on every hierarchical replicate (the per-x replicates are independent).
"""
import math

import numpy as np

from scoreprobe.defaults import MEM_THRESHOLD, RULE_THRESHOLD
from scoreprobe.errors import ConfigError
from scoreprobe.probes import taus as taus_mod
from scoreprobe.probes.abruptness import abruptness, least_squares
from scoreprobe.probes.families import family_draws, interval, u_to_steps

DRAW_KEYS = ("tau_rule", "tau_mem", "tau_novel", "window_log10_width", "abruptness")
_THRESHOLD_OF = {"tau_rule": "rule", "tau_mem": "mem", "tau_novel": "novel"}


def tau_draws(ds, key, n_boot=1000, seed=0, threshold=None):
    """Point value and sample-level bootstrap draws of one statistic of one clocks Dataset.

    Parameters
    ----------
    ds : clocks Dataset with `state` (step, sample) (`family_valid` for "tau_family:<family>").
    key : one of DRAW_KEYS or "tau_family:<family>".
    n_boot, seed : resamples and seed, as in taus() (same seed: the draws taus() summarizes).
    threshold : that statistic's threshold (default: taus()'s; for window width, the rule one).

    Returns
    -------
    (point: float, draws: (n_boot,) float64): τ in steps (+inf: not reached, point and draws alike);
    window_log10_width (0 when closed); abruptness (see `probes.abruptness`).
    """
    if key == "abruptness":
        a = abruptness(ds, n_boot=n_boot, seed=seed)
        return a["abruptness"], a["draws"]
    if key.startswith("tau_family:"):
        return family_draws(ds, key.split(":", 1)[1], threshold=threshold or RULE_THRESHOLD, n_boot=n_boot,
                            seed=seed)
    if key not in DRAW_KEYS:
        raise ConfigError(f"tau_draws: unknown key {key!r}; use one of {', '.join(DRAW_KEYS)} or tau_family:<name>")
    if "state" not in ds:
        raise ConfigError("tau_draws needs the per-sample `state` (step, sample) of the clocks Dataset")
    kw = {"rule_threshold": RULE_THRESHOLD, "mem_threshold": MEM_THRESHOLD, "novel_threshold": None}
    if threshold is not None:
        kw[_THRESHOLD_OF.get(key, "rule") + "_threshold"] = float(threshold)
    ds, _, u, n, th = taus_mod.setup(ds, **kw)
    point = taus_mod.point_values(ds, u, n, th)[key]               # (1,)
    boot = taus_mod.bootstrap(ds, u, th, int(n_boot), seed)[key]   # (n_boot,)
    if key == "window_log10_width":
        return float(point[0]), np.asarray(boot, dtype=np.float64)
    return float(u_to_steps(point)[0]), u_to_steps(boot)


# ---------------------------------------------------------------------------------------------
# Pooling
# ---------------------------------------------------------------------------------------------


def _check(points, draws, last_steps):
    points = np.asarray(points, dtype=np.float64).ravel()
    if points.size == 0 or len(draws) != points.size:
        raise ConfigError(f"pool_seeds needs one draws array per seed and at least one seed, got {points.size} "
                          f"points and {len(draws)} draws")
    draws = [np.asarray(d, dtype=np.float64).ravel() for d in draws]
    draws = [np.where(np.isnan(d), np.inf, d) for d in draws]
    if any(d.size == 0 for d in draws):
        raise ConfigError("pool_seeds: every seed needs at least one bootstrap draw")
    if last_steps is not None and len(last_steps) != points.size:
        raise ConfigError(f"last_steps must have one entry per seed, got {len(last_steps)} for {points.size}")
    return np.where(np.isnan(points), np.inf, points), draws


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


def pool_seeds(points, draws, n_boot=2000, seed=0, ci=0.95, log=True, last_steps=None):
    """Pool one statistic over training seeds, with a hierarchical-bootstrap CI.

    Parameters
    ----------
    points : (S,) per-seed values (inf or NaN: not reached). draws : S arrays of sample-level
        bootstrap draws (tau_draws; inf: not reached). last_steps : (S,) each run's last
        checkpoint, used in place of an unreached point (the pooled value is then a lower bound;
        without last_steps an unreached seed makes it inf).
    log : geometric mean (τ) or arithmetic mean (abruptness, window widths).

    Returns
    -------
    dict: per_seed, pooled, ci [lo, hi] (hi = inf when more than (1 − ci)/2 of the replicates are
    unreached), n_seeds, n_reached, lower_bound, unreached_share (of the replicates), n_boot, log.
    """
    points, draws = _check(points, draws, last_steps)
    reached = np.isfinite(points)
    filled = points if last_steps is None else np.where(reached, points, np.asarray(last_steps, np.float64))
    reps = hierarchical_replicates(draws, n_boot, seed, log)
    return {"per_seed": [float(p) for p in points], "pooled": float(_pool(filled, log)),
            "ci": taus_mod._ci(reps, ci), "n_seeds": int(points.size), "n_reached": int(reached.sum()),
            "lower_bound": bool(not reached.all()), "unreached_share": float(np.mean(~np.isfinite(reps))),
            "n_boot": int(n_boot), "ci_level": ci, "log": bool(log)}


# ---------------------------------------------------------------------------------------------
# Fits across an axis, with seed variance
# ---------------------------------------------------------------------------------------------

FITS = {"power": np.log, "exp": lambda x: x}


def seed_fit(xs, points, draws, kind="power", n_boot=2000, seed=0, ci=0.95, last_steps=None):
    """Fit ln τ against x across runs with several seeds each; CIs include seed variance.

    Parameters
    ----------
    xs : (K,) axis values (N, parameters: kind="power"; G: kind="exp").
    points, draws : per x, the per-seed points and draws of pool_seeds. last_steps : per x, the
        per-seed last steps (for the lower bounds reported in left_out).
    seed : x number k is pooled with seed + k (pool_seeds(..., seed=seed + k) gives its numbers).

    Returns
    -------
    dict: kind, xs (used), pooled (per used x), left_out [{"x", "pooled", "lower_bound": True}]
    (x with some seed unreached), n_boot, ci_level, and kind="power": a, b, b_ci, a_ci;
    kind="exp": factor (= f), factor_ci, c. Fewer than two usable x: NaN values, "note" says why.
    """
    if kind not in FITS:
        raise ConfigError(f"seed_fit: kind must be one of {', '.join(FITS)}, got {kind!r}")
    if not (len(xs) == len(points) == len(draws)):
        raise ConfigError(f"seed_fit: xs, points and draws need one entry per x, got {len(xs)}, {len(points)}, "
                          f"{len(draws)}")
    used, pooled, reps, left = [], [], [], []
    for k, (x, p, d) in enumerate(zip(xs, points, draws)):
        pooled_k = pool_seeds(p, d, n_boot=1, seed=seed + k, ci=ci,
                              last_steps=None if last_steps is None else last_steps[k])
        if pooled_k["lower_bound"]:
            left.append({"x": float(x), "pooled": pooled_k["pooled"], "lower_bound": True})
            continue
        used.append(float(x))
        pooled.append(pooled_k["pooled"])
        reps.append(hierarchical_replicates(_check(p, d, None)[1], n_boot, seed + k))
    out = {"kind": kind, "xs": used, "pooled": pooled, "left_out": left, "n_boot": int(n_boot), "ci_level": ci}
    return _fit_report(out, kind, used, pooled, reps, ci)


def _fit_report(out, kind, used, pooled, reps, ci):
    nan2 = [math.nan, math.nan]
    if len(set(used)) < 2:
        keys = {"power": {"a": math.nan, "b": math.nan, "b_ci": nan2, "a_ci": nan2},
                "exp": {"factor": math.nan, "factor_ci": nan2, "c": math.nan}}[kind]
        return {**out, **keys, "note": f"fewer than two distinct x with every seed reached ({len(set(used))})"}
    X = FITS[kind](np.asarray(used, dtype=np.float64))                 # (K,)
    with np.errstate(divide="ignore"):
        slope, icpt = least_squares(X, np.log(np.asarray(pooled)))
        r_slope, r_icpt = least_squares(X, np.log(np.stack(reps, axis=1)))    # (B,) each
    if kind == "power":
        return {**out, "a": float(np.exp(icpt)), "b": float(slope), "b_ci": interval(r_slope, ci),
                "a_ci": [float(np.exp(v)) for v in interval(r_icpt, ci)]}
    return {**out, "factor": float(np.exp(slope)), "factor_ci": [float(np.exp(v)) for v in interval(r_slope, ci)],
            "c": float(icpt)}
