"""The markdown every study on the grid machinery writes (analyses/<study>/tables.py): the report's head (title,
the command that regenerates it, how many planned runs are done) and a claim read over thresholds (its curve
table, then one line per column: the range of the readable values and the verdict of `stats.curves.robust`)."""
from scoreprobe.stats import curves as C
from scoreprobe.studies.format import curve_table


def header(title, study, args, n_done, n_planned, text, default="cpu", source="the .npz exports"):
    """['# title (preset p)', '', 'Regenerate: `python analyses/<study> [--preset p] --from-results` (from `source`
    only). k of n planned runs done. ' + text, '']: --preset is named unless it is `default` (None: always)."""
    cmd = f"python analyses/{study}" + ("" if args.preset == default else f" --preset {args.preset}") + " --from-results"
    return [f"# {title} (preset {args.preset})", "",
            f"Regenerate: `{cmd}` (from {source} only). {n_done} of {n_planned} planned runs done. " + text, ""]


def curve_claims(head, columns, paper, ref, words, label=None):
    """A claim over thresholds: the table `curve_table(head, columns, paper)` ([(label, curve)]), a blank line, and
    per column '- label: <range of the readable values>; <verdict against `ref` in `words`>' (`label`(column label)
    rewrites the label of that line; default: as it is)."""
    lines = curve_table(head, columns, paper) + [""]
    return lines + [f"- {label(name) if label else name}: {C.range_text(c)}; {C.robust(c, ref, words)}"
                    for name, c in columns]
