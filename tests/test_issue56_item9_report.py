"""Issue 56 item 9, from the user's side: `scoreprobe report` reuses the run's own stores found under the
commands' default names (and says so on the page), passes over the ones it cannot use with the reason,
and shows the provenance as setting | value tables, escaped."""
import json
import re
import warnings

import pytest

from scoreprobe.cli import main
from scoreprobe.errors import ScoreprobeWarning

STEPS = "0,1322,36000"
TINY = dict(n_samples=40, n_steps=4, res=6, field_res=8, retention_items=3, retention_noise=1, dsm_sigmas=4,
            dsm_noise=1, dsm_heldout=8)
SIZE_ARGS = [x for k, v in TINY.items() for x in ("--size", f"{k}={v}")]


def _run(argv, capsys):
    with warnings.catch_warnings():   # 3 checkpoints: under-resolved crossings are expected
        warnings.simplefilter("ignore", ScoreprobeWarning)
        main(argv)
    return capsys.readouterr().out


def _section(page, name):
    return re.search(rf'<section id="{name}">(.*?)</section>', page, re.S).group(1)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A folder where the user ran `scoreprobe clocks` (at the report's sizes) and `scoreprobe basins`
    (at its own defaults) on the shipped series, as docs/commands.md shows."""
    d = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
        warnings.simplefilter("ignore", ScoreprobeWarning)
        mp.chdir(d)
        main(["clocks", "--steps", STEPS, "--n-samples", "40", "--n-steps", "4", "-q"])
        main(["basins", "--steps", STEPS, "--res", "4", "--n-steps", "4", "--no-animate", "-q"])
    assert (d / "clocks.zarr").is_dir() and (d / "basins.zarr").is_dir()
    return d


def _workdir(folder, tmp_path, monkeypatch):
    """A copy of the user's folder for one test: a report writes its cache and page beside the stores, and what
    one test's report leaves there must not decide what the next one reads (order or parallel workers)."""
    import shutil
    work = tmp_path / "runs"
    shutil.copytree(folder, work)
    monkeypatch.chdir(work)
    return work


@pytest.mark.slow   # 6-11 s: -m slow, for the default suite's 480-s budget
def test_report_reuses_the_runs_clocks_and_says_why_not_its_basins(folder, tmp_path, capsys, monkeypatch):
    from scoreprobe.store import open_store
    folder = _workdir(folder, tmp_path, monkeypatch)
    out = _run(["report", "--steps", STEPS, "--sections", "clocks,basins", "--out", "page.html", *SIZE_ARGS], capsys)
    assert re.search(r"clocks +reuse clocks\.zarr, found by its name", out), out
    assert re.search(r"not used +basins\.zarr: it was computed at other settings than the page's \(res, "
                     r"sigma_start differ\); --store basins\.zarr shows it as it is", out), out
    assert re.search(r"basins +compute 3 checkpoints into", out), out
    cache = next((folder / "report.cache").iterdir())
    assert not (cache / "clocks.zarr").exists() and (cache / "basins.zarr").is_dir()   # clocks not recomputed
    page = (folder / "page.html").read_text()
    series = _section(page, "series")
    assert "reused <code>clocks.zarr</code>, found by its name" in series
    assert "found, not used" in series and "other settings than the page" in series
    data = json.loads(re.search(r'id="report-data">(.*?)</script>', page, re.S).group(1).replace("<\\/", "</"))
    assert data["clocks"]["steps"] == [0, 1322, 36000]
    tau = open_store(folder / "clocks.zarr").attrs["tau_rule"]
    assert data["clocks"]["taus"]["tau_rule"]["value"] == (None if tau != tau else pytest.approx(tau, abs=1e-3))
    assert "--store clocks.zarr" in _section(page, "provenance")   # the command that remakes the page names it


def test_a_found_store_of_fewer_checkpoints_is_not_used_and_the_page_is_computed(folder, tmp_path, capsys,
                                                                                 monkeypatch):
    folder = _workdir(folder, tmp_path, monkeypatch)
    out = _run(["report", "--steps", "0,1322,20092,36000", "--sections", "clocks", "--out", "more.html",
                "--cache", "more.cache", *SIZE_ARGS], capsys)
    assert re.search(r"not used +clocks\.zarr: it holds 3 of the 4 checkpoints the page shows \(not 20092\); "
                     r"--store clocks\.zarr shows it as it is", out), out
    assert (folder / "more.cache" / "clocks.zarr").is_dir()


def test_a_found_store_of_another_series_is_named_without_the_store_advice(folder, tmp_path, capsys, monkeypatch):
    import scoreprobe as sp
    series = sp.load_series()
    other = tmp_path / "clocks.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScoreprobeWarning)
        sp.clocks({0: sp.RuleDenoiser(series.rule)}, dataset=series.dataset, rule=series.rule, n_samples=40,
                  n_steps=4, out=str(other), progress=False)
    monkeypatch.chdir(tmp_path)
    out = _run(["report", "--steps", STEPS, "--sections", "clocks", "--out", "p.html", *SIZE_ARGS], capsys)
    line = [ln for ln in out.splitlines() if "not used" in ln]
    assert len(line) == 1 and "another series" in line[0] and "--store" not in line[0], out
    assert "clocks     compute 3 checkpoints" in out


@pytest.mark.slow   # 6-11 s: -m slow, for the default suite's 480-s budget
def test_provenance_is_a_settings_table_not_json(folder, tmp_path, capsys, monkeypatch):
    folder = _workdir(folder, tmp_path, monkeypatch)
    _run(["report", "--steps", STEPS, "--sections", "clocks,basins", "--out", "page.html", *SIZE_ARGS], capsys)
    prov = _section((folder / "page.html").read_text(), "provenance")
    assert '<table class="kv settings"><tr><th>setting</th><th>value</th></tr>' in prov
    assert "<tr><td>n_samples</td><td>40</td></tr>" in prov                    # the report's sizes
    assert "<tr><td>sigma_start</td><td>0.5, 1, 2</td></tr>" in prov
    assert "<tr><td>sampler.name</td><td>heun</td></tr>" in prov                # a store's nested setting
    assert re.search(r"<tr><td>model measured at step 1322</td><td>weights [0-9a-f]+", prov)
    assert "{&quot;" not in prov and '{"' not in prov                           # no raw JSON left
    assert "found by its name, reused" in prov


def test_settings_rows_escape_and_bound_what_a_store_says():
    from scoreprobe.reports.render import MAX_SETTING_ROWS, _settings_table, settings_rows
    rows = settings_rows({"a": {"b": [0.5, 1.0, None]}, "<script>x</script>": "<img src=x onerror=alert(1)>",
                          "flag": True})
    assert rows == [("<script>x</script>", "<img src=x onerror=alert(1)>"), ("a.b", "0.5, 1, none"), ("flag", "yes")]
    html = _settings_table(rows)
    assert "<script>" not in html and "<img" not in html and "&lt;script&gt;" in html
    many = _settings_table(settings_rows({f"k{i}": i for i in range(MAX_SETTING_ROWS + 5)}))
    assert many.count("<tr><td>k") == MAX_SETTING_ROWS and "5 more settings not shown" in many
