"""The tables (markdown and JSON) and the figure of the remedies where the baseline learns, from the exports only:
each variant pooled over its seeds, its τ ratio to the reference over thresholds and the endpoints (Holm in every
family: analyses.remedies.variant_ratios, holm_families; the md: analyses.remedies.holm_md), the runs."""
from analyses.remedies import g3_grid as grid_mod
from analyses.remedies import holm_md
from scoreprobe.reports.study_md import header as study_header, pooled_points
from analyses.remedies import holm_families as H
from analyses.remedies import variant_ratios as S
from scoreprobe.stats.curves import curves_of
from analyses.remedies.piece_clocks import rule_curve
from analyses.remedies import curriculum_rows as R
from scoreprobe.studies import format as F
from scoreprobe.studies import presets

LABELS = {"baseline": "baseline", "global_token": "global token", "multiplicative": "multiplicative (GLU)",
          "curriculum": "curriculum", "curriculum_mixed": "curriculum's control (mixed, no order)",
          "curriculum_since_switch": "curriculum from its switch"}
RUNS_INTRO = ("τ at the paper's thresholds (rule accuracy 0.9, copies 0.1) with the sample-level 95% CI; † the rule "
              "clock beyond the curriculum's pieces (a valid sample counts only when it breaks a piece); ‡ rule accuracy "
              "among the samples that break a piece (the reading compared for the curriculum and its control; its τ has "
              "each checkpoint's own count in the Wilson bound, no sample-level CI).")
RUNS = [F.RUN, F.col("variant", lambda r: r["meta"]["variant"], False), F.DATA_SEED, F.TRAINING_SEED,
        F.col("parameters", lambda r: f"{r['params']:,}"), F.STEPS,
        F.col("τ_rule [95% CI]", lambda r: R.tau_text(r, "tau_rule") + R.piece_mark(r), False),
        F.col("τ_mem [95% CI]", lambda r: R.tau_text(r, "tau_mem"), False),
        F.col("τ_rule at 0.9 ‡", R.breaking_tau, False),
        F.col("peak rule_acc", lambda r: f"{r['peak_rule_acc']:.3f}{R.piece_mark(r)}"),
        F.col("peak ‡ (samples breaking a piece there)", R.breaking_peak), F.FINAL_MEM,
        F.col("final piece share", lambda r: f"{r['piece_share'][-1]:.3f}" if r["beyond_pieces"] else "—"), F.TRAIN_S]


POOLED_AT = (("tau_rule", 0.9), ("tau_rule", 0.8), ("tau_mem", 0.1), ("tau_mem", 0.02))


def section_pooled(rows_by, curves):
    """Per variant, τ pooled over the training seeds at the paper's thresholds (a bound where a seed is censored)."""
    table, out = pooled_points(rows_by, curves, LABELS, POOLED_AT)
    return ["## Per variant, pooled over training seeds", "", "t interval on ln τ over the seeds (`pool_seeds`); "
            "'> x at a budget of T steps': a seed does not reach the threshold, x is the geometric mean with it at T.",
            ""] + table + [""], out


def header(args, rows, runs):
    from scoreprobe.data.curriculum import fine_groups
    from scoreprobe.data.rules import rule_from_spec
    p = grid_mod.PRESETS[args.preset]
    steps, share = (runs[0].steps if runs else 0), grid_mod.CURRICULUM_SHARE
    switch = grid_mod.switch_step(steps)
    rule = rule_from_spec(runs[0].cfg.rule) if runs else None
    free = len(fine_groups(rule, grid_mod.CURRICULUM_G)) - len(rule.groups) if rule else 0
    title = f"Remedies where the baseline learns: parity G = {p['G']}, N = {p['N']}"
    return study_header(title, "remedies", args, len(rows), len(runs), (
        f"Every run is the scaling study's parity run (two_clocks' recipe, {steps} steps) with one switch; the "
        "baseline is the scaling run itself. Data seed 0 for every run (the training set and the held-out set); "
        "training seeds as listed. τ in training steps (reliably exceeds, definitions version 6), over rule thresholds "
        "0.3–0.95 and memorization thresholds 0.01–0.2 (the paper's 0.9 and 0.1 in bold)."), default=None) + [
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
    rows, missing = presets.collect_stats(args, runs, grid_mod.export_folder, R.run_row)
    rows_by = {v: sorted([r for r in rows if r["meta"]["variant"] == v], key=lambda r: r["seed"]) for v in grid_mod.VARIANTS}
    rows_by = {v: rs for v, rs in rows_by.items() if rs}
    curves = curves_of(rows)
    if rows_by.get("curriculum"):
        switch = grid_mod.switch_step(rows_by["curriculum"][0]["steps"])
        rows_by["curriculum_since_switch"], curves = S.since_switch(rows_by["curriculum"], curves, switch)
    lines = header(args, rows, runs)
    text, pooled = section_pooled(rows_by, curves)
    n = len(grid_mod.COMPARISONS)
    fam, ends = S.family(rows_by, curves, grid_mod.COMPARISONS), S.endpoint_family(rows_by, grid_mod.COMPARISONS)
    sizes = H.assign(fam, ends, n)
    lines += (text + holm_md.section_ratios(fam, n, LABELS) + holm_md.section_endpoints(ends, LABELS)
              + holm_md.section_multiplicity(fam, ends, sizes, LABELS) + F.runs_section(rows, missing, RUNS, RUNS_INTRO))
    rep = presets.report_json(args, runs, missing, rows, pooled=pooled, holm_families={**sizes, "words": H.WORDS},
                              comparisons={k: {f"{v}/{ref}": c for (v, ref), c in comps.items()} for k, comps in fam.items()},
                              endpoints={k: {f"{v}/{ref}": c for (v, ref), c in comps.items()} for k, comps in ends.items()})
    return "\n".join(lines) + "\n", rep, rows_by


def write_all(args, runs):
    """Write <results>/remedies_<preset>.md, .json and .png; returns the .md path."""
    from analyses.remedies.figures import variant_figure
    text, rep, rows_by = report(args, runs)
    planned = {v: rs for v, rs in rows_by.items() if v in grid_mod.VARIANTS}   # the curriculum from its switch: no line
    return presets.write_tables(args.results, f"remedies_{args.preset}", text, rep,
                                lambda png: variant_figure(planned, png, LABELS, rule_curve))
