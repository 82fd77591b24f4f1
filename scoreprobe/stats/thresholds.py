"""τ as a curve over thresholds (sp.taus): τ_rule for rule thresholds 0.3 … 0.95, τ_mem for memorization
thresholds 0.01 … 0.2, the window over both, each with a sample-level bootstrap CI.

The paper's thresholds (rule 0.9, memorization 0.1) stay the headline values (`attrs`); a verdict that
holds at 0.9 only is said to (docs/definitions.md, "τ over thresholds"). Every τ is read as in
`stats.taus` (logit-in-log-step interpolation; "reliable" by default, "first_crossing" by name), and
one set of joint resamples of the sample indices serves every threshold, so the curves' CIs are
paired across thresholds.
"""
import json

import numpy as np
import xarray as xr

from scoreprobe.defaults import MEM_THRESHOLD, RULE_THRESHOLD
from scoreprobe.errors import ConfigError
from scoreprobe.stats.crossings import DEFAULT_DEFINITION, crossing_of, logit_fraction, window_segments, window_summary
from scoreprobe.stats.taus import (INTERPOLATION, _ci, check_boot, check_definition, definition_text, novel_oracle_of,
                                    resampled_curves, setup, tau_summary)

RULE_THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
MEM_THRESHOLDS = (0.01, 0.02, 0.05, 0.1, 0.15, 0.2)
CI_METHOD = ("percentile interval of a bootstrap over sample indices, resampled jointly across checkpoints "
             "(samples only: no seed variance)")


def _thresholds(values, name):
    t = np.unique(np.asarray(values, dtype=np.float64).ravel())
    if t.size == 0 or np.any(~np.isfinite(t)) or np.any((t <= 0) | (t >= 1)):
        raise ConfigError(f"{name} must be fractions strictly between 0 and 1, got {list(np.ravel(values))}")
    return t


def _curves(ds, n_boot, seed):
    """Measured (1, S) and resampled (B, S) rule_acc, mem_ratio, n."""
    rule, mem = (ds[k].values.astype(np.float64)[None] for k in ("rule_acc", "mem_ratio"))
    boot = resampled_curves(ds, n_boot, seed) if n_boot and "state" in ds else None
    return rule, mem, boot


def threshold_crossings(u, y, n, thresholds, definition=DEFAULT_DEFINITION):
    """τ in u of curves y (B, S) at every threshold -> (B, T) (NaN: not reached)."""
    return np.stack([crossing_of(u, y, n, t, definition) for t in thresholds], axis=-1)


def _steps(u):
    """u = log(step + 1) (NaN: not reached) -> steps, +inf where not reached."""
    return np.where(np.isnan(u), np.inf, np.expm1(u))


def _tau_vars(name, dim, u, point, boot, n, thresholds, ci, definition):
    """Data variables of one τ over its threshold dim: value, lo, hi, reached share, first crossing."""
    p = _steps(threshold_crossings(u, point, n, thresholds, definition))[0]               # (T,)
    first = _steps(threshold_crossings(u, point, n, thresholds, "first_crossing"))[0]
    out = {name: (dim, np.where(np.isfinite(p), p, np.nan)),
           f"{name}_first_crossing": (dim, np.where(np.isfinite(first), first, np.nan))}
    if boot is not None:
        d = threshold_crossings(u, boot, n, thresholds, definition)                          # (B, T)
        lohi = np.array([[np.expm1(v) for v in _ci(d[:, j], ci)] for j in range(len(thresholds))])
        out[f"{name}_lo"], out[f"{name}_hi"] = (dim, lohi[:, 0]), (dim, lohi[:, 1])
        out[f"{name}_reached"] = (dim, np.isfinite(d).mean(axis=0))
    return out


def _window_vars(u, rule, mem, n, rts, mts, definition):
    """window_open, window_log10_width (rule_threshold, mem_threshold) of (1, S) curves."""
    R, M = logit_fraction(rule, n), logit_fraction(mem, n)
    shape = (len(rts), len(mts))
    is_open, width = np.zeros(shape, bool), np.zeros(shape)
    for i, rt in enumerate(rts):
        start = crossing_of(u, rule, n, rt, definition)[:, None]                       # (1, 1)
        start = np.where(np.isnan(start), np.inf, start)
        for j, mt in enumerate(mts):
            lo, hi = window_segments(u, R, M, logit_fraction(rt, n), logit_fraction(mt, n))
            lo = np.where(hi >= start, np.maximum(lo, start), np.inf)
            o, _, _, w = window_summary(lo, np.where(np.isfinite(lo), hi, -np.inf))
            is_open[i, j], width[i, j] = o[0], w[0]
    dims = ("rule_threshold", "mem_threshold")
    return {"window_open": (dims, is_open), "window_log10_width": (dims, width)}


def taus(ds, rule_thresholds=RULE_THRESHOLDS, mem_thresholds=MEM_THRESHOLDS, definition=DEFAULT_DEFINITION,
         n_boot=1000, ci=0.95, seed=0):
    """τ_rule, τ_novel and τ_mem of a clocks Dataset as curves over thresholds, with bootstrap CIs.

    Parameters
    ----------
    ds : clocks Dataset: `rule_acc`, `mem_ratio` (step,); `state` (step, sample) for the CIs.
    rule_thresholds, mem_thresholds : fractions in (0, 1); τ_novel uses rule_threshold × novel_oracle.
    definition : "reliable" (default) or "first_crossing" (`stats.taus`).
    n_boot, ci, seed : joint resamples of the sample indices (0: no CIs), interval level, seed.

    Returns
    -------
    Dataset, dims rule_threshold (R,), mem_threshold (M,): tau_rule, tau_novel (rule_threshold),
    tau_mem (mem_threshold) in steps (NaN: not reached), each with `_lo`, `_hi` (+inf: not reached in
    more than (1 − ci)/2 of the resamples), `_reached` (share of resamples) and `_first_crossing` (the
    point value under "first_crossing"); window_open, window_log10_width (rule_threshold, mem_threshold).
    attrs: definition, ci, ci_method, n_boot, tau_interpolation, and `headline` (JSON: `tau_summary` at
    rule 0.9 / memorization 0.1, the paper's thresholds).
    """
    check_definition(definition)
    n_boot, ci, seed = check_boot(n_boot, ci, seed)
    rts, mts = _thresholds(rule_thresholds, "rule_thresholds"), _thresholds(mem_thresholds, "mem_thresholds")
    ds, _, u, n, _ = setup(ds)
    rule, mem, boot = _curves(ds, n_boot, seed)
    oracle = novel_oracle_of(ds)
    vs = {**_tau_vars("tau_rule", "rule_threshold", u, rule, None if boot is None else boot[0], n, rts, ci, definition),
          **_tau_vars("tau_novel", "rule_threshold", u, rule - mem, None if boot is None else boot[0] - boot[1], n,
                      rts * oracle, ci, definition),
          **_tau_vars("tau_mem", "mem_threshold", u, mem, None if boot is None else boot[1], n, mts, ci, definition),
          **_window_vars(u, rule, mem, n, rts, mts, definition)}
    head = tau_summary(ds, RULE_THRESHOLD, MEM_THRESHOLD, n_boot=n_boot, ci=ci, seed=seed, warn=False,
                       definition=definition)
    out = xr.Dataset(vs, coords={"rule_threshold": rts, "mem_threshold": mts})
    out.attrs.update(definition=definition_text(definition), ci=ci, ci_method=CI_METHOD,
                     n_boot=int(n_boot) if boot is not None else 0, tau_interpolation=INTERPOLATION,
                     novel_oracle=oracle, headline_rule_threshold=RULE_THRESHOLD,
                     headline_mem_threshold=MEM_THRESHOLD, headline=json.dumps(head, default=float))
    for k in ("tau_rule", "tau_novel", "tau_mem"):
        out[k].attrs.update(units="training steps", long_name=f"{k} ({definition}); NaN: not reached")
    return out


def threshold_draws(ds, key, thresholds, n_boot=1000, seed=0, definition=DEFAULT_DEFINITION):
    """Point τ (T,) and sample-level draws (n_boot, T) of `key` (tau_rule, tau_mem, tau_novel) at every
    threshold, in steps, +inf where not reached: what `seeds.pool_seeds` pools, threshold by threshold."""
    if key not in ("tau_rule", "tau_mem", "tau_novel"):
        raise ConfigError(f"threshold_draws: key must be tau_rule, tau_mem or tau_novel, got {key!r}")
    if "state" not in ds:
        raise ConfigError("threshold_draws needs the per-sample `state` (step, sample) of the clocks Dataset")
    check_definition(definition)
    ts = np.asarray(thresholds, dtype=np.float64)
    ds, _, u, n, _ = setup(ds)
    rule, mem, (brule, bmem, _) = _curves(ds, n_boot, seed)
    if key == "tau_novel":
        ts = ts * novel_oracle_of(ds)
    pick = {"tau_rule": (rule, brule), "tau_mem": (mem, bmem), "tau_novel": (rule - mem, brule - bmem)}[key]
    return (_steps(threshold_crossings(u, pick[0], n, ts, definition))[0],
            _steps(threshold_crossings(u, pick[1], n, ts, definition)))


def pool_taus(datasets, last_steps=None, ci=0.95):
    """Pool `taus` Datasets of S seeds over the seeds, threshold by threshold (`seeds.pool_seeds`).

    Parameters
    ----------
    datasets : S Datasets of `taus` (same thresholds). last_steps : (S,) each run's last checkpoint (its
        budget; a censored threshold is then a lower bound at it), or None (then a censored one is +inf).

    Returns
    -------
    Dataset over rule_threshold / mem_threshold: for tau_rule, tau_novel, tau_mem the pooled geometric
    mean, `_lo`, `_hi` (t interval on ln τ over the seeds; NaN where a seed is censored), `_bound` (True:
    the value is a lower bound at the budget), `_n_reached`; attrs method, ci, n_seeds, budget.
    """
    from scoreprobe.stats.seeds import pool_seeds
    if not datasets:
        raise ConfigError("pool_taus needs at least one taus Dataset")
    first = datasets[0]
    out = xr.Dataset(coords={"rule_threshold": first.rule_threshold.values, "mem_threshold": first.mem_threshold.values})
    method = None
    for key, dim in (("tau_rule", "rule_threshold"), ("tau_novel", "rule_threshold"), ("tau_mem", "mem_threshold")):
        values = np.stack([np.asarray(d[key].values, dtype=np.float64) for d in datasets])      # (S, T)
        pools = [pool_seeds(values[:, j], last_steps=last_steps, ci=ci) for j in range(values.shape[1])]
        out[key] = (dim, [p["pooled"] for p in pools])
        out[f"{key}_lo"] = (dim, [p["ci"][0] for p in pools])
        out[f"{key}_hi"] = (dim, [p["ci"][1] for p in pools])
        out[f"{key}_bound"] = (dim, [p["lower_bound"] for p in pools])
        out[f"{key}_n_reached"] = (dim, [p["n_reached"] for p in pools])
        method = next((p["method"] for p in pools if not p["lower_bound"]), method)
    out.attrs.update(method=method or "lower bounds only", ci=ci, n_seeds=len(datasets),
                     budget=None if last_steps is None else float(np.max(last_steps)))
    return out
