"""The report of analyses/mechanism_seeds: from the exports alone, the per-series statistics (scoreprobe.studies.
battery_series), the claims (claims.py), the json, the figure (scoreprobe.viz.battery.models_figure) and the
markdown, from the report dict alone (every number is in the json): its introduction here, the tables
analyses.mechanism_seeds.battery_models_tables' and the claims scoreprobe.reports.holm_claims'."""
import json

from analyses.mechanism_seeds import grid as G
from analyses.mechanism_seeds.claims import CLAIMS, evaluate, evaluate_controls
from analyses.mechanism_seeds.measure import settings
from scoreprobe.atomic import atomic_write_text
from analyses.mechanism_seeds.battery_models_tables import (capture_table, design_lines, dsm_table, half_change_table,
                                                      kinds_table, models_table, over_training)
from scoreprobe.reports.holm_claims import claim_statistic, claims_table
from scoreprobe.stats.claim_tests import copies_at
from scoreprobe.store import normalize_config
from scoreprobe.studies.battery_export import load_exports
from scoreprobe.studies.battery_series import model_rows, series_report


def build(args, models):
    """The JSON-able report of the planned `models` (those exported with the preset's settings)."""
    st = settings(args.preset)
    done, missing = load_exports(models, args.exports, st)
    p = G.PRESETS[args.preset]
    series = {}
    for name in G.SERIES:
        ms = [done[m.name] for m in models if m.series == name and m.name in done]
        if len(ms) >= 2:
            series[name] = series_report(ms, st, p["n_boot"])
        elif ms:
            series[name] = {"models": model_rows(ms), "n_models": len(ms)}
    claims = evaluate(series)
    for c in claims:   # the statistic as the md words it, for readers of the json (analyses/mechanism's evidence)
        c["statistic"] = list(claim_statistic(c))
    return {"preset": args.preset, "settings": {**st, "seeds": p["seeds"]}, "exports": args.exports.name,
            "n_planned": len(models), "n_done": len(done), "missing": missing, "series": series,
            "claims": claims, "controls": evaluate_controls(series, claims),
            "copies_at_claim_steps": {f"{c['series']}@{c['step']}": copies_at(series[c["series"]], c["test"][2])
                                      for c in claims if c["test"][0] == "mean above" and "step" in c}}


def write_all(args, models, figures=True):
    """Write <stem>.md, .json and .png from the exports; returns the .md path."""
    report = build(args, models)
    stem = args.stem
    stem.parent.mkdir(parents=True, exist_ok=True)
    fig = None
    if figures and any(r.get("n_models", 0) >= 2 for r in report["series"].values()):
        from scoreprobe.viz.battery import models_figure
        models_figure(report, stem.with_suffix(".png"))
        fig = stem.with_suffix(".png").name
    atomic_write_text(stem.with_suffix(".md"), markdown(report, fig))
    atomic_write_text(stem.with_suffix(".json"), json.dumps(normalize_config(report), indent=1))
    return stem.with_suffix(".md")


def intro(report):
    s, p = report["settings"], report["preset"]
    cmd = "python analyses/mechanism_seeds" + ("" if p == "cpu" else f" --preset {p}") + " --from-results"
    return [f"# The mechanism on trained seeds (preset {p})", "",
            f"Regenerate: `{cmd}` (from the per-model exports in `{report['exports']}/`). {report['n_done']} of "
            f"{report['n_planned']} planned models done" + (f"; not done: {', '.join(report['missing'])}."
                                                             if report["missing"] else "."), "",
            *design_lines(s),
            "**This study is the evidence for the mechanism's claims.** The one-model study (`mechanism.md`, "
            "`mechanism_remeasured.md`: one trained model per series, intervals over its units only) reads the same "
            "quantities as point estimates of one model; where its readings say more than the verdicts below, these "
            "verdicts stand (`mechanism.md` lists both side by side).", ""]


def markdown(report, figure=None):
    lines = intro(report) + models_table(report) + claims_table(report, len(CLAIMS))
    for name, rep in report["series"].items():
        if rep.get("n_models", 0) < 2:
            lines += [f"## {name}", "", f"{rep.get('n_models', 0)} model(s) done: the tables need 2.", ""]
            continue
        lines += (half_change_table(name, rep) + over_training(name, rep) + capture_table(name, rep)
                  + dsm_table(name, rep) + kinds_table(name, rep))
    if figure:
        lines += ["## Figure", "", f"![per-model curves and the pooled mean]({figure})", ""]
    return "\n".join(lines)
