"""The G factor's section of analyses/data_draws (markdown and JSON) from the readings of
`analyses.data_draws.g_factor`: the paper's threshold first, in the words of `scoreprobe.stats.verdict`, then the
curve, the coverage of every interval at this design and the censored estimates."""
import math

import numpy as np

from scoreprobe.stats import budget_trend as BT
from analyses.data_draws import g_factor as Fa
from scoreprobe.stats import curves as C
from scoreprobe.studies.format import fmt, threshold_label
from scoreprobe.stats.curves import curves_of
from scoreprobe.stats.verdict import word_at

PAPER = C.PAPER["tau_rule"]


def section(rows_by):
    """(lines, JSON-able dict) of τ_rule(G = 3) / τ_rule(G = 2) at the largest N both were run at."""
    Ns = sorted({N for G, N in rows_by if (2, N) in rows_by and (3, N) in rows_by})
    if not Ns:
        return ["## The G factor", "", "Needs G = 2 and G = 3 at one N: not run yet.", ""], {}
    N = Ns[-1]
    a_rows, b_rows = rows_by[(2, N)], rows_by[(3, N)]
    curves = curves_of(a_rows + b_rows)
    a, b = Fa.arm(a_rows, curves), Fa.arm(b_rows, curves)
    if a is None or b is None:
        return [f"## The G factor at N = {N}", "", "No complete 2 × 2 block of data seeds × training seeds in an arm "
                "yet: no interval with both components.", ""], {"N": N}
    rows = Fa.factor_rows(a, b, C.thresholds_of("tau_rule"))
    v = Fa.verdicts(rows, PAPER)
    D, I = a["ln"].shape[:2]
    regimes = Fa.regime_coverage(D, I)
    lines = intro(N, a, b, len(a_rows), len(b_rows)) + paper_lines(rows, v) + curve_lines(rows)
    lines += coverage_lines(rows, regimes, D, I) + censored_lines(rows)
    out = {"N": N, "region": list(Fa.REGION), "design": [D, I], "readings": rows, "regime_coverage": regimes,
           "verdict": {k: {"word": x.word, "sentence": x.sentence()} for k, x in v.items()}}
    return lines, out


def intro(N, a, b, n_a, n_b):
    D, I = a["ln"].shape[:2]
    return [f"## The G factor: τ_rule(G = 3) / τ_rule(G = 2) at N = {N}", "",
            f"{n_a} runs at G = 2 and {n_b} at G = 3; each arm read over its complete block of {D} data seeds × {I} "
            "training seeds, which are crossed (every training seed is run on every data seed), so the interval "
            "carries both variance components: per arm the crossed variance of the mean (MS_data + MS_init)/(D·I), "
            "the arms' variances added, t with the Satterthwaite df of the four mean squares "
            "(`scoreprobe.stats.crossed_arms.crossed_difference` on ln τ). The paper's \"≈ 10× per unit G\" is read "
            f"as the region ({Fa.REGION[0]:.3g}, {Fa.REGION[1]:.3g}) — 10/1.25 to 10·1.25, our choice of margin (docs/findings.md); the "
            "verdict words are `scoreprobe.stats.verdict.verdict`'s, the paper's threshold (0.9) read first. Where "
            "G = 3 runs do not reach a threshold within their budget the reading is a bound: G = 3's runs pooled with "
            "the censored ones at their budget, over G = 2's upper 95% CI end.", ""]


def paper_lines(rows, v):
    """The paper's threshold first: its verdict sentence, what is known there, and how the bound grows."""
    p = C.at(rows, PAPER)
    lines = [f"**Verdict on \"≈ 10× per unit G\", the paper's threshold {PAPER:g} first** — {v['claim'].sentence()}.", ""]
    if p["kind"] == "bound" and "b_bound" in p:
        lines += [f"- {p['n_censored_b']} of {p['n_runs']} G = 3 runs do not reliably exceed {PAPER:g} within "
                  f"{fmt(p['budget_b'])} steps: the factor is > {p['value']:.1f}× against G = 2's upper CI end "
                  f"({fmt(p['a_ci_end'])} steps; {_how(p)}), > {p['bound_vs_value']:.1f}× against its "
                  f"pooled value ({fmt(p['a_value'])}). " + _budget_text(p)]
    elif p["kind"] == "two-level":
        lines += [f"- the factor at {PAPER:g}: {p['value']:.2f} [{p['ci'][0]:.2f}, {p['ci'][1]:.2f}]."]
    else:
        lines += [f"- at {PAPER:g}: undefined ({p.get('why', 'no reading')})."]
    bounds = [r for r in rows if r["kind"] == "bound" and "b_bound" in r]
    if len(bounds) > 1:
        lines += ["- the bound over the thresholds where G = 3 is censored (against G = 2's upper CI end; against its "
                  "pooled value in brackets): " + ", ".join(f"> {r['value']:.2f} at {r['threshold']:g} "
                                                            f"(> {r['bound_vs_value']:.2f})" for r in bounds)
                  + ". Where some G = 3 runs cross, it bounds these runs' geometric mean, not the population's: the "
                  "censored estimate (last table) reads the latter."]
    lines += [f"- G = 3 slower than G = 2 (factor > 1): {v['slower'].sentence()}."]
    below = [r["threshold"] for r in rows if r["kind"] == "two-level" and r["ci"][1] < Fa.PAPER_FACTOR]
    if below:
        top = max(r["ci"][1] for r in rows if r["kind"] == "two-level" and r["ci"][1] < Fa.PAPER_FACTOR)
        lines += [f"- 10× itself lies above the 95% CI at {C.span(below, [r['threshold'] for r in rows])} (upper ends "
                  f"≤ {top:.2f}); the region read as \"≈ 10×\" starts at {Fa.REGION[0]:.3g}, which those CIs "
                  + ("reach." if top >= Fa.REGION[0] else "do not reach either.")]
    return lines + [""]


def _budget_text(p):
    """What a longer budget could do to the bound: grow it (runs still rising), or nothing (peaked and falling)."""
    if not p.get("falling"):
        return "A bound at the budget: it grows with the budget."
    (p0, p1), (e0, e1) = p["peak_end"]
    return (f"Not reached and falling: every G = 3 run that misses {PAPER:g} peaked ({p0:.3f}–{p1:.3f}) and fell "
            f"below it by its budget (the mean of its last checkpoints {e0:.3f}–{e1:.3f}; a fall of ≥ "
            f"{BT.MARGIN:g} counts, `scoreprobe.stats.budget_trend`): G = 3 does not learn the rule to {PAPER:g} at "
            "this N and recipe; a longer run would not decide it (N does: G = 3 at larger N below).")


def _how(r):
    return "its interval with both components" if r["interval_a"] == "two-level" else r["interval_a"]


def curve_lines(rows):
    """threshold | the factor with both components, or the bound | the claim's word | the word against 1."""
    lines = [f"| rule threshold | G = 3 / G = 2, both components [95% CI] (df) | ≈ 10× ({Fa.REGION[0]:.3g}, "
             f"{Fa.REGION[1]:.3g}) | > 1 |", "|---:|---|---|---|"]
    _, _, lo, hi, cens, fall = Fa.readings(rows)
    for r, l_, h_, c, f in zip(rows, lo, hi, cens, fall):
        words = [word_at(l_, h_, region, c, f) for region in (Fa.REGION, (1.0, math.inf))]
        lines.append(f"| {threshold_label(r['threshold'], PAPER)} | {reading_cell(r)} | {words[0]} | {words[1]} |")
    return lines + [""]


def reading_cell(r):
    if r["kind"] == "two-level":
        return f"{r['value']:.2f} [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}] ({r['df']:.1f})"
    if r["kind"] == "bound" and "b_bound" in r:
        how = "" if r["interval_a"] == "two-level" else f", {r['interval_a']}"
        return (f"> {r['value']:.2f} (G = 3: {r['n_censored_b']} of {r['n_runs']} runs censored at "
                f"{fmt(r['budget_b'])} steps, > {fmt(r['b_bound'])}; G = 2 upper CI end {fmt(r['a_ci_end'])}{how})")
    if r["kind"] == "bound":
        return f"< {r['value']:.2f} (G = 2 censored: > {fmt(r['a_bound'])}; G = 3 upper CI end {fmt(r['b_ci_end'])})"
    return f"undefined ({r['why']})"


def coverage_lines(rows, regimes, D, I):
    """The readable thresholds: components, the three intervals and their coverage at this design."""
    read = [r for r in rows if r["kind"] == "two-level"]
    if not read:
        return []
    comp = lambda c: " / ".join(f"{x:.3f}" for x in c)   # noqa: E731
    ci = lambda x: f"{x[0]:.2f} [{x[1]:.2f}, {x[2]:.2f}]"   # noqa: E731
    lines = [f"Coverage at this design ({D} × {I} per arm, each arm's estimated components, {Fa.N_REP} simulated pairs "
             "of arms per threshold), beside the two shortcuts the interval replaces:", "",
             "| rule threshold | G = 2: var_data / var_init / var_residual | G = 3: the same | coverage: both components / "
             "runs as units / data seeds as units | runs as units [95% CI] | data seeds as units [95% CI] |",
             "|---:|---|---|---|---|---|"]
    for r in read:
        c = r["coverage"]
        lines.append(f"| {r['threshold']:g} | {comp(r['components_a'])} | {comp(r['components_b'])} | "
                     f"{c['two-level']:.3f} / {c['runs as units']:.3f} / {c['data seeds as units']:.3f} | "
                     f"{ci(r['runs_as_units'])} | {ci(r['data_seeds_as_units'])} |")
    return lines + [""] + [coverage_summary(read, regimes)] + [""]


def coverage_summary(read, regimes):
    rng = lambda vals: f"{min(vals):.3f}–{max(vals):.3f}"   # noqa: E731
    both = [r["coverage"]["two-level"] for r in read]
    word = ("conservative at this design (≥ 0.95 at every readable threshold)" if min(both) >= 0.95 else
            "below 0.95 at this design: not conservative")
    names = Fa.X.INTERVALS
    over = "; ".join(f"{n} {rng([c[n] for c in regimes.values()])}" for n in names)
    return (f"- the interval with both components covers {rng(both)}: {word}. Runs as units (each run a unit, though "
            f"runs share data and training seeds) covers {rng([r['coverage']['runs as units'] for r in read])}; data "
            f"seeds as units (their training seeds are shared) {rng([r['coverage']['data seeds as units'] for r in read])}"
            f": both too narrow here, shown for comparison, never read for a verdict. Over {len(regimes)} mixes of the "
            f"components ({', '.join(regimes)}; {Fa.N_REP} pairs each): {over}.")


def censored_lines(rows):
    """Where some G = 3 runs cross: the censored-normal estimate of τ and of the factor with their coverage."""
    cens = [r for r in rows if "censored_factor" in r]
    if not cens:
        return []
    lines = ["Where some G = 3 runs cross and some do not: the censored normal over G = 3's runs (`censored_mean` on "
             "ln τ, the censored runs at their budget; runs as units: it ignores the crossing) and its factor against "
             "G = 2's crossed interval (MOVER: each side's own interval). Coverage simulated at this design: G = 3 with "
             "the fitted mean and variance split as at its last readable threshold, censored at its budget, G = 2 with "
             f"its components; {Fa.N_REP_CENSORED} replicates each (Monte Carlo SE ≤ "
             f"{math.sqrt(0.25 / Fa.N_REP_CENSORED):.3f}):", "",
             "| rule threshold | G = 3 censored | G = 3 τ_rule, censored estimate [95% CI] | factor, censored estimate "
             "[95% CI] | coverage: τ / factor (simulated censored share) |", "|---:|---:|---|---|---|"]
    for r in cens:
        e, f, c = r["censored_estimate_b"], r["censored_factor"], r.get("censored_coverage")
        cov = f"{c['mean']:.2f} / {c['difference']:.2f} ({c['censored_share']:.2f})" if c else "—"
        lines.append(f"| {r['threshold']:g} | {r['n_censored_b']} of {r['n_runs']} | {fmt(e['value'])} "
                     f"[{fmt(e['ci'][0])}, {fmt(e['ci'][1])}] | {f['value']:.2f} [{f['ci'][0]:.2f}, {fmt(f['ci'][1], 2)}] "
                     f"| {cov} |")
    sds = [r for r in cens if math.isfinite(r["sd_b"])]
    if sds:
        lines += ["", "- the censored fit's SD of ln τ: " + ", ".join(f"{r['sd_b']:.2f} at {r['threshold']:g}" for r in sds)
                  + f", against {sds[0]['sd_b_last_readable']:.2f} over G = 3's runs at its last readable threshold: the "
                  "normal model reads the runs that never cross as a wide spread; if they are plateaus rather than late "
                  "crossings, the estimate is a model's extrapolation."]
    covs = [r["censored_coverage"] for r in cens if r.get("censored_coverage")]
    if covs:
        lo = min(min(c["mean"], c["difference"]) for c in covs)
        lines += [f"- these intervals cover {lo:.2f}–{max(max(c['mean'], c['difference']) for c in covs):.2f} at this "
                  "design" + (": below the 0.93 target, so they are shown beside the bounds, not read for the verdict."
                              if lo < 0.93 else ".")]
    return lines + [""]


def cross_n_section(rows_by, rows):
    """(lines, JSON-able dict): the G factor where both arms reach the paper's threshold — G = 3 at each larger N
    (data seed 0) over G = 2 at the grid's N — and the G = 2 shift between its two grid N that the reading assumes
    away (`analyses.data_draws.g_factor_cross_n`)."""
    from analyses.data_draws import g_factor_cross_n as X
    grid = sorted(N for G, N in rows_by if G == 2 and (3, N) in rows_by)
    if not grid:
        return [], {}
    N, T = grid[-1], C.thresholds_of("tau_rule")
    a = Fa.arm(rows_by[(2, N)], curves_of(rows_by[(2, N)]))
    bigs = sorted({r["meta"]["N"] for r in rows if r["meta"]["G"] == 3 and r["meta"]["N"] > N})
    if a is None or not bigs:
        return [], {}
    out, lines = {"N": N, "factors": {}}, [f"## The G factor where both arms reach {PAPER:g}", ""]
    for Nb in bigs:
        rs = sorted([r for r in rows if r["meta"]["G"] == 3 and r["meta"]["N"] == Nb and r["meta"]["data_seed"] == 0],
                    key=lambda r: r["seed"])
        out["factors"][Nb] = X.cross_factor(np.log(C._points(rs, curves_of(rs), "tau_rule")), a["ln"], T)
        p = C.at(out["factors"][Nb], PAPER)
        lines.append(f"- τ_rule(G = 3, N = {Nb}) / τ_rule(G = 2, N = {N}) at {PAPER:g}: " + (
            f"{p['value']:.2f} [{p['ci'][0]:.2f}, {p['ci'][1]:.2f}] (G = 3: {p['n_b']} training seeds of data seed 0, "
            f"t; G = 2: its crossed block; MOVER)" if math.isfinite(p["value"]) else f"undefined ({p['why']})") + ".")
    small = [n for G, n in rows_by if G == 2 and n < N]
    if small:
        s = Fa.arm(rows_by[(2, max(small))], curves_of(rows_by[(2, max(small))]))
        shift = out["g2_shift"] = X.g2_shift(s["ln"], a["ln"], T) if s is not None else []
        out["N_small"] = max(small)
        read = [r for r in shift if r["covers_1"] is not None and r["threshold"] < PAPER]
        if read:
            held = sum(r["covers_1"] for r in read)
            lines.append(f"- It assumes G = 2's τ_rule does not move between N = {N} and the larger N (G = 2 was not "
                         f"run there). From N = {max(small)} to {N}, G = 2's τ_rule moves by a factor "
                         f"{min(r['value'] for r in read):.2f}–{max(r['value'] for r in read):.2f} at "
                         f"{C.span([r['threshold'] for r in read], T)} (95% CI ends {min(r['ci'][0] for r in read):.2f} "
                         f"to {max(r['ci'][1] for r in read):.2f}; both components), its interval holding 1 at {held} "
                         f"of {len(read)} thresholds" + (": no shift resolved there." if held == len(read) else
                                                          ": the assumption does not hold at every threshold."))
    lines.append("- A factor across N reads G and N together, and the budget (views per image) makes the larger N "
                 "train longer: it is not the per-unit-G factor at one N, shown beside that verdict, never for it.")
    return lines + [""], out
