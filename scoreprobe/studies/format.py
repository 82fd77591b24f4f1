"""Formatting and selection helpers of the studies' tables: cells of τ with intervals, bounds, slopes, and what is
left to run."""
import math

from scoreprobe.stats.runs import pooled


def fmt(v, digits=0):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if isinstance(v, float) and math.isinf(v):
        return "∞" if v > 0 else "−∞"
    return f"{v:.{digits}f}" if digits or abs(v) < 1e15 else f"{v:.3g}"


def ci_text(ci, digits=0, open_end="not reached"):
    """'[lo, hi]'; an infinite end reads `open_end` ("unbounded" for a fitted exponent, either end); an undefined
    (NaN) end reads '—', never `open_end`; an interval with both ends undefined reads 'no interval'."""
    if all(isinstance(c, float) and math.isnan(c) for c in ci):
        return "(no interval)"
    if not math.isfinite(ci[0]) and ci[0] > 0:
        return f"[{open_end}]"
    lo = open_end if math.isinf(ci[0]) and open_end == "unbounded" else fmt(ci[0], digits)
    return f"[{lo}, {open_end if math.isinf(ci[1]) else fmt(ci[1], digits)}]"


def under_text(row):
    """The cell of a threshold some run crossed before its first checkpoint after step 0 (curves.mark_under_resolved)."""
    return f"under-resolved (crossed before step {fmt(row['under_resolved'])} in {row['n_under']} run(s))"


TREND_WORDS = {"falling": ", not reached and falling", "rising": ", budget-bound"}   # stats.runs.unreached_trend


def pooled_cell(p, digits=0):
    """'pooled [lo, hi] (s0 / s1 / s2)'; '> bound at a budget of T steps (…)' where some seed is censored (the
    bound: unreached seeds at their last step; it grows with the budget), followed by ', not reached and falling'
    (every unreached seed peaked and fell below the threshold) or ', budget-bound' (one still rising) where the
    runs' curves tell (`scoreprobe.stats.runs.unreached_trend`); window widths: `window_cell`."""
    if "n_open" in p:
        return window_cell(p, digits or 2)
    per = " / ".join("—" if not math.isfinite(v) else fmt(v, digits) for v in p["per_seed"])
    if p.get("under_resolved"):
        return f"{under_text(p)} ({per})"
    if p["lower_bound"]:
        budget = f" at a budget of {fmt(p['budget'])} steps" if p.get("budget") is not None else ""
        budget += TREND_WORDS.get(p.get("unreached_trend"), "")
        est = p.get("censored_estimate")
        if est:   # some seeds crossed: the censored-normal estimate first, the bound beside it
            return (f"{fmt(est['value'], digits)} {ci_text(est['ci'], digits, open_end='unbounded')} censored fit, "
                    f"{est['n_censored']} of {p['n_seeds']} censored (> {fmt(p['pooled'], digits)}{budget}) ({per})")
        return f"> {fmt(p['pooled'], digits)}{budget} ({per})"
    return f"{fmt(p['pooled'], digits)} {ci_text(p['ci'], digits)} ({per})"


def window_cell(w, digits=2):
    """'open in 2 of 3; median 0.58 (0.72 / 0.45)' ('≥' marks a window still open at the last checkpoint)."""
    if not w["n_open"]:
        return f"open in 0 of {w['n_seeds']}"
    widths = " / ".join(("≥ " if c else "") + fmt(v, digits) for v, c in zip(w["widths_open"], w["censored"]))
    med = ("≥ " if w["median_is_bound"] else "") + fmt(w["median_open"], digits)
    return f"open in {w['n_open']} of {w['n_seeds']}; median among open {med} ({widths})"


def select(rows, **meta):
    return [r for r in rows if all(r["meta"].get(k) == v for k, v in meta.items())]


def statuses(rs):
    return "; ".join(f"s{r['seed']}: {r['window_status']}" for r in rs)


def cells(rs, draws, keys):
    """{key: pooled} and the markdown cells of one configuration."""
    p = {k: pooled(rs, draws, k) for k in keys}
    return p, [pooled_cell(p[k], 2 if k in ("window_log10_width", "abruptness") else 0) for k in keys]


def curve_cell(row, digits=2):
    """One threshold of a claim's curve: 'value [lo, hi]', a bound with its budget, or why it is not read."""
    if "n_open" in row:
        return window_cell(row)
    if row.get("under_resolved"):
        return under_text(row)
    if "pooled" in row and "per_seed" in row:
        est = row.get("censored_estimate")
        if row.get("lower_bound") and est:   # the estimate and, beside it, the bound at the budget
            return (f"{fmt(est['value'])} {ci_text(est['ci'], 0, open_end='unbounded')} censored fit, "
                    f"{est['n_censored']} of {row['n_seeds']} censored; > {fmt(row['pooled'])}")
        return pooled_cell(row, 0).split(" (")[0]
    if row.get("censored"):
        return "censored (a seed does not reach it)"
    for v, c, pre in (("factor", "factor_ci", ""), ("b", "b_ci", ""), ("value", "ci", "")):
        if v in row:
            if not math.isfinite(row[v]):
                return "— " + ("(" + row["note"].split(" (")[0] + ")" if row.get("note") else "")
            n = f" (n = {row['n_points']})" if "n_points" in row else ""
            return f"{pre}{fmt(row[v], digits)} {ci_text(row[c], digits, 'unbounded')}{n}"
    return "—"


def threshold_label(t, paper):
    return f"**{t:g}** (paper)" if abs(t - paper) < 1e-9 else f"{t:g}"


def curve_table(head, columns, paper):
    """Markdown rows: threshold | one cell per (label, curve) in `columns`."""
    lines = [f"| {head} | " + " | ".join(label for label, _ in columns) + " |",
             "|---:|" + "---|" * len(columns)]
    for j, row in enumerate(columns[0][1]):
        lines.append(f"| {threshold_label(row['threshold'], paper)} | "
                     + " | ".join(curve_cell(c[j]) for _, c in columns) + " |")
    return lines


def not_done(missing):
    """'Not done: run (why), …' (or 'none') of the planned runs without an export: every study's last line."""
    return "Not done: " + (", ".join(f"{k} ({v})" for k, v in missing.items()) or "none") + "."


# ---------------------------------------------------------------------------------------------
# The "## Runs" table every study ends with
# ---------------------------------------------------------------------------------------------

def col(header, cell, numeric=True):
    """One column of a runs table: (header, cell(row) -> str, right-aligned)."""
    return header, cell, numeric


def tau_col(key, extra=lambda r: ""):
    """'τ_rule [95% CI]' / 'τ_mem [95% CI]': the run's τ with its sample-level CI, then `extra(row)`."""
    return col(f"{key.replace('tau_', 'τ_')} [95% CI]",
               lambda r: f"{fmt(r[key])} {ci_text(r[key + '_ci'])}{extra(r)}", numeric=False)


RUN = col("run", lambda r: str(r["run"]), numeric=False)
DATA_SEED = col("data seed", lambda r: str(r["meta"]["data_seed"]))
TRAINING_SEED = col("training seed", lambda r: str(r["seed"]))
STEPS = col("steps", lambda r: str(r["steps"]))
PEAK = col("peak rule_acc", lambda r: f"{r['peak_rule_acc']:.3f}")
FINAL_MEM = col("final mem", lambda r: f"{r['final_mem_ratio']:.3f}")
TRAIN_S = col("train s", lambda r: fmt(r["train_s"]) + (f" (steps {r['train_s_from_step']:,}–{r['steps']:,})"
                                                           if r.get("train_s_from_step") else ""))
WINDOW = col("window", lambda r: str(r["window_status"]), numeric=False)


def runs_section(rows, missing, columns, intro=None):
    """'## Runs': `intro` (a paragraph, optional), one row per run over `columns` ([col(...)]), then the
    runs not done."""
    lines = ["## Runs", ""] + ([intro, ""] if intro else [])
    lines += ["| " + " | ".join(h for h, _, _ in columns) + " |",
              "|" + "|".join("---:" if num else "---" for _, _, num in columns) + "|"]
    lines += ["| " + " | ".join(cell(r) for _, cell, _ in columns) + " |" for r in rows]
    return lines + ["", not_done(missing)]


def sigma_runs(values, grid):
    """A set of σ of `grid` as runs of neighbouring grid points: '0.504–2.01, 5.04' (gaps stay gaps)."""
    idx = sorted(grid.index(v) for v in values)
    runs, out = [], []
    for i in idx:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    for run in runs:
        a, b = grid[run[0]], grid[run[-1]]
        out.append(f"{a:.3g}" if len(run) == 1 else f"{a:.3g}–{b:.3g}")
    return ", ".join(out) if out else "none"


def slope_cell(row):
    """A slope row of `scoreprobe.stats.censored_slopes.censored_slope_curve` (full=True) as a table cell:
    'b [lo, hi] (n = k, c censored)', why it is undefined, or the under-resolved text."""
    if row.get("under_resolved"):
        return under_text(row)
    runs = _runs_text(row)
    if math.isnan(row["b"]):
        return f"undefined ({row['method']}; {row['n']} runs, {row['n_censored']} censored){runs}"
    how = f"per-N means, {row['b_df']} df; " if "b_df" in row else ""
    return f"{row['b']:.2f} {ci_text(row['b_ci'], 2, open_end='unbounded')} ({how}n = {row['n']}, {row['n_censored']} censored){runs}"


def _runs_text(row):
    """'; lack of fit F(2, 8) = 9.86, p = 0.007; runs as units 1.27 [1.19, 1.35]' (rows before issue 73: '')."""
    if "lack_of_fit" not in row:
        return ""
    lof = row["lack_of_fit"]
    text = (f"; lack of fit F({lof['df'][0]}, {lof['df'][1]}) = {lof['F']:.2f}, p = {lof['p']:.3f}" if not lof["why"]
            else f"; lack of fit not read ({lof['why']})")
    if math.isfinite(row["b_runs"]):
        text += f"; runs as units {row['b_runs']:.2f} {ci_text(row['b_ci_runs'], 2, open_end='unbounded')}"
    return text


def todo_text(runs, key, label):
    """The runs not done counted by key(run), in first-appearance order: '<label(key)> (k seed(s))' joined by ', '
    ('none' without any), e.g. '192x4 at N = 120 (1 seed), 128x4 at N = 240 (3 seeds)'."""
    counts = {}
    for r in runs:
        counts[key(r)] = counts.get(key(r), 0) + 1
    return ", ".join(f"{label(k)} ({n} seed{'s' if n > 1 else ''})" for k, n in counts.items()) or "none"


def first_crossing_text(row, key):
    """' (first crossing T)' beside a run's τ `key` where the first crossing differs from it ('' where they agree,
    both undefined included)."""
    a, b = row[key], row[f"{key}_first_crossing"]
    same = (a == b) or (a != a and b != b)
    return "" if same else f" (first crossing {fmt(b)})"
