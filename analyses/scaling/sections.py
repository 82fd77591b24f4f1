"""Sections of the scaling tables beyond the parity G and N axes: capacity, other rules, Sudoku / Latin
constraint families, the matched GPT, and why each window is closed."""
import math

from analyses.scaling.stats import axis_fit, by_group, family_order, pooled, ratio_pooled
from analyses.scaling.format import cells as _cells, ci_text, fmt, pooled_cell, select, statuses as _statuses

KEYS3 = ["tau_rule", "tau_mem", "window_log10_width"]
HEAD3 = "τ_rule pooled [95% CI] (per seed) | τ_mem pooled [95% CI] (per seed) | window log10 width (per seed)"


def section_capacity(rows, draws, p):
    cap = p["capacity"]
    lines = [f"## Capacity (parity, N = {cap['N']})", "", f"| G | DiT width × depth | parameters | seeds | {HEAD3} |",
             "|---:|---|---:|---:|---|---|---|"]
    out = {}
    for G in cap["Gs"]:
        groups = {}
        for w, d in cap["sizes"]:
            rs = sorted(select(rows, rule="parity", model="dit", G=G, N=cap["N"], width=w, depth=d),
                        key=lambda r: r["seed"])
            if rs:
                groups[(w, d)] = rs
        for (w, d), rs in groups.items():
            pg, cells = _cells(rs, draws, KEYS3)
            out.setdefault(f"G{G}", {})[f"{w}x{d}"] = {"params": rs[0]["params"], **pg}
            lines.append(f"| {G} | {w} × {d} | {rs[0]['params']:,} | {len(rs)} | " + " | ".join(cells) + " |")
        if len(groups) >= 2:
            xs = [rs[0]["params"] for rs in groups.values()]
            for key in ("tau_rule", "tau_mem"):
                out[f"fit_{key}_G{G}"] = axis_fit(list(groups.values()), xs, draws, key, "power")
    lines.append("")
    for key, fit in ((k, v) for k, v in out.items() if k.startswith("fit_")):
        left = ", ".join(f"{fmt(x['x'])} params (> {fmt(x['pooled'])})" for x in fit["left_out"])
        lines.append(f"- {key[4:].replace('_G', ' at G = ')}: ∝ params^{fmt(fit['b'], 2)} {ci_text(fit['b_ci'], 2, open_end='unbounded')} "
                     f"over {len(fit['xs'])} sizes" + (f"; not reached by every seed: {left}" if left else "")
                     + (f" — {fit['note']}" if "note" in fit else ""))
    return lines + ["- the paper: τ_rule falls and τ_mem comes earlier with capacity (exponents < 0)"], out


def section_windows(rows):
    lines = ["## Why a window is closed", "", "| configuration | per seed |", "|---|---|"]
    for g, rs in by_group(rows).items():
        lines.append(f"| {g} | {_statuses(rs)} |")
    return lines, {g: [r["window_status"] for r in rs] for g, rs in by_group(rows).items()}


def section_rules(rows, draws, p):
    N, w = p["rules"]["N"], p["base"]["hidden_size"]
    lines = [f"## Other rules vs parity (N = {N}, DiT width {w})", "", f"| rule | seeds | {HEAD3} | peak rule_acc |",
             "|---|---:|---|---|---|---|"]
    out = {}
    cands = [(f"parity G = {G}", select(rows, rule="parity", model="dit", G=G, N=N, width=w, depth=4)) for G in (2, 3)]
    cands += [(spec["name"] + (f" k = {spec['k']}" if "k" in spec else ""),
               select(rows, rule_label=spec["name"] + str(spec.get("k", "")), N=N)) for spec in p["rules"]["rules"]]
    for label, rs in cands:
        if rs:
            rs = sorted(rs, key=lambda r: r["seed"])
            pg, cells = _cells(rs, draws, KEYS3)
            out[label] = pg
            peaks = " / ".join(f"{r['peak_rule_acc']:.3f}" for r in rs)
            lines.append(f"| {label} | {len(rs)} | " + " | ".join(cells) + f" | {peaks} |")
    return lines + ["", "- the paper: exact-K (a global count) is learned fast, unlike high-order parity"], out


def section_puzzles(rows, draws, p):
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
                  "| family | τ pooled [95% CI] (per seed) |", "|---|---|"]
        lines += [f"| {f} | {pooled_cell(v)} |" for f, v in res.items()]
        order = family_order(rs, draws) if {"rows", "columns"} <= set(fams) else None
        out[spec["name"]] = {"families": res, "rows<columns": order}
        if order and order["n_reached"] == 0:
            lines += ["", "- rows before columns: not decidable, no seed reaches 0.9 in rows or in columns"]
        elif order:
            lines += ["", order_line(order, rs)]
        lines.append("")
    return lines, out


def order_line(order, rs):
    """The rows-before-columns line: per-seed ratios (a censored family as a bound), the pooled ratio, and
    the share of resamples in which rows reach 0.9 first, per seed and pooled over seeds."""
    per = " / ".join("—" if not math.isfinite(v) else f"{b} {fmt(v, 2)}".strip()
                     for v, b in zip(order["per_seed"], order["per_seed_bound"]))
    head = {"": "", "<": "< ", ">": "> ", "mixed": "(bounds both ways) "}[order["bound"]] + fmt(order["pooled"], 2)
    censored = ", ".join(f"s{r['seed']}" for r, b in zip(rs, order["per_seed_bound"]) if b)
    note = f"; a family not reached by the last step counts at it ({censored}), so that seed's ratio is a bound" \
        if censored else ""
    share = " / ".join(fmt(s, 2) for s in order["per_seed_share_first"])
    ci = [-math.inf if order["ci"][0] <= 0 else order["ci"][0], order["ci"][1]]   # a ratio of 0: unbounded below
    return (f"- rows before columns: τ_rows / τ_columns = {head} {ci_text(ci, 2, 'unbounded')} "
            f"(per seed {per}{note}); share of resamples in which rows reach 0.9 first: "
            f"{fmt(order['share_first'], 2)} {ci_text(order['share_ci'], 2)} pooled over seeds (per seed {share})")


def section_gpt(rows, draws, p):
    g = p["gpt"]
    lines = [f"## GPT vs DiT on the same data (parity G = {g['G']}, N = {g['N']})", "",
             f"| model | parameters | seeds | {HEAD3} | abruptness (logit per decade) pooled [95% CI] (per seed) |",
             "|---|---:|---:|---|---|---|---|"]
    out = {}
    cands = [("DiT (PF-ODE)", select(rows, rule="parity", model="dit", G=g["G"], N=g["N"],
                                     width=p["base"]["hidden_size"], depth=4))]
    cands += [(f"GPT {o} order (ancestral)", select(rows, model="gpt", token_order=o, N=g["N"])) for o in g["orders"]]
    done = {label: sorted(rs, key=lambda r: r["seed"]) for label, rs in cands if rs}
    for label, rs in done.items():
        pg, cells = _cells(rs, draws, KEYS3 + ["abruptness"])
        out[label] = {"params": rs[0]["params"], **pg, "runs": [r["run"] for r in rs]}
        lines.append(f"| {label} | {rs[0]['params']:,} | {len(rs)} | " + " | ".join(cells) + " |")
    lines.append("")
    dit = done.get(cands[0][0])
    for label, rs in list(done.items())[1:] if dit else []:
        r = ratio_pooled(dit, rs, draws, "abruptness")
        out[label]["abruptness_vs_dit"] = r
        verdict = "more abrupt" if r["ci"][0] > 0 else "less abrupt" if r["ci"][1] < 0 else "not distinguishable"
        lines.append(f"- abruptness {label.split(' (')[0]} − DiT = {fmt(r['difference'], 2)} {ci_text(r['ci'], 2)} "
                     f"logit per decade: {verdict}")
    return lines + ["- abruptness: the least-squares slope of logit(mem_ratio) per decade of steps over the checkpoints "
                    "with at least 20 of 1000 samples on each side (docs/definitions.md); the paper: memorization "
                    "is more abrupt for the GPT"], out
