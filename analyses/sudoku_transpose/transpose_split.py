"""A ratio of two constraint families within each run (τ_rows / τ_columns) on crossed data seed × training seed
grids, and its split under a transform of the data that swaps the two families (transposing a Sudoku grid), from
the per-run rows of scoreprobe.stats.runs.run_stats (analyses/sudoku_transpose).

With R_o (original data) and R_t (the same grids transposed), both in image coordinates, and a model whose
ln R = a + δ on the original data and a − δ on the transposed data (a: the architecture's preference for
image rows; δ: the drawn data's preference for the rows of the grids as drawn, which transposition turns
into image columns):

    architecture part  sqrt(R_o · R_t) = e^a   (kept by transposition)
    data part          sqrt(R_o / R_t) = e^δ   (reversed by transposition)

Both are formed per matched (data seed, training seed) pair, the runs of both orientations at that pair, so δ
cancels exactly from the architecture part; the pairs' values are pooled with the two-level t interval over the
data seed × training seed grid (a training seed's init is shared by every data seed: the pairs are not
independent units, and an init-driven asymmetry repeats across them). A uniform draw of Sudoku grids is as likely
as its transpose, so δ averages to 0 over data seeds; a data preference is a property of one draw and is read per
data seed (training seeds as units). Which seed sets a part: `component_tests` and `holm_tables` (the two-level F
tests of its variance components, Holm-adjusted in two named families).
"""
import math

import numpy as np

from scoreprobe.stats import seed_grid as draws_stats
from scoreprobe.stats import curves as C
from scoreprobe.stats.seeds import pool_seeds

FIRST, SECOND = "rows", "columns"


def family_key(family):
    return f"tau_family:{family}"


def ratio_points(rows, curves, first=FIRST, second=SECOND):
    """(R, T) τ_first / τ_second of each run at each family threshold; NaN where either is not reached."""
    A, B = C._points(rows, curves, family_key(first)), C._points(rows, curves, family_key(second))
    ok = np.isfinite(A) & np.isfinite(B)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, A / B, np.nan)


def _censored(t, per_run, units):
    return C._row(t, {"value": math.nan, "ci": [math.nan, math.nan], "censored": True, "per_run": per_run,
                      "units": units})


def units_of(rows):
    """(runs in pooling order, shape, words): the largest complete data seed × training seed block (at least
    2 × 2: two-level pooling) or, without one, every run (t over the runs)."""
    block = draws_stats.complete_grid(rows)
    if block is None:
        return list(rows), (len(rows),), f"{len(rows)} runs (t over runs; no complete 2 × 2 data × training seed grid)"
    ds, ss, grid = block
    return ([r for row in grid for r in row], (len(ds), len(ss)),
            f"data seeds {ds} × training seeds {ss} (two-level t interval)")


def family_ratio_curve(rows, curves):
    """τ_rows / τ_columns pooled at each threshold (units_of: two-level where the grid is complete): the
    geometric mean with its t interval, var_data / var_init / var_residual of ln R in the two-level case;
    censored where some run of the units does not reach both families. Two families of the same runs, paired
    within each run: not `scoreprobe.stats.seeds.ratio_curve`, which compares two configurations (Welch)."""
    runs, shape, words = units_of(rows)
    R = ratio_points(runs, curves)                                                  # (runs, T)
    out = _pooled(R, shape, words, lambda per: {"per_run": per}, ("var_data", "var_init", "var_residual"))
    return C.mark_under_resolved(out, runs, curves, family_key(FIRST), family_key(SECOND))


def _pooled(V, shape, words, fields, extra):
    """One row per family threshold: pool_seeds of V's column (V (units, T) in units_of order, reshaped to
    `shape`) with fields(per-unit values) and the `extra` keys of pool_seeds; censored where a unit is NaN."""
    out = []
    for j, t in enumerate(C.thresholds_of("tau_family")):
        per = [float(v) for v in V[:, j]]
        if not len(V) or not np.isfinite(V[:, j]).all():
            out.append(_censored(t, per, words))
            continue
        p = pool_seeds(V[:, j].reshape(shape))
        out.append(C._row(t, {"value": p["pooled"], "ci": p["ci"], "censored": False, **fields(per), "units": words,
                              "method": p["method"], **{k: p[k] for k in extra if k in p}}))
    return out


def matched(rows_o, rows_t):
    """The runs of both orientations at the (data seed, training seed) pairs present in both, in one order."""
    key = lambda r: (r["meta"]["data_seed"], r["seed"])   # noqa: E731
    t = {key(r): r for r in rows_t}
    pairs = sorted(k for k in (key(r) for r in rows_o) if k in t)
    o = {key(r): r for r in rows_o}
    return [o[k] for k in pairs], [t[k] for k in pairs]


def _part(rows_o, rows_t, curves, sign):
    """sqrt(R_o · R_t) (sign +1) or sqrt(R_o / R_t) (sign −1) of each matched (data seed, training seed) pair,
    pooled at each threshold over units_of the pairs: two-level where they form a complete data × training
    seed grid (a training seed's init is shared by every data seed, so the pairs are not independent units:
    an init-driven asymmetry repeats), else a t interval over the pairs; censored where a pair is."""
    o, t = matched(rows_o, rows_t)
    Ro, Rt = ratio_points(o, curves), ratio_points(t, curves)
    with np.errstate(invalid="ignore"):
        V = np.sqrt(Ro * Rt) if sign > 0 else np.sqrt(Ro / Rt)                      # (pairs, T)
    units, shape, words = units_of(o)
    at = {id(r): i for i, r in enumerate(o)}
    V = V[[at[id(r)] for r in units]]                                                # units_of order
    seeds = [[r["meta"]["data_seed"], r["seed"]] for r in units]                   # (data seed, training seed)
    out = _pooled(V, shape, words, lambda per: {"n_pairs": len(o), "per_pair": per, "pair_seeds": seeds},
                  ("var_data", "var_init", "var_residual", "p_data", "p_init"))
    return C.mark_under_resolved(out, o + t, curves, family_key(FIRST), family_key(SECOND))


def architecture_part(rows_o, rows_t, curves):
    """e^a = sqrt(R_o · R_t) at each threshold: image rows vs image columns with the data's orientation balanced
    (< 1: the model learns image rows first whatever the data)."""
    return _part(rows_o, rows_t, curves, +1)


def data_part(rows_o, rows_t, curves):
    """e^δ = sqrt(R_o / R_t) at each threshold: the drawn grids' rows vs their columns with the image orientation
    balanced (< 1: the data's rows are learned first in either orientation)."""
    return _part(rows_o, rows_t, curves, -1)


def data_part_by_seed(rows_o, rows_t, curves):
    """{data seed: data_part over that data seed's training seeds} (each draw's own preference)."""
    seeds = sorted({r["meta"]["data_seed"] for r in rows_o} & {r["meta"]["data_seed"] for r in rows_t})
    pick = lambda rows, d: [r for r in rows if r["meta"]["data_seed"] == d]   # noqa: E731
    return {d: data_part(pick(rows_o, d), pick(rows_t, d), curves) for d in seeds}


def family_curves(rows, curves, families):
    """{family: pooled τ at each family threshold} over units_of(rows) (two-level where complete; a lower bound
    at the budget where some run does not reach it)."""
    runs, shape, _ = units_of(rows)
    if len(shape) == 2:
        D, I = shape
        grid = [runs[i * I:(i + 1) * I] for i in range(D)]
        return {f: draws_stats.two_level_curve(grid, curves, family_key(f)) for f in families}
    return {f: C.pooled_curve(runs, curves, family_key(f)) for f in families}


# ---------------------------------------------------------------------------------------------
# Which seed sets a part: the two-level F tests of its variance components
# ---------------------------------------------------------------------------------------------

PARTS = {"architecture_part": "kept (architecture)", "data_part": "reversed (data)"}
COMPONENTS = {"p_init": "training seed", "p_data": "data seed"}


def component_tests(reps, parts=PARTS, components=COMPONENTS):
    """[(config, part, component, threshold, p)] of every two-level F test with a finite p in the parts of
    `reps` ({config: {part: curve}}, e.g. an architecture's report)."""
    return [(arch, part, comp, r["threshold"], float(r[comp])) for arch, rep in reps.items() for part in parts
            for r in rep.get(part, []) for comp in components if _finite(r.get(comp))]


def _finite(v):
    return isinstance(v, (int, float)) and math.isfinite(v)


def holm_tables(tests):
    """({(config, part, comp): Holm-adjusted p (T,) over its own readable thresholds}, {test tuple: Holm-adjusted
    p over every test of `tests`}), keyed so each family is explicit."""
    from scoreprobe.stats.pvalues import adjust_pvalues
    own = {}
    for key in dict.fromkeys(t[:3] for t in tests):
        own[key] = adjust_pvalues(np.array([[t[4] for t in tests if t[:3] == key]]), "holm")[0]
    study = adjust_pvalues(np.array([[t[4] for t in tests]]), "holm")[0] if tests else []
    return own, dict(zip(tests, study))


def means_by_seed(row, comp):
    """{seed: geometric mean of a part's per-pair values} at one threshold's row, per training seed (comp
    "p_init") or data seed ("p_data"), over the other seed."""
    key = 1 if comp == "p_init" else 0
    by = {}
    for (d, s), v in zip(row["pair_seeds"], row["per_pair"]):
        by.setdefault((d, s)[key], []).append(v)
    return {k: math.exp(np.mean(np.log(v))) for k, v in sorted(by.items())}
