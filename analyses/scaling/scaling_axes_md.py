"""Sections of analyses/scaling's tables beyond the parity G and N axes, each one axis of configurations against a
reference over training seeds: capacity (τ ∝ params^b), other rules against parity G = 2, the matched GPT against
the DiT. The constraint families: `families_md`; why each window is closed: `windows_md`."""
from scoreprobe.reports.study_md import curve_claims
from scoreprobe.stats import curves as C
from scoreprobe.stats.runs import axis_fit, ratio_pooled
from scoreprobe.studies.format import cells as _cells, ci_text, curve_table, fmt, select

KEYS3 = ["tau_rule", "tau_mem", "window_log10_width"]
HEAD3 = "τ_rule pooled [95% CI] (per seed) | τ_mem pooled [95% CI] (per seed) | window: log10 width"
EXPONENT_WORDS = {"below": "falls with capacity (exponent < 0)", "includes": "not resolved (CI includes 0)",
                  "above": "rises with capacity (exponent > 0)"}


def section_capacity(rows, draws, p, curves):
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
                out[f"curve_{key}_G{G}"] = C.fit_curve(list(groups.values()), xs, curves, key, "power")
        if groups:
            out[f"curve_window_G{G}"] = {f"{w}x{d}": C.window_curve(rs, curves) for (w, d), rs in groups.items()}
    lines.append("")
    for key, fit in ((k, v) for k, v in out.items() if k.startswith("fit_")):
        left = ", ".join(f"{fmt(x['x'])} params (> {fmt(x['pooled'])} at a budget of {fmt(x['budget'])})"
                         for x in fit["left_out"])
        lines.append(f"- {key[4:].replace('_G', ' at G = ')}, paper threshold: ∝ params^{fmt(fit['b'], 2)} "
                     f"{ci_text(fit['b_ci'], 2, open_end='unbounded')} over {len(fit['xs'])} sizes"
                     + (f"; censored (left out): {left}" if left else "") + (f" — {fit['note']}" if "note" in fit else ""))
    for key, head, paper in (("tau_mem", "memorization threshold", 0.1), ("tau_rule", "rule threshold", 0.9)):
        cols = [(f"exponent G = {G}", out[f"curve_{key}_G{G}"]) for G in cap["Gs"] if f"curve_{key}_G{G}" in out]
        if not cols:
            continue
        lines += ["", f"{key.replace('tau_', 'τ_')} ∝ params^b over thresholds (every seed's ln τ; sizes with a censored "
                  "seed left out):", ""]
        lines += curve_claims(head, cols, paper, 0.0, EXPONENT_WORDS, lambda label: f"{key.replace('tau_', 'τ_')} {label}")
    if "curve_window_G2" in out:
        cols = [(f"window at {size.replace('x', ' × ')}", c) for size, c in out["curve_window_G2"].items()]
        lines += ["", "The window at G = 2 over rule thresholds (memorization 0.1): open in k of 3 seeds, median log10 "
                  "width among the open ones ('≥': still open at the last checkpoint):", ""]
        lines += curve_table("rule threshold", cols, 0.9)
    return lines + ["", "- the paper: τ_rule falls and τ_mem comes earlier with capacity (exponents < 0)"], out


def section_rules(rows, draws, p, curves):
    N, w = p["rules"]["N"], p["base"]["hidden_size"]
    lines = [f"## Other rules vs parity (N = {N}, DiT width {w})", "", f"| rule | seeds | {HEAD3} | peak rule_acc |",
             "|---|---:|---|---|---|---|"]
    out, groups = {}, {}
    cands = [(f"parity G = {G}", select(rows, rule="parity", model="dit", G=G, N=N, width=w, depth=4)) for G in (2, 3)]
    cands += [(spec["name"] + (f" k = {spec['k']}" if "k" in spec else ""),
               select(rows, rule_label=spec["name"] + str(spec.get("k", "")), N=N)) for spec in p["rules"]["rules"]]
    for label, rs in cands:
        if rs:
            rs = groups[label] = sorted(rs, key=lambda r: r["seed"])
            pg, cells = _cells(rs, draws, KEYS3)
            out[label] = pg
            peaks = " / ".join(f"{r['peak_rule_acc']:.3f}" for r in rs)
            lines.append(f"| {label} | {len(rs)} | " + " | ".join(cells) + f" | {peaks} |")
    base = groups.get("parity G = 2")
    others = [k for k in groups if k != "parity G = 2"]
    if base is None or not others:
        return lines + ["", "- the paper: exact-K (a global count) is learned fast, unlike high-order parity"], out
    for key, head, paper, claim, words in (
            ("tau_rule", "rule threshold", 0.9, "τ_rule of each rule / parity G = 2",
             {"below": "learned earlier than parity G = 2", "includes": "not distinguishable from parity G = 2",
              "above": "learned later than parity G = 2"}),
            ("tau_mem", "memorization threshold", 0.1, "τ_mem of each rule / parity G = 2 (the paper: τ_mem barely "
             "depends on the rule)", {"below": "copies earlier than parity G = 2", "above": "copies later than parity "
                                      "G = 2", "includes": "consistent with the same τ_mem"})):
        cols = [(f"{k} / parity G = 2", C.ratio_curve(base, groups[k], curves, key)) for k in others]
        out[f"curve_{key}_vs_parity2"] = {k: c for k, (_, c) in zip(others, cols)}
        lines += ["", f"{claim}, over thresholds (Welch t on ln τ; censored where a seed does not reach it):", ""]
        lines += curve_claims(head, cols, paper, 1.0, words)
    return lines + ["- the paper: exact-K (a global count) is learned fast, unlike high-order parity; τ_mem barely "
                    "depends on the rule"], out


def section_gpt(rows, draws, p, curves):
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
    gpts = list(done.items())[1:] if dit else []
    for label, rs in gpts:
        r = ratio_pooled(dit, rs, draws, "abruptness")
        out[label]["abruptness_vs_dit"] = r
        verdict = "more abrupt" if r["ci"][0] > 0 else "less abrupt" if r["ci"][1] < 0 else "not distinguishable"
        lines.append(f"- abruptness {label.split(' (')[0]} − DiT = {fmt(r['difference'], 2)} {ci_text(r['ci'], 2)} "
                     f"logit per decade (Welch t): {verdict}")
    for key, head, paper in (("tau_rule", "rule threshold", 0.9), ("tau_mem", "memorization threshold", 0.1)):
        cols = [(f"{label.split(' (')[0]} / DiT", C.ratio_curve(dit, rs, curves, key)) for label, rs in gpts]
        if not cols:
            continue
        out.setdefault("curves", {})[f"{key}_vs_dit"] = {label: c for label, c in cols}
        words = {"below": "earlier than the DiT", "includes": "not distinguishable", "above": "later than the DiT"}
        lines += ["", f"{key.replace('tau_', 'τ_')} of the GPT / the DiT over thresholds (Welch t on ln τ):", ""]
        lines += curve_claims(head, cols, paper, 1.0, words)
    return lines + ["- abruptness: the least-squares slope of logit(mem_ratio) per decade of steps over the checkpoints "
                    "with at least 20 of 1000 samples on each side (docs/definitions.md); the paper: memorization "
                    "is more abrupt for the GPT"], out
