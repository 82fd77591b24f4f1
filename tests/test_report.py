"""`scoreprobe report` / sp.report: one self-contained page built from the probes' stores; bad stores
are refused or named; the page works in a real headless browser (where Chromium is installed)."""
import json
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import scoreprobe as sp
from scoreprobe.cli import main
from scoreprobe.errors import ScoreprobeWarning, StoreError
from scoreprobe.reports import build, make_plan, markdown
from scoreprobe.reports.gather import store_record
from scoreprobe.probes.wilson import wilson_interval as wilson
from browser import Browser, find_chromium, wait_for

ROOT = Path(__file__).resolve().parents[1]
STEPS = [0, 1322, 36000]
TINY = dict(n_samples=40, n_steps=4, res=6, field_res=8, retention_items=3, retention_noise=1, dsm_sigmas=4,
            dsm_noise=1, dsm_heldout=8)
TINY_ARGS = [x for k, v in TINY.items() for x in ("--size", f"{k}={v}")]


def _quiet(fn, *a, **kw):
    with warnings.catch_warnings():   # 3 checkpoints: under-resolved crossings are expected
        warnings.simplefilter("ignore", ScoreprobeWarning)
        return fn(*a, **kw)


@pytest.fixture(scope="module")
def series():
    return sp.load_series()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "report.html"
    return _quiet(sp.report, None, out, steps=STEPS, sizes=TINY, progress=False)


def _data(text):
    raw = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', text, re.S).group(1)
    return json.loads(raw.replace("<\\/", "</"))


def _cache(built):
    return built.cache


def test_wilson_interval_matches_the_formula_at_known_points():
    lo, hi = wilson(np.array([0.5, 0.0]), 100)
    assert lo[0] == pytest.approx(0.40383, abs=1e-5) and hi[0] == pytest.approx(0.59617, abs=1e-5)
    z2 = 1.959963984540054 ** 2
    assert lo[1] == pytest.approx(0, abs=1e-12) and hi[1] == pytest.approx(z2 / (100 + z2))   # p = 0: upper end z²/(n + z²)


@pytest.mark.parametrize("case", ["mem first", "rule never", "both never", "open"])
def test_window_is_worded_as_window_status(case):
    """The clocks payload carries stats.taus.window_status's words, and the τ table shows them."""
    import html
    from scoreprobe.stats.taus import tau_summary, window_status
    from scoreprobe.reports.payload import clocks_payload
    from scoreprobe.reports.render import _clock_table
    from tests.test_taus import STEPS, curves
    from tests.test_window_status import CASES
    rule, mem, expected = CASES[case]
    # 1000 samples: with 40, the "mem first" rule curve (0.974 at its last checkpoint only) is not confidently
    # above 0.9 (Wilson lower bound 0.87), so τ_rule would not be reliably reached (definitions version 6)
    ds = curves(STEPS, rule, mem).assign(novel_valid=("step", rule), sample=np.arange(1000))
    ds.attrs.update(tau_summary(ds, n_boot=0, warn=False))
    payload = clocks_payload(ds)
    assert payload["window"]["status"] == expected == window_status(ds) == ds.attrs["window_status"]
    if expected != "open":      # then, where the peak's interval reaches 0.9 (peak 0.899 here), " — not decided ..."
        assert f"<td>{html.escape(expected)}" in _clock_table(payload)


def test_page_stands_alone_and_holds_every_section(built):
    text = built.path.read_text()
    assert built.bytes == len(text.encode()) and built.computed == {s: STEPS for s in sp.reports.SECTIONS}
    assert not re.search(r'\b(src|href)\s*=\s*"(?!#|data:)', text)          # nothing to fetch
    assert not re.search(r"https?://", text.replace("http://www.w3.org/2000/svg", ""))
    assert "<link" not in text and "default-src 'none'" in text                # and a CSP that forbids it
    for section in ("series", "clocks", "basins", "field", "retention", "dsm", "provenance", "definitions"):
        assert f'<section id="{section}">' in text
    assert markdown.to_html((ROOT / "docs" / "definitions.md").read_text()) in text   # copied in full
    assert "DSM gap heat map" in text and "data:image/png;base64," in text


def test_page_shows_the_stores_numbers_and_digests(built):
    text, data, cache = built.path.read_text(), _data(built.path.read_text()), _cache(built)
    bas = sp.open_store(cache / "basins.zarr")
    assert data["basins"]["steps"] == STEPS == data["clocks"]["steps"]
    frac = bas.fraction.transpose("step", "sigma_start", "state").sel(state=data["basins"]["states"]).values
    np.testing.assert_allclose(data["basins"]["fraction"], frac, atol=1e-4)
    clk = sp.open_store(cache / "clocks.zarr")
    np.testing.assert_allclose(data["clocks"]["curves"]["mem_ratio"]["y"], clk.mem_ratio.values, atol=1e-4)
    tau = clk.attrs["tau_mem"]
    assert data["clocks"]["taus"]["tau_mem"]["value"] == (None if tau != tau else pytest.approx(tau, abs=1e-3))
    for section in sp.reports.SECTIONS:
        assert store_record(cache / f"{section}.zarr")["record_digest"] in text
    assert "scoreprobe report --out" in text and "--size n_samples=40" in text   # the command that remakes it


def test_second_run_computes_nothing(built, series):
    plan = make_plan(series, built.path, steps=STEPS, sizes=TINY)
    assert plan.todo == {} and all(it.have == STEPS for it in plan.items.values())
    again = _quiet(build, plan)
    assert again.computed == {}
    strip = lambda t: re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", "", t)   # noqa: E731
    assert strip(again.path.read_text()) == strip(built.path.read_text())


def _edit_root(store, **attrs):
    """Change root attributes of a store copy (the commit record's chunk checksums stay valid)."""
    meta = json.loads((store / "zarr.json").read_text())
    for k, v in attrs.items():
        meta["attributes"][k] = v(meta["attributes"][k]) if callable(v) else v
    (store / "zarr.json").write_text(json.dumps(meta))


def test_store_of_another_series_is_refused(built, series, tmp_path, capsys):
    ds = series.dataset
    other = tmp_path / "other.zarr"
    plane = sp.auto_plane(ds, series.rule, seed=0)
    sp.basins({0: sp.EmpiricalDenoiser(ds.train)}, plane, sigma_start=1.0, res=4, n_steps=2, dataset=ds,
              rule=series.rule, out=str(other), progress=False)
    with pytest.raises(StoreError, match="another series"):
        make_plan(series, built.path, stores=[other], steps=STEPS, sizes=TINY)
    shutil.copytree(other, tmp_path / "cache" / "basins.zarr")           # a cache made for another series
    with pytest.raises(StoreError, match="another series.*choose another --cache"):
        make_plan(series, built.path, cache=tmp_path / "cache", steps=STEPS, sizes=TINY)
    with pytest.raises(SystemExit) as e:
        main(["report", "--store", str(other), "--out", str(tmp_path / "r.html")])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and "another series" in err[0]
    assert not (tmp_path / "r.html").exists()


def test_store_of_another_definitions_version_is_refused(built, series, tmp_path):
    old = tmp_path / "clocks.zarr"
    shutil.copytree(_cache(built) / "clocks.zarr", old)
    _edit_root(old, scoreprobe_config=lambda c: json.dumps({**json.loads(c), "definitions": 1}))
    with pytest.raises(StoreError, match="definitions version 1"):
        make_plan(series, built.path, stores=[old], steps=STEPS, sizes=TINY)


def test_store_without_a_complete_step_is_refused(built, series, tmp_path):
    partial = tmp_path / "basins.zarr"
    shutil.copytree(_cache(built) / "basins.zarr", partial)
    _edit_root(partial, scoreprobe_steps_written=0)
    with pytest.raises(StoreError, match="no complete step"):
        make_plan(series, built.path, stores=[partial], steps=STEPS, sizes=TINY)


def test_cache_its_probe_would_not_resume_is_refused_before_computing(built, series, tmp_path):
    old = tmp_path / "cache" / "clocks.zarr"
    shutil.copytree(_cache(built) / "clocks.zarr", old)    # as written before per-step model identities
    _edit_root(old, scoreprobe_record=lambda r: {k: v for k, v in r.items() if k != "models"})
    with pytest.raises(StoreError, match="before scoreprobe recorded which model"):
        make_plan(series, built.path, cache=tmp_path / "cache", steps=STEPS, sizes=TINY)


def test_cache_at_other_sizes_is_refused_before_computing(built, series):
    with pytest.raises(StoreError, match=r"other settings \(res"):
        make_plan(series, built.path, cache=_cache(built), steps=STEPS, sizes={**TINY, "res": 7})
    with pytest.raises(StoreError, match=r"other settings \(plane"):
        make_plan(series, built.path, cache=_cache(built), steps=STEPS, sizes=TINY, plane="train:0,heldout:0,violating:0")


def test_the_default_cache_is_shared_per_series_and_sizes_not_per_page_name(built, series):
    """Another page name of the same series and sizes computes nothing; other sizes or another plane get a
    cache of their own (nothing refused), next to the page."""
    other_page = make_plan(series, built.path.parent / "another-name.html", steps=STEPS, sizes=TINY)
    assert other_page.cache == built.cache and other_page.todo == {}
    assert built.cache.parent == built.path.parent / "report.cache"
    bigger = make_plan(series, built.path, steps=STEPS, sizes={**TINY, "res": 7})
    moved = make_plan(series, built.path, steps=STEPS, sizes=TINY, plane="train:0,heldout:0,violating:0")
    assert len({bigger.cache, moved.cache, built.cache}) == 3
    assert bigger.items["basins"].todo == STEPS and moved.items["basins"].todo == STEPS


def test_a_store_with_fewer_checkpoints_is_named_on_the_page(built, series, tmp_path):
    short = tmp_path / "short-clocks.zarr"
    _quiet(sp.clocks, series, n_samples=20, n_steps=2, steps=[36000], out=str(short), progress=False)
    plan = make_plan(series, tmp_path / "page.html", stores=[short], cache=_cache(built), steps=STEPS, sizes=TINY)
    assert plan.todo == {} and plan.items["clocks"].given
    page = _quiet(build, plan)
    assert [s for s, _ in page.notes] == ["clocks"]
    assert "holds 1 checkpoints; 2 of the 3 the other sections show are not in it" in page.path.read_text()
    assert _data(page.path.read_text())["clocks"]["steps"] == [36000]


def test_cli_says_what_it_reuses_and_writes_the_page(built, tmp_path, capsys):
    out = tmp_path / "cli.html"
    main(["report", "--out", str(out), "--cache", str(_cache(built)), "--steps", ",".join(map(str, STEPS)), *TINY_ARGS])
    text = capsys.readouterr().out
    assert "nothing to compute" in text and f"wrote {out}" in text
    assert _data(out.read_text())["basins"]["steps"] == STEPS
    with pytest.raises(SystemExit) as e:
        main(["report", "--size", "bogus=1", "--out", str(tmp_path / "x.html")])
    assert e.value.code == 2 and "unknown report size 'bogus'" in capsys.readouterr().err


@pytest.mark.skipif(find_chromium() is None, reason="needs Chromium (apt-get install chromium)")
def test_page_in_headless_chromium(built, tmp_path):
    url = built.path.resolve().as_uri()
    with Browser() as b:
        b.goto(url)
        assert wait_for(lambda: b.js("window.__report && window.__report.ready"))
        frame = lambda: (b.js("document.getElementById('basin-canvas').dataset.frame"),   # noqa: E731
                         b.js("document.getElementById('shares').innerText"),
                         b.js("document.querySelector('#field-panel canvas').dataset.frame"))
        first = frame()
        b.js("(() => { const s = document.getElementById('step-slider'); s.value = s.max; "
             "s.dispatchEvent(new Event('input')); })()")
        last = frame()
        assert first[0] == "step=0 sigma_start=1" and last[0] == "step=36000 sigma_start=1"
        assert first[1] != last[1] and "share of the plane at step 36000" in last[1]
        assert first[2] == "step=0 sigma=1" and last[2] == "step=36000 sigma=1"      # the field follows
        b.js("document.getElementById('play').click()")
        assert wait_for(lambda: frame()[0] == "step=0 sigma_start=1", timeout=5)      # play wraps to the start
        b.js("document.getElementById('play').click()")
        b.screenshot(tmp_path / "page.png")
        print(f"render {b.js('window.__report.ready'):.0f} ms; page {built.bytes / 1e6:.2f} MB")
        assert b.errors() == []
        assert [u for u in b.requests() if u != url and not u.startswith("data:")] == []
    assert (tmp_path / "page.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_field_on_another_plane_is_named_on_the_page(built, series, tmp_path):
    other = sp.plane_from_spec("train:0,heldout:0,violating:0", series.dataset, series.rule)
    field = tmp_path / "field.zarr"
    sp.score_field(series, other, [0.5, 1.0, 2.0], res=4, steps=STEPS, out=str(field), progress=False)
    plan = make_plan(series, tmp_path / "page.html", stores=[field], cache=_cache(built), steps=STEPS, sizes=TINY)
    page = _quiet(build, plan)
    assert ("field", "the score field store is on another plane than the basin maps: the two are not the same "
                     "points") in page.notes
    assert "another plane than the basin maps" in page.path.read_text()


def test_a_store_measured_on_another_model_is_refused_and_one_without_identities_named(built, series, tmp_path):
    other = tmp_path / "other-model.zarr"
    shutil.copytree(_cache(built) / "basins.zarr", other)
    _edit_root(other, scoreprobe_record=lambda r: {**r, "models": [{"weights": "0" * 16}] + r["models"][1:]})
    with pytest.raises(StoreError, match="step 0 was measured on another model"):
        make_plan(series, built.path, stores=[other], steps=STEPS, sizes=TINY)
    legacy = tmp_path / "legacy.zarr"
    shutil.copytree(_cache(built) / "basins.zarr", legacy)
    _edit_root(legacy, scoreprobe_record=lambda r: {k: v for k, v in r.items() if k != "models"})
    plan = make_plan(series, built.path, stores=[legacy], steps=STEPS, sizes=TINY)
    assert [s for s, n in plan.notes if "does not record which model" in n] == ["basins"]
