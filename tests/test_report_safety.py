"""The report page cannot run a sender's script (issue 33): one escaping path (scoreprobe/reports/safe.py),
embedded JSON that cannot end its element, a Content-Security-Policy that allows the page's own script
by its hash and nothing else; and an injection corpus rendered into one real page, loaded in headless
Chromium, where no injected script runs and the page's own script still works."""
import ast
import base64
import hashlib
import json
import re
import shutil
import warnings
from pathlib import Path

import pytest

import scoreprobe as sp
from abuse_corpus import CFG
from abuse_report import VECTORS, _edit
from page_markup import injected_markup
from browser import Browser, find_chromium, wait_for
from scoreprobe.cli import main
from scoreprobe.errors import StoreError
from scoreprobe.reports import safe
from scoreprobe.training.train import TrainConfig, train_run

ROOT = Path(__file__).resolve().parents[1]
TINY = {"n_samples": 8, "n_steps": 2, "res": 4}
RUN_NAME = "run<img src=x onerror=document.title='pwned-name'>"
needs_chromium = pytest.mark.skipif(find_chromium() is None, reason="needs Chromium (apt-get install chromium)")


# ---------------------------------------------------------------------------------------------
# The escaping path
# ---------------------------------------------------------------------------------------------

def test_escape_and_templates():
    assert safe.escape("<a href=\"x\" title='y'>&</a>") == "&lt;a href=&quot;x&quot; title=&#x27;y&#x27;&gt;&amp;&lt;/a&gt;"
    assert safe.escape(safe.escape("<")) == "&lt;"                          # escaped once, not twice
    page = safe.html('<td title="{t}">{v}</td>', t='" onmouseover="x', v="<script>")
    assert page == '<td title="&quot; onmouseover=&quot;x">&lt;script&gt;</td>' and isinstance(page, safe.Markup)
    assert safe.html("<b>{x}</b>", x=safe.html("<i>{y}</i>", y="<")) == "<b><i>&lt;</i></b>"
    assert safe.Markup("<p>") + "<img>" == "<p>&lt;img&gt;" and "<img>" + safe.Markup("<p>") == "&lt;img&gt;<p>"
    assert safe.join(["<", safe.Markup("<br>")], "&") == "&lt;&amp;<br>"
    with pytest.raises(TypeError, match="fields"):
        safe.html("<b>{x}</b>", y=1)                  # a field without a value, a value without a field
    with pytest.raises(TypeError, match="constant"):
        safe.html(safe.Markup("{x}"), x=1)
    assert safe.html("{x}{x:.2f}{x.__class__}", x=1) == "1{x:.2f}{x.__class__}"   # no format specs, no attribute access
    with pytest.raises(TypeError, match="not Markup"):
        safe.fill("{{A}}", A="<script>")


def test_embedded_json_cannot_end_or_reopen_its_element():
    data = {"a": "</script><!--<script>", "b": "x\u2028y\u2029&>", "</script>": 1}
    text = safe.json_text(data)
    assert not re.search("[<>&\u2028\u2029]", text) and json.loads(text) == data
    with pytest.raises(ValueError):
        safe.json_text({"x": float("nan")})


def test_csp_allows_exactly_the_pages_own_script_and_style():
    policy = safe.csp("alert(1)", "p{}")
    digest = "'sha256-" + base64.b64encode(hashlib.sha256(b"alert(1)").digest()).decode() + "'"
    assert f"script-src {digest};" in policy and "unsafe" not in policy
    for part in ("default-src 'none'", "connect-src 'none'", "form-action 'none'", "base-uri 'none'", "img-src data:",
                 "require-trusted-types-for 'script'"):
        assert part in policy


def _markup_builders(tree):
    """(line, kind) of every f-string, %-format or .format() whose constant text holds a tag."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
            if "<" in text and any(isinstance(v, ast.FormattedValue) for v in node.values):
                found.append((node.lineno, "f-string"))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) \
                and "<" in str(node.left.value):
            found.append((node.lineno, "%"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format" \
                and isinstance(node.func.value, ast.Constant) and "<" in str(node.func.value.value):
            found.append((node.lineno, ".format"))
    return found


def _page_modules():
    """The files the HTML pages are built from: scoreprobe.reports itself, scoreprobe.cli.report, and every module of
    scoreprobe.reports that the package's API (`scoreprobe`, its lazy exports) or any command line reaches. The
    studies' markdown writers that also live in reports/ are reached from analyses/ alone (they write .md files,
    never a page)."""
    from test_layout import _modules, _reach, import_graph
    graph, paths = import_graph(), _modules(ROOT / "scoreprobe")
    roots = ["scoreprobe", "scoreprobe.reports"] + [m for m in graph if m.startswith("scoreprobe.cli")]
    reached = set().union(*(_reach(graph, m) | {m} for m in roots))
    return sorted(paths[m] for m in reached if m == "scoreprobe.cli.report" or m.startswith("scoreprobe.reports"))


def test_no_module_of_the_report_formats_values_into_html():
    """Every value reaches the page through safe.html / safe.escape: no f-string, % or .format makes markup,
    and no other module escapes on its own (one path)."""
    files = _page_modules()
    names = {p.stem for p in files}
    assert {"__init__", "render", "payload", "gather", "plan", "safe", "markdown", "report", "compare_page"} <= names
    assert not names & {"verdict_table", "holm_md", "battery_tables"}   # markdown for analyses/, not the page
    for path in files:
        source = path.read_text()
        assert _markup_builders(ast.parse(source)) == [], path.name
        if path.name != "safe.py":
            assert not re.search(r"^\s*import html\b|^\s*from html\b|html\.escape|markupsafe", source, re.M), path.name
    assert _markup_builders(ast.parse('f"<b>{x}</b>"')) == [(1, "f-string")]   # the check can fail


def test_the_page_script_uses_no_string_to_html_sink():
    """The page's script (page.js, page_gallery.js, page_compare.js) builds elements and sets text only: the
    policy's Trusted Types would refuse an innerHTML (and its style-src an inline style attribute), so the page
    would break where it used one."""
    from scoreprobe.reports.render import SCRIPT_PARTS, script_text
    assert len(SCRIPT_PARTS) == 3
    for name in SCRIPT_PARTS:
        js = (ROOT / "scoreprobe" / "reports" / name).read_text()
        code = "\n".join(line.split("//")[0] for line in js.splitlines())
        assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function", code), name
        assert js in script_text()
    assert "JSON.parse(document.getElementById(\"report-data\").textContent)" in script_text()


# ---------------------------------------------------------------------------------------------
# One page carrying every injection vector that a store, run.json or a folder name can hold
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """(page path, run directory, given stores): a tiny run named with markup, run.json's data_seed and
    parameterization set to vectors, and clocks / basins stores whose string attributes hold them all."""
    root = tmp_path_factory.mktemp("inject")
    run = root / RUN_NAME
    train_run(TrainConfig(**CFG), run, progress=False)
    meta = json.loads((run / "run.json").read_text())
    meta["config"].update(data_seed=VECTORS[0], parameterization=VECTORS[1])
    (run / "run.json").write_text(json.dumps(meta))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sp.report(run, root / "first.html", sections=("clocks", "basins"), steps="all", sizes=TINY,
                  cache=root / "first.cache", progress=False)
        given = root / "given"
        shutil.copytree(root / "first.cache", given)
        _edit(given / "clocks.zarr", attrs={"under_resolved": VECTORS, "history": "\n".join(VECTORS)},
              config={"note": VECTORS, VECTORS[1]: VECTORS[0]}, record={"note": VECTORS})
        _edit(given / "basins.zarr", attrs={"history": "\n".join(VECTORS)})
        page = sp.report(run, root / "page.html", stores=[given / "clocks.zarr", given / "basins.zarr"], steps="all",
                         sizes=TINY, progress=False).path
    return page, run, given


def test_every_vector_is_on_the_page_as_text_only(hostile):
    page, run, _ = hostile
    text = page.read_text(encoding="utf-8")
    assert injected_markup(text) == []
    for v in VECTORS[:2]:
        assert safe.escape(v) in text     # shown (escaped) in the τ table, the settings and the history
    data = json.loads(re.search(r'id="report-data">(.*?)</script>', text, re.S).group(1))
    assert data["clocks"]["under_resolved"] == VECTORS        # the data survive intact, U+2028 included
    assert safe.escape(f"scoreprobe report — {run.name}") in text


def test_injected_markup_finds_what_escaping_would_have_let_through(hostile):
    """The static check the corpus uses: it flags each vector when written into the page unescaped."""
    text = hostile[0].read_text(encoding="utf-8")
    for v in (VECTORS[0], VECTORS[1], VECTORS[5], VECTORS[6], VECTORS[7], '<a href="http://exfil.invalid/">x</a>'):
        assert injected_markup(text.replace("<main>", "<main>" + v, 1)), v
    broken = text.replace('id="report-data">', 'id="report-data"><!--<script>', 1)
    assert "the embedded data no longer parse" in injected_markup(broken)


def _check_page_script_works(b):
    """The page's own script ran (by its hash) and its slider and σ buttons still drive the basin map."""
    assert wait_for(lambda: b.js("window.__report && window.__report.ready"))
    frame = lambda: b.js("document.getElementById('basin-canvas').dataset.frame")   # noqa: E731
    first = frame()
    b.js("(() => { const s = document.getElementById('step-slider'); s.value = s.max; "
         "s.dispatchEvent(new Event('input')); })()")
    last = frame()
    assert first.startswith("step=0 ") and last.startswith("step=12 ") and first != last
    buttons = "document.querySelectorAll('#plane-controls span button')"
    b.js(f"{buttons}[0].click()")
    assert b.js(f"{buttons}[0].classList.contains('on') && !{buttons}[1].classList.contains('on')")
    assert frame().endswith("sigma_start=0.5")


@pytest.fixture(scope="module")
def browser():
    if find_chromium() is None:
        pytest.skip("needs Chromium (apt-get install chromium)")
    with Browser() as b:
        yield b


@needs_chromium
def test_no_injected_script_runs_in_chromium_and_the_page_still_works(hostile, browser):
    page, run, _ = hostile
    b = browser
    b.events.clear()
    b.goto(page.resolve().as_uri())
    _check_page_script_works(b)
    assert b.js("document.title") == f"scoreprobe report — {run.name}"       # no vector set the title
    assert b.js("document.querySelectorAll('iframe, object, embed, base, form, meta[http-equiv=refresh], "
                "[onerror], [onload], [onmouseover]').length") == 0
    assert b.js("[...document.images].every((i) => i.src.startsWith('data:'))")
    shown = b.js("document.getElementById('clocks').textContent")
    assert all(v in shown for v in VECTORS[:2])                               # as text, in the τ table
    assert json.loads(b.js("JSON.stringify(JSON.parse(document.getElementById('report-data').textContent)"
                           ".clocks.under_resolved)")) == VECTORS
    assert b.errors() == []                                                    # nothing blocked: nothing tried
    assert [u for u in b.requests() if not u.startswith(("file:", "data:"))] == []


@needs_chromium
def test_the_policy_blocks_what_escaping_might_miss(hostile, browser, tmp_path):
    """Defence in depth: markup written into the page unescaped (as a bug would) does not run, loads
    nothing and cannot use innerHTML; the page's own script still runs by its hash."""
    text = hostile[0].read_text(encoding="utf-8")
    raw = ("<img src=x onerror=\"document.title='csp-img'\"><script>document.title='csp-script'</script>"
           "<img src=\"http://exfil.invalid/leak\"><svg onload=\"document.title='csp-svg'\"></svg>")
    bad = tmp_path / "bad.html"
    bad.write_text(text.replace("<main>", "<main>" + raw, 1), encoding="utf-8")
    b = browser
    b.events.clear()
    b.goto(bad.resolve().as_uri())
    _check_page_script_works(b)
    assert b.js("document.title") == f"scoreprobe report — {hostile[1].name}"
    tried = {e["params"]["requestId"] for e in b.events if e["method"] == "Network.requestWillBeSent"
             and "exfil" in e["params"]["request"]["url"]}
    blocked = {e["params"]["requestId"] for e in b.events if e["method"] == "Network.loadingFailed"
               and e["params"].get("blockedReason") == "csp"}
    assert tried and tried <= blocked                                          # announced, then refused by the policy
    assert not [e for e in b.events if e["method"] == "Network.responseReceived" and "exfil" in json.dumps(e)]
    assert any("Content Security Policy" in e for e in b.errors())            # blocked, not absent
    sink = b.js("(() => { try { document.body.insertAdjacentHTML('beforeend', '<b>x</b>'); return 'allowed'; } "
                "catch (e) { return e.name; } })()")
    assert sink == "TypeError"                                                 # Trusted Types: no string sinks


# ---------------------------------------------------------------------------------------------
# The reproduction of the issue, and the attributes refused by type
# ---------------------------------------------------------------------------------------------

def test_issue_reproduction_n_boot_markup_is_refused_in_one_line(hostile, tmp_path, capsys):
    _, run, given = hostile
    store = tmp_path / "clocks.zarr"
    shutil.copytree(given / "clocks.zarr", store)
    _edit(store, attrs={"n_boot": "<img src=x onerror=document.title=1337>"})
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(["report", str(run), "--sections", "clocks", "--steps", "all", "--size", "n_samples=8 n_steps=2",
              "--store", str(store), "--out", str(tmp_path / "r.html")])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and "attribute n_boot must be a non-negative integer" in err[0]
    assert not (tmp_path / "r.html").exists()
    with pytest.raises(StoreError, match="n_boot"):
        sp.report(run, tmp_path / "r.html", stores=[store], sections=("clocks",), steps="all", sizes=TINY)
