"""The data seed × training seed tables of one configuration (analyses/data_draws, markdown and JSON): its grid of
runs, the one-factor spreads of ln τ, and over a complete block the two-level split per threshold (pooled τ, the
variance components, their F tests with Holm and power, the pooled interval's coverage at the block's own
components); the numbers from `scoreprobe.stats.seed_grid`."""
import math

from scoreprobe.stats import seed_grid as S
from scoreprobe.stats import curves as C
from scoreprobe.studies.format import ci_text, fmt, pooled_cell, under_text

N_REP = 40000   # simulated blocks per readable threshold for the pooled interval's coverage


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
    """The two-level split of one complete block: pooled τ (the censored estimate beside the bound where some runs
    do not cross), the variance components, the F tests of each component = 0 per threshold and, Holm-adjusted
    over the readable thresholds, where they reject, with the power of that test after Holm; the pooled
    interval's coverage at the block's own components."""
    out.update(data_seeds=ds, training_seeds=ss)
    D, I = len(ds), len(ss)
    lines = [f"Two-level split over data seeds {ds} × training seeds {ss} (ln τ = μ + a_data + b_init + e; ANOVA "
             "estimates clipped at 0; variance of the mean (MS_data + MS_init)/(D·I), the residual counted twice, t "
             "with Satterthwaite df; its coverage at this block's estimated components is measured below each table). "
             "Cells: pooled τ [95% CI] (where some runs do not cross: the bound at the budget, and beside it the "
             "censored normal over the runs, `censored_mean`, runs as units), var_data / var_init / var_residual of "
             "ln τ (the data seed's share of the total), and the exact F tests of var_data = 0 (MS_data / MS_residual) "
             "and var_init = 0 (MS_init / MS_residual). Holm families: one per configuration, clock and component, "
             "over its readable thresholds (sizes below); not adjusted across families.", ""]
    for key, label in (("tau_rule", "rule threshold"), ("tau_mem", "memorization threshold")):
        curve = out[key] = S.two_level_curve(grid, curves, key)
        cens = out[f"censored_{key}"] = S.censored_runs(grid, curves, key)
        lines += [f"| {label} | pooled τ [95% CI] | var_data / var_init / var_residual | F test p: data / init |",
                  "|---:|---|---|---|"]
        for row in curve:
            lines.append(f"| {_threshold(row['threshold'], C.PAPER[key])} | {_pooled(row, cens.get(row['threshold']))} | "
                         f"{split_cell(row)} | {p_cell(row)} |")
        k = len([r for r in curve if not r.get("lower_bound") and not r.get("under_resolved")
                 and math.isfinite(r.get("p_data", math.nan))])
        power = S.power_line(k, D, I)
        cover = out[f"coverage_{key}"] = S.block_coverage(curve, D, I, N_REP)
        lines += [""] + [f"- {w}" for w in S.component_verdicts(curve)] + ([f"- {power}"] if power else [])
        lines += [f"- {_coverage_text(cover)}", ""] if cover else [""]
    return lines


def _pooled(row, cens):
    cell = pooled_cell(row).split(" (")[0]
    if cens is None:
        return cell
    return (f"{cell}; censored normal over runs: {fmt(cens['value'])} {ci_text(cens['ci'], 0, 'unbounded')}, "
            f"{cens['n_censored']} of {cens['n']} censored")


def _coverage_text(cover):
    vals = [c for _, c in cover]
    word = "≥ 0.95: conservative here" if min(vals) >= 0.95 else "below 0.95 somewhere: not conservative here"
    span = f"{min(vals):.3f}" if len(vals) == 1 else f"{min(vals):.3f}–{max(vals):.3f}"
    where = "its readable threshold" if len(vals) == 1 else f"its {len(vals)} readable thresholds"
    return (f"the pooled interval covers {span} at this block's estimated components at {where} ({N_REP} simulated "
            f"blocks each): {word}")


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
