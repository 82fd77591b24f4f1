"""`scoreprobe compare ... --report` / sp.compare_report: one offline page comparing runs, made with the report's
machinery, rendered in real headless Chromium. Ground truth: sp.compare on the same shipped scaling exports (its τ,
CIs and curves), the CLI's printed table, hostile run names shown as text only."""
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from abuse_report import VECTORS
from page_markup import injected_markup
from browser import Browser, find_chromium, wait_for

import scoreprobe as sp
from scoreprobe.cli import main
from scoreprobe.stats.compare import table_rows

ROOT = Path(__file__).resolve().parents[1]
EXPORTS = ROOT / "analyses" / "results" / "scaling_cpu"
RUNS = ("g2-n120", "g2-n120-s1", "g2-n240")
needs_chromium = pytest.mark.skipif(find_chromium() is None, reason="needs Chromium (apt-get install chromium)")


def _data(path):
    raw = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', path.read_text(), re.DOTALL).group(1)
    return json.loads(raw)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("cmp") / "compare.html"
    code = main(["compare", *(str(EXPORTS / f"{n}.npz") for n in RUNS), "--n-boot", "200", "--report", str(out)])
    assert code in (None, 0)
    return out, sp.compare([EXPORTS / f"{n}.npz" for n in RUNS], n_boot=200)


def test_the_page_holds_compares_numbers(page):
    out, ds = page
    data = _data(out)["compare"]
    assert data["runs"] == list(RUNS) and data["steps"] == ds["step"].values.tolist()
    for key in ("tau_rule", "tau_novel", "tau_mem"):
        want = [None if np.isnan(v) else float(v) for v in ds[key].values]
        assert data["taus"][key]["value"] == want                                   # exactly, not rounded
        ci = [[None if not np.isfinite(x) else float(x) for x in row] for row in ds[key + "_ci"].values]
        assert data["taus"][key]["ci"] == ci
    np.testing.assert_array_equal(np.array(data["curves"]["rule_acc"], dtype=float), ds["rule_acc"].values)
    assert data["measured"] == ds["measured"].values.tolist() and len(set(data["colors"])) == len(RUNS)
    text = out.read_text()
    assert "default-src 'none'" in text and not re.search(r'\b(src|href)\s*=\s*"(?!#|data:)', text)
    assert "scoreprobe compare" in text and "--report" in text                      # the command that remakes it


@needs_chromium
def test_compare_page_in_headless_chromium_shows_the_table_of_compare(page, tmp_path, capsys):
    out, ds = page
    head, rows = table_rows(ds)
    main(["compare", *(str(EXPORTS / f"{n}.npz") for n in RUNS), "--n-boot", "200"])
    printed = capsys.readouterr().out
    with Browser() as b:
        b.goto(out.resolve().as_uri())
        assert wait_for(lambda: b.js("window.__report && window.__report.ready"))
        shown = b.js("[...document.querySelectorAll('#tau-table tr')].map((tr) => [...tr.children].map((c) => "
                     "c.textContent))")
        assert shown[0] == list(head) and shown[1:] == [list(r) for r in rows]
        for r in rows:                                                                  # as the CLI prints them
            assert all(cell in printed for cell in r)
        tau = [[int(x) for x in re.findall(r"\d+", row[4].split(" [")[0])] for row in shown[1:]]   # τ_mem, rounded
        assert [t[0] if t else None for t in tau] == [None if np.isnan(v) else round(float(v))
                                                      for v in ds["tau_mem"].values]
        diffs = b.js("[...document.querySelectorAll('#diff-table tbody tr')].map((tr) => tr.children[0].textContent)")
        assert diffs == list(RUNS[1:])
        colours = b.js("[...document.querySelectorAll('#compare-chart polyline')].map((p) => p.getAttribute('stroke'))")
        assert len(colours) == 2 * len(RUNS) and len(set(colours)) == len(RUNS)       # one colour per run, two curves
        bands = b.js("document.querySelectorAll('#compare-chart rect[fill-opacity=\"0.13\"]').length")
        with_ci = sum(np.isfinite(ds[k + "_ci"].values[i, 0]) for k in ("tau_rule", "tau_mem") for i in range(len(RUNS))
                      if np.isfinite(ds[k].values[i]))
        assert bands == with_ci > 0                                                     # a τ band per τ with a CI
        b.screenshot(tmp_path / "compare.png")
        assert b.errors() == []
        assert [u for u in b.requests() if not u.startswith(("file:", "data:"))] == []


@needs_chromium
def test_hostile_run_names_are_text_only(tmp_path):
    """Names from --names / sp.compare_report(names=) and from file names reach the page as text."""
    named = tmp_path / (VECTORS[0] + ".npz")
    shutil.copy(EXPORTS / "g2-n120.npz", named)
    out = tmp_path / "hostile.html"
    main(["compare", str(named), str(EXPORTS / "g2-n240.npz"), "--n-boot", "20", "--report", str(out)])
    api = sp.compare_report([EXPORTS / "g2-n120.npz", EXPORTS / "g2-n240.npz", EXPORTS / "g2-n30-s1.npz"],
                            tmp_path / "api.html", names=VECTORS[1:4], n_boot=20)
    for path, names in ((out, [VECTORS[0], "g2-n240"]), (api, VECTORS[1:4])):
        text = path.read_text(encoding="utf-8")
        assert injected_markup(text) == [] and _data(path)["compare"]["runs"] == names
        with Browser() as b:
            b.goto(path.resolve().as_uri())
            assert wait_for(lambda: b.js("window.__report && window.__report.ready"))
            first = b.js("[...document.querySelectorAll('#tau-table tbody tr')].map((tr) => tr.children[0].textContent)")
            assert first == names and b.js("document.title") == "scoreprobe compare — " + ", ".join(names)
            assert b.js("document.querySelectorAll('iframe, base, meta[http-equiv=refresh], [onerror], [onmouseover]')"
                        ".length") == 0
            legend = b.js("[...document.querySelectorAll('#compare-chart text')].map((t) => t.textContent).join('|')")
            assert all(f"{n}: rule accuracy" in legend for n in names)
            assert b.errors() == []
