"""The markdown of a transposition design (analyses/sudoku_transpose): per configuration (an architecture) the
pooled τ of each constraint family, τ_rows / τ_columns on the original and the transposed data with its kept
(architecture) and reversed (data) parts (`analyses.sudoku_transpose.transpose_split`), their verdicts over thresholds,
what the data part can say, and which seed sets each part (the two-level F tests with Holm in named families).

Families are named in image coordinates: "rows" are the rows of the images a model is trained on and samples;
on transposed data those are the columns of the grids as drawn."""
import numpy as np

from scoreprobe.stats import curves as C
from analyses.sudoku_transpose import transpose_split as S
from scoreprobe.stats.verdict import verdict
from scoreprobe.studies.format import curve_table

ORDER_WORDS = {"below": "image rows first", "above": "image columns first", "includes": "no order resolved"}
KEPT_WORDS = {"below": "image rows first whatever the data (architecture)",
              "above": "image columns first whatever the data (architecture)", "includes": "no architecture preference"}
REVERSED_WORDS = {"below": "the drawn grids' rows first (data)", "above": "the drawn grids' columns first (data)",
                  "includes": "no data preference"}
CELL_SIDES = {"ratio": ("image rows first", "image columns first"), "data": ("the grids' rows first",
                                                                           "the grids' columns first")}
# the claims read with scoreprobe.stats.verdict (the paper's threshold 0.9 first): "rows before columns" is R_o < 1;
# its two parts are read as the same one-sided claim, region (0, 1)
PAPER, REGION, ALPHA = 0.9, (0.0, 1.0), 0.05
CLAIMS = (("ratio_original", "rows before columns (R_o < 1, the original data)"),
          ("architecture_part", "the architecture learns image rows first (kept < 1)"),
          ("data_part", "the draw's own rows first, pooled over draws (reversed < 1)"))


def direction(curve):
    """The one relation to 1 that holds at every readable threshold ("below", "above", "includes"), "mixed"
    when several do, "censored" when none is readable."""
    rel = C.relation(curve, 1.0)
    held = [k for k in ("below", "above", "includes") if rel[k]]
    return held[0] if len(held) == 1 else "mixed" if held else "censored"


def decision(kept, reversed_by_seed):
    """The decision for one configuration from its kept part (architecture) and each draw's reversed part (data)."""
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


def cell(curve, kind="ratio"):
    """'0.66–0.83 (95% CI ends …): < 1, image rows first' of a ratio curve, over its readable thresholds."""
    first, second = CELL_SIDES[kind]
    word = {"below": f"< 1, {first}", "above": f"> 1, {second}", "includes": "CI includes 1",
            "mixed": "sides differ across thresholds", "censored": "censored"}[direction(curve)]
    return f"{C.range_text(curve)}: {word}"


def curve_verdict(curve):
    """scoreprobe.stats.verdict of "the ratio lies in (0, 1)" over a ratio curve, the paper's 0.9 first."""
    v = [C.value_of(r) for r in curve]
    return verdict([r["threshold"] for r in curve], [x[0] for x in v], [x[1] for x in v], [x[2] for x in v],
                   region=REGION, paper_threshold=PAPER)


def verdict_lines(rep):
    """One bullet per claim of CLAIMS: its verdict word and sentence (every reading of the range)."""
    return [f"- verdict, {words}: **{curve_verdict(rep[key]).word}** — {curve_verdict(rep[key]).sentence()}"
            for key, words in CLAIMS if key in rep]


def _key(r):
    return r["meta"]["data_seed"], r["seed"]


def family_section(rows_o, rows_t, curves, families, given, out):
    """The pooled τ of each family of `families` but the ones `given` by construction, per orientation (lines;
    the curves and the units' words go into `out`)."""
    fam = {}
    for label, rs in (("original", rows_o), ("transposed", rows_t)):
        if rs:
            names = [f for f in families if f in rs[0].get("family_names", []) and f not in given]
            fam[label] = S.family_curves(rs, curves, names)
            out[f"families_{label}"] = fam[label]
            out[f"units_{label}"] = S.units_of(rs)[2]
    cols = [(f"{f} ({label})", c) for label, fc in fam.items() for f, c in fc.items()]
    if not cols:
        return []
    units = "; ".join(f"{label}: {out[f'units_{label}']}" for label in fam)
    return [f"Pooled τ of each family (image coordinates) over family-accuracy thresholds; {units}. "
            "'> x': some run does not reach it (a lower bound at its budget)."
            + (f" Not shown: {', '.join(given)}, valid from step 0 by construction (one symbol sampled per "
               "cell)." if given else ""), ""] + curve_table("family threshold", cols, 0.9) + [""]


def orientation_report(title, rows, curves, families, given=()):
    """(markdown lines, JSON-able dict) of one configuration's original and transposed runs (rows with
    meta "transposed" and "data_seed"): the families, the ratios and their parts, the verdicts, the decision."""
    rows_o = sorted([r for r in rows if not r["meta"]["transposed"]], key=_key)
    rows_t = sorted([r for r in rows if r["meta"]["transposed"]], key=_key)
    out = {"runs_original": [r["run"] for r in rows_o], "runs_transposed": [r["run"] for r in rows_t]}
    lines = [f"## {title}", "", f"Runs: {len(rows_o)} on the original data, {len(rows_t)} on the transposed data.", ""]
    lines += family_section(rows_o, rows_t, curves, families, given, out)
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
    out["verdict_words"] = {key: curve_verdict(out[key]).word for key, _ in CLAIMS}
    lines += verdict_lines(out)
    return lines + [f"- **decision: {out['decision']}**", ""], out


def decision_table(reps, labels):
    """'## Decision': one row per configuration of `reps` ({config: orientation_report's dict}), named by
    labels[config]."""
    lines = ["## Decision", "", "| architecture | original: τ_rows / τ_columns | transposed: τ_rows / τ_columns | "
             "kept (architecture) | reversed (data) | decision (the readable thresholds) | verdict: rows before columns (R_o < 1) / kept < 1 "
             "/ reversed < 1 |", "|---|---|---|---|---|---|---|"]
    for arch, rep in reps.items():
        if "decision" not in rep:
            lines.append(f"| {labels[arch]} | not run in both orientations yet | | | | | |")
            continue
        words = " / ".join(f"**{rep['verdict_words'][k]}**" for k, _ in CLAIMS)
        lines.append(f"| {labels[arch]} | {cell(rep['ratio_original'])} | {cell(rep['ratio_transposed'])} "
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


# ---------------------------------------------------------------------------------------------
# What the data part can say, and which seed sets each part
# ---------------------------------------------------------------------------------------------

def components_lines(arch, rep, tests, family_words):
    """The table of the four F tests of one configuration (smallest p, where, Holm in each family), then what
    follows: a component whose Holm over its thresholds is below 0.05 is said to set that part. tests:
    stats.transpose_split.component_tests of every configuration; family_words: what the study-wide Holm
    family spans (e.g. '3 architectures × 2 parts × 2 components × their readable thresholds')."""
    mine = [t for t in tests if t[0] == arch]
    if not mine:
        return []
    own, study = S.holm_tables(tests)
    m = len(tests)
    lines = ["Which seed sets the order: two-level F tests of each part's variance components over the data seed × "
             "training seed grid (a component = 0), at every readable threshold. Holm families: the test over its own "
             f"readable thresholds, and all {m} component tests of this study ({family_words}).", "",
             "| part | component | p < 0.05 at (p) | smallest p | Holm over its thresholds (size) | Holm over all "
             f"{m} |", "|---|---|---|---:|---:|---:|"]
    said = []
    for part in S.PARTS:
        for comp in S.COMPONENTS:
            ts = [t for t in mine if t[1] == part and t[2] == comp]
            if not ts:
                continue
            adj = own[(arch, part, comp)]
            i = int(np.argmin([t[4] for t in ts]))
            low = [t for t in ts if t[4] < ALPHA]
            where = ", ".join(f"{t[3]:g} ({t[4]:.2g})" for t in low) or "none"
            lines.append(f"| {S.PARTS[part]} | {S.COMPONENTS[comp]} | {where} | {ts[i][4]:.2g} at {ts[i][3]:g} | "
                         f"{adj[i]:.2g} ({len(ts)}) | {study[ts[i]]:.2g} |")
            if adj[i] < ALPHA:
                said.append(_set_by(rep, part, comp, ts[i], adj[i], len(ts), study[ts[i]], m))
    return lines + [""] + said + ([""] if said else [])


def _set_by(rep, part, comp, test, own_p, k, study_p, m):
    """'- the training seed sets the kept part: …' with each seed's geometric mean at the threshold of the
    smallest p."""
    who = S.COMPONENTS[comp]
    means = "; ".join(f"{who} {k_}: {v:.2f}" for k_, v in S.means_by_seed(C.at(rep[part], test[3]), comp).items())
    verdict_all = "below 0.05 there too" if study_p < ALPHA else "not below 0.05 there"
    return (f"- The {who} sets the order in the {S.PARTS[part]} part (which family comes first differs "
            f"from one {who} to the next): p {test[4]:.2g} at {test[3]:g}, Holm "
            f"{own_p:.2g} over its {k} readable thresholds (below 0.05); over all {m} component tests of the "
            f"study {study_p:.2g} ({verdict_all}). Geometric mean of the part per {who} at "
            f"{test[3]:g} (over the other seed): {means}.")


def data_lines(rep, tests, arch):
    """What the reversed (data) part says: not its pooled CI (1 by symmetry), but the draw-level test and each
    draw alone."""
    if "data_part" not in rep:
        return []
    own, study = S.holm_tables(tests)
    ts = [t for t in tests if t[0] == arch and t[1] == "data_part" and t[2] == "p_data"]
    lines = ["What the data part can say: pooled over uniform draws it is 1 by symmetry (a draw is as likely as its "
             f"transpose), so its CI including 1 ({C.range_text(rep['data_part'])}) says nothing about a draw."]
    if ts:
        adj = own[(arch, "data_part", "p_data")]
        i = int(np.argmin([t[4] for t in ts]))
        lines[0] += (f" The draw-level test (F test that the draws do not differ in their preference, the data-seed "
                     f"component of the reversed part): smallest p {ts[i][4]:.2g} at {ts[i][3]:g}, Holm "
                     f"{adj[i]:.2g} over its {len(ts)} readable thresholds"
                     f" ({'below' if adj[i] < ALPHA else 'not below'} 0.05).")
    per = []
    for d, curve in rep.get("data_part_by_seed", {}).items():
        rel = C.relation(curve, 1.0)
        grid = [r["threshold"] for r in curve]
        sides = [f"{what} at {C.span(rel[k], grid)} ({_range(curve, rel[k])})"
                 for k, what in (("below", "its grids' rows first"), ("above", "its grids' columns first")) if rel[k]]
        per.append(f"data seed {d}: " + ("; ".join(sides) if sides else "no preference resolved at any readable "
                                        "threshold"))
    if per:
        lines[0] += " Each draw alone (its training seeds as units): " + "; ".join(per) + "."
    return lines + [""]


def _range(curve, thresholds):
    """'0.84–0.85, CI ends 0.77–0.93' of a curve's values at `thresholds`."""
    v = [C.value_of(C.at(curve, t)) for t in thresholds]
    lo, hi = min(x[0] for x in v), max(x[0] for x in v)
    return (f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}–{hi:.2f}") + \
        f", CI ends {min(x[1] for x in v):.3f}–{max(x[2] for x in v):.3f}"
