"""The markdown of a ladder of rules against a reference family at one N and model (analyses/exactk_ladder:
exact-K k = 3, 9, 18 against parity G = 2, 3, 4): the chance levels at initialisation, the count error of exact-K
(analyses.exactk_ladder.count_error), pooled τ per rule over thresholds, and the ratios of τ between rules with a bound
from the budget where a ratio is censored (analyses.exactk_ladder.ratio_bounds). Configurations are keyed by their
label ('exact-K k = 18', 'parity G = 3')."""
from scoreprobe.probes.counts import TOP
from analyses.exactk_ladder import count_error as K
from scoreprobe.stats import curves as C
from analyses.exactk_ladder.ratio_bounds import bounded_ratio_curve
from scoreprobe.studies.format import ci_text, curve_cell, curve_table, fmt, threshold_label


def section_chance(by):
    """The chance levels of every configuration ({label: rows with rule_spec, n_train, curve, n_samples,
    step0_states}) beside the measured accuracy at step 0: (lines, {label: {"chance", "step0"}})."""
    lines = ["## Chance levels at initialisation", "",
             "Chance = the exact accuracy of uniformly random bits, n_valid / 2^36 (Fraction arithmetic; "
             "`scoreprobe.probes.counts.chance_accuracy`). Measured = rule_acc at step 0 with the Clopper–Pearson "
             "95% interval, per training seed in brackets. The untrained DiT's output is zero (adaLN-Zero), so its "
             "PF-ODE samples keep the signs of their starting noise: uniformly random bits, the same in every "
             "training seed (then the interval is that of one seed's n samples, not of the seeds pooled). "
             "Copies by chance = N / n_valid: the mem_ratio of a perfect generalizer (uniform over the valid "
             "images), which hits a training image by chance; a memorization threshold at or below it is no "
             "evidence of copying.", "",
             "| rule | chance (exact) | chance ≈ | measured at step 0 [95% CI] (per seed) | measured vs chance "
             "| copies by chance (N / n_valid) |",
             "|---|---|---:|---|---|---:|"]
    out = {}
    for label, rs in by.items():
        ch = K.chance(rs[0]["rule_spec"], rs[0]["n_train"])
        m = K.step0(rs, ch["value"])
        out[label] = {"chance": ch, "step0": m}
        meas = "no step-0 checkpoint" if m is None else (
            f"{m['pooled']:.4f} [{m['ci'][0]:.4f}, {m['ci'][1]:.4f}] ("
            + " / ".join(f"{v:.3f}" for v in m["per_seed"]) + f"; n = {m['n']}"
            + (", the same samples in every seed" if m["identical"] and len(rs) > 1 else "") + ")")
        lines.append(f"| {label} | {ch['formula']} | {ch['value']:.4g} | {meas} | "
                     f"{'—' if m is None else m['relation']} | {ch['copies']['value']:.3g} |")
    return lines + [""], out


def _share_cells(share, top, nf):
    return " | ".join(f"{v:.3f}" for v in [*share, top, nf])


def section_counts(by):
    """The count error of every exact-K configuration of `by` (rows with "counts", stats.count_error.run_counts)
    at selected checkpoints, chance first: (lines, {label: {"chance", "pooled"}})."""
    heads = " | ".join(f"error {e}" for e in range(TOP))
    lines = ["## Count error of exact-K: |Σ bits − k| per checkpoint", "",
             "Over the samples of a checkpoint (the same starting noises at every step): mean |Σ − k| over the "
             "finite samples (mean over training seeds, t 95% interval over them, clipped at 0) and the share of all "
             f"samples with error 0 (= exact accuracy), 1, 2, ≥ {TOP}, and non-finite (the shares add up to 1; means "
             "over the seeds). First row: uniformly random bits (Σ ~ Binomial(36, 1/2)), exact. Checkpoints: step 0, "
             "the first after it, every 4th, the last and the peak of rule_acc.", ""]
    out = {}
    for label, rs in by.items():
        if rs[0]["meta"]["rule"] != "exactk":
            continue
        pooled = K.pooled_counts(rs)
        ch = K.chance(rs[0]["rule_spec"], rs[0]["n_train"])["count_error"]
        out[label] = {"chance": ch, "pooled": pooled}
        lines += [f"### {label}", ""]
        if pooled is None:
            lines += ["No export with Σ bits yet (an export of version 1 stands in for τ only).", ""]
            continue
        no = [r["run"] for r in rs if not r.get("counts")]
        lines += [f"Training seeds {pooled['seeds']}, data seed 0" + (f"; without Σ bits: {', '.join(no)}" if no else "")
                  + ". Error 0 equals rule_acc (the rule's own check) at every checkpoint of every run: "
                  + ("yes" if pooled["share0_is_rule_acc"] else "**NO**") + ".", "",
                  f"| step | mean abs error [95% CI] | {heads} | error ≥ {TOP} | non-finite |",
                  "|---:|---|" + "---:|" * (TOP + 2),
                  f"| chance | {ch['mean_abs']:.3f} | {_share_cells(ch['share'], ch['share_top'], 0.0)} |"]
        for row in pooled["rows"]:
            ci = "" if len(pooled["seeds"]) < 2 else " " + ci_text(row["mean_abs_ci"], 3)
            lines.append(f"| {row['step']} | {fmt(row['mean_abs'], 3)}{ci} | "
                         f"{_share_cells(row['share'], row['share_top'], row['share_not_finite'])} |")
        lines.append("")
    return lines, out


def section_taus(by, curves):
    """Pooled τ_rule and τ_mem of every configuration of `by` ({label: rows}) over thresholds: (lines, curves)."""
    lines = ["## τ per rule over thresholds", "", "Pooled over training seeds (geometric mean, t 95% interval on "
             "ln τ); '> x at a budget of T steps': some seed does not reach the threshold (a lower bound).", ""]
    out = {}
    if not by:
        return lines + ["No run exported yet.", ""], out
    for key, head in (("tau_rule", "rule threshold"), ("tau_mem", "memorization threshold")):
        cols = [(label, C.pooled_curve(rs, curves, key)) for label, rs in by.items()]
        out[key] = dict(cols)
        lines += curve_table(head, cols, C.PAPER[key])
        lines.append("")
    return lines, out


def section_ratios(by, curves):
    """τ_rule(exact-K k) / τ_rule(parity G) for every pair (`by`: {label: rows}, labels 'exact-K k = …' and
    'parity G = …'); within the ladder k / 18; τ_mem vs parity G = 2; a bound from the budget where censored."""
    ks = [lb for lb in by if lb.startswith("exact-K")]
    Gs = [lb for lb in by if lb.startswith("parity")]
    lines = ["## Exact-K against parity at the same N and model", "",
             "τ_rule(exact-K k) / τ_rule(parity G) over rule thresholds (Welch t on ln τ over the training seeds; "
             "censored where a seed of either does not reach the threshold; '<' / '>': a bound where one side "
             "reaches the threshold in every seed and the other in none, from the unreached runs' budget, no "
             "interval).", ""]
    out = {"exactk_over_parity": {}, "ladder": {}, "tau_mem": {}}
    if not ks or not Gs:
        return lines + ["Needs an exact-K and a parity configuration: not run yet.", ""], out
    bullets = []
    for k in ks:
        cols = [(g, bounded_ratio_curve(by[g], by[k], curves, "tau_rule")) for g in Gs]
        out["exactk_over_parity"][k] = {f"{k} / {g}": c for g, c in cols}
        lines += [f"### {k}", ""] + bounded_table("rule threshold", [(f"{k} / {g}", c) for g, c in cols],
                                                  C.PAPER["tau_rule"]) + [""]
        bullets += [_verdict(k, g, c) for g, c in cols]
    lines += ["Verdicts over thresholds:", ""] + bullets + [""]
    top = next((k for k in ks if k.endswith("k = 18")), None)
    if top and len(ks) > 1:
        cols = [(k, bounded_ratio_curve(by[top], by[k], curves, "tau_rule")) for k in ks if k != top]
        out["ladder"] = {f"{k} / {top}": c for k, c in cols}
        lines += ["### Within the ladder: τ_rule(k) / τ_rule(k = 18)", ""]
        lines += bounded_table("rule threshold", [(f"{k} / {top}", c) for k, c in cols], C.PAPER["tau_rule"])
        lines += [""] + [_verdict(k, top, c) for k, c in cols] + [""]
    ref = next((g for g in Gs if g.endswith("G = 2")), None)
    if ref and len(by) > 1:
        cols = [(f"{lb} / {ref}", bounded_ratio_curve(by[ref], by[lb], curves, "tau_mem")) for lb in by if lb != ref]
        out["tau_mem"] = dict(cols)
        lines += [f"### τ_mem of every rule / {ref} (the paper: τ_mem barely depends on the rule)", ""]
        lines += bounded_table("memorization threshold", cols, C.PAPER["tau_mem"]) + [""]
        lines += _chance_copy_notes(by, C.THRESHOLDS["tau_mem"])
    return lines, out


def _chance_copy_notes(by, thresholds):
    """One line per rule whose chance copy share N / n_valid reaches a memorization threshold."""
    lines = []
    for label, rs in by.items():
        c = K.chance(rs[0]["rule_spec"], rs[0]["n_train"])["copies"]["value"]
        low = ", ".join(f"{t:g}" for t in thresholds if t <= c)
        if low:
            lines.append(f"- {label}: a perfect generalizer copies {c:.3f} of its samples by chance "
                         f"(N / n_valid), so its τ_mem at {low} "
                         "is no evidence of copying; only the thresholds above it are.")
    return lines + ([""] if lines else [])


def _verdict(b, a, curve):
    """'- b / a: range; verdict over thresholds; bounds' of a ratio curve b / a of τ_rule."""
    words = {"below": f"{b} learned earlier (CI below 1)", "includes": "not distinguishable (CI includes 1)",
             "above": f"{b} learned later (CI above 1)"}
    return f"- {b} / {a}: {C.range_text(curve)}; {C.robust(curve, 1.0, words)}{_bound_text(curve, a, b)}"


def bounded_table(head, columns, paper):
    """curve_table whose censored cells with a bound read '< 0.12 (bound …)'."""
    def cell(row):
        b = row.get("bound")
        return f"{b['side']} {b['value']:.2f} (bound: one side reaches in no seed)" if b else curve_cell(row)
    lines = [f"| {head} | " + " | ".join(label for label, _ in columns) + " |", "|---:|" + "---|" * len(columns)]
    for j, row in enumerate(columns[0][1]):
        lines.append(f"| {threshold_label(row['threshold'], paper)} | " + " | ".join(cell(c[j]) for _, c in columns)
                     + " |")
    return lines


def _bound_text(curve, a, b):
    """'; b learned earlier (bound: …) at 0.5–0.95 (…)' for the thresholds of `curve` (b / a) with a bound."""
    sides = {"<": [], ">": []}
    for row in curve:
        if row.get("bound"):
            sides[row["bound"]["side"]].append(row["threshold"])
    grid = [row["threshold"] for row in curve]
    words = {"<": f"{b} learned earlier (bound: every {b} seed reaches it, no {a} seed does)",
             ">": f"{b} learned later (bound: every {a} seed reaches it, no {b} seed does)"}
    return "".join(f"; {words[s]} at {C.span(ts, grid)}" for s, ts in sides.items() if ts)
