"""Per-run and per-configuration statistics of a study's runs, from the minimal clocks Datasets of the exports
(`scoreprobe.studies.export`): per run (τ with sample-level draws, window status, peaks, abruptness, family clocks,
τ over thresholds) and per configuration (pooled over seeds with the t interval of `scoreprobe.stats.seeds`;
censored seeds make a bound at the budget)."""

import math

import numpy as np

from scoreprobe.defaults import MEM_THRESHOLD, RULE_THRESHOLD
from scoreprobe.errors import ConfigError
from scoreprobe.stats.budget_trend import falling_at
from scoreprobe.stats.extrapolate import extrapolate_tau
from scoreprobe.stats.families import first_share, interval
from scoreprobe.stats.curves import run_curves
from scoreprobe.stats.seeds import hierarchical_replicates, pool_ratio, pool_seeds, pool_windows, seed_fit, tau_draws
from scoreprobe.stats.taus import tau_summary, window_status

N_BOOT = 1000           # sample-level resamples per run (taus()' default, same seed: the same draws)
N_BOOT_POOL = 2000      # hierarchical replicates per configuration
TAU_KEYS = ("tau_rule", "tau_mem", "tau_novel")
KEYS = TAU_KEYS + ("window_log10_width", "abruptness")
LOG = {"window_log10_width": False, "abruptness": False}   # pooled as arithmetic means
TREND = {"tau_rule": ("rule_acc", RULE_THRESHOLD), "tau_mem": ("mem_ratio", MEM_THRESHOLD)}   # curve, threshold


def run_stats(name, run, info):
    """One run's numbers (JSON-able, "draws" kept apart) from its export `info` (export.read_export)."""
    ds = info["ds"]
    t = tau_summary(ds, n_boot=N_BOOT, warn=False)
    first = tau_summary(ds, n_boot=0, warn=False, definition="first_crossing")
    out = {"run": name, "group": run.group, "seed": run.seed, "params": info["params"], "meta": run.meta,
           "steps": int(ds.step.values[-1]), "window_status": window_status(ds, t),
           "peak_rule_acc": float(ds.rule_acc.max()), "final_rule_acc": float(ds.rule_acc[-1]),
           "final_mem_ratio": float(ds.mem_ratio[-1]), "train_s": info["train_s"], "clocks_s": info["clocks_s"],
           **{k: t[k] for k in ("tau_rule", "tau_rule_ci", "tau_mem", "tau_mem_ci", "tau_novel", "tau_novel_ci",
                                "window_open", "window_intervals", "window_log10_width", "window_log10_width_ci",
                                "window_hi_censored", "under_resolved")},
           **{f"{k}_first_crossing": first[k] for k in ("tau_rule", "tau_mem", "window_status")}}
    # what its training log says (studies.divergence.log_meta) and the step its train_s starts at when training
    # resumed (studies.runner.run_one), where recorded
    for k in ("train_start", "lowest_loss", "last_loss", "loss_spikes", "train_s_from_step"):
        if k in info["meta"]:
            out[k] = info["meta"][k]
    out["curve"] = {"step": ds.step.values.tolist(), "rule_acc": ds.rule_acc.values.tolist(),
                    "mem_ratio": ds.mem_ratio.values.tolist()}
    draws = {k: tau_draws(ds, k, n_boot=N_BOOT) for k in KEYS}
    if "family" in ds.coords:
        from scoreprobe.stats.families import family_taus
        out["families"] = family_taus(ds, n_boot=N_BOOT)
        out["family_names"] = [str(f) for f in ds.family.values]
        out["curve"]["family_acc"] = {f: ds.family_acc.sel(family=f).values.tolist() for f in out["family_names"]}
        for f in ds.family.values:
            draws[f"tau_family:{f}"] = tau_draws(ds, f"tau_family:{f}", n_boot=N_BOOT)
    if not np.isfinite(out["tau_rule"]):
        out["tau_rule_extrapolated"] = extrapolate_tau(ds)
    out["abruptness"] = draws["abruptness"][0]
    out["curves"] = {k: v.tolist() for k, v in run_curves(ds).items()}
    return out, draws


def pooled(rows, draws, key, seed=0):
    """pool_seeds of `key` over the runs `rows` (one configuration, seeds): t interval over the seeds; some seed
    unreached: a lower bound at the budget (unreached seeds at their last step), no interval. Window widths:
    `windows` instead (a closed window is not a width of 0)."""
    if key == "window_log10_width":
        return windows(rows)
    log = LOG.get(key, True)
    points = [draws[r["run"]][key][0] for r in rows]
    out = pool_seeds(points, [draws[r["run"]][key][1] for r in rows], n_boot=N_BOOT_POOL, seed=seed, log=log,
                     last_steps=[float(r["steps"]) for r in rows] if log else None)
    if out.get("lower_bound") and key in TREND:
        out["unreached_trend"] = unreached_trend(rows, points, key)
    return out


def unreached_trend(rows, points, key):
    """Where the seeds that do not reach `key`'s threshold are heading at their budget (`budget_trend`):
    "falling" (every one peaked and fell below the threshold: not learned at this setting, a longer run would not
    decide it), "rising" (one is still rising or flat: budget-bound), None (a curve too short to read, or none
    stored). rows: the runs (each with its "curve"); points: (R,) their τ, non-finite where unreached."""
    curve, threshold = TREND[key]
    reached = np.isfinite(np.asarray(points, np.float64))
    if reached.all() or any(curve not in r.get("curve", {}) for r in rows):
        return None
    try:
        fall = falling_at([(r["curve"]["step"], r["curve"][curve]) for r in rows], reached[:, None], [threshold])
    except ConfigError:
        return None
    return "falling" if fall[0] else "rising"


def windows(rows):
    """pool_windows of the runs `rows`: open in k of S seeds, widths among the open ones (a window still open at
    the last checkpoint is a lower bound)."""
    return pool_windows([r["window_open"] for r in rows], [r["window_log10_width"] for r in rows],
                        [r["window_hi_censored"] for r in rows])


def by_group(rows):
    """{group: [rows sorted by seed]} in first-appearance order."""
    out = {}
    for r in rows:
        out.setdefault(r["group"], []).append(r)
    return {g: sorted(rs, key=lambda r: r["seed"]) for g, rs in out.items()}


def axis_fit(groups, xs, draws, key, kind, seed=0):
    """seed_fit of `key` across configurations `groups` (lists of rows) at axis values `xs` (least squares over
    every seed's ln τ, t interval; an x with a censored seed is left out as a bound)."""
    pts = [[draws[r["run"]][key][0] for r in rs] for rs in groups]
    last = [[float(r["steps"]) for r in rs] for rs in groups]
    return seed_fit(list(xs), pts, kind=kind, seed=seed, last_steps=last)


def ratio_pooled(rows_a, rows_b, draws, key):
    """Configuration b against a over seeds: for τ the ratio b / a (Welch t on ln τ), for the arithmetic keys
    (abruptness) the difference b − a (Welch t); censored (value NaN) when any seed of either is unreached."""
    log = LOG.get(key, True)
    out = pool_ratio([draws[r["run"]][key][0] for r in rows_a], [draws[r["run"]][key][0] for r in rows_b], log=log)
    return {**out, ("ratio" if log else "difference"): out["value"]}


def _ratio(a, b):
    """a / b of τ values with +inf for unreached: finite / inf = 0, inf / finite = inf, inf / inf = NaN."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(np.isfinite(b), a / b, np.where(np.isfinite(a), 0.0, np.nan))


def _censored_ratio(a, b, last):
    """(ratio, bound) of one run's τ_a / τ_b, an unreached family at the run's last step `last`: bound "<"
    when only b is unreached (the true ratio is smaller), ">" when only a is, "" when both are reached;
    (NaN, "") when neither is."""
    fa, fb = np.isfinite(a), np.isfinite(b)
    if not (fa or fb):
        return math.nan, ""
    return float((a if fa else last) / (b if fb else last)), "" if fa and fb else ("<" if fa else ">")


def family_order(rows, draws, first="rows", second="columns", seed=0, ci=0.95):
    """τ_first / τ_second over seeds, and how often `first` reaches 0.9 first.

    Per run the ratio of the two family clocks, a family that never reaches 0.9 censored at the run's last
    step (so that run's ratio is a bound, `per_seed_bound` "<" or ">"); `pooled` is their geometric mean over
    the runs where one family is reached, a bound when every censored run is censored the same way
    (`bound`; "mixed" when both ways). `ci`: hierarchical replicates (seeds, then paired sample draws) of the
    uncensored ratios (0 where only `first` is reached, inf where only `second` is, NaN where neither,
    counted against both ends): an infinite end means more than 2.5% of the replicates lie past every
    finite ratio. `share_first`: the mean over seeds of the share of paired draws in which `first` reaches
    first (ties half), with its hierarchical CI (`share_ci`); per seed in `per_seed_share_first`.
    """
    pts, bounds, ratio_draws, share_draws = [], [], [], []
    for r in rows:
        (a, da), (b, db) = draws[r["run"]][f"tau_family:{first}"], draws[r["run"]][f"tau_family:{second}"]
        value, bound = _censored_ratio(a, b, float(r["steps"]))
        pts.append(value)
        bounds.append(bound)
        ratio_draws.append(_ratio(da, db))
        share_draws.append(first_share(da, db))
    reached = np.isfinite(pts)
    kinds = set(bounds) - {""}                # a bound is only set where one family is reached
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = hierarchical_replicates(ratio_draws, N_BOOT_POOL, seed, log=True)
    shares = hierarchical_replicates(share_draws, N_BOOT_POOL, seed, log=False)
    return {"per_seed": pts, "per_seed_bound": bounds, "n_seeds": len(pts), "n_reached": int(reached.sum()),
            "pooled": float(np.exp(np.mean(np.log(np.asarray(pts)[reached])))) if reached.any() else math.nan,
            "bound": "" if not kinds else (kinds.pop() if len(kinds) == 1 else "mixed"),
            "ci": interval(ratios, ci), "share_first": float(np.mean(shares)),
            "share_ci": interval(shares, ci), "ci_level": ci, "n_boot": N_BOOT_POOL,
            "per_seed_share_first": [float(np.mean(d)) for d in share_draws]}
