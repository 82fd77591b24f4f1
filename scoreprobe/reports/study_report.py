"""What every study's report shares (analyses/<study>/tables.py): the command that regenerates it, the runs as
JSON, and writing the markdown, the JSON and the figure beside them (`scoreprobe.studies.presets.write_report`)."""
from scoreprobe.studies import presets


def regenerate_command(study, preset, default="cpu"):
    """'python analyses/<study> --from-results', with '--preset <preset>' unless it is the default one."""
    return f"python analyses/{study}" + ("" if preset == default else f" --preset {preset}") + " --from-results"


runs_json = presets.runs_json   # the per-run rows without their curves


def write_study(results, stem, lines, rep, figure=None):
    """`presets.write_tables` of the report's lines ("\n".join(lines) + "\n"): <stem>.md, .json and, with
    `figure`, figure(<stem>.png); returns the .md path."""
    return presets.write_tables(results, stem, "\n".join(lines) + "\n", rep, figure)
