"""The report of any denoiser (issue 34, item 1): `scoreprobe report --denoiser FILE:FN --trust --dataset ...`
and `sp.report({step: D}, out, dataset=...)` both write the page, end to end."""
import json
import re
import warnings

import pytest

import scoreprobe as sp
from scoreprobe.errors import ConfigError, ScoreprobeWarning
from test_sources import _cli
from scoreprobe.viz.common import ANCHOR_COLORS
from test_usercode import USER_CODE
from browser import Browser, find_chromium, wait_for

RULE = sp.Parity(G=2, shape=(6, 6))
TINY = dict(n_samples=24, n_steps=3, res=4, field_res=4, retention_items=2, retention_noise=1, dsm_sigmas=3,
            dsm_noise=1, dsm_heldout=6)
TINY_ARGS = [x for k, v in TINY.items() for x in ("--size", f"{k}={v}")]


def _data(text):
    raw = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', text, re.S).group(1)
    return json.loads(raw.replace("<\\/", "</"))


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = sp.make_dataset(RULE, 20, 10, seed=0)
    data.save(tmp_path / "data.npz")
    (tmp_path / "mine.py").write_text(USER_CODE.format(n=20))
    return tmp_path


def test_cli_report_of_your_own_denoiser_writes_the_page(here, capsys):
    code, out, err = _cli(["report", "--denoiser", "mine.py:make", "--trust", "--dataset", "data.npz",
                           "--steps", "0,100", "--out", "mine.html", "--device", "cpu", *TINY_ARGS], capsys)
    assert code == 0, err
    assert "report of mine.py:make (your denoiser" in out and "wrote mine.html" in out
    text = (here / "mine.html").read_text()
    data = _data(text)
    assert data["clocks"]["steps"] == [0, 100] and data["basins"]["steps"] == [0, 100]
    assert data["clocks"]["curves"]["mem_ratio"]["y"][-1] == 1.0      # step 100: the memorizer copies
    assert data["clocks"]["curves"]["mem_ratio"]["y"][0] == 0.0       # step 0: the rule oracle never does
    assert "mine.py:make" in text and "--denoiser" in text              # the page says what was measured


@pytest.mark.slow   # 6-11 s: -m slow, for the default suite's 480-s budget
def test_api_report_of_a_mapping_with_dataset_writes_the_page(tmp_path):
    data = sp.make_dataset(RULE, 20, 10, seed=0)
    models = {0: sp.RuleDenoiser(RULE), 100: sp.EmpiricalDenoiser(data.train)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScoreprobeWarning)
        page = sp.report(models, tmp_path / "r.html", dataset=data, sizes=TINY, progress=False)
    got = _data(page.path.read_text())
    assert got["clocks"]["steps"] == [0, 100] and got["clocks"]["curves"]["mem_ratio"]["y"] == [0.0, 1.0]
    assert got["retention"]["steps"] == [0, 100] and page.computed["dsm"] == [0, 100]
    curves = got["clocks"]["curves"]                                    # group level beside the samples (item 5)
    assert curves["group_acc"]["y"] == [1.0, 1.0]                       # both oracles: every group valid
    assert curves["group_mem"]["y"][1] == 1.0 > curves["group_mem"]["y"][0]   # copies: every group a training item's
    assert [a["color"] for a in got["basins"]["anchors"]] == list(ANCHOR_COLORS)
    data.save(tmp_path / "d.npz")                                       # one denoiser (step 0), the data as a file
    one = sp.report(sp.RuleDenoiser(RULE), tmp_path / "one.html", dataset=tmp_path / "d.npz", sizes=TINY,
                    progress=False, sections=("clocks",))
    assert _data(one.path.read_text())["clocks"]["steps"] == [0]


def test_api_report_of_a_denoiser_without_data_or_with_two_data_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="dataset="):
        sp.report({0: sp.RuleDenoiser(RULE)}, tmp_path / "r.html")
    with pytest.raises(ConfigError, match="carries its own data"):
        sp.report(sp.load_series(), tmp_path / "r.html", dataset=sp.make_dataset(RULE, 4, 4))
    assert not (tmp_path / "r.html").exists()


@pytest.mark.skipif(find_chromium() is None, reason="needs Chromium (apt-get install chromium)")
def test_the_page_draws_group_curves_anchor_colours_and_explains_u_v(tmp_path):
    """In a real browser: the clocks chart's legend has the group curves, the basin legend one key per anchor in
    its colour and a line saying what u and v are (issue 34, items 5 and 8)."""
    data = sp.make_dataset(RULE, 20, 10, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScoreprobeWarning)
        page = sp.report({0: sp.RuleDenoiser(RULE), 100: sp.EmpiricalDenoiser(data.train)}, tmp_path / "r.html",
                         dataset=data, sizes=TINY, progress=False, sections=("clocks", "basins"))
    with Browser() as b:
        b.goto(page.path.resolve().as_uri())
        assert wait_for(lambda: b.js("window.__report && window.__report.ready"))
        legend = b.js("Array.from(document.querySelectorAll('#clocks-chart svg text')).map(t => t.textContent)")
        assert {"group accuracy", "group memorization", "rule accuracy", "memorized"} <= set(legend)
        keys = b.js("Array.from(document.querySelectorAll('.anchor-key')).map(r => r.innerText.trim())")
        names = [a["label"] for a in _data(page.path.read_text())["basins"]["anchors"]]
        assert keys == names
        assert b.js("document.getElementById('uv-axes').innerText").startswith(f"u: along {names[0]} → {names[1]}")
        assert "non-finite" in b.js("document.getElementById('shares').innerText")
        assert b.errors() == []
