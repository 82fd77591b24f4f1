"""Every scaling claim as a curve over thresholds (issue 35): per run, τ at each rule threshold (0.3 … 0.95)
and memorization threshold (0.01 … 0.2) (`stats.thresholds`); per claim, the pooled value, ratio, paired
ratio or fitted exponent at each threshold with its seed-level interval (`stats.seeds`), censored where some
seed does not reach the threshold; and a verdict that is called robust only where it holds at every threshold
that can be read."""
import math

import numpy as np

from scoreprobe.stats.families import _taus_u, _valid, u_to_steps
from scoreprobe.stats.intervals import t_interval
from scoreprobe.stats.seeds import pool_seeds, pool_windows, seed_fit
from scoreprobe.stats.seeds import ratio_curve as threshold_ratios
from scoreprobe.stats.thresholds import MEM_THRESHOLDS, RULE_THRESHOLDS, threshold_crossings
from scoreprobe.stats.taus import setup, tau_summary

VALUE_KEYS = (("factor", "factor_ci"), ("b", "b_ci"), ("value", "ci"), ("pooled", "ci"))   # (value, its CI) by kind
THRESHOLDS = {"tau_rule": RULE_THRESHOLDS, "tau_mem": MEM_THRESHOLDS, "tau_family": RULE_THRESHOLDS}
PAPER = {"tau_rule": 0.9, "tau_mem": 0.1, "tau_family": 0.9}


def run_curves(ds):
    """{key: (T,) τ in steps (inf: not reached)} at THRESHOLDS, and per constraint family; "resolved_from": (1,)
    the first checkpoint after step 0 (a τ below it crossed between step 0 and it: only τ ≤ it is known,
    `mark_under_resolved`)."""
    ds, _, u, n, _ = setup(ds)
    rule, mem = (ds[k].values.astype(np.float64)[None] for k in ("rule_acc", "mem_ratio"))
    steps = ds["step"].values
    out = {"resolved_from": np.array([float(steps[steps > 0].min())]),   # a crossing below it is not resolved
           "tau_rule": u_to_steps(threshold_crossings(u, rule, n, RULE_THRESHOLDS)[0]),
           "tau_mem": u_to_steps(threshold_crossings(u, mem, n, MEM_THRESHOLDS)[0])}
    wins = [tau_summary(ds, rule_threshold=t, n_boot=0, warn=False) for t in RULE_THRESHOLDS]   # memorization 0.1
    out.update(window_open=np.array([w["window_open"] for w in wins], dtype=np.float64),
               window_width=np.array([w["window_log10_width"] for w in wins]),
               window_hi_censored=np.array([w["window_hi_censored"] for w in wins], dtype=np.float64))
    if "family_valid" in ds:
        ds, u, fv, names = _valid(ds)
        acc = fv.mean(axis=1)[None]                                               # (1, S, F)
        for f, name in enumerate(names):
            out[f"tau_family:{name}"] = np.array([u_to_steps(_taus_u(u, acc, n, t)[0, f]) for t in RULE_THRESHOLDS])
    return out


def curves_of(rows):
    """{run: {key: (T,) τ over thresholds}} of the rows (each with "run" and "curves", as run_stats makes them)."""
    return {r["run"]: {k: np.asarray(v, dtype=np.float64) for k, v in r["curves"].items()} for r in rows}


def _kind(key):
    return "tau_family" if key.startswith("tau_family") else key


def thresholds_of(key):
    return list(THRESHOLDS[_kind(key)])


def _points(rows, curves, key):
    """(S, T) per seed, per threshold."""
    return np.array([curves[r["run"]][key] for r in rows], dtype=np.float64)


def _row(t, d):
    return {"threshold": float(t), **d}


def pooled_curve(rows, curves, key):
    """pool_seeds at each threshold (t interval on ln τ; a bound at the budget where some seed is censored)."""
    P, last = _points(rows, curves, key), [float(r["steps"]) for r in rows]
    return mark_under_resolved([_row(t, pool_seeds(P[:, j], last_steps=last)) for j, t in enumerate(thresholds_of(key))],
                               rows, curves, key)


def window_curve(rows, curves):
    """pool_windows at each rule threshold (memorization 0.1): open in k of S, median width among the open."""
    W = {k: _points(rows, curves, k) for k in ("window_open", "window_width", "window_hi_censored")}
    return [_row(t, pool_windows(W["window_open"][:, j] > 0, W["window_width"][:, j], W["window_hi_censored"][:, j] > 0))
            for j, t in enumerate(RULE_THRESHOLDS)]


def ratio_curve(rows_a, rows_b, curves, key):
    """b / a at each threshold (Welch t on ln τ), censored where any seed of either is not reached."""
    curve = threshold_ratios(_points(rows_a, curves, key), _points(rows_b, curves, key), thresholds_of(key))
    return mark_under_resolved(curve, rows_a + rows_b, curves, key)


def paired_curve(rows, curves, key_a, key_b):
    """τ_a / τ_b within each run (the same samples), t interval over the seeds' ln ratios; censored where a seed
    reaches neither or one of them (`per_seed`: the ratios, NaN there)."""
    A, B = _points(rows, curves, key_a), _points(rows, curves, key_b)
    out = []
    for j, t in enumerate(thresholds_of(key_a)):
        ok = np.isfinite(A[:, j]) & np.isfinite(B[:, j])
        r = np.log(A[:, j] / B[:, j]) if ok.all() else None
        _, lo, hi = t_interval(r) if r is not None else (None, math.nan, math.nan)
        out.append(_row(t, {"value": float(np.exp(r.mean())) if r is not None else math.nan,
                            "ci": [float(np.exp(lo)), float(np.exp(hi))], "censored": not ok.all(),
                            "per_seed": [float(a / b) if np.isfinite(a) and np.isfinite(b) else math.nan
                                         for a, b in zip(A[:, j], B[:, j])]}))
    return mark_under_resolved(out, rows, curves, key_a, key_b)


def fit_curve(groups, xs, curves, key, kind):
    """seed_fit at each threshold: least squares over every seed's ln τ, x with a censored seed left out."""
    out = []
    for j, t in enumerate(thresholds_of(key)):
        pts = [[curves[r["run"]][key][j] for r in rs] for rs in groups]
        last = [[float(r["steps"]) for r in rs] for rs in groups]
        out.append(_row(t, seed_fit(list(xs), pts, kind=kind, last_steps=last)))
    return mark_under_resolved(out, [r for rs in groups for r in rs], curves, key)


def _early(rows, curves, keys):
    """(S, T) True where a run crossed a threshold of any of `keys` before its first checkpoint after step 0, and
    (S,) those checkpoints (0 for curves stored before the field: nothing is early)."""
    first = np.array([float(np.asarray(curves[r["run"]].get("resolved_from", [0.0]))[0]) for r in rows])
    early = np.zeros((len(rows), len(thresholds_of(keys[0]))), dtype=bool)
    for key in keys:
        early |= _points(rows, curves, key) < first[:, None]
    return early, first


def mark_under_resolved(curve, rows, curves, *keys):
    """`curve` (rows of any kind built from `rows`' τ of `keys`) with every threshold some run crossed before its
    first checkpoint after step 0 made unreadable: value and CI NaN, "under_resolved" the largest such checkpoint
    (τ ≤ it is all that is known: neither a value nor a bound of a ratio), "n_under" the runs."""
    early, first = _early(rows, curves, keys)
    for j, row in enumerate(curve):
        if early[:, j].any():
            for v, c in VALUE_KEYS:
                if v in row:
                    row.update({v: math.nan, c: [math.nan, math.nan]})
            row.update(under_resolved=float(first[early[:, j]].max()), n_under=int(early[:, j].sum()))
    return curve


# ---------------------------------------------------------------------------------------------
# Verdicts over a curve
# ---------------------------------------------------------------------------------------------

def value_of(row):
    """(value, lo, hi) of a curve row of any kind; NaN where censored / under-resolved / not fitted."""
    for v, c in VALUE_KEYS:
        if v in row:
            if row.get("censored") or row.get("lower_bound") or row.get("under_resolved") or \
                    (v in ("factor", "b") and math.isnan(row[v])):
                return math.nan, math.nan, math.nan
            return row[v], row[c][0], row[c][1]
    raise KeyError(row)


def readable(curve):
    """The rows of a curve with a value and a finite interval."""
    return [r for r in curve if all(math.isfinite(v) for v in value_of(r))]


def relation(curve, ref):
    """Where the curve's CIs lie against `ref`: {"above": [...], "below": [...], "includes": [...],
    "censored": [...], "under_resolved": [...]} (lists of thresholds)."""
    out = {"above": [], "below": [], "includes": [], "censored": [], "under_resolved": []}
    for r in curve:
        v, lo, hi = value_of(r)
        key = "under_resolved" if r.get("under_resolved") else "censored" if not math.isfinite(v) else \
            "above" if lo > ref else "below" if hi < ref else "includes"
        out[key].append(r["threshold"])
    return out


def span(ts, grid=None):
    """The thresholds `ts` as text: runs contiguous in `grid` (the curve's full threshold list; default
    `ts` itself) as 'first–last', separate runs joined by ', ', with the count when more than one:
    span([0.3, 0.6, 0.7], grid=[0.3, 0.4, 0.5, 0.6, 0.7]) == '0.3, 0.6–0.7 (3 thresholds)'."""
    if not ts:
        return "none"
    grid = sorted(set(grid if grid is not None else ts) | set(ts))
    pos = sorted(grid.index(t) for t in set(ts))
    runs, start = [], pos[0]
    for a, b in zip(pos, pos[1:] + [None]):
        if b != a + 1:
            runs.append(f"{grid[start]:g}" if start == a else f"{grid[start]:g}–{grid[a]:g}")
            start = b
    text = ", ".join(runs)
    return text if len(pos) == 1 else f"{text} ({len(pos)} thresholds)"


def robust(curve, ref, words):
    """A verdict against `ref`, the paper's own threshold read first (`paper_clause`), then over the readable
    thresholds: words = {"above", "below", "includes"} texts; "robust" when one holds at every readable threshold
    *and* the paper's threshold is among them, else each named with its thresholds; the thresholds not read
    (censored, crossed before the first checkpoint after 0) named after it."""
    rel = relation(curve, ref)
    grid = [r["threshold"] for r in curve]
    held = [k for k in ("above", "below", "includes") if rel[k]]
    unread = (f"; censored at {span(rel['censored'], grid)}" if rel["censored"] else "") + \
        (f"; under-resolved (crossed before the first checkpoint after step 0) at {span(rel['under_resolved'], grid)}"
         if rel["under_resolved"] else "")
    head = paper_clause(curve, ref, words)
    if not held:
        return head + "not readable at any threshold" + (" (censored everywhere)" if not rel["under_resolved"] else unread)
    if len(held) == 1:
        k, paper = held[0], paper_threshold_of(curve)
        whole = paper is None or paper in rel[k]
        return (f"{head}{words[k]} at every readable threshold ({span(rel[k], grid)}; "
                f"{'robust' if whole else 'not the paper' + chr(39) + 's: not called robust'})" + unread)
    return head + "; ".join(f"{words[k]} at {span(rel[k], grid)}" for k in held) + " (not robust across thresholds)" \
        + unread


PAPER_THRESHOLDS = ((tuple(RULE_THRESHOLDS), 0.9), (tuple(MEM_THRESHOLDS), 0.1))
_WORD_KEY = {"supported": "above", "contradicted": "below", "undecided": "includes"}


def paper_threshold_of(curve):
    """The paper's threshold of a curve over the rule (0.9) or memorization (0.1) thresholds; None otherwise."""
    grid = tuple(r["threshold"] for r in curve)
    return next((p for ts, p in PAPER_THRESHOLDS if len(ts) == len(grid) and np.allclose(ts, grid)), None)


def paper_clause(curve, ref, words):
    """'at the paper's threshold 0.9: <words[key]> (v [lo, hi]); over the range: ' with the key from
    `scoreprobe.stats.verdict` of the claim "the value exceeds ref" (supported: above, contradicted: below,
    undecided: includes); 'not read (censored ...)' where that threshold has no interval; '' for a curve over
    other thresholds."""
    from scoreprobe.stats.verdict import verdict
    paper = paper_threshold_of(curve)
    if paper is None:
        return ""
    row = at(curve, paper)
    if row.get("under_resolved"):
        return f"at the paper's threshold {paper:g}: not read (crossed before the first checkpoint); over the range: "
    v = [value_of(r) for r in curve]
    if not math.isfinite(value_of(row)[0]):
        return f"at the paper's threshold {paper:g}: not read (censored: a run does not reach it); over the range: "
    t = [r["threshold"] for r in curve]
    word = verdict(t, [x[0] for x in v], [x[1] for x in v], [x[2] for x in v], region=(ref, math.inf),
                   paper_threshold=paper).paper.word
    val, lo, hi = value_of(row)
    return f"at the paper's threshold {paper:g}: {words[_WORD_KEY[word]]} ({val:.3g} [{lo:.3g}, {hi:.3g}]); over the range: "


def range_text(curve, digits=2):
    """'4.5–5.0 (CI ends 3.1–9.0)' over the readable thresholds."""
    rs = readable(curve)
    if not rs:
        return "—"
    v = [value_of(r) for r in rs]
    f = lambda x: f"{x:.{digits}f}"   # noqa: E731
    return (f"{f(min(a for a, _, _ in v))}–{f(max(a for a, _, _ in v))} (95% CI ends from {f(min(lo for _, lo, _ in v))} "
            f"to {f(max(hi for _, _, hi in v))})")


def at(curve, threshold):
    return next(r for r in curve if abs(r["threshold"] - threshold) < 1e-9)
