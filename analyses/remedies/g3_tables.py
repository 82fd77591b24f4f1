"""The tables (markdown and JSON) and the figure of the remedies where the baseline learns, from the exports only."""
import math

import numpy as np

from scoreprobe.studies import presets
from analyses.remedies import g3_families as H
from analyses.remedies import g3_grid as grid_mod
from analyses.remedies import g3_stats as S
from scoreprobe.stats import curves as C
from scoreprobe.studies import format as F
from scoreprobe.studies.format import ci_text, fmt, pooled_cell, threshold_label
from scoreprobe.stats.curves import curves_of
from scoreprobe.viz.common import save_figure

LABELS = {"baseline": "baseline", "global_token": "global token", "multiplicative": "multiplicative (GLU)",
          "curriculum": "curriculum", "curriculum_mixed": "curriculum's control (mixed, no order)",
          "curriculum_since_switch": "curriculum from its switch"}


def collect(args, runs):
    """rows (per run, g3_stats.run_row), missing {run: why} of the planned runs, each from its own folder."""
    return presets.collect(runs, lambda run: grid_mod.export_folder(args.results, args.preset, run), S.run_row)


def _tau(row, key):
    v = row[key]
    return f"{fmt(v)} {ci_text(row[key + '_ci'])}" if math.isfinite(v) else f"> {row['steps']} (not reached)"


def section_runs(rows, missing):
    def mark(r):
        return " †" if r["beyond_pieces"] else ""
    intro = ("τ at the paper's thresholds (rule accuracy 0.9, copies 0.1) with the sample-level 95% CI; † the rule "
             "clock beyond the curriculum's pieces (a valid sample counts only when it breaks a piece); ‡ rule accuracy "
             "among the samples that break a piece (the reading compared for the curriculum and its control; its τ has "
             "each checkpoint's own count in the Wilson bound, no sample-level CI).")
    return F.runs_section(rows, missing, [
        F.RUN, F.col("variant", lambda r: r["meta"]["variant"], False), F.DATA_SEED, F.TRAINING_SEED,
        F.col("parameters", lambda r: f"{r['params']:,}"), F.STEPS,
        F.col("τ_rule [95% CI]", lambda r: _tau(r, "tau_rule") + mark(r), False),
        F.col("τ_mem [95% CI]", lambda r: _tau(r, "tau_mem"), False),
        F.col("τ_rule at 0.9 ‡", lambda r: _breaking_tau(r) if r["beyond_pieces"] else "—", False),
        F.col("peak rule_acc", lambda r: f"{r['peak_rule_acc']:.3f}{mark(r)}"),
        F.col("peak ‡ (samples breaking a piece there)", _breaking_peak), F.FINAL_MEM,
        F.col("final piece share", lambda r: f"{r['piece_share'][-1]:.3f}" if r["beyond_pieces"] else "—"),
        F.TRAIN_S], intro)


def _breaking_tau(r):
    v = C.at([{"threshold": t, "v": x} for t, x in zip(C.thresholds_of("tau_rule"), r["curves"]["tau_rule"])], 0.9)["v"]
    return fmt(v) if math.isfinite(v) else f"> {r['steps']} (not reached)"


def _breaking_peak(r):
    if not r["beyond_pieces"]:
        return "—"
    i = int(np.argmax(r["curve"]["rule_acc_breaking"]))   # a NaN knot is np.argmax's pick: the table shows nan
    return f"{r['curve']['rule_acc_breaking'][i]:.3f} ({r['curve']['n_breaking'][i]})"


def section_pooled(rows_by, curves):
    """Per variant, τ pooled over the training seeds at the paper's thresholds (a bound where a seed is censored)."""
    lines = ["## Per variant, pooled over training seeds", "", "t interval on ln τ over the seeds (`pool_seeds`); "
             "'> x at a budget of T steps': a seed does not reach the threshold, x is the geometric mean with it at T.",
             "", "| variant | seeds | τ_rule at 0.9 | τ_rule at 0.8 | τ_mem at 0.1 | τ_mem at 0.02 |",
             "|---|---:|---|---|---|---|"]
    out = {}
    for v, rs in rows_by.items():
        cells, out[v] = [], {}
        for key, t in (("tau_rule", 0.9), ("tau_rule", 0.8), ("tau_mem", 0.1), ("tau_mem", 0.02)):
            row = C.at(C.pooled_curve(rs, curves, key), t)
            out[v][f"{key}@{t:g}"] = row
            cells.append(pooled_cell(row))
        lines.append(f"| {LABELS[v]} | {len(rs)} | " + " | ".join(cells) + " |")
    return lines + [""], out


def ratio_cell(row):
    """'0.62 [0.41, 0.93] p_H6 0.03 *' (Holm in the planned family, its size in the label), a bound against the
    reference's CI end where a seed is censored, or why nothing is read."""
    if row.get("censored"):
        b = row.get("bound")
        if b is None:
            return "— (censored on both sides)"
        return (f"{b['kind']} {fmt(b['value_ci_end'], 2)} against the other arm's CI end ({b['kind']} {fmt(b['value'], 2)} "
                f"against its point; bound: {b['n_censored']} seed(s) at their budget, {fmt(b['budget'])} steps)")
    if not math.isfinite(row["value"]):
        return "—"
    h = row.get("holm", {}).get("planned")
    p = f"p_H{h['size']} {H.p_text(h['p'])}{' *' if h['significant'] else ''}" if h and math.isfinite(h["p"]) else "p —"
    return f"{fmt(row['value'], 2)} {ci_text(row['ci'], 2)} {p}"


def section_ratios(fam, n):
    """Per clock, every comparison's ratio over thresholds (Holm in the planned family of `n`), and the verdicts."""
    lines = ["## Each variant against its reference, over thresholds", "",
             "variant / reference of the geometric mean τ over training seeds (Welch t interval on ln τ, 95%); "
             f"p_H{n}: Welch's t-test on ln τ, Holm-adjusted over the {n} comparisons of this table at the same clock "
             "and threshold, a comparison without a p there (censored, under-resolved) counted with p = 1 (`*`: below "
             "0.05 in that family; every other family in 'Multiplicity' below). A bound where a seed does not reach: "
             "the censored arm's geometric mean with that seed at its budget over the other arm's 95% CI end (its point "
             "value beside). Curriculum and control: rule accuracy among the samples that break a piece (‡ below); the "
             "others: rule accuracy itself.", ""]
    for key, head, paper in (("tau_rule", "rule threshold", 0.9), ("tau_mem", "memorization threshold", 0.1)):
        comps = fam.get(key, {})
        if not comps:
            continue
        names = [f"{LABELS[v]} / {LABELS[ref]}" for v, ref in comps]
        curves = list(comps.values())
        lines += [f"### {'τ_rule' if key == 'tau_rule' else 'τ_mem'}", "", f"| {head} | " + " | ".join(names) + " |",
                  "|---:|" + "---|" * len(names)]
        for j, row in enumerate(curves[0]):
            lines.append(f"| {threshold_label(row['threshold'], paper)} | "
                         + " | ".join(ratio_cell(c[j]) for c in curves) + " |")
        lines += [""] + [f"- {n}: {S.verdict(c)}; ratio {C.range_text(c)}." for n, c in zip(names, curves)] + [""]
    return lines


def section_endpoints(fam):
    """Per endpoint, every comparison's difference of seed means with its interval and Holm-adjusted p."""
    names = {"peak_rule": "peak rule accuracy ‡", "final_mem": "memorized share at the last checkpoint"}
    lines = ["## Endpoints: peak rule accuracy and the share copied at the end", "",
             "variant − reference of the means over training seeds (Welch t interval, 95%; each seed's value in "
             f"the last two columns); p_Holm: Welch's t-test, Holm-adjusted over the {_n_end(fam)} comparisons at each "
             "endpoint (the curriculum from its switch has the curriculum's endpoints and is not one of them; `*`: below "
             "0.05). "
             "Read where the τ are censored: a peak is the best of the checkpoints (biased up alike for every "
             "variant on the same checkpoint grid).", ""]
    for name, comps in fam.items():
        if not comps:
            continue
        lines += [f"| {names[name]} | difference [95% CI] | p_Holm | reference's seeds | variant's seeds |",
                  "|---|---|---|---|---|"]
        for (v, ref), c in comps.items():
            diff = "—" if not math.isfinite(c["value"]) else f"{c['value']:+.3f} {ci_text(c['ci'], 3)}"
            h = c["holm"]["planned"]
            p = f"{H.p_text(h['p'])}{' *' if h['significant'] else ''}" if math.isfinite(h["p"]) else "—"
            seeds = [" / ".join(f"{x:.3f}" for x in c[k]) for k in ("a", "b")]
            lines.append(f"| {LABELS[v]} / {LABELS[ref]} | {diff} | {p} | {seeds[0]} | {seeds[1]} |")
        lines.append("")
    return lines


def _n_end(fam):
    return max((len(c) for c in fam.values()), default=0)


def _holm_cell(h, family):
    """'0.080 *' of a cell's Holm-adjusted p in `family` ('—' where the cell is not in that family)."""
    return f"{H.p_text(h[family]['p'])}{' *' if h[family]['significant'] else ''}" if family in h else "—"


def section_multiplicity(fam, ends, sizes):
    """Every test with p < 0.05 before adjustment under each family (g3_families), the count that survives in
    each, and the copying effects (τ_mem, the last memorized share) said family by family."""
    cells = [(f"τ_{key[4:]} at {r['threshold']:g}", f"{LABELS[v]} / {LABELS[ref]}", r, ci_text(r["ci"], 2), 2)
             for key, comps in fam.items() for (v, ref), rs in comps.items() for r in rs]
    names = {"peak_rule": "peak rule accuracy ‡", "final_mem": "memorized share at the last checkpoint"}
    cells += [(names[n], f"{LABELS[v]} / {LABELS[ref]}", c, ci_text(c["ci"], 3), 3)
              for n, comps in ends.items() for (v, ref), c in comps.items()]
    tested = [c for c in cells if math.isfinite(H._p(c[2]))]
    lines = ["## Multiplicity: every p under each family", "",
             f"A Holm adjustment holds for the family it is computed over, so each is named with its size. τ ratios: "
             f"the readable comparisons at the same clock and threshold (their number varies: a censored comparison has "
             f"no p); the {sizes['planned']} comparisons of the tables at that clock and threshold (the headline: fixed "
             f"before the runs, a censored one counted with p = 1); the {sizes['tau_tests']} readable τ-ratio tests of "
             f"this study; all {sizes['all_tests']} readable tests of this study (the τ ratios and the "
             f"{sum(sizes['endpoint'].values())} endpoint comparisons). Endpoints: the "
             f"{_n_end(ends)} comparisons at each endpoint, and all {sizes['all_tests']} tests.", "",
             "| test | comparison | estimate [95% CI] | p | Holm: readable here (size) | Holm: the comparisons here (size) "
             f"| Holm: {sizes['tau_tests']} τ tests | Holm: all {sizes['all_tests']} tests |", "|---|---|---|---:|---|---|---:|---:|"]
    small = [c for c in tested if H._p(c[2]) < H.ALPHA]
    for test, name, c, ci, d in small:
        h = c["holm"]
        lines.append(f"| {test} | {name} | {fmt(c['value'], d)} {ci} | {H.p_text(H._p(c))} | {_holm_cell(h, 'readable')} "
                     f"({h['readable']['size']}) | {_holm_cell(h, 'planned')} ({h['planned']['size']}) | "
                     f"{_holm_cell(h, 'tau_tests')} | {_holm_cell(h, 'all_tests')} |")
    count = {f: sum(1 for c in tested if c[2]["holm"].get(f, {}).get("significant")) for f in H.FAMILIES}
    lines += ["", f"{len(small)} of the {len(tested)} tests have p < 0.05 before adjustment (`*`: below 0.05 after). "
              f"Below 0.05 after Holm: {count['readable']} in their readable family, {count['planned']} among the "
              f"comparisons at their clock and threshold or endpoint, {count['tau_tests']} of the {sizes['tau_tests']} "
              f"τ tests, {count['all_tests']} of all {sizes['all_tests']} tests.", ""]
    copying = [c for c in small if c[0].startswith("τ_mem") or c[0].startswith("memorized")]
    lines += [f"- Copying, {name}, {test}: {fmt(c['value'], d)} {ci}, p {H.p_text(H._p(c))}; Holm "
              + "; ".join(H.family_text(c, f, not test.startswith("τ")) for f in H.FAMILIES
                          if f in c["holm"] and not (f == "planned" and not test.startswith("τ"))) + "."
              for test, name, c, ci, d in copying]   # an endpoint's planned family is its readable one
    return lines + ([""] if copying else [])


def header(args, rows, runs):
    from scoreprobe.data.curriculum import fine_groups
    from scoreprobe.data.rules import rule_from_spec
    p = grid_mod.PRESETS[args.preset]
    cmd = f"python analyses/remedies --preset {args.preset} --from-results"
    steps, share = (runs[0].steps if runs else 0), grid_mod.CURRICULUM_SHARE
    switch = grid_mod.switch_step(steps)
    rule = rule_from_spec(runs[0].cfg.rule) if runs else None
    free = len(fine_groups(rule, grid_mod.CURRICULUM_G)) - len(rule.groups) if rule else 0
    return [f"# Remedies where the baseline learns: parity G = {p['G']}, N = {p['N']} (preset {args.preset})", "",
            f"Regenerate: `{cmd}` (from the .npz exports only). {len(rows)} of {len(runs)} planned runs done. Every run "
            f"is the scaling study's parity run (two_clocks' recipe, {steps} steps) with one switch; the baseline is the "
            "scaling run itself. Data seed 0 for every run (the training set and the held-out set); training seeds "
            "as listed. τ in training steps (reliably exceeds, definitions version 6), over rule thresholds 0.3–0.95 "
            "and memorization thresholds 0.01–0.2 (the paper's 0.9 and 0.1 in bold).", "",
            f"What the curriculum adds: N = {p['N']} *other* training images (every piece of {grid_mod.CURRICULUM_G} "
            f"pixels of each group even, a group's remaining pixel 0), drawn by the first {switch} steps (a "
            f"share {share:g} of the steps); the loss is the baseline's. So it also sees each of the run's own training "
            f"images {1 - share:g}× as often as the baseline. The control (`curriculum_mixed`) draws each minibatch item "
            f"from the same extra images with probability {share:g} at every step: the same images and, in expectation, "
            "the same number of draws of each, without the order. The rule clock of both is rule accuracy among the samples "
            "that break a piece: pieces are valid images, so counting them as valid would credit the first phase's easy "
            "task, and counting them as failures would cap the control, whose data keep a share of piece images to the "
            f"end, at 1 − that share (both readings are kept in the JSON). The baseline's and the switches' exports keep "
            f"no piece masks; a uniform sampler of the rule's images satisfies every piece with probability 2^-{free}, "
            "so for them the two readings agree. 'Curriculum from its switch': the curriculum's τ less its "
            f"{switch} first-phase steps (budget {steps - switch}), against the baseline's from step 0 "
            "— whether the first phase gives a head start once the model trains on its own images; chosen after the "
            "first seed was read, so it is Holm-adjusted with the five planned comparisons, not beside them.", ""]


def report(args, runs):
    """(markdown, JSON-able report, rows by variant) of every table."""
    rows, missing = collect(args, runs)
    rows_by = {v: sorted([r for r in rows if r["meta"]["variant"] == v], key=lambda r: r["seed"]) for v in grid_mod.VARIANTS}
    rows_by = {v: rs for v, rs in rows_by.items() if rs}
    curves = curves_of(rows)
    if rows_by.get("curriculum"):
        switch = grid_mod.switch_step(rows_by["curriculum"][0]["steps"])
        rows_by["curriculum_since_switch"], curves = S.since_switch(rows_by["curriculum"], curves, switch)
    lines = header(args, rows, runs)
    text, pooled = section_pooled(rows_by, curves)
    fam, ends = S.family(rows_by, curves), S.endpoint_family(rows_by)
    sizes = H.assign(fam, ends, len(S.COMPARISONS))
    lines += (text + section_ratios(fam, len(S.COMPARISONS)) + section_endpoints(ends)
              + section_multiplicity(fam, ends, sizes) + section_runs(rows, missing))
    rep = {"preset": args.preset, "n_planned": len(runs), "missing": missing, "pooled": pooled,
           "holm_families": {**sizes, "words": H.WORDS},
           "comparisons": {k: {f"{v}/{ref}": c for (v, ref), c in comps.items()} for k, comps in fam.items()},
           "endpoints": {k: {f"{v}/{ref}": c for (v, ref), c in comps.items()} for k, comps in ends.items()},
           "runs": [{k: v for k, v in r.items() if k not in ("curve", "curves")} for r in rows]}
    return "\n".join(lines) + "\n", rep, rows_by


def figure(rows_by, path):
    """Rule accuracy (among the samples that break a piece for the curriculum and its control) and memorized share
    per variant."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for i, (v, rs) in enumerate((v, rs) for v, rs in rows_by.items() if v in grid_mod.VARIANTS):
        for r in rs:
            x = np.asarray(r["curve"]["step"]) + 1
            ls = ("-", "--", ":", "-.", (0, (1, 3)))[r["seed"] % 5]
            ax1.plot(x, S.rule_curve(r), ls, color=f"C{i}", label=f"{LABELS[v]} s{r['seed']}")
            ax2.plot(x, r["curve"]["mem_ratio"], ls, color=f"C{i}")
    for ax, name in ((ax1, "rule accuracy (curriculum, control: among piece-breaking samples)"), (ax2, "memorized share")):
        ax.set(xscale="log", xlabel="training step + 1", ylabel=name)
    if rows_by:
        ax1.legend(fontsize=6)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def write_all(args, runs):
    """Write <results>/remedies_<preset>.md, .json and .png; returns the .md path."""
    text, rep, rows_by = report(args, runs)
    stem = presets.write_report(args.results, f"remedies_{args.preset}", text, rep)
    figure(rows_by, stem.with_suffix(".png"))
    return stem.with_suffix(".md")
