"""Write the page: one HTML file with its styles, script, data (JSON) and figures (PNG) inline.

The static parts (the series, τ table, provenance, the definitions copied from
docs/definitions.md) are HTML made here; the charts, basin maps, score field and the step slider
are drawn by `page.js` (plain JavaScript, shipped as package data) from the embedded JSON.
"""
import html
import json
import re
from pathlib import Path

from scoreprobe.reports import markdown

HERE = Path(__file__).parent

# section: (title, one-line explanation, headings of docs/definitions.md it rests on)
SECTIONS = {
    "series": ("The series", "Which model was measured: its rule and data, architecture, how its checkpoints "
               "are read, and which checkpoints each section covers.", ("Data and models",)),
    "clocks": ("The clocks", "Per checkpoint, the share of samples that obey the rule, that are valid and "
               "new, and that copy a training item, and beside them the same at the level of the rule's groups "
               "(group accuracy, group memorization); τ_rule, τ_novel and τ_mem are where the sample-level curves "
               "cross their thresholds, the innovation window lies between.",
               ("Sample metrics", "Clocks", "Endpoint states")),
    "basins": ("Basin evolution", "Every point of a plane through a training item, a held-out item and a "
               "rule-violating vertex is taken as a noisy sample at σ_start and followed down the PF-ODE; "
               "its colour is the state of the vertex it ends on.", ("Basin maps", "Endpoint states", "Sampler")),
    "field": ("Score field", "The model's score (D(x, σ) − x)/σ² on the same plane, at the same step and at "
              "σ = the basin map's σ_start, next to the perfect memorizer's and the perfect generalizer's.",
              ("Score field", "Data and models")),
    "retention": ("Retention", "Noisy copies of training and held-out items are followed down the PF-ODE: "
                  "how many return to their item, and how many another training item captures.",
                  ("Per-item basins",)),
    "dsm": ("DSM loss by σ", "The denoising loss of training vs held-out items at each noise level; a "
            "positive gap (red) means held-out items are denoised worse, i.e. memorization, dots mark the "
            "smallest σ where the gap is significant.", ("DSM loss by",)),
    "provenance": ("Provenance", "What made this page: the scoreprobe version, the settings of every "
                   "analysis, the checksums its stores record, and the command that regenerates it.",
                   ("The report page",)),
}


def _esc(x):
    return html.escape(str(x))


def _definition_blocks(heads, defs):
    """<details> with the definitions sections whose titles start with one of `heads`, and links to them."""
    picked = [(t, body) for h in heads for t, body in defs.items() if t.startswith(h)]
    links = " · ".join(f'<a href="#{markdown.slug(t)}">{markdown.inline(t)}</a>' for t, _ in picked)
    inner = "".join(f"<h4>{markdown.inline(t)}</h4>{markdown.to_html(b)}" for t, b in picked)
    return (f'<details class="defs"><summary>Definitions: {links}</summary>'
            f'<div class="defs-body">{inner}</div></details>') if picked else ""


def _table(rows, cls="kv"):
    body = "".join(f"<tr><th>{_esc(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="{cls}">{body}</table>'


def _notes(notes, section):
    mine = [n for s, n in notes if s == section]
    return "".join(f'<p class="note">⚠ {_esc(n)}</p>' for n in mine)


def _section(name, body, defs, notes):
    title, line, heads = SECTIONS[name]
    return (f'<section id="{name}"><h2>{_esc(title)}</h2><p class="lede">{_esc(line)}</p>{_notes(notes, name)}'
            f"{body}{_definition_blocks(heads, defs)}</section>")


def _provenance(prov):
    rows = [("scoreprobe", _esc(prov["version"])), ("generated", _esc(prov["generated"])),
            ("regenerate", f'<code class="cmd">{_esc(prov["command"])}</code>'),
            ("sizes", _esc(", ".join(f"{k}={v}" for k, v in prov["sizes"].items()))),
            ("packages", _esc(", ".join(f"{k} {v}" for k, v in prov["packages"].items())))]
    stores = []
    for section, rec in prov["stores"].items():
        steps = rec["steps"]
        extra = "".join(f"<li>{_esc(k)}: <code>{_esc(json.dumps(v)[:400])}</code></li>" for k, v in rec["extra"].items())
        per_step = "".join(f"<tr><td>{s}</td><td><code>{_esc(d)}</code></td></tr>"
                           for s, d in zip(steps, rec["step_digests"]))
        stores.append(
            f'<div class="store"><h4>{_esc(section)} — <code>{_esc(rec["path"])}</code> ({rec["origin"]})</h4>'
            f'<p>{len(steps)} steps; record digest <code>{rec["record_digest"]}</code> (BLAKE2b of the commit record '
            f'holding {rec["n_checksums"]} chunk checksums, verified when read)</p>'
            f'{"<ul>" + extra + "</ul>" if extra else ""}'
            f'<details><summary>settings (scoreprobe_config)</summary><pre>{_esc(json.dumps(rec["config"], indent=1, sort_keys=True))}</pre></details>'
            f'<details><summary>per-step digests</summary><table class="digests">{per_step}</table></details>'
            f'<details><summary>history</summary><pre>{_esc(rec["history"])}</pre></details></div>')
    return _table(rows) + "".join(stores)


def _clock_table(c):
    def fmt(t):
        v = "not reached" if t["value"] is None else f"{t['value']:.0f}"
        ci = "" if not t["ci"] else " [" + " – ".join("not reached" if x is None else f"{x:.0f}" for x in t["ci"]) + "]"
        return v + ci
    names = {"tau_rule": "τ_rule", "tau_novel": "τ_novel", "tau_mem": "τ_mem"}
    rows = [(names[k], _esc(fmt(t))) for k, t in c["taus"].items()]
    w = c["window"]
    if w["open"]:
        spans = ", ".join(f"{lo:.0f} – {hi:.0f}" for lo, hi in w["intervals"])
        ci = f" [{w['log10_width_ci'][0]:.2f}, {w['log10_width_ci'][1]:.2f}]" if len(w["log10_width_ci"]) == 2 and \
            None not in w["log10_width_ci"] else ""
        text = f"open: steps {spans}, log10 width {w['log10_width']:.2f}{ci}" + \
            (" (still open at the last checkpoint)" if w["censored"] else "")
    else:
        text = w["status"]   # probes.taus.window_status: "closed: ..."
    rows.append(("innovation window", _esc(text)))
    if c["under_resolved"]:
        rows.append(("under-resolved", _esc(", ".join(c["under_resolved"]) + ": no checkpoint within a factor 1.5")))
    return _table(rows, "kv taus") + f'<p class="small">{round(100 * (c["ci"] or 0.95))}% bootstrap CIs over ' \
        f'{c["n_boot"]} resamples; ribbons: 95% Wilson intervals of each fraction over {c["n_samples"]} samples.</p>'


BODIES = {
    "clocks": lambda p: '<div id="clocks-chart" class="chart"></div>' + _clock_table(p),
    "basins": lambda p: '<div class="plane-row"><div id="basin-panel"></div>'
                        '<div id="shares-panel"></div></div>',
    "field": lambda p: '<div id="field-panel" class="plane-row"></div>',
    "retention": lambda p: '<div id="retention-chart" class="chart"></div>',
    "dsm": lambda p: (f'<div class="figs"><img alt="DSM gap heat map" src="data:image/png;base64,{p["heatmap"]}">'
                      f'<img alt="DSM loss by sigma" src="data:image/png;base64,{p["losses"]}"></div>'),
}


def page_html(title, series_rows, payloads, notes, prov):
    """The whole page as a string."""
    defs = markdown.sections(markdown.definitions_text())
    parts = [_section("series", _table(series_rows), defs, notes)]
    for name in ("clocks", "basins", "field", "retention", "dsm"):
        if name == "basins" and "basins" in payloads:   # the slider stays in view over the linked sections
            parts.append('<div class="linked"><div id="plane-controls"></div>')
        if name in payloads:
            parts.append(_section(name, BODIES[name](payloads[name]), defs, notes))
        else:
            parts.append(f'<section id="{name}"><h2>{_esc(SECTIONS[name][0])}</h2><p class="lede">not computed '
                         f'for this page</p>{_notes(notes, name)}</section>')
        if name == "retention" and "basins" in payloads:
            parts.append("</div>")
    parts.append(_section("provenance", _provenance(prov), defs, notes))
    data = {k: v for k, v in payloads.items() if k != "dsm"}
    nav = "".join(f'<a href="#{k}">{_esc(v[0])}</a>' for k, v in SECTIONS.items()) + '<a href="#definitions">Definitions</a>'
    template = (HERE / "page.html").read_text(encoding="utf-8")
    fill = {"TITLE": _esc(title), "STYLE": (HERE / "page.css").read_text(encoding="utf-8"), "NAV": nav,
            "BANNER": "".join(f'<p class="note">⚠ {_esc(n)}</p>' for s, n in notes if s == "page"),
            "SECTIONS": "\n".join(parts), "DEFINITIONS": markdown.to_html(markdown.definitions_text()),
            "DATA": json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/"),
            "SCRIPT": (HERE / "page.js").read_text(encoding="utf-8")}
    return re.sub(r"\{\{([A-Z]+)\}\}", lambda m: fill[m.group(1)], template)   # one pass: inserted text stays as is
