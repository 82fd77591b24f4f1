"""The tables of analyses/scaling (markdown and JSON), from the exports only: the parity G and N axes here (τ_rule
against G, τ_mem and τ_rule against N), the other axes from scoreprobe.reports (scaling_axes_md: capacity, other
rules, the matched GPT; families_md: the puzzles' constraint families; windows_md: why a window is closed); the
figures (analyses.scaling.figures) from the same numbers."""
import math

from analyses.scaling import grid as scaling_grid
from analyses.scaling import families_md, scaling_axes_md as sec, windows_md
from scoreprobe.reports.study_md import curve_claims, header
from scoreprobe.stats import curves as C
from scoreprobe.stats.censored_slopes import censored_slope_curve
from scoreprobe.stats.curves import curves_of
from scoreprobe.stats.runs import axis_fit
from scoreprobe.studies import format as F
from scoreprobe.studies.format import cells as _cells, ci_text, curve_table, fmt, select, statuses as _statuses
from scoreprobe.studies.presets import collect_with_draws, write_tables
from analyses.scaling.figures import figures


def section_runs(rows, missing):
    intro = ("τ as the paper defines it (reliably exceeds, definitions version 6) with the sample-level 95% CI; in "
             "brackets after it, the first crossing where it differs.")
    return F.runs_section(rows, missing, [
        F.RUN, F.col("params", lambda r: f"{r['params']:,}"), F.STEPS,
        F.tau_col("tau_rule", lambda r: F.first_crossing_text(r, "tau_rule")),
        F.tau_col("tau_mem", lambda r: F.first_crossing_text(r, "tau_mem")),
        F.WINDOW, F.PEAK, F.FINAL_MEM, F.TRAIN_S], intro)


def section_G(rows, draws, p, curves):
    ax = p["G_axis"]
    groups = {G: select(rows, rule="parity", model="dit", G=G, N=ax["N"], width=p["base"]["hidden_size"])
              for G in ax["Gs"]}
    groups = {G: sorted(rs, key=lambda r: r["seed"]) for G, rs in groups.items() if rs}
    lines = [f"## τ_rule vs G (parity, N = {ax['N']})", "", "| G | seeds | τ_rule pooled [95% CI] (per seed) | "
             "peak rule_acc (per seed) | window |", "|---:|---:|---|---|---|"]
    out = {"per_G": {}}
    for G, rs in groups.items():
        pg, cells = _cells(rs, draws, ["tau_rule"])
        out["per_G"][G] = pg["tau_rule"]
        peaks = " / ".join(f"{r['peak_rule_acc']:.3f}" for r in rs)
        lines.append(f"| {G} | {len(rs)} | {cells[0]} | {peaks} | {_statuses(rs)} |")
    if len(groups) < 2:
        return lines, out
    fit = axis_fit(list(groups.values()), list(groups), draws, "tau_rule", "exp")
    out["fit"] = fit
    lines += [""] + _lower_bounds(groups, fit, out, out["per_G"])
    Gs = list(groups)
    out["curve_factor"] = C.fit_curve(list(groups.values()), Gs, curves, "tau_rule", "exp")
    out["curve_pooled"] = {G: C.pooled_curve(rs, curves, "tau_rule") for G, rs in groups.items()}
    cols = [(f"τ_rule G = {G}", out["curve_pooled"][G]) for G in Gs] + [("factor per unit G (fit over G)",
                                                                         out["curve_factor"])]
    verdict = C.robust(out["curve_factor"], 10.0, {"below": "the paper's ≈ 10× per unit of G is excluded (CI below 10)",
                                                   "includes": "consistent with ≈ 10×", "above": "above 10×"})
    lines += ["", "τ_rule over rule thresholds (pooled over seeds; factor: ln τ_rule = c + G ln f by least squares "
              "over every seed, t interval; a G with a censored seed is left out, so at most thresholds it is G = 2 → 3):", ""]
    lines += curve_table("rule threshold", cols, 0.9)
    lines += ["", f"- per-unit-G factor over thresholds: {C.range_text(out['curve_factor'])}; {verdict}"]
    return lines, out


def _lower_bounds(groups, fit, out, per_G):
    """G values left out at 0.9 (some seed censored): the lower bound on τ_rule and on the factor from the last
    reached G — against its pooled value and, the bound a referee can use, against its upper CI end — both bounds
    of the budget (they grow with it), with each seed's extrapolation."""
    lines, reached = [], {int(x): v for x, v in zip(fit["xs"], fit["pooled"])}
    for lo in fit["left_out"]:
        G = int(lo["x"])
        prev = max((g for g in reached if g < G), default=None)
        ext = [r.get("tau_rule_extrapolated") for r in groups[G]]
        ext_text = ", ".join(f"s{r['seed']}: {fmt(e['tau'])}" if e else f"s{r['seed']}: not rising"
                             for r, e in zip(groups[G], ext) if not math.isfinite(r["tau_rule"] or math.nan))
        bound = lo["pooled"] / reached[prev] if prev is not None else None
        hi = per_G[prev]["ci"][1] if prev is not None else math.nan
        bound_ci = lo["pooled"] / hi if math.isfinite(hi) else None
        out.setdefault("lower_bounds", {})[G] = {"tau_rule_above": lo["pooled"], "factor_above": bound,
                                                 "factor_above_vs_ci_end": bound_ci, "vs_G": prev,
                                                 "budget": lo["budget"], "extrapolated": ext}
        lines.append(f"- G = {G} at 0.9: τ_rule > {fmt(lo['pooled'])} at a budget of {fmt(lo['budget'])} steps "
                     f"(censored seeds at their last step; the bound grows with the budget and carries no CI)"
                     + (f", so τ_rule(G={G}) / τ_rule(G={prev}) > {fmt(bound, 1)}× per {G - prev} unit(s) of G at "
                        f"this budget against G = {prev}'s pooled value" if bound else "")
                     + (f" (> {fmt(bound_ci, 1)}× against its upper 95% CI end {fmt(hi)})" if bound_ci else "") + (f"; trend extrapolated from the last checkpoints' "
                                                           f"logit(rule_acc) vs log step: {ext_text}" if ext_text else ""))
    return lines


def section_N(rows, draws, p, curves):
    ax, w = p["N_axis"], p["base"]["hidden_size"]
    lines, out = [f"## τ_mem and τ_rule vs N (parity, G = {ax['G']}; G = 3 at N = "
                  f"{', '.join(map(str, ax['G3_Ns'])) or '—'})", "", "| G | N | seeds | τ_mem pooled [95% CI] "
                  "(per seed) | τ_rule pooled [95% CI] (per seed) | window |", "|---:|---:|---:|---|---|---|"], {}
    by_G = {}
    for G, Ns in ((ax["G"], ax["Ns"]), (3, ax["G3_Ns"])):
        groups = {N: sorted(select(rows, rule="parity", model="dit", G=G, N=N, width=w), key=lambda r: r["seed"])
                  for N in Ns}
        groups = by_G[G] = {N: rs for N, rs in groups.items() if rs}
        for N, rs in groups.items():
            pg, cells = _cells(rs, draws, ["tau_mem", "tau_rule"])
            out.setdefault(f"G{G}", {})[N] = pg
            lines.append(f"| {G} | {N} | {len(rs)} | {cells[0]} | {cells[1]} | {_statuses(rs)} |")
        if len(groups) >= 2:
            out[f"fit_mem_G{G}"] = axis_fit(list(groups.values()), list(groups), draws, "tau_mem", "power")
            out[f"fit_mem_G{G}"]["seeds_per_x"] = [len(rs) for rs in groups.values()]
    lines += [""] + _fit_lines(out.get(f"fit_mem_G{ax['G']}"), ax["G"])
    lines += _mem_curve(by_G[ax["G"]], curves, out) + _invariance_lines(out, by_G, curves)
    return lines, out


B_WORDS = {"above": "steeper than the paper's 1.14", "includes": "consistent with 1.14", "below": "shallower than 1.14"}
B_LINES = {"b (censored N left out)": "b over thresholds, censored N left out",
           "b (every run kept)": "b over thresholds, every run kept"}


def _mem_curve(groups, curves, out):
    """b over memorization thresholds two ways: an N with a censored seed left out (`fit_curve`), and every run kept,
    censored at its budget (`censored_slope_curve`, the method of analyses/capacity_exponent)."""
    if len(groups) < 2:
        return []
    c = out["curve_b"] = C.fit_curve(list(groups.values()), list(groups), curves, "tau_mem", "power")
    kept = out["curve_b_censored"] = censored_slope_curve([r for rs in groups.values() for r in rs], curves,
                                                          [N for N, rs in groups.items() for _ in rs])
    return ["", "τ_mem = a·N^b over memorization thresholds (every seed's ln τ_mem, t interval on b; an N with a "
            "censored seed left out), and with every run kept, a run that does not reach the threshold censored at "
            "its budget (`censored_fit`, the method of analyses/capacity_exponent):", ""] + \
        curve_claims("memorization threshold", [("b (censored N left out)", c), ("b (every run kept)", kept)], 0.1, 1.14,
                     B_WORDS, B_LINES.get)


def _fit_lines(fit, G):
    if fit is None:
        return [f"- τ_mem = a·N^b at G = {G}: fewer than two N done"]
    left = ", ".join(f"N = {fmt(x['x'])} (> {fmt(x['pooled'])} at a budget of {fmt(x['budget'])})" for x in fit["left_out"])
    return [f"- τ_mem = a·N^b at G = {G}, threshold 0.1: a = {fmt(fit['a'], 2)}, b = {fmt(fit['b'], 2)} "
            f"{ci_text(fit['b_ci'], 2, open_end='unbounded')} ({fit['method']}; {fit['n_points']} runs; N = "
            f"{', '.join(fmt(x) for x in fit['xs'])})" + (f"; left out, memorization not reached by every seed: {left}"
                                                          if left else "")
            + (f" — {fit['note']}" if "note" in fit else ""), "- the paper's reference DiT: τ_mem ≈ 35·N^1.14"]


def _invariance_lines(out, groups_by_G, curves):
    """τ_rule across N: the ratio of each N against the largest, over rule thresholds (Welch t on ln τ_rule,
    censored where a seed does not reach the threshold), and the N where 0.9 is never reached (peaks)."""
    lines = []
    for G, groups in groups_by_G.items():
        per = out.get(f"G{G}", {})
        for N in [N for N in per if per[N]["tau_rule"]["lower_bound"]]:
            peaks = " / ".join(f"{r['peak_rule_acc']:.3f}" for r in groups[N])
            lines.append(f"- G = {G}, N = {N}: rule accuracy does not reliably exceed 0.9 in every seed (peaks {peaks})")
        Ns = sorted(groups)
        if len(Ns) < 2:
            continue
        top = Ns[-1]
        cols = [(f"τ_rule(N = {N}) / τ_rule(N = {top})", C.ratio_curve(groups[top], groups[N], curves, "tau_rule"))
                for N in Ns[:-1]]
        out[f"curve_rule_N_G{G}"] = {N: c for N, (_, c) in zip(Ns[:-1], cols)}
        lines += ["", f"τ_rule across N at G = {G} over rule thresholds (Welch t on ln τ_rule):", ""]
        lines += curve_table("rule threshold", cols, 0.9) + [""]
        for N, (_, c) in zip(Ns[:-1], cols):
            words = {"includes": "consistent with invariance", "below": f"earlier at N = {N}",
                     "above": f"later at N = {N}"}
            lines.append(f"- G = {G}, N = {N} vs {top}: ratio {C.range_text(c)}; {C.robust(c, 1.0, words)}")
    return lines


def report(args, runs):
    """(markdown text, JSON-able report) of every table, from the exports in args.exports."""
    p = scaling_grid.PRESETS[args.preset]
    rows, draws, missing = collect_with_draws(runs, args.exports)
    curves = curves_of(rows)
    lines = header("Scaling of the two clocks", "scaling", args, len(rows), len(runs), (
             "τ in training steps, read as the paper defines it: the step from which the curve *reliably* exceeds "
             "its threshold (the 95% Wilson lower bound at or above it at two consecutive checkpoints; definitions "
             "version 6, docs/definitions.md). Pooled = geometric mean over seeds (abruptness: arithmetic); "
             "**95% CIs: t interval on ln τ over the seeds (S − 1 df)**, whose coverage is measured by simulation "
             "(0.95 at S = 3 and 5, tests/test_intervals.py; the hierarchical bootstrap used before covered ≈ 0.80 "
             "at S = 3); ratios between configurations: Welch t on ln τ; fits: least squares over every seed's "
             "ln τ, t interval on the slope; one run's CI: percentile bootstrap over its sample indices, resampled "
             "jointly across checkpoints. A seed that never reaches a threshold is censored at its budget: where "
             "some seeds of a configuration cross and some do not, the pooled value is the censored normal (Tobit) "
             "estimate with its profile interval ('censored fit', `scoreprobe.stats.censored.censored_mean`; at 3 "
             "runs with one censored it is wide, and its coverage where defined is 0.95 in simulation, "
             "docs/definitions.md) beside the bound '> x at a budget of T steps' (censored seeds at their last step; "
             "it grows with the budget); where none crosses, only the bound. Ratios and fits do not take a censored "
             "value as a number (`pool_ratio` NaN, `seed_fit` leaves the x out); a factor bounded at the paper's "
             "threshold is given against the other arm's upper CI end. Window widths: open in k of S seeds and the "
             "median among the open ones (a closed window is not a width of 0). Every claim is read at the paper's "
             "threshold first (0.9 and 0.1, in bold), then over the range (rule 0.3–0.95, memorization 0.01–0.2); "
             "'robust' only where one reading holds at every readable threshold including the paper's. The verdict "
             "words of each claim: docs/findings.md (`python analyses/findings`)."), source=f"{args.exports}/*.npz")
    report = {"preset": args.preset, "n_planned": len(runs), "missing": missing}
    sections = [("G", lambda: section_G(rows, draws, p, curves)), ("N", lambda: section_N(rows, draws, p, curves)),
                ("capacity", lambda: sec.section_capacity(rows, draws, p, curves)),
                ("rules", lambda: sec.section_rules(rows, draws, p, curves)),
                ("puzzles", lambda: families_md.section_puzzles(rows, draws, p, curves)),
                ("gpt", lambda: sec.section_gpt(rows, draws, p, curves)), ("windows", lambda: windows_md.section_windows(rows))]
    for name, make in sections:
        if name in args.only or name == "windows":
            text, report[name] = make()
            lines += text + [""]
    lines += section_runs(rows, missing)
    report["runs"] = rows
    return "\n".join(lines) + "\n", report


def write_all(args, runs):
    """Write <results>/scaling_<preset>.md, .json and the figures; returns the .md path."""
    text, rep = report(args, runs)
    return write_tables(args.results, f"scaling_{args.preset}", text, rep,
                        lambda png: figures(rep, args, png.with_suffix("")))
