"""Statistics of analyses/scaling.py, from the minimal clocks Datasets of the exports: per run (τ with
sample-level draws, window status, peaks, abruptness, family clocks) and per configuration (pooled over
seeds with the hierarchical bootstrap of `scoreprobe.probes.seeds`)."""

import numpy as np

from grid import extrapolate_tau
from scoreprobe.probes.families import interval
from scoreprobe.probes.seeds import hierarchical_replicates, pool_seeds, seed_fit, tau_draws
from scoreprobe.probes.taus import taus, window_status

N_BOOT = 1000           # sample-level resamples per run (taus()' default, same seed: the same draws)
N_BOOT_POOL = 2000      # hierarchical replicates per configuration
TAU_KEYS = ("tau_rule", "tau_mem", "tau_novel")
KEYS = TAU_KEYS + ("window_log10_width", "abruptness")
LOG = {"window_log10_width": False, "abruptness": False}   # pooled as arithmetic means


def run_stats(name, run, info):
    """One run's numbers (JSON-able, "draws" kept apart) from its export `info` (scaling_export.read_export)."""
    ds = info["ds"]
    t = taus(ds, n_boot=N_BOOT, warn=False)
    out = {"run": name, "group": run.group, "seed": run.seed, "params": info["params"], "meta": run.meta,
           "steps": int(ds.step.values[-1]), "window_status": window_status(ds, t),
           "peak_rule_acc": float(ds.rule_acc.max()), "final_rule_acc": float(ds.rule_acc[-1]),
           "final_mem_ratio": float(ds.mem_ratio[-1]), "train_s": info["train_s"], "clocks_s": info["clocks_s"],
           **{k: t[k] for k in ("tau_rule", "tau_rule_ci", "tau_mem", "tau_mem_ci", "tau_novel", "tau_novel_ci",
                                "window_open", "window_intervals", "window_log10_width", "window_log10_width_ci",
                                "window_hi_censored", "under_resolved")}}
    out["curve"] = {"step": ds.step.values.tolist(), "rule_acc": ds.rule_acc.values.tolist(),
                    "mem_ratio": ds.mem_ratio.values.tolist()}
    draws = {k: tau_draws(ds, k, n_boot=N_BOOT) for k in KEYS}
    if "family" in ds.coords:
        from scoreprobe.probes.families import family_taus
        out["families"] = family_taus(ds, n_boot=N_BOOT)
        out["family_names"] = [str(f) for f in ds.family.values]
        out["curve"]["family_acc"] = {f: ds.family_acc.sel(family=f).values.tolist() for f in out["family_names"]}
        for f in ds.family.values:
            draws[f"tau_family:{f}"] = tau_draws(ds, f"tau_family:{f}", n_boot=N_BOOT)
    if not np.isfinite(out["tau_rule"]):
        out["tau_rule_extrapolated"] = extrapolate_tau(ds)
    out["abruptness"] = draws["abruptness"][0]
    return out, draws


def pooled(rows, draws, key, seed=0):
    """pool_seeds of `key` over the runs `rows` (one configuration, seeds), unreached seeds at their last step."""
    log = LOG.get(key, True)
    points = [draws[r["run"]][key][0] for r in rows]
    return pool_seeds(points, [draws[r["run"]][key][1] for r in rows], n_boot=N_BOOT_POOL, seed=seed, log=log,
                      last_steps=[float(r["steps"]) for r in rows] if log else None)


def by_group(rows):
    """{group: [rows sorted by seed]} in first-appearance order."""
    out = {}
    for r in rows:
        out.setdefault(r["group"], []).append(r)
    return {g: sorted(rs, key=lambda r: r["seed"]) for g, rs in out.items()}


def axis_fit(groups, xs, draws, key, kind, seed=0):
    """seed_fit of `key` across configurations `groups` (lists of rows) at axis values `xs`."""
    pts = [[draws[r["run"]][key][0] for r in rs] for rs in groups]
    dr = [[draws[r["run"]][key][1] for r in rs] for rs in groups]
    last = [[float(r["steps"]) for r in rs] for rs in groups]
    return seed_fit(list(xs), pts, dr, kind=kind, n_boot=N_BOOT_POOL, seed=seed, last_steps=last)


def ratio_pooled(rows_a, rows_b, draws, key, seed=0, ci=0.95):
    """Configuration b against a, pooled over seeds: for τ the ratio b / a, for the arithmetic keys (window width,
    abruptness) the difference b − a; the CI from the two configurations' independent hierarchical replicates
    (an unreached τ replicate is +inf; a replicate with a unreached is undetermined). None when a is unreached."""
    pa, pb = pooled(rows_a, draws, key, seed), pooled(rows_b, draws, key, seed + 1)
    if pa["lower_bound"]:
        return None
    log = LOG.get(key, True)
    reps = [hierarchical_replicates([draws[r["run"]][key][1] for r in rs], N_BOOT_POOL, s, log)
            for rs, s in ((rows_a, seed), (rows_b, seed + 1))]
    with np.errstate(invalid="ignore", divide="ignore"):
        value = pb["pooled"] / pa["pooled"] if log else pb["pooled"] - pa["pooled"]
        contrast = np.where(np.isfinite(reps[0]), reps[1] / reps[0] if log else reps[1] - reps[0], np.nan)   # (B,)
    return {"ratio" if log else "difference": float(value), "lower_bound": pb["lower_bound"],
            "ci": interval(contrast, ci), "a": pa, "b": pb}


def _ratio(a, b):
    """a / b of τ values with +inf for unreached: finite / inf = 0, inf / finite = inf, inf / inf = NaN."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(np.isfinite(b), a / b, np.where(np.isfinite(a), 0.0, np.nan))


def family_order(rows, draws, first="rows", second="columns", seed=0):
    """τ_first / τ_second pooled over seeds: per run the ratio of the paired family draws (one resampling,
    the same seed), pooled geometrically; share of pooled replicates in which `first` reaches first."""
    pts, dr = [], []
    for r in rows:
        (a, da), (b, db) = draws[r["run"]][f"tau_family:{first}"], draws[r["run"]][f"tau_family:{second}"]
        pts.append(float(_ratio(a, b)))
        dr.append(_ratio(da, db))
    p = pool_seeds(pts, dr, n_boot=N_BOOT_POOL, seed=seed)
    return {**p, "per_seed_share_first": [r["families"]["order"].get(f"{first}<{second}", {}).get("share_first")
                                          for r in rows]}
