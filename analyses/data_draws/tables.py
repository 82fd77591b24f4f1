"""The tables of analyses/data_draws (markdown and JSON) and its figure, from the exports only."""
import math

from analyses.scaling import presets
from analyses.data_draws import grid as grid_mod
from analyses.data_draws import stats as S
from analyses.scaling import curves as C
from analyses.scaling import format as F
from analyses.scaling.format import ci_text, curve_table, fmt, pooled_cell, under_text
from analyses.scaling.stats import run_stats
from analyses.scaling.tables import curves_of
from scoreprobe.probes.seeds import pool_seeds

PAPER_FACTOR = 10.0   # the paper's ≈ 10× in τ_rule per unit of G


def collect(args, runs):
    """rows (per run, scaling's run_stats), missing {run: why} of the planned runs, each from its own folder."""
    return presets.collect(runs, lambda run: grid_mod.export_folder(args.results, args.preset, run),
                           lambda run, info: run_stats(run.name, run, info)[0])


def grid_lines(G, N, rows):
    """Data seed (rows) × training seed (columns) of one configuration: 'τ_rule / τ_mem' per run."""
    ds, ss, cells = S.grid_of(rows)
    lines = ["| data seed \\ training seed | " + " | ".join(f"s{s}" for s in ss) + " |", "|---|" + "---|" * len(ss)]
    for d in ds:
        cell = [f"{_tau(cells[(d, s)], 'tau_rule')} / {_tau(cells[(d, s)], 'tau_mem')}" if (d, s) in cells else "not run"
                for s in ss]
        lines.append(f"| d{d} | " + " | ".join(cell) + " |")
    return lines


def _tau(row, key):
    v = row[key]
    return fmt(v) if math.isfinite(v) else f"> {row['steps']}"


def split_cell(row):
    if row.get("lower_bound") or row.get("under_resolved") or "var_data" not in row:
        return "— (a run censored)" if row.get("lower_bound") else under_text(row) if row.get("under_resolved") else "—"
    return (f"{row['var_data']:.3f} / {row['var_init']:.3f} / {row['var_residual']:.3f} "
            f"(data {100 * S.data_share(row):.0f}%)")


def section_config(G, N, rows, curves):
    """One configuration: its grid, and τ_rule, τ_mem over thresholds with the two-level split."""
    lines = [f"## Parity G = {G}, N = {N}", "", "τ_rule / τ_mem at the paper's thresholds (0.9, 0.1) per run "
             "('> T': not reached by the last checkpoint T):", ""] + grid_lines(G, N, rows) + [""]
    out = {"runs": [r["run"] for r in rows]}
    lines += spread_lines(rows, curves, out)
    block = S.complete_grid(rows)
    if block is None:
        return lines + ["No complete 2 × 2 block of data seeds × training seeds yet: no two-level split.", ""], out
    return lines + two_level_lines(*block, curves, out), out


def two_level_lines(ds, ss, grid, curves, out):
    """The two-level split of one complete block: pooled τ, the variance components, the F tests of
    each component = 0 per threshold and, Holm-adjusted over the readable thresholds, where they reject."""
    out.update(data_seeds=ds, training_seeds=ss)
    lines = [f"Two-level split over data seeds {ds} × training seeds {ss} (ln τ = μ + a_data + b_init + e; ANOVA "
             "estimates clipped at 0; variance of the mean (MS_data + MS_init)/(D·I), conservative, t with "
             "Satterthwaite df: 0.92–0.99 coverage at 3 × 2 and 3 × 3 in simulation). Cells: pooled τ [95% CI], "
             "var_data / var_init / var_residual of ln τ (the data seed's share of the total), and the exact F "
             "tests of var_data = 0 (MS_data / MS_residual) and var_init = 0 (MS_init / MS_residual).", ""]
    for key, label in (("tau_rule", "rule threshold"), ("tau_mem", "memorization threshold")):
        curve = out[key] = S.two_level_curve(grid, curves, key)
        lines += [f"| {label} | pooled τ [95% CI] | var_data / var_init / var_residual | F test p: data / init |",
                  "|---:|---|---|---|"]
        for row in curve:
            lines.append(f"| {_threshold(row['threshold'], C.PAPER[key])} | {pooled_cell(row).split(' (')[0]} | "
                         f"{split_cell(row)} | {p_cell(row)} |")
        lines += [""] + [f"- {w}" for w in S.component_verdicts(curve)] + [""]
    return lines


def p_cell(row):
    if row.get("lower_bound") or row.get("under_resolved") or "p_data" not in row:
        return "—"
    return f"{row['p_data']:.3f} / {row['p_init']:.3f}"


def spread_lines(rows, curves, out):
    """The one-factor spreads of ln τ (data seeds at a fixed training seed vs training seeds at a fixed data seed)."""
    lines = ["Spread of ln τ across data seeds (same training seed) and across training seeds (same data seed): "
             "pooled variances with their degrees of freedom, and their ratio with its 95% F interval (> 1: the "
             "data draw moves τ more than the initialisation; a run censored at a threshold leaves its group out "
             "there).", ""]
    for key, label in (("tau_rule", "rule threshold"), ("tau_mem", "memorization threshold")):
        rows_k = out[f"spread_{key}"] = S.one_factor_spreads(rows, curves, key)
        lines += [f"| {label} | across data seeds: var (df) | across training seeds: var (df) | ratio [95% CI] |",
                  "|---:|---|---|---|"]
        for r in rows_k:
            ratio = "—" if not math.isfinite(r["ratio"]) else f"{r['ratio']:.2f} {ci_text(r['ratio_ci'], 2, 'unbounded')}"
            lines.append(f"| {_threshold(r['threshold'], C.PAPER[key])} | {_var(r['data_var'], r['data_df'])} | "
                         f"{_var(r['init_var'], r['init_df'])} | {ratio} |")
        lines.append("")
    return lines


def _var(v, df):
    return "—" if not df else f"{v:.4f} ({df})"


def _threshold(t, paper):
    return f"**{t:g}**" if abs(t - paper) < 1e-9 else f"{t:g}"


def section_factor(rows_by, p):
    """τ_rule(G = 3) / τ_rule(G = 2) at the largest common N, over thresholds, runs or data seeds as units."""
    Ns = sorted({N for G, N in rows_by if (2, N) in rows_by and (3, N) in rows_by})
    if not Ns:
        return ["## The G factor", "", "Needs G = 2 and G = 3 at one N: not run yet.", ""], {}
    N = Ns[-1]
    a, b = rows_by[(2, N)], rows_by[(3, N)]
    curves = curves_of(a + b)
    by_run, by_data = S.factor_curves(a, b, curves)
    words = {"below": f"below the paper's ≈ {PAPER_FACTOR:g}× (CI below)", "includes": f"consistent with "
             f"≈ {PAPER_FACTOR:g}×", "above": f"above {PAPER_FACTOR:g}×"}
    lines = [f"## The G factor: τ_rule(G = 3) / τ_rule(G = 2) at N = {N}", "",
             f"{len(a)} runs at G = 2 and {len(b)} at G = 3 (data seeds × training seeds). Two units: every run "
             "(Welch t on ln τ over runs; too narrow when runs of one data seed are alike) and every data seed (the "
             "mean ln τ over its training seeds; Welch t over data seeds, the conservative interval). A threshold "
             "some run does not reach is censored (no ratio).", ""]
    lines += curve_table("rule threshold", [("runs as units", by_run), ("data seeds as units", by_data)], 0.9)
    lines += ["", f"- runs as units: {C.robust(by_run, PAPER_FACTOR, words)}; factor {C.range_text(by_run)}.",
              f"- data seeds as units: {C.robust(by_data, PAPER_FACTOR, words)}; factor {C.range_text(by_data)}.",
              f"- against 1 (no G effect), data seeds as units: "
              f"{C.robust(by_data, 1.0, {'below': 'G = 3 faster', 'includes': 'CI includes 1', 'above': 'G = 3 slower'})}.", ""]
    return lines, {"N": N, "by_run": by_run, "by_data": by_data}


def section_large_N(rows, p):
    """G = 3 across N at data seed 0: does a larger N let it reach the rule reliably?"""
    Ns = sorted({N for G, N in p["large_N"]} | {N for G, N in p["configs"] if G == 3})
    groups = {N: sorted([r for r in rows if r["meta"]["G"] == 3 and r["meta"]["N"] == N and r["meta"]["data_seed"] == 0],
                        key=lambda r: r["seed"]) for N in Ns}
    groups = {N: rs for N, rs in groups.items() if rs}
    lines = ["## G = 3 at larger N (data seed 0)", "", "Does a larger N let G = 3 reach the rule reliably? (the paper "
             "reports it for large G at large N.) Budgets: the recipe's 12 000 views per image.", "",
             "| N | seeds | steps | τ_rule pooled [95% CI] (per seed) | peak rule_acc (per seed) | τ_mem pooled (per seed) "
             "| window |", "|---:|---:|---:|---|---|---|---|"]
    out = {}
    for N, rs in groups.items():
        pr, pm = (pool_seeds([r[k] for r in rs], last_steps=[float(r["steps"]) for r in rs]) for k in ("tau_rule", "tau_mem"))
        out[N] = {"tau_rule": pr, "tau_mem": pm, "rule_curve": C.pooled_curve(rs, curves_of(rs), "tau_rule")}
        peaks = " / ".join(f"{r['peak_rule_acc']:.3f}" for r in rs)
        status = "; ".join(f"s{r['seed']}: {r['window_status']}" for r in rs)
        lines.append(f"| {N} | {len(rs)} | {rs[0]['steps']} | {pooled_cell(pr)} | {peaks} | {pooled_cell(pm)} | {status} |")
    if len(groups) >= 2:
        lines += ["", "τ_rule over rule thresholds, pooled over seeds per N (a bound where a seed does not reach it):", ""]
        lines += curve_table("rule threshold", [(f"N = {N}", out[N]["rule_curve"]) for N in groups], 0.9)
    missing = [N for N in Ns if N not in groups]
    if missing:
        lines += ["", f"No export yet (not run, or still training): N = {', '.join(map(str, missing))}."]
    return lines + [""], out


def section_runs(rows, missing):
    return F.runs_section(rows, missing, [F.RUN, F.DATA_SEED, F.TRAINING_SEED, F.STEPS, F.tau_col("tau_rule"),
                                          F.tau_col("tau_mem"), F.WINDOW, F.PEAK, F.FINAL_MEM, F.TRAIN_S])


def report(args, runs):
    """(markdown, JSON-able report) of every table."""
    p = grid_mod.PRESETS[args.preset]
    rows, missing = collect(args, runs)
    rows_by = {(G, N): [r for r in rows if (r["meta"]["G"], r["meta"]["N"]) == (G, N)] for G, N in p["configs"]}
    rows_by = {k: v for k, v in rows_by.items() if v}
    cmd = "python analyses/data_draws" + ("" if args.preset == "cpu" else f" --preset {args.preset}") + " --from-results"
    lines = [f"# Data draws × training seeds (preset {args.preset})", "",
             f"Regenerate: `{cmd}` (from the .npz exports only). {len(rows)} of {len(runs)} planned runs done. "
             "Each run is the scaling study's parity run (two_clocks' recipe) with its data seed (which draws the N "
             "training images and the held-out set) and its training seed (weights, minibatches, noise) named "
             "apart; data seed 0 is the scaling run itself. τ in training steps, reliably exceeds (definitions "
             "version 6, docs/definitions.md), over rule thresholds 0.3–0.95 and memorization thresholds "
             "0.01–0.2 (the paper's 0.9 and 0.1 in bold).", ""]
    rep = {"preset": args.preset, "n_planned": len(runs), "missing": missing, "configs": {}}
    for (G, N), rs in rows_by.items():
        text, rep["configs"][f"g{G}-n{N}"] = section_config(G, N, rs, curves_of(rs))
        lines += text
    text, rep["factor"] = section_factor(rows_by, p)
    lines += text
    text, rep["large_N"] = section_large_N(rows, p)
    lines += text + section_runs(rows, missing)
    rep["runs"] = [{k: v for k, v in r.items() if k not in ("curve", "curves")} for r in rows]
    return "\n".join(lines) + "\n", rep, rows_by


def write_all(args, runs):
    """Write <results>/data_draws_<preset>.md, .json and .png; returns the .md path."""
    from analyses.data_draws.figures import figure
    text, rep, rows_by = report(args, runs)
    stem = presets.write_report(args.results, f"data_draws_{args.preset}", text, rep)
    figure(rows_by, stem.with_suffix(".png"))
    return stem.with_suffix(".md")
