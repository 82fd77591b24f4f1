"""Markdown tables of single runs' clocks with their bootstrap CIs (`sp.clocks` attrs: τ_rule, τ_novel, τ_mem with
"<key>_ci", the window): a sweep of runs with its G ratios and N power law, models side by
side, and samplers against Heun."""
import json
import math
from pathlib import Path

from scoreprobe.atomic import atomic_write_text
from scoreprobe.stats.paired_states import paired


def _fmt(v, digits=0):
    return "—" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.{digits}f}"


def tau_cell(r, key):
    """'2426 [2136, 2759]' of a run's τ `key` ('—' not reached; an open upper end 'not reached')."""
    ci = r.get(key + "_ci")
    text = _fmt(r[key])
    if ci and r[key] is not None and math.isfinite(r[key]):
        text += f" [{_fmt(ci[0])}, {'not reached' if ci[1] is None or not math.isfinite(ci[1]) else _fmt(ci[1])}]"
    return text


def tau_text(v, ci):
    """'2426 [2136, 2759]', every undefined value 'not reached' (the value and either end)."""
    def one(x):
        return "not reached" if x is None or not math.isfinite(x) else f"{x:.0f}"
    return one(v) + (f" [{one(ci[0])}, {one(ci[1])}]" if ci else "")


def window_cell(r):
    """'2426–27005: 1.05 [0.93, 1.10]' (step intervals, '+' still open at the end; log10 width [CI]) or 'closed'."""
    if not r["window_open"]:
        return "closed"
    spans = " ∪ ".join(f"{_fmt(lo)}–{_fmt(hi)}" for lo, hi in r["window_intervals"])
    ci = r.get("window_log10_width_ci") or [math.nan, math.nan]
    return f"{spans}{'+' if r['window_hi_censored'] else ''}: {r['window_log10_width']:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]"


def sweep_table(rows):
    """One row per run (G, N, steps, τ with CIs, the window, accuracies), then the under-resolved crossings."""
    lines = ["| run | G | N | steps | τ_rule | τ_novel | τ_mem | window: steps, log10 width | peak rule_acc "
             "| final rule_acc | final mem |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['run']} | {r['G']} | {r['N']} | {r['steps']} | {tau_cell(r, 'tau_rule')} | "
                     f"{tau_cell(r, 'tau_novel')} | {tau_cell(r, 'tau_mem')} | {window_cell(r)} | "
                     f"{r['peak_rule_acc']:.3f} | {r['final_rule_acc']:.3f} | {r['final_mem_ratio']:.3f} |")
    return lines + ["", "— = not reached within the run. Under-resolved crossings (no checkpoint within a factor 1.5): "
                    + (", ".join(f"{r['run']} {k}" for r in rows for k in r["under_resolved"]) or "none") + ".", ""]


def ratio_lines(ratios, N_fixed):
    """'## τ_rule vs G' bullets of scoreprobe.stats.run_ci_fits.g_ratio."""
    lines = [f"## τ_rule vs G (N = {N_fixed})", ""]
    for key, v in ratios.items():
        if "ratio" in v:
            upper = f"{v['ci'][1]:.1f}" if math.isfinite(v["ci"][1]) else "unbounded: the larger G is not reached in some resamples"
            lines.append(f"- τ_rule {key} = {v['ratio']:.1f}× [95% CI {v['ci'][0]:.1f}, {upper}]")
        else:
            ext = "" if v["extrapolated"] is None else (
                f"; extrapolating the logit of rule_acc linearly in log step: {v['extrapolated']:.0f}× "
                f"[{v['extrapolated_ci'][0]:.0f}, {v['extrapolated_ci'][1]:.0f}]")
            lines.append(f"- τ_rule {key} > {v['ratio_above']:.1f}× (the larger G not reached in the run){ext}")
    return lines + (["- no ratio: τ_rule not reached at the smaller G"] if not ratios else [])


def fit_lines(f, G_fixed):
    """'## τ_mem vs N' bullets of scoreprobe.stats.run_ci_fits.mem_fit, the paper's reference last."""
    lines = [f"## τ_mem vs N (G = {G_fixed})", ""]
    if "error" in f:
        return lines + [f"- no fit: {f['error']}"]
    lines.append(f"- τ_mem = a·N^b: a = {f['a']:.3g}, b = {f['b']:.2f}, 95% CI of b [{f['b_ci'][0]:.2f}, "
                 f"{f['b_ci'][1]:.2f}] (t-interval of the log-log fit, {f['n']} runs, r² = {f['r2']:.3f})")
    lof = f.get("lack_of_fit")
    if lof and not lof["why"]:
        lo, hi = f["b_ci_means"]
        lines.append(f"- lack of fit (replicate runs per N): F({lof['df'][0]}, {lof['df'][1]}) = {lof['F']:.2f}, p = "
                     f"{lof['p']:.3f}; b with the per-N means as units (each N's deviation from the line in its error, "
                     f"t on {lof['K'] - 2} df): [{lo:.2f}, {hi:.2f}]")
    elif lof:
        lines.append(f"- lack of fit not read ({lof['why']}): the interval above assumes ln τ_mem is linear in ln N")
    if "b_ci_measurement" in f:
        lo, hi = f["b_ci_measurement"]
        lines.append(f"- b from measurement noise alone (each τ_mem redrawn within its CI): [{lo:.2f}, {hi:.2f}]")
    return lines + ["- the paper's reference DiT: τ_mem ≈ 35·N^1.14"]


def models_table(rows):
    """One row per model (params, τ with CIs, the window, τ_mem in views), then the under-resolved crossings."""
    lines = ["| model | params | τ_rule | τ_novel | τ_mem | window (steps) | log10 width | τ_mem in views | peak rule_acc "
             "| final mem |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [tau_text(r[k], r[k + "_ci"]) for k in ("tau_rule", "tau_novel", "tau_mem")]
        window = " ∪ ".join(f"{lo:.0f}–{hi:.0f}" for lo, hi in r["window_intervals"]) or "closed"
        views = tau_text(r["tau_mem"] * r["views_per_step"], None) if r["tau_mem"] is not None else "—"
        lines.append(f"| {r['model']} | {r['params'] / 1e6:.2f}M | {' | '.join(cells)} | {window} | {r['window_log10_width']:.2f} | {views} "
                     f"| {r['peak_rule_acc']:.3f} | {r['final_mem_ratio']:.3f} |")
    under = [f"{r['model']} {k}" for r in rows for k in r["under_resolved"]]
    return lines + ["", "Under-resolved crossings: " + (", ".join(under) or "none") + "."]


def sampler_table(rows, label_of):
    """One row per sampler (label_of(row["sampler_fields"])), paired with the "heun" row when there is one."""
    base = next((r for r in rows if r["label"] == "heun"), None)
    out = ["| sampler | τ_rule [95% CI] | τ_mem [95% CI] | window, log10 width | peak rule_acc | final rule_acc |"
           " final mem_ratio | Δ final mem_ratio vs Heun (paired s.e.) | final states changed vs Heun |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        width = f"{r['window_log10_width']:.2f}" if r["window_open"] else "closed"
        cells = [label_of(r["sampler_fields"]), tau_text(r["tau_rule"], r["tau_rule_ci"]),
                 tau_text(r["tau_mem"], r["tau_mem_ci"]), width, f"{r['peak_rule_acc']:.3f}",
                 f"{r['final_rule_acc']:.3f}", f"{r['final_mem_ratio']:.3f}"]
        if base is None:
            cells += ["–", "–"]
        else:
            changed, delta, se = paired(r, base)
            cells += [f"{delta:+.3f} ({se:.3f})", f"{changed:.3f}"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def write_rows(path, meta, rows, table):
    """{**meta, "rows": rows} as JSON at `path` and the markdown `table` beside it (.md); returns `table`."""
    atomic_write_text(path, json.dumps({**meta, "rows": rows}, indent=1, default=float) + "\n")
    atomic_write_text(path.with_suffix(".md"), table + "\n")
    return table


def read_rows(path):
    """{label: row} of a JSON that write_rows wrote ({} when there is none yet)."""
    return {r["label"]: r for r in json.loads(Path(path).read_text())["rows"]} if Path(path).exists() else {}
