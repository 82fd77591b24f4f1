"""What every study's report shares (analyses/<study>/tables.py): the command that regenerates it, the runs as
JSON, and writing the markdown, the JSON and the figure beside them (`scoreprobe.studies.presets.write_report`)."""
from scoreprobe.studies import presets


def regenerate_command(study, preset, default="cpu"):
    """'python analyses/<study> --from-results', with '--preset <preset>' unless it is the default one."""
    return f"python analyses/{study}" + ("" if preset == default else f" --preset {preset}") + " --from-results"


def runs_json(rows, drop=("curve", "curves")):
    """The per-run rows without their (long) curves: the "runs" of a report's JSON."""
    return [{k: v for k, v in r.items() if k not in drop} for r in rows]


def write_study(results, stem, lines, rep, figure=None):
    """Write <results>/<stem>.md ("\\n".join(lines) + "\\n") and .json (rep), then figure(<stem>.png) when given;
    returns the .md path."""
    path = presets.write_report(results, stem, "\n".join(lines) + "\n", rep)
    if figure is not None:
        figure(path.with_suffix(".png"))
    return path.with_suffix(".md")
