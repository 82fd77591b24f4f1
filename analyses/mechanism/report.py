"""The report of analyses/mechanism: every number from the stores (nothing from a log), summarized by
scoreprobe.studies.battery_summary (one unit per independent thing; each series is ONE trained model: the CIs are
over its planes / items / pairs, not over training runs), the md (markdown.py), the json and the figures."""
import json
from pathlib import Path

from analyses.mechanism import measure as M
from scoreprobe.atomic import atomic_write_text
from scoreprobe.store import normalize_config
from scoreprobe.studies import battery
from scoreprobe.studies.battery_summary import summarize


def collect(args, name):
    """Everything measured for series `name`, read from its stores (nothing is computed), with its clocks."""
    series, taus = M.open_series(args, name)
    steps = M.chosen_steps(series, args.n_ckpt)
    return {**battery.collect(args, name, series, steps), "series": series, "taus": taus}


def write_report(args, timings, measure_s):
    from analyses.mechanism.markdown import markdown
    from scoreprobe.viz.mechanism import study_figures
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    stem = results / f"mechanism{args.suffix}"
    cols = {name: collect(args, name) for name in args.series}
    summary = {name: summarize(col, args) for name, col in cols.items()}
    settings = {k: v for k, v in vars(args).items() if k not in ("results", "out", "no_figures", "rereport")}
    report = normalize_config({"settings": settings, "series": summary, "timings_s": timings,
                               "measure_s": round(measure_s, 1)})
    atomic_write_text(stem.with_suffix(".json"), json.dumps(report, indent=1))
    figures = [] if args.no_figures else study_figures(summary, {n: c["anim"] for n, c in cols.items()}, stem)
    atomic_write_text(stem.with_suffix(".md"), markdown(report, figures, args))
    print(stem.with_suffix(".md").read_text())
    print(f"wrote {stem}.md, .json and {', '.join(str(f) for f in figures)}")
    return report
