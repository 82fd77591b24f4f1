"""Write the page: one HTML file with its styles, script, data (JSON) and figures (PNG) inline.

The static parts (the series, τ table, provenance, the definitions copied from
docs/definitions.md) are HTML made here, every value through `safe` (one escaping path); the
charts, basin maps, score field and the step slider are drawn by `page.js` (plain JavaScript,
shipped as package data, allowed by its hash in the page's Content-Security-Policy) from the
embedded JSON, which it reads with JSON.parse and puts on the page as text only.
"""
from pathlib import Path

from scoreprobe.reports import markdown
from scoreprobe.reports.safe import Markup, csp, escape, fill, html, join, json_text

HERE = Path(__file__).parent
MAX_SHOWN_CHARS = 20000   # a store's history or settings are shown up to this many characters
# The page's one script: these files, in this order, in one function scope (they share its helpers),
# ending with start() (page.js), which draws what the page's data hold.
SCRIPT_PARTS = ("page.js", "page_gallery.js", "page_compare.js")

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
    "gallery": ("Gallery", "The images themselves: the first samples of the clocks at each checkpoint, the plane's "
                "three anchors and endpoints picked on the basin map (click a cell there), each as its pixel "
                "grid (puzzles as symbols) titled with its state and, for a copy, the training item it equals; "
                "the rule's groups are outlined and the cells of a violated group tinted red.",
                ("Endpoint states", "The report page")),
    "field": ("Score field", "The model's score (D(x, σ) − x)/σ² on the same plane, at the same step and at "
              "σ = the basin map's σ_start, next to the perfect memorizer's and the perfect generalizer's.",
              ("Score field", "Data and models")),
    "retention": ("Retention", "Noisy copies of training and held-out items are followed down the PF-ODE: "
                  "how many return to their item, and how many another training item captures.",
                  ("Per-item basins",)),
    "dsm": ("DSM loss by σ", "The denoising loss of training vs held-out items at each noise level; a "
            "positive gap (red) means held-out items are denoised worse, i.e. memorization, dots mark the "
            "smallest σ where the gap is significant.", ("DSM loss by",)),
    "features": ("Features", "Sparse autoencoders given with the page (--sae): each one's best latents by F1 "
                 "against the rule's features, with the inputs that make them fire hardest, clean and noisy.", ()),
    "provenance": ("Provenance", "What made this page: the scoreprobe version, the settings of every "
                   "analysis, the checksums its stores record, and the command that regenerates it.",
                   ("The report page",)),
}


def _definition_blocks(heads, defs):
    """<details> with the definitions sections whose titles start with one of `heads`, and links to them."""
    picked = [(t, body) for h in heads for t, body in defs.items() if t.startswith(h)]
    if not picked:
        return Markup()
    links = join((html('<a href="#{slug}">{title}</a>', slug=markdown.slug(t), title=markdown.inline(t))
                  for t, _ in picked), " · ")
    inner = join(html("<h4>{title}</h4>{body}", title=markdown.inline(t), body=markdown.to_html(b)) for t, b in picked)
    return html('<details class="defs"><summary>Definitions: {links}</summary><div class="defs-body">{inner}'
                "</div></details>", links=links, inner=inner)


def _table(rows, cls="kv"):
    """A two-column table of (label, value) rows; values are text, or Markup made with `safe.html`."""
    body = join(html("<tr><th>{k}</th><td>{v}</td></tr>", k=k, v=v) for k, v in rows)
    return html('<table class="{cls}">{body}</table>', cls=cls, body=body)


def _notes(notes, section):
    return join(html('<p class="note">⚠ {n}</p>', n=n) for s, n in notes if s == section)


def _section(name, body, defs, notes, sections=None):
    """One <section> of the page: its title, one-line explanation, notes, body and definitions
    (`sections`: the page's {name: (title, line, definition headings)}, default SECTIONS)."""
    title, line, heads = (sections or SECTIONS)[name]
    return html('<section id="{name}"><h2>{title}</h2><p class="lede">{line}</p>{notes}{body}{defs}</section>',
                name=name, title=title, line=line, notes=_notes(notes, name), body=body,
                defs=_definition_blocks(heads, defs))


def _clip(text, limit=MAX_SHOWN_CHARS):
    """`text` cut to `limit` characters, saying how much was left out (a store's history or config can be long)."""
    text = str(text)
    return text if len(text) <= limit else text[:limit] + f" … ({len(text) - limit} more characters not shown)"


MAX_SETTING_ROWS = 400   # rows of one settings table at most (a store's config can be long)
MAX_VALUE_CHARS = 400    # characters of one setting's value shown at most


def _readable(value):
    """A config value as text a reader scans: numbers with %g, lists joined by commas, none for null."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_readable(v) for v in value[:64]) + (f", … ({len(value) - 64} more)" if len(value) > 64 else "")
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_readable(v)}" for k, v in value.items())
    return str(value)


def settings_rows(config, prefix=""):
    """(setting, value) text rows of a nested config: dotted keys in sorted order, readable values."""
    if not isinstance(config, dict):
        return [(prefix or "value", _clip(_readable(config), MAX_VALUE_CHARS))]
    rows = []
    for key in sorted(config, key=str):
        name = f"{prefix}.{key}" if prefix else str(key)
        rows += settings_rows(config[key], name) if isinstance(config[key], dict) and config[key] else \
            [(name, _clip(_readable(config[key]), MAX_VALUE_CHARS))]
    return rows


def _settings_table(rows):
    """A setting | value table (escaped like every value), at most MAX_SETTING_ROWS rows, saying what is cut."""
    shown = list(rows)[:MAX_SETTING_ROWS]
    more = len(rows) - len(shown)
    body = join(html("<tr><td>{k}</td><td>{v}</td></tr>", k=k, v=v) for k, v in shown)
    tail = html('<tr><td colspan="2">… {n} more settings not shown</td></tr>', n=more) if more > 0 else Markup()
    return html('<table class="kv settings"><tr><th>setting</th><th>value</th></tr>{body}{tail}</table>',
                body=body, tail=tail)


def _model_rows(models, steps):
    """(setting, value) rows of the per-step model identities a store records (sweep.identity)."""
    from scoreprobe.sweep.identity import describe
    rows = []
    for step, model in zip(steps, models if isinstance(models, list) else []):
        text = describe(model) if isinstance(model, dict) else _readable(model)
        rows.append((f"model measured at step {step}", _clip(text, MAX_VALUE_CHARS)))
    return rows


def _store_block(section, rec):
    steps = rec["steps"]
    extra = rec["extra"] if isinstance(rec["extra"], dict) else {}
    extra_rows = _model_rows(extra.get("models"), steps) + settings_rows({k: v for k, v in extra.items()
                                                                          if k != "models"})
    per_step = join(html("<tr><td>{s}</td><td><code>{d}</code></td></tr>", s=s, d=d)
                    for s, d in zip(steps, rec["step_digests"]))
    return html(
        '<div class="store"><h4>{section} — <code>{path}</code> ({origin})</h4>'
        "<p>{n} steps; record digest <code>{digest}</code> (BLAKE2b of the commit record holding {n_sums} chunk "
        "checksums, verified when read)</p>"
        "<details><summary>settings (scoreprobe_config)</summary>{config}</details>"
        "<details><summary>models measured and record</summary>{extra}</details>"
        '<details><summary>per-step digests</summary><table class="digests">{per_step}</table></details>'
        "<details><summary>history</summary><pre>{history}</pre></details></div>",
        section=section, path=rec["path"], origin=rec["origin"], n=len(steps), digest=rec["record_digest"],
        n_sums=rec["n_checksums"], config=_settings_table(settings_rows(rec["config"])),
        extra=_settings_table(extra_rows), per_step=per_step, history=_clip(rec["history"]))


def _provenance(prov):
    rows = [("scoreprobe", prov["version"]), ("generated", prov["generated"]),
            ("regenerate", html('<code class="cmd">{c}</code>', c=prov["command"])),
            ("packages", ", ".join(f"{k} {v}" for k, v in prov["packages"].items()))]
    sizes = html("<h4>report sizes</h4>{t}", t=_settings_table(settings_rows(prov["sizes"])))
    return _table(rows) + sizes + join(_store_block(s, rec) for s, rec in prov["stores"].items())


def _clock_table(c):
    """The τ table of a clocks payload (its values checked by checks.check_clock_attrs)."""
    def fmt(t):
        v = "not reached" if t["value"] is None else f"{t['value']:.0f}"
        ci = "" if not t["ci"] else " [" + " – ".join("not reached" if x is None else f"{x:.0f}" for x in t["ci"]) + "]"
        return v + ci
    names = {"tau_rule": "τ_rule", "tau_novel": "τ_novel", "tau_mem": "τ_mem"}
    rows = [(names[k], fmt(t)) for k, t in c["taus"].items()]
    w = c["window"]
    if w["open"]:
        spans = ", ".join(f"{lo:.0f} – {hi:.0f}" for lo, hi in w["intervals"])
        width = "not defined" if w["log10_width"] is None else f"{w['log10_width']:.2f}"
        ci = f" [{w['log10_width_ci'][0]:.2f}, {w['log10_width_ci'][1]:.2f}]" if len(w["log10_width_ci"]) == 2 and \
            None not in w["log10_width_ci"] else ""
        text = f"open: steps {spans}, log10 width {width}{ci}" + \
            (" (still open at the last checkpoint)" if w["censored"] else "")
    else:
        text = w["status"] + (f" — {w['undecided']}" if w.get("undecided") else "")   # stats.taus.window_status
    rows.append(("innovation window", text))
    if c["under_resolved"]:
        rows.append(("under-resolved", ", ".join(c["under_resolved"]) + ": no checkpoint within a factor 1.5"))
    level = round(100 * (0.95 if c["ci"] is None else c["ci"]))
    n_boot = "an unrecorded number of" if c["n_boot"] is None else c["n_boot"]
    return _table(rows, "kv taus") + html(
        '<p class="small">{level}% bootstrap CIs over {n_boot} resamples; ribbons: 95% Wilson intervals of each '
        "fraction over {n} samples.</p>", level=level, n_boot=n_boot, n=c["n_samples"])


BODIES = {
    "clocks": lambda p: Markup('<div id="clocks-chart" class="chart"></div>') + _clock_table(p),
    "basins": lambda p: Markup('<div class="plane-row"><div id="basin-panel"></div><div id="shares-panel"></div></div>'),
    "field": lambda p: Markup('<div id="field-panel" class="plane-row"></div>'),
    "retention": lambda p: Markup('<div id="retention-chart" class="chart"></div>'),
    "gallery": lambda p: Markup('<div id="gallery-panel"></div>'),
    "dsm": lambda p: html('<div class="figs"><img alt="DSM gap heat map" src="data:image/png;base64,{heat}">'
                          '<img alt="DSM loss by sigma" src="data:image/png;base64,{losses}"></div>',
                          heat=p["heatmap"], losses=p["losses"]),
}


GALLERY_WITHOUT_BASINS = ("The images themselves: the first samples of the clocks at each checkpoint, each as its "
                          "pixel grid (puzzles as symbols) titled with its state and, for a copy, the training item "
                          "it equals; the rule's groups are outlined and the cells of a violated group tinted red.")


def _sections(payloads, defs, notes, series_rows):
    parts = [_section("series", _table(series_rows), defs, notes)]
    # without basin maps (a GPT series, or --sections without basins) the gallery has no anchors or endpoints to name
    own = SECTIONS if "basins" in payloads else {**SECTIONS, "gallery": (SECTIONS["gallery"][0], GALLERY_WITHOUT_BASINS,
                                                                         SECTIONS["gallery"][2])}
    for name in ("clocks", "basins", "gallery", "field", "retention", "dsm"):
        if name == "basins" and "basins" in payloads:   # the slider stays in view over the linked sections
            parts.append(Markup('<div class="linked"><div id="plane-controls"></div>'))
        if name in payloads:
            parts.append(_section(name, BODIES[name](payloads[name]), defs, notes, own))
        else:
            parts.append(html('<section id="{name}"><h2>{title}</h2><p class="lede">not computed for this page</p>'
                              "{notes}</section>", name=name, title=SECTIONS[name][0], notes=_notes(notes, name)))
        if name == "retention" and "basins" in payloads:
            parts.append(Markup("</div>"))
    if "features" in payloads:                          # only when SAEs were given (reports.features_section)
        from scoreprobe.reports.features_section import features_body
        parts.append(_section("features", features_body(payloads["features"]), defs, notes))
    return parts


def script_text():
    """The page's one script: SCRIPT_PARTS in one function scope, then start()."""
    parts = [(HERE / name).read_text(encoding="utf-8") for name in SCRIPT_PARTS]
    return '"use strict";\n(function () {\n' + "\n".join(parts) + "\nstart();\n})();\n"


def assemble(title, nav, parts, data, banner=None):
    """A whole page from its sections: the template with the CSP of its script and style, `nav`
    ((anchor, title) pairs), the sections (Markup), the data as JSON text, and the definitions."""
    links = join(html('<a href="#{k}">{t}</a>', k=k, t=t) for k, t in nav) + \
        Markup('<a href="#definitions">Definitions</a>')
    style = (HERE / "page.css").read_text(encoding="utf-8")
    script = script_text()
    template = (HERE / "page.html").read_text(encoding="utf-8")
    text = fill(template, CSP=csp(script, style), TITLE=escape(title), STYLE=Markup(style), NAV=links,
                BANNER=Markup() if banner is None else banner, SECTIONS=join(parts, "\n"), DEFINITIONS=markdown.to_html(markdown.definitions_text()),
                DATA=json_text(data), SCRIPT=Markup(script))
    return str(text)


def page_html(title, series_rows, payloads, notes, prov):
    """The whole page as a string. series_rows: (label, text or Markup) rows; every value from a store,
    a run directory or the user is escaped by `safe` as it is put in (payloads go in as JSON text)."""
    defs = markdown.sections(markdown.definitions_text())
    parts = _sections(payloads, defs, notes, series_rows)
    parts.append(_section("provenance", _provenance(prov), defs, notes))
    data = {k: v for k, v in payloads.items() if k not in ("dsm", "features")}
    nav = [(k, v[0]) for k, v in SECTIONS.items() if k != "features" or "features" in payloads]
    return assemble(title, nav, parts, data, _notes(notes, "page"))
