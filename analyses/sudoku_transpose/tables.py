"""The tables of analyses/sudoku_transpose (markdown and JSON) and its figure, from the exports only: per
architecture analyses.sudoku_transpose.transpose_split_md (families, ratios, kept and reversed parts, verdicts, which seed
sets the order), the decision table first, the runs last."""
from scoreprobe.cli.study import folder
from analyses.sudoku_transpose import transpose_split_md as T
from scoreprobe.reports.study_report import regenerate_command, runs_json, write_study
from analyses.sudoku_transpose import transpose_split as S
from scoreprobe.stats.curves import curves_of
from scoreprobe.stats.runs import run_stats
from scoreprobe.studies import format as F
from scoreprobe.studies import presets
from scoreprobe.studies.format import fmt
from analyses.sudoku_transpose.figures import transpose_figure
from analyses.sudoku_transpose import grid as grid_mod

FAMILIES = ("rows", "columns", "boxes", "cells")
COORDINATES = ("Families are named in **image coordinates**: 'rows' are the rows of the images a model is trained on "
               "and samples; on transposed data those are the columns of the grids as drawn (and 'columns' their "
               "rows); boxes and cells map to themselves.")
HOLM_FAMILY = "3 architectures × 2 parts × 2 components × their readable thresholds"


def collect(args, runs):
    """rows (per run), missing {run: why} of the planned runs, each read from its own export folder."""
    return presets.collect(runs, folder(grid_mod, args), lambda run, info: run_stats(run.name, run, info)[0])


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
    """(markdown lines, JSON-able report) of every table."""
    rows, missing = collect(args, runs)
    curves = curves_of(rows)
    lines = [f"# Sudoku rows vs columns, decided (preset {args.preset})", "",
             f"Regenerate: `{regenerate_command(grid_mod.STUDY, args.preset)}` (from the .npz exports only). "
             f"{len(rows)} of {len(runs)} planned runs done. "
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
            texts[arch], reps[arch] = T.orientation_report(grid_mod.ARCH_LABELS[arch], rs, curves, FAMILIES,
                                                           grid_mod.BY_CONSTRUCTION.get(arch, ()))
    tests = S.component_tests(reps)
    body = []
    for arch, text in texts.items():     # the families of the component tests span every architecture
        body += text + T.data_lines(reps[arch], tests, arch) + T.components_lines(arch, reps[arch], tests, HOLM_FAMILY)
    lines += T.decision_table(reps, grid_mod.ARCH_LABELS) + body + section_runs(rows, missing)
    rep = {"preset": args.preset, "n_planned": len(runs), "missing": missing, "coordinates": COORDINATES,
           "archs": reps, "runs": runs_json(rows)}
    return lines, rep


def write_all(args, runs):
    """Write <results>/sudoku_transpose_<preset>.md, .json and .png; returns the .md path."""
    lines, rep = report(args, runs)
    return write_study(args.results, f"{grid_mod.STUDY}_{args.preset}", lines, rep,
                       lambda png: transpose_figure(rep["archs"], grid_mod.ARCH_LABELS, png))
