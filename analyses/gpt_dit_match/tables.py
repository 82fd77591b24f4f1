"""The tables (markdown and JSON) and the figure of the GPT–DiT match, from the exports only: the sections of
analyses.gpt_dit_match.model_match_md over the sweep, the evaluation runs and the dense-checkpoint runs, then the runs."""
import math

from scoreprobe.cli.study import folder
from analyses.gpt_dit_match import model_match_md as M
from scoreprobe.reports.study_report import regenerate_command, runs_json, write_study
from analyses.gpt_dit_match import model_match as S
from scoreprobe.stats.curves import curves_of
from scoreprobe.studies import format as F
from scoreprobe.studies import presets
from scoreprobe.studies.format import fmt
from analyses.gpt_dit_match.figures import match_figure
from analyses.gpt_dit_match import grid as grid_mod

LABELS = grid_mod.LABELS


def section_runs(rows, missing):
    def band(r):
        a = r["abrupt_common"]
        return (f"{fmt(a['abruptness'], 2)} ({fmt(a['band'][0])}–{fmt(a['band'][1])})"
                if math.isfinite(a["abruptness"]) else "—")
    return F.runs_section(rows, missing, [
        F.RUN, F.col("split", lambda r: r["split"], False), F.col("model", lambda r: LABELS[r["match_model"]], False),
        F.col("lr", lambda r: f"{r['lr']:g}"), F.DATA_SEED, F.TRAINING_SEED, F.STEPS,
        F.col("budget FLOPs", lambda r: M._g(r["budget_flops"])), F.tau_col("tau_rule"), F.tau_col("tau_mem"),
        F.col("abruptness (band steps)", band, False), F.PEAK, F.FINAL_MEM])


def report(args):
    """(markdown lines, JSON-able report, evaluation rows by model)."""
    p = grid_mod.PRESETS[args.preset]
    tuning, ready, pending, dense, chosen = grid_mod.phases(args.results, args.preset)
    rows, missing = presets.collect(tuning + ready + dense, folder(grid_mod, args), S.run_row)
    rows_by, dense_by = (M.by_model(rows, split, p["models"]) for split in ("evaluation", "dense"))
    curves = curves_of([r for r in rows if r["split"] != "tuning"])
    lines = [f"# A fair GPT–DiT match: parity G = {p['G']}, N = {p['N']} (preset {args.preset})", "",
             f"Regenerate: `{regenerate_command('gpt_dit_match', args.preset)}` (from the .npz exports only). "
             f"{len(rows)} of {len(tuning) + len(ready) + len(pending) + len(dense)} "
             f"planned runs done. Tuning split: data seed {p['tune_data_seed']}; evaluation split: data seed "
             f"{p['eval_data_seed']} (the scaling study's); training seeds named per run. τ in training steps (reliably "
             "exceeds, definitions version 6), over rule thresholds 0.3–0.95 and memorization thresholds 0.01–0.2.", "",
             M.samplers_text(rows, LABELS), ""]
    one = {r.meta["match_model"]: r for r in grid_mod.eval_runs(args.preset, {})}   # a run of each model
    text_f, flops = M.section_flops({m: one[m] for m in p["models"]}, LABELS)
    text_m, models = M.section_models(rows_by, curves, LABELS)
    text_d, dense_rep = M.section_dense(dense_by, rows_by, curves, p.get("dense_checkpoints"),
                                        next((r.cfg.n_checkpoints for r in ready if r.meta["match_model"] != "dit"),
                                             None), LABELS)
    vs = S.versus_dit(rows_by, curves, dense_by)
    lines += text_f + M.section_sweep(chosen, p, grid_mod.TUNE_THRESHOLD, LABELS) + text_m + text_d
    lines += M.section_versus(vs, LABELS) + section_runs(rows, missing)
    if pending:
        lines.append("Waiting for their sweep: " + ", ".join(sorted({LABELS[r.meta['match_model']] for r in pending})) + ".")
    rep = {"preset": args.preset, "flops": flops, "sweep": {m: {"lr": lr, "rows": rs} for m, (lr, rs) in chosen.items()},
           "models": models, "dense": dense_rep, "versus_dit": vs, "missing": missing, "runs": runs_json(rows)}
    return lines, rep, rows_by


def write_all(args):
    """Write <results>/gpt_dit_match_<preset>.md, .json and .png; returns the .md path."""
    lines, rep, rows_by = report(args)
    return write_study(args.results, f"gpt_dit_match_{args.preset}", lines, rep,
                       lambda png: match_figure(rows_by, LABELS, S.COMMON_BAND, png))
