"""One offline HTML page comparing runs (`scoreprobe compare ... --report`, `sp.compare_report`).

Made with the report's machinery (`render.assemble`: the same template, script, styles, escaping and
Content-Security-Policy): the runs, the τ table with CIs and the differences to the first run
(the text of `stats.compare.table_rows` / `difference_rows`, as `scoreprobe compare` prints them),
the curves of every run overlaid in its own colour with τ and their CIs as bands (drawn by the
page's script from the embedded numbers), and the provenance. Every value from a run, a store or
the user is escaped by `safe` where it enters the HTML.
"""
import datetime
import json
import math
import os
import shlex
from pathlib import Path

import xarray as xr

from scoreprobe.errors import ConfigError
from scoreprobe.limits import MAX_PAGE_BYTES
from scoreprobe.reports import markdown, render
from scoreprobe.reports.safe import Markup, html, join

SECTIONS = {
    "runs": ("The runs", ("What was compared: each run's name, what it was read from, its checkpoints and the "
                          "settings its clocks were measured with."), ("Comparing runs",)),
    "taus": ("τ table", ("τ_rule, τ_novel and τ_mem of each run with their bootstrap CIs and its innovation window "
                         "(each from the run's own checkpoints), then each run's differences to the first with CIs."),
             ("Clocks", "Comparing runs")),
    "curves": ("Curves overlaid", ("Rule accuracy (solid) and memorized share (dashed) of every run in its own "
                                   "colour, dots at its own checkpoints; each τ_rule and τ_mem as a dashed line with "
                                   "its CI shaded, the thresholds dotted."), ("Sample metrics",)),
    "provenance": ("Provenance", ("What made this page: the scoreprobe version, the step axis, the bootstrap "
                                  "settings and the command that remakes it."), ("Comparing runs",)),
}
CURVES = ("rule_acc", "mem_ratio", "novel_valid")


def _exact(v):
    """A float for JSON as it is (no rounding), None for NaN / inf / None."""
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def compare_payload(ds):
    """The page's data of a compare Dataset: runs, their colours (viz.compare.run_color), the step
    axis, measured (run, step), the curves (run, step; null outside a run's range), τ and CIs (run,)."""
    from scoreprobe.viz.compare import run_color
    runs = [str(n) for n in ds["run"].values]
    taus = {}
    for key in ("tau_rule", "tau_novel", "tau_mem"):
        if key in ds and ds[key].dims == ("run",):
            ci = ds[key + "_ci"].values if key + "_ci" in ds else [[math.nan, math.nan]] * len(runs)
            taus[key] = {"value": [_exact(v) for v in ds[key].values], "ci": [[_exact(a), _exact(b)] for a, b in ci]}
    measured = ds["measured"].values.tolist() if "measured" in ds else [[True] * ds.sizes["step"]] * len(runs)
    return {"runs": runs, "colors": [run_color(i) for i in range(len(runs))],
            "steps": [int(s) for s in ds["step"].values], "measured": measured,
            "curves": {c: [[_exact(v) for v in row] for row in ds[c].values] for c in CURVES if c in ds},
            "taus": taus, "thresholds": {"rule": _exact(ds.attrs.get("rule_threshold")),
                                         "mem": _exact(ds.attrs.get("mem_threshold"))}}


def _config(ds, i):
    try:
        value = json.loads(str(ds["config"].values[i])) if "config" in ds else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _runs_table(ds, sources):
    head = ("run", "read from", "checkpoints", "samples", "clocks settings")
    rows = []
    for i, name in enumerate(ds["run"].values):
        cfg = _config(ds, i)
        measured = ds["step"].values[ds["measured"].values[i]] if "measured" in ds else ds["step"].values
        span = f"{len(measured)}: {int(measured[0])} … {int(measured[-1])}" if len(measured) else "0"
        shown = {k: cfg[k] for k in ("rule", "n_samples", "seed", "n_steps", "sampler") if k in cfg}
        rows.append((str(name), sources[i] if sources and i < len(sources) else "a Dataset", span,
                     str(cfg.get("n_samples", "")), html("<code>{c}</code>", c=render._clip(json.dumps(shown), 600))))
    return _grid(head, rows)


def _grid(head, rows):
    """A table with a header row; cells are text or Markup made with `safe.html`."""
    top = join(html("<th>{h}</th>", h=h) for h in head)
    body = join(html("<tr>{cells}</tr>", cells=join(html("<td>{c}</td>", c=c) for c in r)) for r in rows)
    return html('<table class="grid"><thead><tr>{top}</tr></thead><tbody>{body}</tbody></table>', top=top, body=body)


def _tau_tables(ds):
    from scoreprobe.stats.compare import DIFFERENCES, difference_rows, table_rows
    head, rows = table_rows(ds)
    out = html('<div id="tau-table">{t}</div>', t=_grid(head, rows))
    diffs = difference_rows(ds)
    if diffs:
        labels = [label for key, label in DIFFERENCES if key in ds]
        level = round(100 * ds.attrs.get("ci", 0.95))
        dhead = ("run", "vs") + tuple(f"Δ log10 {x} [{level}% CI]" if x != "window width" else
                                      f"Δ window log10 width [{level}% CI]" for x in labels) + ("bootstrap", "data")
        drows = [(name, ref, *(text for _, text in parts), how, data) for name, ref, how, data, parts in diffs]
        out += html('<h4>Differences to the first run</h4><div id="diff-table">{t}</div><p class="small">Δ log10 τ = '
                    "log10((τ + 1) / (τ_first + 1)); NaN, naming the run, where either τ is not reached (or a window is "
                    "closed); ±∞: an interval end where the τ is not reached in enough resamples.</p>", t=_grid(dhead, drows))
    return out


def _provenance(ds, command):
    from scoreprobe import __version__
    rows = [("scoreprobe", __version__),
            ("generated", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
            ("step axis", ds.attrs.get("step_axis", "")), ("reference run", ds.attrs.get("reference", "")),
            ("bootstrap", f"{ds.attrs.get('n_boot', '')} resamples, {ds.attrs.get('ci', '')} level"),
            ("thresholds", f"rule {ds.attrs.get('rule_threshold', '')}, memorized {ds.attrs.get('mem_threshold', '')}")]
    if command:
        rows.append(("regenerate", html('<code class="cmd">{c}</code>', c=command)))
    return render._table(rows)


def compare_html(ds, sources=None, command=None, title=None):
    """The page of a compare Dataset (sp.compare) as a string. sources: what each run was read from (text)."""
    if "run" not in ds.dims or "rule_acc" not in ds:
        raise ConfigError("a compare page needs a compare() Dataset (rule_acc along run and step)")
    defs = markdown.sections(markdown.definitions_text())
    names = [str(n) for n in ds["run"].values]
    bodies = {"runs": _runs_table(ds, sources), "taus": _tau_tables(ds),
              "curves": Markup('<div id="compare-chart" class="chart"></div>'), "provenance": _provenance(ds, command)}
    parts = [render._section(k, bodies[k], defs, [], SECTIONS) for k in SECTIONS]
    title = title or "scoreprobe compare — " + ", ".join(names)[:200]
    return render.assemble(title, [(k, v[0]) for k, v in SECTIONS.items()], parts, {"compare": compare_payload(ds)})


def command_line(items, out, names=None, **options):
    """The `scoreprobe compare` command that remakes the page (for runs given as paths); options:
    {name: value} of its other options (n_boot=1000 -> --n-boot 1000; None left out)."""
    args = ["scoreprobe", "compare", *(os.fspath(i) for i in items)]
    if names:
        args += ["--names", ",".join(names)]
    for k, v in options.items():
        if v is not None:
            args += ["--" + k.replace("_", "-"), str(v)]
    return " ".join(shlex.quote(a) for a in args + ["--report", os.fspath(out)])


def write_compare_page(ds, out, sources=None, command=None):
    """Write the page of a compare Dataset to `out` (atomically); returns (path, bytes)."""
    from scoreprobe.atomic import check_out_path
    from scoreprobe.reports import write_atomic
    out = check_out_path(out, "write_compare_page: out")
    text = compare_html(ds, sources, command)
    size = len(text.encode("utf-8"))
    if size > MAX_PAGE_BYTES:
        raise ConfigError(f"the page would take {size / 2**20:.0f} MiB, more than the limit {MAX_PAGE_BYTES >> 20} MiB "
                          "(scoreprobe.limits.MAX_PAGE_BYTES); nothing was written")
    write_atomic(out, text)
    return Path(out), size


def compare_report(items, out="compare.html", names=None, **kw):
    """One offline HTML page comparing runs: the τ table with CIs, the differences to the first run and
    the curves overlaid (one colour per run, τ bands).

    Parameters
    ----------
    items : a compare Dataset (sp.compare), or what sp.compare takes (clocks Datasets, stores, run
        directories, scaling exports), compared here with `names` and `kw` (n_samples, seed, n_boot, ...).
    out : the HTML file (written atomically; it needs nothing else to open).

    Returns
    -------
    pathlib.Path of the page.
    """
    from scoreprobe.atomic import check_out_path
    from scoreprobe.stats.compare import compare
    out = check_out_path(out, "compare_report: out")   # a NUL byte, a folder: refused before comparing
    if isinstance(items, xr.Dataset) and "run" in items.dims:
        ds, sources = items, None
    else:
        items = list(items)
        ds = compare(items, names=names, **kw)
        sources = [os.fspath(i) if isinstance(i, (str, os.PathLike)) else "a Dataset" for i in items]
    path, _ = write_compare_page(ds, out, sources)
    return path
