"""What analyses/sudoku_transpose's curves allow one to say, beyond the decision table: the verdict words of
`scoreprobe.stats.verdict` (the paper's threshold 0.9 read first) on "rows before columns" and on each part;
what the data part can and cannot say; and which seed sets the order.

- Verdicts: the claim "rows are learned before columns" is R_o < 1 (image rows = the grids' rows on the
  original data); its two parts, the architecture's preference for image rows (kept < 1) and the draw's
  preference for its own rows (reversed < 1), are read as the same one-sided claim: region (0, 1).
- The data part pooled over draws: a uniform draw of grids is as likely as its transpose, so the reversed part
  is 1 in expectation over draws and a pooled CI including 1 says nothing about any one draw. What can: the
  draw-level F test (the data-seed component of the reversed part is 0: the draws do not differ in their
  preference) and each draw alone (its training seeds as units).
- Which seed sets the order: the two-level F tests of each part (scoreprobe.stats.intervals.two_level: the
  data-seed and the training-seed component = 0 on (D − 1, (D − 1)(I − 1)) and (I − 1, ...) df). Families for
  Holm, named with their size: one test over its readable thresholds, and every component test of the study.
"""
import math

import numpy as np

from scoreprobe.stats import curves as C
from scoreprobe.stats.pvalues import adjust_pvalues
from scoreprobe.stats.verdict import verdict

PAPER = 0.9
REGION = (0.0, 1.0)
CLAIMS = (("ratio_original", "rows before columns (R_o < 1, the original data)"),
          ("architecture_part", "the architecture learns image rows first (kept < 1)"),
          ("data_part", "the draw's own rows first, pooled over draws (reversed < 1)"))
PARTS = {"architecture_part": "kept (architecture)", "data_part": "reversed (data)"}
COMPONENTS = {"p_init": "training seed", "p_data": "data seed"}
ALPHA = 0.05


def curve_verdict(curve):
    """scoreprobe.stats.verdict of "the ratio lies in (0, 1)" over a ratio curve, the paper's 0.9 first."""
    v = [C.value_of(r) for r in curve]
    return verdict([r["threshold"] for r in curve], [x[0] for x in v], [x[1] for x in v], [x[2] for x in v],
                   region=REGION, paper_threshold=PAPER)


def verdict_lines(rep):
    """One bullet per claim of CLAIMS: its verdict word and sentence (every reading of the range)."""
    return [f"- verdict, {words}: **{curve_verdict(rep[key]).word}** — {curve_verdict(rep[key]).sentence()}"
            for key, words in CLAIMS if key in rep]


def component_tests(reps):
    """[(arch, part, component, threshold, p)] of every two-level F test with a p in the study's parts."""
    return [(arch, part, comp, r["threshold"], float(r[comp])) for arch, rep in reps.items() for part in PARTS
            for r in rep.get(part, []) for comp in COMPONENTS if _finite(r.get(comp))]


def _finite(v):
    return isinstance(v, (int, float)) and math.isfinite(v)


def holm_tables(tests):
    """({(arch, part, comp): Holm-adjusted p (T,) over its own readable thresholds}, {test tuple: Holm-adjusted p
    over every test of the study}), keyed so each family is explicit."""
    own = {}
    for key in dict.fromkeys(t[:3] for t in tests):
        own[key] = adjust_pvalues(np.array([[t[4] for t in tests if t[:3] == key]]), "holm")[0]
    study = adjust_pvalues(np.array([[t[4] for t in tests]]), "holm")[0] if tests else []
    return own, dict(zip(tests, study))


def components_lines(arch, rep, tests):
    """The table of the four F tests of one architecture (smallest p, where, Holm in each family), then what
    follows: a component whose Holm over its thresholds is below 0.05 is said to set that part."""
    mine = [t for t in tests if t[0] == arch]
    if not mine:
        return []
    own, study = holm_tables(tests)
    m = len(tests)
    lines = ["Which seed sets the order: two-level F tests of each part's variance components over the data seed × "
             "training seed grid (a component = 0), at every readable threshold. Holm families: the test over its own "
             f"readable thresholds, and all {m} component tests of this study (3 architectures × 2 parts × 2 "
             "components × their readable thresholds).", "",
             "| part | component | p < 0.05 at (p) | smallest p | Holm over its thresholds (size) | Holm over all "
             f"{m} |", "|---|---|---|---:|---:|---:|"]
    said = []
    for part in PARTS:
        for comp in COMPONENTS:
            ts = [t for t in mine if t[1] == part and t[2] == comp]
            if not ts:
                continue
            adj = own[(arch, part, comp)]
            i = int(np.argmin([t[4] for t in ts]))
            low = [t for t in ts if t[4] < ALPHA]
            where = ", ".join(f"{t[3]:g} ({t[4]:.2g})" for t in low) or "none"
            lines.append(f"| {PARTS[part]} | {COMPONENTS[comp]} | {where} | {ts[i][4]:.2g} at {ts[i][3]:g} | "
                         f"{adj[i]:.2g} ({len(ts)}) | {study[ts[i]]:.2g} |")
            if adj[i] < ALPHA:
                said.append(_set_by(rep, part, comp, ts[i], adj[i], len(ts), study[ts[i]], m))
    return lines + [""] + said + ([""] if said else [])


def _set_by(rep, part, comp, test, own_p, k, study_p, m):
    """'- the training seed sets the kept part: …' with each seed's geometric mean at the threshold of the
    smallest p."""
    row = C.at(rep[part], test[3])
    key = 1 if comp == "p_init" else 0
    by = {}
    for (d, s), v in zip(row["pair_seeds"], row["per_pair"]):
        by.setdefault((d, s)[key], []).append(v)
    means = "; ".join(f"{COMPONENTS[comp]} {k_}: {math.exp(np.mean(np.log(v))):.2f}" for k_, v in sorted(by.items()))
    verdict_all = "below 0.05 there too" if study_p < ALPHA else "not below 0.05 there"
    return (f"- The {COMPONENTS[comp]} sets the order in the {PARTS[part]} part (which family comes first differs "
            f"from one {COMPONENTS[comp]} to the next): p {test[4]:.2g} at {test[3]:g}, Holm "
            f"{own_p:.2g} over its {k} readable thresholds (below 0.05); over all {m} component tests of the "
            f"study {study_p:.2g} ({verdict_all}). Geometric mean of the part per {COMPONENTS[comp]} at "
            f"{test[3]:g} (over the other seed): {means}.")


def data_lines(rep, tests, arch):
    """What the reversed (data) part says: not its pooled CI (1 by symmetry), but the draw-level test and each
    draw alone."""
    if "data_part" not in rep:
        return []
    own, study = holm_tables(tests)
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
