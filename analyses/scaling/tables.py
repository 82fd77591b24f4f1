"""The tables of analyses/scaling (markdown and JSON), from the exports only; the figures are drawn by
figures.py from the same numbers."""
import json
import math

from analyses.scaling import grid as scaling_grid
from analyses.scaling import sections as sec
from analyses.scaling.export import load_exports
from analyses.scaling.figures import figures
from analyses.scaling.format import cells as _cells, ci_text, fmt, pooled_cell, select, statuses as _statuses
from analyses.scaling.stats import axis_fit, ratio_pooled, run_stats
from scoreprobe.store import normalize_config


def collect(runs, folder):
    """rows (per run, JSON-able), draws {run: {key: (point, draws)}}, missing {run: why} of the planned runs."""
    done, missing = load_exports(runs, folder)
    rows, draws = [], {}
    for run in runs:
        if run.name in done:
            row, d = run_stats(run.name, run, done[run.name])
            rows.append(row)
            draws[run.name] = d
    return rows, draws, missing


def section_runs(rows, missing):
    lines = ["## Runs", "", "| run | params | steps | τ_rule [95% CI] | τ_mem [95% CI] | window | peak rule_acc "
             "| final mem | train s |", "|---|---:|---:|---|---|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['run']} | {r['params']:,} | {r['steps']} | {fmt(r['tau_rule'])} {ci_text(r['tau_rule_ci'])} "
                     f"| {fmt(r['tau_mem'])} {ci_text(r['tau_mem_ci'])} | {r['window_status']} | {r['peak_rule_acc']:.3f} "
                     f"| {r['final_mem_ratio']:.3f} | {fmt(r['train_s'])} |")
    lines += ["", "Not done: " + (", ".join(f"{k} ({v})" for k, v in missing.items()) or "none") + "."]
    return lines


def section_G(rows, draws, p):
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
    if len(groups) >= 2:
        fit = axis_fit(list(groups.values()), list(groups), draws, "tau_rule", "exp")
        out["fit"] = fit
        lines += ["", f"- per-unit-G factor (ln τ_rule = c + G ln f over G = {', '.join(fmt(x) for x in fit['xs'])}, "
                  f"every seed reached): f = {fmt(fit['factor'], 2)}× {ci_text(fit['factor_ci'], 2)} "
                  f"({_seed_note([len(rs) for rs in groups.values()], 'G')}); the paper: ≈ 10×"
                  + (f" — {fit['note']}" if "note" in fit else "")]
        lines += _lower_bounds(groups, fit, out)
    return lines, out


def _lower_bounds(groups, fit, out):
    """G values left out (some seed unreached): the lower bound on τ_rule and on the factor from the last
    reached G, with each seed's extrapolation."""
    lines, reached = [], {int(x): v for x, v in zip(fit["xs"], fit["pooled"])}
    for lo in fit["left_out"]:
        G = int(lo["x"])
        prev = max((g for g in reached if g < G), default=None)
        ext = [r.get("tau_rule_extrapolated") for r in groups[G]]
        ext_text = ", ".join(f"s{r['seed']}: {fmt(e['tau'])}" if e else f"s{r['seed']}: not rising"
                             for r, e in zip(groups[G], ext) if not math.isfinite(r["tau_rule"] or math.nan))
        bound = lo["pooled"] / reached[prev] if prev is not None else None
        out.setdefault("lower_bounds", {})[G] = {"tau_rule_above": lo["pooled"], "factor_above": bound,
                                                 "vs_G": prev, "extrapolated": ext}
        lines.append(f"- G = {G}: τ_rule not reached by every seed: τ_rule > {fmt(lo['pooled'])} (pooled, unreached "
                     f"seeds at their last step)" + (f", so τ_rule(G={G}) / τ_rule(G={prev}) > {fmt(bound, 1)}× "
                     f"per {G - prev} unit(s) of G" if bound else "") + (f"; trend extrapolated from the last "
                     f"checkpoints' logit(rule_acc) vs log step: {ext_text}" if ext_text else ""))
    return lines


def section_N(rows, draws, p):
    ax, w = p["N_axis"], p["base"]["hidden_size"]
    lines, out = [f"## τ_mem and τ_rule vs N (parity, G = {ax['G']}; G = 3 at N = "
                  f"{', '.join(map(str, ax['G3_Ns'])) or '—'})", "", "| G | N | seeds | τ_mem pooled [95% CI] "
                  "(per seed) | τ_rule pooled [95% CI] (per seed) | window |", "|---:|---:|---:|---|---|---|"], {}
    by_G = {}
    for G, Ns in ((ax["G"], ax["Ns"]), (3, ax["G3_Ns"])):
        groups = by_G[G] = {N: sorted(select(rows, rule="parity", model="dit", G=G, N=N, width=w), key=lambda r: r["seed"])
                  for N in Ns}
        groups = {N: rs for N, rs in groups.items() if rs}
        for N, rs in groups.items():
            pg, cells = _cells(rs, draws, ["tau_mem", "tau_rule"])
            out.setdefault(f"G{G}", {})[N] = pg
            lines.append(f"| {G} | {N} | {len(rs)} | {cells[0]} | {cells[1]} | {_statuses(rs)} |")
        if len(groups) >= 2:
            out[f"fit_mem_G{G}"] = axis_fit(list(groups.values()), list(groups), draws, "tau_mem", "power")
            out[f"fit_mem_G{G}"]["seeds_per_x"] = [len(rs) for rs in groups.values()]
    lines += [""] + _fit_lines(out.get(f"fit_mem_G{ax['G']}"), ax["G"]) + _invariance_lines(out, by_G, draws)
    return lines, out


def _fit_lines(fit, G):
    if fit is None:
        return [f"- τ_mem = a·N^b at G = {G}: fewer than two N done"]
    left = ", ".join(f"N = {fmt(x['x'])} (> {fmt(x['pooled'])})" for x in fit["left_out"])
    return [f"- τ_mem = a·N^b at G = {G}: a = {fmt(fit['a'], 2)}, b = {fmt(fit['b'], 2)} {ci_text(fit['b_ci'], 2, open_end='unbounded')} "
            f"({_seed_note(fit.get('seeds_per_x'))}; N = {', '.join(fmt(x) for x in fit['xs'])})"
            + (f"; left out, memorization not reached by every seed: {left}" if left else "")
            + (f" — {fit['note']}" if "note" in fit else ""), "- the paper's reference DiT: τ_mem ≈ 35·N^1.14"]


def _seed_note(seeds, axis="N"):
    """How much seed variance a fit's CI holds: none while every x has one training seed."""
    if not seeds or max(seeds) <= 1:
        return f"95% CI over samples only: one training seed per {axis} so far, no seed variance in it yet"
    return f"95% CI, hierarchical bootstrap over seeds and samples; seeds per {axis}: {', '.join(map(str, seeds))}"


def _invariance_lines(out, groups_by_G, draws):
    """τ_rule across N at each G: the ratio between the smallest and largest N where every seed reached it (CI
    from the hierarchical replicates), and the N where it is never reached (peaks): the invariance claim."""
    lines = []
    for G, groups in groups_by_G.items():
        per = out.get(f"G{G}", {})
        reached = [N for N in per if not per[N]["tau_rule"]["lower_bound"]]
        never = [N for N in per if per[N]["tau_rule"]["lower_bound"]]
        for N in never:
            peaks = " / ".join(f"{r['peak_rule_acc']:.3f}" for r in groups[N])
            lines.append(f"- G = {G}, N = {N}: rule accuracy does not reach 0.9 in every seed (peaks {peaks}; "
                         f"τ_mem {pooled_cell(per[N]['tau_mem'])})")
        if len(reached) >= 2:
            lo, hi = min(reached), max(reached)
            r = ratio_pooled(groups[lo], groups[hi], draws, "tau_rule")
            out[f"rule_N_G{G}"] = r
            finite = all(math.isfinite(v) for v in r["ci"])
            verdict = ("not decidable: the CI is open" if not finite else "consistent with invariance"
                       if r["ci"][0] <= 1 <= r["ci"][1] else "τ_rule changes with N")
            lines.append(f"- τ_rule(N = {hi}) / τ_rule(N = {lo}) at G = {G}: {fmt(r['ratio'], 2)} "
                         f"{ci_text(r['ci'], 2)}: {verdict}")
        if never and reached and min(never) < max(reached):
            lines.append(f"- G = {G}: τ_rule is reached at N = {', '.join(map(str, sorted(reached)))} but not at N = "
                         f"{', '.join(map(str, sorted(never)))}: whether the rule is learned before memorization "
                         "depends on N here, against \"τ_rule is largely invariant to N\"")
    return lines


def report(args, runs):
    """(markdown text, JSON-able report) of every table, from the exports in args.exports."""
    p = scaling_grid.PRESETS[args.preset]
    rows, draws, missing = collect(runs, args.exports)
    cmd = "python analyses/scaling" + ("" if args.preset == "cpu" else f" --preset {args.preset}") + " --from-results"
    lines = [f"# Scaling of the two clocks (preset {args.preset})", "",
             f"Regenerate: `{cmd}` (from {args.exports}/*.npz only). {len(rows)} of {len(runs)} planned runs done. "
             "τ in training steps; pooled = geometric mean over seeds (window width, abruptness: arithmetic); "
             "95% CIs from a hierarchical bootstrap (seeds with replacement, then samples within checkpoints; "
             "docs/definitions.md); '> x': some seed did not reach the threshold, x is a lower bound; "
             "'not reached' as a CI end: more than 2.5% of the replicates never reach it.", ""]
    report = {"preset": args.preset, "n_planned": len(runs), "missing": missing}
    sections = [("G", lambda: section_G(rows, draws, p)), ("N", lambda: section_N(rows, draws, p)),
                ("capacity", lambda: sec.section_capacity(rows, draws, p)),
                ("rules", lambda: sec.section_rules(rows, draws, p)),
                ("puzzles", lambda: sec.section_puzzles(rows, draws, p)),
                ("gpt", lambda: sec.section_gpt(rows, draws, p)), ("windows", lambda: sec.section_windows(rows))]
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
    stem = args.results / f"scaling_{args.preset}"
    stem.with_suffix(".md").write_text(text)
    stem.with_suffix(".json").write_text(json.dumps(normalize_config(_keys_to_str(rep)), indent=1))
    figures(rep, args, stem)
    return stem.with_suffix(".md")


def _keys_to_str(obj):
    if isinstance(obj, dict):
        return {str(k): _keys_to_str(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_keys_to_str(v) for v in obj]
    return obj
