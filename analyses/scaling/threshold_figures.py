"""One threshold-curve figure per claim of the scaling study (issue 35), drawn with
`scoreprobe.viz.thresholds.panel` from the report of tables.py (the exports only)."""
from scoreprobe.viz import new_figure
from scoreprobe.viz.common import save_figure
from scoreprobe.viz.thresholds import panel

RULE_X, MEM_X = "rule-accuracy threshold", "memorization threshold"


def claims(rep):
    """{name: [(curves, ref, paper, xlabel, ylabel, title, log)]} of the claims with curves in the report."""
    out = {}
    g, n, cap = rep.get("G", {}), rep.get("N", {}), rep.get("capacity", {})
    if "curve_factor" in g:
        out["G"] = [([("G = 2 → 3 (fit over G)", g["curve_factor"])], 10.0, 0.9, RULE_X, "τ_rule factor per unit G",
                     "τ_rule grows ×10 per unit G? (grey: 10)", True)]
    if "curve_b" in n:
        out["N"] = [([(f"N = {k} / 240", c) for k, c in n.get("curve_rule_N_G2", {}).items()], 1.0, 0.9, RULE_X,
                     "τ_rule ratio", "τ_rule invariant to N? (G = 2; grey: 1)", True),
                    ([("b", n["curve_b"])], 1.14, 0.1, MEM_X, "exponent b of τ_mem ∝ N^b",
                     "τ_mem ∝ N^1.14? (G = 2; grey: 1.14)", False)]
    if any(k.startswith("curve_") for k in cap):
        out["capacity"] = [([(f"G = {G}", cap[f"curve_{key}_G{G}"]) for G in (2, 3) if f"curve_{key}_G{G}" in cap],
                            0.0, paper, x, f"exponent of {key.replace('tau_', 'τ_')} ∝ params^b",
                            f"{key.replace('tau_', 'τ_')} falls with capacity? (grey: 0)", False)
                           for key, paper, x in (("tau_rule", 0.9, RULE_X), ("tau_mem", 0.1, MEM_X))]
    rules = rep.get("rules", {})
    if "curve_tau_rule_vs_parity2" in rules:
        out["rules"] = [(list(rules["curve_tau_rule_vs_parity2"].items()), 1.0, 0.9, RULE_X, "τ_rule / parity G = 2",
                         "exact-K learned fast? (grey: 1)", True),
                        (list(rules["curve_tau_mem_vs_parity2"].items()), 1.0, 0.1, MEM_X, "τ_mem / parity G = 2",
                         "τ_mem invariant to the rule? (grey: 1)", True)]
    puzzles = [(k, v["curve_rows_over_columns"]) for k, v in rep.get("puzzles", {}).items()
               if isinstance(v, dict) and "curve_rows_over_columns" in v]
    if puzzles:
        out["puzzles"] = [(puzzles, 1.0, 0.9, "family-accuracy threshold", "τ_rows / τ_columns (within runs)",
                           "rows before columns? (grey: 1)", True)]
    gc = rep.get("gpt", {}).get("curves", {})
    if gc:
        out["gpt"] = [(list(gc[f"{key}_vs_dit"].items()), 1.0, paper, x, f"{key.replace('tau_', 'τ_')} GPT / DiT",
                       f"GPT {key.replace('tau_', 'τ_')} earlier than the DiT's? (grey: 1)", True)
                      for key, paper, x in (("tau_rule", 0.9, RULE_X), ("tau_mem", 0.1, MEM_X)) if f"{key}_vs_dit" in gc]
    return out


def threshold_figures(rep, stem):
    """Write <stem>_thresholds_<claim>.png for every claim; returns the paths."""
    paths = []
    for name, panels in claims(rep).items():
        fig = new_figure((5.5 * len(panels), 4.2))
        axes = fig.subplots(1, len(panels), squeeze=False)[0]
        for ax, spec in zip(axes, panels):
            curves, ref, paper, xlabel, ylabel, title, log = spec
            panel(ax, curves, ref, paper, xlabel, ylabel, title, log)
        fig.suptitle("seed-level 95% CIs (t on ln τ; fits: t on the slope); ×: a seed censored at that threshold",
                     fontsize=8)
        path = stem.with_name(f"{stem.name}_thresholds_{name}.png")
        save_figure(fig, path, dpi=100)
        paths.append(path)
    return paths
