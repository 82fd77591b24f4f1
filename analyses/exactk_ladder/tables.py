"""The tables of analyses/exactk_ladder (markdown and JSON) and its figure, from the exports only: the sections of
analyses.exactk_ladder.rule_ladder (chance levels, count error, τ per rule, ratios with bounds), then the runs."""
from analyses.exactk_ladder import rule_ladder as L
from scoreprobe.reports.study_report import regenerate_command, runs_json, write_study
from analyses.exactk_ladder import count_error as K
from scoreprobe.stats.curves import curves_of
from scoreprobe.stats.runs import run_stats
from scoreprobe.studies import format as F
from analyses.exactk_ladder.fallback_exports import collect_first
from analyses.exactk_ladder.figures import ladder_figure
from analyses.exactk_ladder import grid as grid_mod


def collect(args, runs):
    """rows (per run, with its label, count error and the export it was read from), missing {run: why}."""
    def row_of(run, info, folder):
        row = run_stats(run.name, run, info)[0]
        row.update(label=grid_mod.label(run), source=folder.name, n_samples=int(info["ds"].sizes["sample"]),
                   step0_states=K.states_key(info["ds"]["state"].values[0]),
                   data_seed=int(run.cfg.data_seed), n_train=int(run.cfg.n_train), rule_spec=run.cfg.rule,
                   counts=K.run_counts(info["ds"], run.cfg.rule["k"]) if grid_mod.has_counts(run) else None)
        return row
    return collect_first(runs, lambda run: grid_mod.export_folders(args.results, args.preset, run), row_of)


def configs(rows):
    """{label: rows sorted by seed}: exact-K by k, then parity by G."""
    out = {}
    for r in sorted(rows, key=lambda r: (r["meta"]["rule"] != "exactk", r["rule_spec"].get("k", r["meta"]["G"]),
                                         r["seed"])):
        out.setdefault(r["label"], []).append(r)
    return out


def section_runs(rows, missing):
    def bits(r):
        return "yes" if r.get("counts") else ("no (version 1)" if r["meta"]["rule"] == "exactk" else "—")
    return F.runs_section(rows, missing, [
        F.RUN, F.col("rule", lambda r: r["label"], False), F.TRAINING_SEED,
        F.col("data seed", lambda r: str(r["data_seed"])), F.STEPS, F.tau_col("tau_rule"), F.tau_col("tau_mem"),
        F.PEAK, F.FINAL_MEM, F.col("Σ bits", bits, False), F.col("export", lambda r: r["source"], False),
        F.TRAIN_S])


def report(args, runs):
    """(markdown lines, JSON-able report, {label: rows}) of every table."""
    p = grid_mod.PRESETS[args.preset]
    rows, missing = collect(args, runs)
    by, curves = configs(rows), curves_of(rows)
    lines = [f"# An exact-K ladder against parity (preset {args.preset}, N = {p['N']})", "",
             f"Regenerate: `{regenerate_command('exactk_ladder', args.preset)}` (from the .npz exports only). "
             f"{len(rows)} of {len(runs)} planned runs done. "
             "Every run is the scaling study's DiT recipe at one N (the 80×4 DiT, two_clocks' steps and checkpoints, "
             "1000 samples per checkpoint); data seed 0 (the training set) and the training seed (weights, "
             "minibatches, noise) are named apart. τ in training steps, reliably exceeds (definitions version 6, "
             "docs/definitions.md), over rule thresholds 0.3–0.95 and memorization thresholds 0.01–0.2 (the "
             "paper's 0.9 and 0.1 in bold). Count error: docs/definitions.md, \"Count error and chance levels\".", ""]
    rep = {"preset": args.preset, "N": p["N"], "n_planned": len(runs), "missing": missing}
    for name, (text, part) in (("chance", L.section_chance(by)), ("count_error", L.section_counts(by)),
                               ("taus", L.section_taus(by, curves)), ("ratios", L.section_ratios(by, curves))):
        lines += text
        rep[name] = part
    lines += section_runs(rows, missing)
    rep["runs"] = runs_json(rows, drop=("curves",))
    return lines, rep, by


def write_all(args, runs):
    """Write <results>/exactk_ladder_<preset>.md, .json and .png; returns the .md path."""
    lines, rep, by = report(args, runs)
    return write_study(args.results, f"exactk_ladder_{args.preset}", lines, rep,
                       lambda png: ladder_figure(by, rep["chance"], png))
