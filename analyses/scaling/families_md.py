"""Constraint families of a puzzle rule (Sudoku, Latin squares: rows, columns, boxes, cells) over training seeds
(analyses/scaling): τ of each family at 0.9 pooled over the seeds, the order of rows and columns (per-seed ratios,
bounds where a family is censored, the share of resamples in which rows reach 0.9 first: `stats.runs.family_order`)
and τ_rows / τ_columns within each run over thresholds (`stats.curves.paired_curve`)."""
import math

from scoreprobe.stats import curves as C
from scoreprobe.stats.runs import family_order, pooled
from scoreprobe.studies.format import curve_table, fmt, pooled_cell, select


def section_puzzles(rows, draws, p, curves):
    N = p["puzzles"]["N"]
    lines, out = [f"## Sudoku 4×4 and Latin 4×4: constraint families (N = {N})", ""], {}
    for spec in p["puzzles"]["rules"]:
        rs = sorted(select(rows, rule_label=spec["name"] + str(spec["n"]), N=N), key=lambda r: r["seed"])
        if not rs:
            continue
        if "families" not in rs[0]:
            lines += [f"- {spec['name']}: no family variables in the export (clocks without families)", ""]
            continue
        fams = rs[0]["family_names"]
        res = {f: pooled(rs, draws, f"tau_family:{f}") for f in fams}
        res["all (τ_rule)"] = pooled(rs, draws, "tau_rule")
        lines += [f"### {spec['name']} {spec['n']}×{spec['n']} ({len(rs)} seeds)", "",
                  "| family | τ at 0.9 pooled [95% CI] (per seed) |", "|---|---|"]
        lines += [f"| {f} | {pooled_cell(v)} |" for f, v in res.items()]
        order = family_order(rs, draws) if {"rows", "columns"} <= set(fams) else None
        out[spec["name"]] = {"families": res, "rows<columns": order}
        if order and order["n_reached"] == 0:
            lines += ["", "- rows before columns: not decidable at 0.9, no seed reaches 0.9 in rows or in columns"]
        elif order:
            lines += ["", order_line(order, rs)]
        if order:
            c = out[spec["name"]]["curve_rows_over_columns"] = C.paired_curve(rs, curves, "tau_family:rows",
                                                                              "tau_family:columns")
            words = {"below": "rows first", "above": "columns first", "includes": "no order resolved"}
            lines += ["", "τ_rows / τ_columns within each run, over thresholds (t interval over the seeds' ln ratios; "
                      "censored where a seed does not reach both):", ""]
            lines += curve_table("family threshold", [("τ_rows / τ_columns", c)], 0.9)
            lines += ["", f"- rows vs columns: {C.range_text(c)}; {C.robust(c, 1.0, words)}; per seed at each "
                      "threshold in the JSON"]
        lines.append("")
    return lines, out


def order_line(order, rs):
    """The rows-before-columns line at 0.9: per-seed ratios (a censored family makes that seed's ratio a bound at
    the run's last step), a pooled ratio only when every seed reaches both (a bound never enters a mean), and the
    share of each seed's resamples in which rows reach 0.9 first."""
    per = " / ".join("—" if not math.isfinite(v) else f"{b} {fmt(v, 2)}".strip()
                     for v, b in zip(order["per_seed"], order["per_seed_bound"]))
    censored = ", ".join(f"s{r['seed']}" for r, b in zip(rs, order["per_seed_bound"]) if b)
    share = " / ".join(fmt(s, 2) for s in order["per_seed_share_first"])
    pooled = (f"pooled {fmt(order['pooled'], 2)}" if not censored and order["n_reached"] == order["n_seeds"]
              else f"no pooled ratio: a family is censored by the {fmt(float(rs[0]['steps']))}-step budget in {censored}")
    return (f"- rows before columns at 0.9: τ_rows / τ_columns per seed {per} ({pooled}); share of each seed's "
            f"resamples in which rows reach 0.9 first: {share}")
