"""The tables of analyses/sudoku_transpose (markdown and JSON) and its figure, from the exports only."""

from scoreprobe.studies import presets
from scoreprobe.stats import curves as C
from scoreprobe.studies import format as F
from scoreprobe.studies.format import curve_table, fmt
from scoreprobe.stats.runs import run_stats
from scoreprobe.stats.curves import curves_of
from analyses.sudoku_transpose import grid as grid_mod
from analyses.sudoku_transpose import readings as R
from analyses.sudoku_transpose import stats as S

FAMILIES = ("rows", "columns", "boxes", "cells")
ORDER_WORDS = {"below": "image rows first", "above": "image columns first", "includes": "no order resolved"}
KEPT_WORDS = {"below": "image rows first whatever the data (architecture)",
              "above": "image columns first whatever the data (architecture)", "includes": "no architecture preference"}
REVERSED_WORDS = {"below": "the drawn grids' rows first (data)", "above": "the drawn grids' columns first (data)",
                  "includes": "no data preference"}
COORDINATES = ("Families are named in **image coordinates**: 'rows' are the rows of the images a model is trained on "
               "and samples; on transposed data those are the columns of the grids as drawn (and 'columns' their "
               "rows); boxes and cells map to themselves.")


def collect(args, runs):
    """rows (per run), missing {run: why} of the planned runs, each read from its own export folder."""
    return presets.collect(runs, lambda run: grid_mod.export_folder(args.results, args.preset, run),
                           lambda run, info: run_stats(run.name, run, info)[0])


def direction(curve):
    """The one relation to 1 that holds at every readable threshold ("below", "above", "includes"), "mixed"
    when several do, "censored" when none is readable."""
    rel = C.relation(curve, 1.0)
    held = [k for k in ("below", "above", "includes") if rel[k]]
    return held[0] if len(held) == 1 else "mixed" if held else "censored"


def decision(kept, reversed_by_seed):
    """The decision for one architecture from its kept part (architecture) and each draw's reversed part (data)."""
    words = []
    k = direction(kept)
    if k in ("below", "above"):
        words.append(f"architecture preference (kept by transposition): image {'rows' if k == 'below' else 'columns'} "
                     "first")
    prefs = {d: direction(c) for d, c in reversed_by_seed.items()}
    sides = [f"the grids' {what} first at data seed(s) {', '.join(str(d) for d, v in prefs.items() if v == side)}"
             for side, what in (("below", "rows"), ("above", "columns")) if side in prefs.values()]
    if sides:
        words.append("data preference (reversed by transposition): " + "; ".join(sides))
    if words:
        return "; ".join(words)
    mixed = k == "mixed" or "mixed" in prefs.values()
    return "neither resolved" + (" (a part changes side across thresholds)" if mixed else
                                 " at any readable threshold" if k != "censored" else " (censored)")


CELL_SIDES = {"ratio": ("image rows first", "image columns first"), "data": ("the grids' rows first",
                                                                           "the grids' columns first")}


def cell(curve, kind="ratio"):
    """'0.66–0.83 (95% CI ends …): < 1, image rows first' of a ratio curve, over its readable thresholds."""
    first, second = CELL_SIDES[kind]
    word = {"below": f"< 1, {first}", "above": f"> 1, {second}", "includes": "CI includes 1",
            "mixed": "sides differ across thresholds", "censored": "censored"}[direction(curve)]
    return f"{C.range_text(curve)}: {word}"


def arch_report(arch, rows, curves):
    """(markdown lines, JSON-able dict) of one architecture's original and transposed runs."""
    rows_o = sorted([r for r in rows if not r["meta"]["transposed"]], key=_key)
    rows_t = sorted([r for r in rows if r["meta"]["transposed"]], key=_key)
    out = {"runs_original": [r["run"] for r in rows_o], "runs_transposed": [r["run"] for r in rows_t]}
    lines = [f"## {grid_mod.ARCH_LABELS[arch]}", "",
             f"Runs: {len(rows_o)} on the original data, {len(rows_t)} on the transposed data.", ""]
    fam, given = {}, grid_mod.BY_CONSTRUCTION.get(arch, ())
    for label, rs in (("original", rows_o), ("transposed", rows_t)):
        if rs:
            names = [f for f in FAMILIES if f in rs[0].get("family_names", []) and f not in given]
            fam[label] = S.family_curves(rs, curves, names)
            out[f"families_{label}"] = fam[label]
            out[f"units_{label}"] = S.units_of(rs)[2]
    cols = [(f"{f} ({label})", c) for label, fc in fam.items() for f, c in fc.items()]
    if cols:
        units = "; ".join(f"{label}: {out[f'units_{label}']}" for label in fam)
        lines += [f"Pooled τ of each family (image coordinates) over family-accuracy thresholds; {units}. "
                  "'> x': some run does not reach it (a lower bound at its budget)."
                  + (f" Not shown: {', '.join(given)}, valid from step 0 by construction (one symbol sampled per "
                     "cell)." if given else ""), ""]
        lines += curve_table("family threshold", cols, 0.9) + [""]
    if not (rows_o and rows_t):
        return lines + ["Needs runs in both orientations for the ratios.", ""], out
    ratio_o, ratio_t = S.family_ratio_curve(rows_o, curves), S.family_ratio_curve(rows_t, curves)
    kept, rev = S.architecture_part(rows_o, rows_t, curves), S.data_part(rows_o, rows_t, curves)
    by_seed = S.data_part_by_seed(rows_o, rows_t, curves)
    out.update(ratio_original=ratio_o, ratio_transposed=ratio_t, architecture_part=kept, data_part=rev,
               data_part_by_seed=by_seed, decision=decision(kept, by_seed))
    cols = [("R_o: τ_rows / τ_columns, original", ratio_o), ("R_t: transposed", ratio_t),
            ("kept: sqrt(R_o·R_t)", kept), ("reversed: sqrt(R_o/R_t)", rev)]
    cols += [(f"reversed, data seed {d}", c) for d, c in by_seed.items()]
    lines += ["τ_rows / τ_columns (image coordinates) and its two parts over family thresholds (R_o, R_t: pooled "
              "over the units above; the parts: formed per matched (data seed, training seed) pair from the runs "
              "of both orientations there and pooled over the pairs with the two-level t interval; per data "
              "seed: its training seeds as units; censored where a run does not reach both families):", ""]
    lines += curve_table("family threshold", cols, 0.9) + [""]
    verdicts = {"original": C.robust(ratio_o, 1.0, ORDER_WORDS), "transposed": C.robust(ratio_t, 1.0, ORDER_WORDS),
                "kept": C.robust(kept, 1.0, KEPT_WORDS), "reversed": C.robust(rev, 1.0, REVERSED_WORDS),
                **{f"reversed_d{d}": C.robust(c, 1.0, REVERSED_WORDS) for d, c in by_seed.items()}}
    out["verdicts"] = verdicts
    lines += [f"- original data: {verdicts['original']}", f"- transposed data: {verdicts['transposed']}",
              f"- kept by transposition (architecture): {verdicts['kept']}",
              f"- reversed by transposition (data), pooled over draws: {verdicts['reversed']}"]
    lines += [f"- reversed, data seed {d}: {verdicts[f'reversed_d{d}']}" for d in by_seed]
    out["verdict_words"] = {key: R.curve_verdict(out[key]).word for key, _ in R.CLAIMS}
    lines += R.verdict_lines(out)
    return lines + [f"- **decision: {out['decision']}**", ""], out


def _key(r):
    return r["meta"]["data_seed"], r["seed"]


def decision_table(reps):
    lines = ["## Decision", "", "| architecture | original: τ_rows / τ_columns | transposed: τ_rows / τ_columns | "
             "kept (architecture) | reversed (data) | decision (the readable thresholds) | verdict: rows before columns (R_o < 1) / kept < 1 "
             "/ reversed < 1 |", "|---|---|---|---|---|---|---|"]
    for arch, rep in reps.items():
        if "decision" not in rep:
            lines.append(f"| {grid_mod.ARCH_LABELS[arch]} | not run in both orientations yet | | | | | |")
            continue
        words = " / ".join(f"**{rep['verdict_words'][k]}**" for k, _ in R.CLAIMS)
        lines.append(f"| {grid_mod.ARCH_LABELS[arch]} | {cell(rep['ratio_original'])} | {cell(rep['ratio_transposed'])} "
                     f"| {cell(rep['architecture_part'])} | {cell(rep['data_part'], 'data')} | {rep['decision']} "
                     f"| {words} |")
    return lines + ["", "Cells: the range of the pooled value over the readable family thresholds (0.3–0.95) with the "
                    "ends of its 95% CIs, and where every readable CI lies against 1. Kept = sqrt(R_o·R_t), the "
                    "preference for image rows that transposing the data does not move (the architecture's); "
                    "reversed = sqrt(R_o/R_t), the preference for the drawn grids' rows that transposition turns "
                    "into image columns (the data's; a uniform draw of grids is as likely as its transpose, so it "
                    "averages to 1 over draws and is decided per data seed). The decision reads every readable "
                    "threshold (scoreprobe.stats.curves.robust). Verdict: `scoreprobe.stats.verdict` of the claim "
                    "that the ratio lies below 1, the paper's threshold 0.9 read first (undefined where a run does "
                    "not reach it there), then the range (each architecture's bullets).", ""]


def section_runs(rows, missing):
    def family(f):
        return F.col(f, lambda r: fmt(r["families"][f]["tau"]) if f in r.get("families", {}) else "—")
    intro = ("τ at family accuracy 0.9 (image coordinates; '—': not reached by the last checkpoint) and the clocks "
             "at the paper's thresholds (0.9, 0.1).")
    return F.runs_section(rows, missing, [
        F.RUN, F.col("model", lambda r: r["meta"]["arch"], False),
        F.col("data", lambda r: "transposed" if r["meta"]["transposed"] else "original", False), F.DATA_SEED,
        F.TRAINING_SEED, F.STEPS, *[family(f) for f in FAMILIES], F.col("τ_rule", lambda r: fmt(r["tau_rule"])),
        F.col("τ_mem", lambda r: fmt(r["tau_mem"])), F.TRAIN_S], intro)


def report(args, runs):
    """(markdown, JSON-able report) of every table."""
    rows, missing = collect(args, runs)
    curves = curves_of(rows)
    cmd = "python analyses/sudoku_transpose" + ("" if args.preset == "cpu" else f" --preset {args.preset}") + \
        " --from-results"
    lines = [f"# Sudoku rows vs columns, decided (preset {args.preset})", "",
             f"Regenerate: `{cmd}` (from the .npz exports only). {len(rows)} of {len(runs)} planned runs done. "
             f"4×4 Sudoku, N = {grid_mod.puzzle_N(args.preset)} training grids per data seed; every run is the "
             "scaling study's Sudoku run with its data seed (which grids are drawn), its training seed (weights, "
             "minibatches, noise) and its orientation (transposed: the same drawn grids, each transposed, in "
             "the training and the held-out set); the untransposed 2×2-patch DiT at data seed 0 is the scaling "
             "run itself. τ in training steps, reliably exceeds (definitions version 6, docs/definitions.md).",
             "", COORDINATES, ""]
    reps, texts = {}, {}
    for arch in grid_mod.ARCHS:
        rs = [r for r in rows if r["meta"]["arch"] == arch]
        if rs:
            texts[arch], reps[arch] = arch_report(arch, rs, curves)
    tests = R.component_tests(reps)
    body = []
    for arch, text in texts.items():     # the families of the component tests span every architecture
        body += text + R.data_lines(reps[arch], tests, arch) + R.components_lines(arch, reps[arch], tests)
    lines += decision_table(reps) + body + section_runs(rows, missing)
    rep = {"preset": args.preset, "n_planned": len(runs), "missing": missing, "coordinates": COORDINATES,
           "archs": reps, "runs": [{k: v for k, v in r.items() if k not in ("curve", "curves")} for r in rows]}
    return "\n".join(lines) + "\n", rep


def write_all(args, runs):
    """Write <results>/sudoku_transpose_<preset>.md, .json and .png; returns the .md path."""
    from analyses.sudoku_transpose.figures import figure
    text, rep = report(args, runs)
    stem = presets.write_report(args.results, f"{grid_mod.STUDY}_{args.preset}", text, rep)
    figure(rep, stem.with_suffix(".png"))
    return stem.with_suffix(".md")
