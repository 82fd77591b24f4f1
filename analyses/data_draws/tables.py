"""The tables of analyses/data_draws (markdown and JSON) and its figure, from the exports only: per configuration
its data seed × training seed tables (`seed_grid_md.py`), the G factor with both variance components
(`g_factor_md.py`), G = 3 at larger N (`large_n_md.py`), the runs; the figure is `figures.py`'s."""
from analyses.data_draws import grid as grid_mod
from analyses.data_draws import g_factor_md, large_n_md, seed_grid_md
from scoreprobe.reports.study_md import header
from scoreprobe.stats.curves import curves_of
from scoreprobe.studies import format as F
from scoreprobe.studies import presets

INTRO = ("Each run is the scaling study's parity run (two_clocks' recipe) with its data seed (which draws the N "
         "training images and the held-out set) and its training seed (weights, minibatches, noise) named apart; data "
         "seed 0 is the scaling run itself. τ in training steps, reliably exceeds (definitions version 6, "
         "docs/definitions.md), over rule thresholds 0.3–0.95 and memorization thresholds 0.01–0.2 (the paper's 0.9 "
         "and 0.1 in bold).")
RUNS = [F.RUN, F.DATA_SEED, F.TRAINING_SEED, F.STEPS, F.tau_col("tau_rule"), F.tau_col("tau_mem"), F.WINDOW, F.PEAK,
        F.FINAL_MEM, F.TRAIN_S]


def report(args, runs):
    """(markdown, JSON-able report, rows by (G, N)) of every table."""
    p = grid_mod.PRESETS[args.preset]
    rows, missing = presets.collect_stats(args, runs, grid_mod.export_folder)
    rows_by = {(G, N): [r for r in rows if (r["meta"]["G"], r["meta"]["N"]) == (G, N)] for G, N in p["configs"]}
    rows_by = {k: v for k, v in rows_by.items() if v}
    lines = header("Data draws × training seeds", "data_draws", args, len(rows), len(runs), INTRO)
    configs = {}
    for (G, N), rs in rows_by.items():
        text, configs[f"g{G}-n{N}"] = seed_grid_md.section_config(G, N, rs, curves_of(rs))
        lines += text
    text, factor = g_factor_md.section(rows_by)
    lines += text
    text, large = large_n_md.section(rows, p)
    lines += text
    text, cross = g_factor_md.cross_n_section(rows_by, rows)
    lines += text + F.runs_section(rows, missing, RUNS)
    rep = presets.report_json(args, runs, missing, rows, configs=configs, factor=factor, large_N=large,
                              factor_cross_n=cross)
    return "\n".join(lines) + "\n", rep, rows_by


def write_all(args, runs):
    """Write <results>/data_draws_<preset>.md, .json and .png; returns the .md path."""
    from analyses.data_draws.figures import figure
    text, rep, rows_by = report(args, runs)
    return presets.write_tables(args.results, f"data_draws_{args.preset}", text, rep, lambda png: figure(rows_by, png))
