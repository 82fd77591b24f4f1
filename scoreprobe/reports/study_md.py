"""The markdown every study on the grid machinery writes (analyses/<study>/tables.py): the report's head (title,
the command that regenerates it, how many planned runs are done) and a claim read over thresholds (its curve
table, then one line per column: the range of the readable values and the verdict of `stats.curves.robust`), and
groups pooled over their seeds at a few thresholds."""
from scoreprobe.reports.study_report import regenerate_command
from scoreprobe.stats import curves as C
from scoreprobe.studies.format import curve_table, pooled_cell


def header(title, study, args, n_done, n_planned, text, default="cpu", source="the .npz exports"):
    """['# title (preset p)', '', 'Regenerate: `python analyses/<study> [--preset p] --from-results` (from `source`
    only). k of n planned runs done. ' + text, '']: --preset is named unless it is `default` (None: always)."""
    cmd = regenerate_command(study, args.preset, default)
    return [f"# {title} (preset {args.preset})", "",
            f"Regenerate: `{cmd}` (from {source} only). {n_done} of {n_planned} planned runs done. " + text, ""]


def curve_claims(head, columns, paper, ref, words, label=None):
    """A claim over thresholds: the table `curve_table(head, columns, paper)` ([(label, curve)]), a blank line, and
    per column '- label: <range of the readable values>; <verdict against `ref` in `words`>' (`label`(column label)
    rewrites the label of that line; default: as it is)."""
    lines = curve_table(head, columns, paper) + [""]
    return lines + [f"- {label(name) if label else name}: {C.range_text(c)}; {C.robust(c, ref, words)}"
                    for name, c in columns]


def pooled_points(rows_by, curves, labels, points):
    """One row per group of `rows_by` ({group: rows}): 'label | seeds | pooled τ at each of `points`' ([(key, t)],
    `curves.pooled_curve` read at t: a bound where a seed is censored). Returns (the table's lines, {group:
    {"<key>@<t>": pooled row}})."""
    names = [f"{key.replace('tau_', 'τ_')} at {t:g}" for key, t in points]
    lines = ["| variant | seeds | " + " | ".join(names) + " |", "|---|---:|" + "---|" * len(points)]
    out = {}
    for v, rs in rows_by.items():
        out[v] = {f"{key}@{t:g}": C.at(C.pooled_curve(rs, curves, key), t) for key, t in points}
        lines.append(f"| {labels[v]} | {len(rs)} | " + " | ".join(pooled_cell(r) for r in out[v].values()) + " |")
    return lines, out
