"""Crossed data seed × training seed grids (any study that names both seeds of its runs), from the per-run rows of
scoreprobe.stats.runs.run_stats: the grid of a configuration, its two-level split at every threshold with the
interval's coverage at the configuration's own components, the censored estimate where some runs do not cross, the power of the component
tests after Holm, and the G factor's two shortcuts (runs or data seeds as the units; the factor with both
components: `crossed_arms.crossed_difference`)."""
import itertools
import math

import numpy as np
import scipy.stats

from scoreprobe.stats import curves as C
from scoreprobe.stats.seeds import pool_seeds, ratio_curve


def grid_of(rows):
    """(data seeds, training seeds, {(d, s): row}) of one configuration's rows."""
    cells = {(r["meta"]["data_seed"], r["seed"]): r for r in rows}
    return sorted({d for d, _ in cells}), sorted({s for _, s in cells}), cells


def complete_grid(rows):
    """The largest complete block of (data seeds × training seeds) among the rows, at least 2 × 2:
    (data seeds, training seeds, [[row]] (D, I)); None when there is none."""
    ds, ss, cells = grid_of(rows)
    best = None
    for k in range(len(ss), 1, -1):
        for cols in itertools.combinations(ss, k):
            full = [d for d in ds if all((d, s) in cells for s in cols)]
            if len(full) >= 2 and (best is None or len(full) * k > len(best[0]) * len(best[1])):
                best = (full, list(cols))
    if best is None:
        return None
    return best[0], best[1], [[cells[(d, s)] for s in best[1]] for d in best[0]]


def two_level_curve(block, curves, key):
    """pool_seeds of (D, I) points at each threshold of `key`: pooled τ with the two-level t interval and the
    variance components of ln τ (var_data, var_init, var_residual); a lower bound where a run is censored."""
    flat = [r for row in block for r in row]
    D, I = len(block), len(block[0])
    P = C._points(flat, curves, key)                                             # (D·I, T)
    last = [float(r["steps"]) for r in flat]
    curve = [C._row(t, pool_seeds(P[:, j].reshape(D, I), last_steps=last)) for j, t in enumerate(C.thresholds_of(key))]
    return C.mark_under_resolved(curve, flat, curves, key)


def data_share(row):
    """var_data / (var_data + var_init + var_residual) of a two-level row (NaN: censored or no variance)."""
    if row.get("lower_bound") or row.get("under_resolved") or "var_data" not in row:
        return math.nan
    total = row["var_data"] + row["var_init"] + row["var_residual"]
    return row["var_data"] / total if total > 0 else math.nan


def component_verdicts(curve, alpha=0.05):
    """Lines saying at which readable thresholds each variance component is > 0 at family-wise level
    alpha (the F tests of `intervals.two_level`, Holm-adjusted over the thresholds every run crosses)."""
    from scoreprobe.stats.pvalues import adjust_pvalues
    rows = [r for r in curve if not r.get("lower_bound") and not r.get("under_resolved")
            and math.isfinite(r.get("p_data", math.nan))]
    if not rows:
        return ["no threshold every run crosses: no test of the components"]
    out = []
    for name, key in (("the data draw (var_data > 0)", "p_data"), ("the initialisation (var_init > 0)", "p_init")):
        adj = adjust_pvalues(np.array([r[key] for r in rows]), "holm")
        hit = [f"{r['threshold']:g}" for r, a in zip(rows, adj) if a < alpha]
        out.append(f"{name}: significant at family-wise {alpha:g} (Holm over {len(rows)} readable thresholds) at "
                   + (", ".join(hit) if hit else "none") + f"; smallest unadjusted p {min(r[key] for r in rows):.3f}")
    return out


def data_means(rows, curves, key):
    """(D, T) ln τ averaged over the training seeds of each data seed (inf where a run is censored)."""
    ds, _, cells = grid_of(rows)
    return np.array([np.mean([np.log(curves[r["run"]][key]) for (d2, _), r in cells.items() if d2 == d], axis=0)
                     for d in ds])


def factor_curves(rows_a, rows_b, curves, key="tau_rule"):
    """b / a at each threshold of `key`, two shortcuts: every run a unit (Welch t over runs; runs that share a
    data or training seed are not independent, so this interval is too narrow then) and every data seed a unit
    (the mean of ln τ over its training seeds; Welch t over data seeds, which ignores that the training seeds are
    shared). `factor.py` reads both components; the coverage of all three is measured there."""
    by_run = C.ratio_curve(rows_a, rows_b, curves, key)
    A, B = np.exp(data_means(rows_a, curves, key)), np.exp(data_means(rows_b, curves, key))
    if min(len(A), len(B)) < 2:   # one data seed on a side: no interval with data seeds as units
        one = {"value": math.nan, "ci": [math.nan, math.nan], "censored": False, "note": "one data seed (no interval)"}
        return by_run, [C._row(t, dict(one)) for t in C.thresholds_of(key)]
    by_data = ratio_curve(A, B, C.thresholds_of(key))
    return by_run, C.mark_under_resolved(by_data, rows_a + rows_b, curves, key)


def one_factor_spreads(rows, curves, key):
    """Where no complete block exists (or beside it): the spread of ln τ across data seeds at a fixed training
    seed and across training seeds at a fixed data seed, at every threshold of `key`.

    Each is a pooled within-group variance (ddof 1, groups with ≥ 2 runs none of which is censored at that
    threshold): across data seeds it estimates var_data + var_residual, across training seeds var_init +
    var_residual. Returns one row per threshold: data_var, data_df, init_var, init_df, ratio (data / init)
    and its 95% CI from the F distribution (NaN where either side has no degree of freedom)."""
    _, _, cells = grid_of(rows)
    by_seed, by_data = {}, {}
    for (d, s), r in cells.items():
        by_seed.setdefault(s, []).append(r)
        by_data.setdefault(d, []).append(r)
    out = []
    for j, t in enumerate(C.thresholds_of(key)):
        (vd, dfd), (vi, dfi) = (_pooled_var(groups, curves, key, j) for groups in (by_seed, by_data))
        ratio, ci = math.nan, [math.nan, math.nan]
        if dfd and dfi and vi > 0:
            ratio = vd / vi
            ci = [ratio / scipy.stats.f.ppf(0.975, dfd, dfi), ratio / scipy.stats.f.ppf(0.025, dfd, dfi)]
        out.append(C._row(t, {"data_var": vd, "data_df": dfd, "init_var": vi, "init_df": dfi, "ratio": ratio,
                              "ratio_ci": [float(c) for c in ci]}))
    return out


def _pooled_var(groups, curves, key, j):
    """(pooled variance of ln τ within groups, its df) over the groups of ≥ 2 runs all reached at threshold j."""
    ss, df = 0.0, 0
    for rs in groups.values():
        v = np.log([curves[r["run"]][key][j] for r in rs])
        if len(v) >= 2 and np.isfinite(v).all():
            ss += float(((v - v.mean()) ** 2).sum())
            df += len(v) - 1
    return (ss / df if df else math.nan), df


def block_coverage(curve, D, I, n_rep=40000):
    """Coverage of the crossed interval on the pooled ln τ at each readable row of a two-level `curve` (its own
    estimated components, D × I, n_rep simulated blocks): [(threshold, coverage)]."""
    from scoreprobe.stats.crossed_arms import arm_coverage
    out = []
    for j, r in enumerate(curve):
        if r.get("lower_bound") or r.get("under_resolved") or "var_data" not in r:
            continue
        c = (r["var_data"], r["var_init"], r["var_residual"])
        out.append((r["threshold"], arm_coverage(c, D, I, n_rep=n_rep, seed=j)))
    return out


def censored_runs(block, curves, key):
    """Per threshold of `key` where some runs of the block crossed and some did not: the censored normal over the
    runs (`scoreprobe.stats.censored.censored_mean` on ln τ, unreached runs at their last step; runs as units),
    {threshold: dict value, ci, n_censored, n}; thresholds with every run or fewer than 2 crossed are left out."""
    from scoreprobe.stats.censored import censored_mean
    flat = [r for row in block for r in row]
    P, last = C._points(flat, curves, key), np.log([float(r["steps"]) for r in flat])
    out = {}
    for j, t in enumerate(C.thresholds_of(key)):
        cens = ~np.isfinite(P[:, j])
        if not cens.any() or (~cens).sum() < 2:
            continue
        r = censored_mean(np.where(cens, last, np.log(np.where(cens, 1.0, P[:, j]))), cens)
        out[t] = {"value": math.exp(r["mean"]), "ci": [math.exp(r["lower"]), math.exp(r["upper"])],
                  "n_censored": int(cens.sum()), "n": int(cens.size)}
    return out


def power_line(k, D, I, ratio=4.0, alpha=0.05):
    """The power of the F test of var_data = 0 at D × I for var_data = ratio·var_residual (a data SD twice the
    residual's at 4), unadjusted and at Holm's first step over a family of k thresholds."""
    from scoreprobe.stats.crossed_arms import f_power
    if k < 1:
        return None
    return (f"power: a data SD {math.sqrt(ratio):g}× the residual's is found by the F test at {D} × {I} with "
            f"probability {f_power(D, I, ratio, alpha):.2f} at level {alpha:g}, {f_power(D, I, ratio, alpha, k):.2f} "
            f"after Holm over this family of {k} readable threshold{'s' if k > 1 else ''} (level {alpha:g}/{k} at "
            "its first step; the thresholds read the same runs, so the family acts as one test); a smaller data "
            "effect is not excluded")
