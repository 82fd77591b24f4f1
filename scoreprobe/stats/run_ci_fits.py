"""Ratios and a power law from single runs' τ with their bootstrap CIs (one run per configuration and seed,
no pooling over seeds; the clock tables and figures of series of runs read them): τ_rule(G') / τ_rule(G) with a log-normal CI from the two runs'
CIs (or a bound where the larger G is not reached), and τ_mem = a·N^b with the spread of b when each τ_mem is
redrawn within its own CI. Rows: dicts with "G", "N", "seed", "steps", τ keys and their "<key>_ci"."""
import math

import numpy as np

from scoreprobe.stats.taus import fit_power_law


def finite_rows(rows, key):
    """The rows whose `key` is a finite positive τ."""
    return [r for r in rows if r[key] is not None and math.isfinite(r[key]) and r[key] > 0]


def log_se(row, key):
    """Standard error of ln τ from its bootstrap CI (half-width / 1.96); NaN when the CI is open."""
    lo, hi = row.get(key + "_ci") or (None, None)
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)) or lo <= 0:
        return math.nan
    return (math.log(hi) - math.log(lo)) / (2 * 1.96)


def g_ratio(rows, N_fixed, seeds):
    """τ_rule(G') / τ_rule(G) for consecutive G of the sweep at N_fixed (per seed of `seeds`), with a CI from the
    two bootstrap CIs (log-normal), or the bound: {"G3/G2 (seed 0)": {"ratio", "ci"} or {"ratio_above",
    "extrapolated", "extrapolated_ci"}}."""
    out = {}
    for seed in seeds:
        by_g = {r["G"]: r for r in rows if r["N"] == N_fixed and r["seed"] == seed}
        out.update(_g_ratios(by_g, f" (seed {seed})" if len(seeds) > 1 else ""))
    return out


def _g_ratios(by_g, suffix):
    out, gs = {}, sorted(by_g)
    for G, G1 in zip(gs, gs[1:]):
        lo, hi = by_g[G], by_g[G1]
        if not finite_rows([lo], "tau_rule"):
            continue
        key = f"G{G1}/G{G}{suffix}"
        if finite_rows([hi], "tau_rule"):
            r = hi["tau_rule"] / lo["tau_rule"]
            se = math.hypot(log_se(lo, "tau_rule"), log_se(hi, "tau_rule"))
            if math.isfinite(se):
                out[key] = {"ratio": r, "ci": [r * math.exp(-1.96 * se), r * math.exp(1.96 * se)]}
            else:  # an open CI (not reached in some resamples): the conservative lower bound only
                out[key] = {"ratio": r, "ci": [hi["tau_rule_ci"][0] / lo["tau_rule_ci"][1], math.inf]}
        else:
            ext = hi.get("tau_rule_extrapolated")
            out[key] = {"ratio_above": hi["steps"] / lo["tau_rule"],
                        "extrapolated": None if ext is None else ext["tau"] / lo["tau_rule"],
                        "extrapolated_ci": None if ext is None else [v / lo["tau_rule"] for v in ext["ci"]]}
    return out


def mem_fit(rows, G_fixed, n_draws=2000, seed=0):
    """τ_mem = a·N^b over the N sweep at G_fixed: least squares in log-log with its t-interval, and the spread of b
    when each τ_mem is redrawn within its own bootstrap CI (measurement noise alone, "b_ci_measurement");
    {"error": why} when there are too few points."""
    ok = finite_rows([r for r in rows if r["G"] == G_fixed], "tau_mem")
    try:
        fit = fit_power_law([r["N"] for r in ok], [r["tau_mem"] for r in ok])
    except Exception as e:  # too few runs reached τ_mem within the budget
        return {"error": str(e)}
    se = np.array([log_se(r, "tau_mem") for r in ok])
    if np.all(np.isfinite(se)):
        rng = np.random.default_rng(seed)
        logn = np.log([r["N"] for r in ok])
        draws = np.log([r["tau_mem"] for r in ok]) + rng.normal(size=(n_draws, len(ok))) * se
        b = np.polyfit(logn, draws.T, 1)[0]
        fit["b_ci_measurement"] = [float(np.percentile(b, 2.5)), float(np.percentile(b, 97.5))]
    return fit
