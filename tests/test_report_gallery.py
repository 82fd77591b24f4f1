"""The report's gallery (reports/gallery.py, page_gallery.js): samples per checkpoint with their states, the
plane's anchors, and a click on a basin-map cell showing that cell's endpoint, in real headless Chromium.

Ground truth: the clocks store's per-sample states (the gallery's samples are its first ones), the basins
store's endpoint_bits / endpoint_state / endpoint_train_index at the clicked cell, the training item a copy
names, the rule's group_valid, the plane's anchor bits in the basins config."""
import base64
import json
import re
import warnings

import numpy as np
import pytest
from browser import Browser, find_chromium, wait_for

import scoreprobe as sp
from scoreprobe.data.datasets import STATE_CODES, STATES
from scoreprobe.errors import ScoreprobeWarning, StoreError
from scoreprobe.reports.gallery import anchor_bits, endpoints_payload, rule_drawing

STEPS = [0, 1322, 36000]
K = 6     # gallery samples per checkpoint
TINY = {"n_samples": 40, "n_steps": 4, "res": 6, "field_res": 8, "retention_items": 3, "retention_noise": 1,
        "dsm_sigmas": 4, "dsm_noise": 1, "dsm_heldout": 8, "gallery": K}
needs_chromium = pytest.mark.skipif(find_chromium() is None, reason="needs Chromium (apt-get install chromium)")


def _quiet(fn, *a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScoreprobeWarning)
        return fn(*a, **kw)


def _data(path):
    raw = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', path.read_text(), re.DOTALL).group(1)
    return json.loads(raw)


def _cells(rec, shape):
    """(n, H, W) int8 cells of an image_records block."""
    return np.frombuffer(base64.b64decode(rec["cells"]), dtype=np.int8).reshape(-1, *shape[1:])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("gallery") / "report.html"
    result = _quiet(sp.report, None, out, steps=STEPS, sizes=TINY, progress=False)
    return result, sp.load_series()


def test_the_samples_are_the_first_of_the_clocks_with_their_states_and_copied_items(built):
    result, series = built
    g = _data(result.path)["gallery"]
    clocks = sp.open_store(result.cache / "clocks.zarr")
    rule, train = series.rule, series.dataset.train
    assert g["samples"]["steps"] == STEPS and g["samples"]["n"] == K and g["rule"]["shape"] == [1, 6, 6]
    for i, step in enumerate(STEPS):
        rec = g["samples"]["records"][i]
        bits = _cells(rec, rule.image_shape).reshape(K, -1).astype(np.uint8)
        np.testing.assert_array_equal(rec["state"], clocks["state"].sel(step=step).values[:K])   # the clocks' own
        for k in range(K):
            copy = rec["state"][k] == STATE_CODES["valid_memorized"]
            assert (rec["train"][k] >= 0) == copy and rec["label"][k].startswith("copy of #") == copy
            if copy:
                assert rec["label"][k] == f"copy of #{rec['train'][k]}" and np.array_equal(train[rec["train"][k]], bits[k])
        want = [np.flatnonzero(~v).tolist() for v in rule.group_valid(bits)]
        assert rec["violated"] == want and (rec["state"][0] != STATE_CODES["rule_violating"]) == (want[0] == [])
    outline = rule_drawing(rule)
    assert len(outline["groups"]) == rule.n_groups and sorted(c for grp in outline["groups"] for c in map(tuple, grp)) \
        == sorted((r, c) for r in range(6) for c in range(6))       # parity groups: every cell once


def test_every_basin_cell_points_at_its_own_endpoint(built):
    result, series = built
    g = _data(result.path)["gallery"]
    bas = sp.open_store(result.cache / "basins.zarr")
    order = ("step", "sigma_start", "v", "u")
    index = np.frombuffer(base64.b64decode(g["endpoints"]["index"]), dtype="<i2")
    recs = g["endpoints"]["records"]
    bits = _cells(recs, series.rule.image_shape).reshape(len(recs["state"]), -1)
    state = bas["endpoint_state"].transpose(*order).values.ravel()
    truth = bas["endpoint_bits"].transpose(*order, "bit").values.reshape(len(state), -1)
    train = bas["endpoint_train_index"].transpose(*order).values.ravel()
    assert g["endpoints"]["stored"] and g["endpoints"]["left_out"] == 0 and (index >= 0).all()
    assert len(recs["state"]) == g["endpoints"]["n_records"] < len(state)     # distinct endpoints, fewer than cells
    np.testing.assert_array_equal(np.array(recs["state"])[index], state)
    np.testing.assert_array_equal(np.array(recs["train"])[index], train)
    finite = state != STATE_CODES["invalid"]
    np.testing.assert_array_equal(bits[index][finite], truth[finite])
    anchors = g["anchors"]
    np.testing.assert_array_equal(_cells(anchors, series.rule.image_shape).reshape(3, -1), anchor_bits(bas, series.rule))
    assert anchors["labels"] == [str(x) for x in bas["anchor_label"].values] and anchors["label"][0].startswith("copy of #")


def test_a_store_without_endpoint_bits_shows_items_and_anchors_only(built):
    result, series = built
    bas = sp.open_store(result.cache / "basins.zarr").load()
    old = endpoints_payload(bas.drop_vars("endpoint_bits"), series.dataset, series.rule)
    recs, index = old["records"], np.frombuffer(base64.b64decode(old["index"]), dtype="<i2")
    bits = _cells(recs, series.rule.image_shape).reshape(len(recs["state"]), -1)
    image = np.array(recs["image"])[index]
    order = ("step", "sigma_start", "v", "u")
    train = bas["endpoint_train_index"].transpose(*order).values.ravel()
    held = bas["endpoint_heldout_index"].transpose(*order).values.ravel()
    anchor = bas["endpoint_anchor"].transpose(*order).values.ravel()
    assert not old["stored"] and (image == ((train >= 0) | (held >= 0) | (anchor >= 0))).all()
    hit = train >= 0
    np.testing.assert_array_equal(bits[index][hit], series.dataset.train[train[hit]])
    broken = bas.copy(deep=True)
    broken["endpoint_train_index"].values[0, 0, 0, 0] = len(series.dataset.train)      # past the training set
    with pytest.raises(StoreError, match="endpoint_train_index holds values outside"):
        endpoints_payload(broken, series.dataset, series.rule)


def _click_cell(b, r, q, nu, nv):
    """A real mouse click (CDP Input events) at the centre of basin-map cell (v index r, u index q)."""
    b.js("document.getElementById('basin-canvas').scrollIntoView({block: 'center'})")
    box = b.js("(() => { const c = document.getElementById('basin-canvas'), b = c.getBoundingClientRect(); "
               "return [b.left + c.clientLeft, b.top + c.clientTop, c.clientWidth, c.clientHeight]; })()")
    x, y = box[0] + (q + 0.5) / nu * box[2], box[1] + (nv - 1 - r + 0.5) / nv * box[3]
    for kind in ("mousePressed", "mouseReleased"):
        b.page("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)


def _panel(b):
    return b.js("(() => { const p = document.getElementById('endpoint-panel'), c = p.querySelector('.card'); "
                "return {cell: p.dataset.cell, state: p.dataset.state, train: c && c.dataset.train, "
                "cap: c && c.querySelector('.cap').textContent, "
                "px: [...p.querySelectorAll('rect.px')].map((r) => r.getAttribute('fill') === '#000' ? 1 : 0)}; })()")


@needs_chromium
def test_a_click_on_a_basin_cell_shows_its_endpoint_in_chromium(built, tmp_path):
    result, _ = built
    bas = sp.open_store(result.cache / "basins.zarr")
    nv, nu = bas.sizes["v"], bas.sizes["u"]
    with Browser(height=1000) as b:
        b.goto(result.path.resolve().as_uri())
        assert wait_for(lambda: b.js("window.__report && window.__report.ready"))
        assert b.js("document.querySelectorAll('#gallery-panel .gallery-row').length") == len(STEPS)
        assert b.js("document.querySelectorAll('#gallery-panel .gallery-row .card').length") == K * len(STEPS)
        assert b.js("document.querySelectorAll('#anchor-strip .card').length") == 3
        b.js("(() => { const s = document.getElementById('step-slider'); s.value = s.max; "
             "s.dispatchEvent(new Event('input')); })()")
        sigma = b.js("window.__report.state.sigma")
        at = bas.isel(step=len(STEPS) - 1, sigma_start=sigma)
        state = at["endpoint_state"].transpose("v", "u").values
        cells = [tuple(np.argwhere(state == code)[0]) for code in np.unique(state)] + [(0, 0), (nv - 1, nu - 1)]
        for r, q in cells:
            _click_cell(b, int(r), int(q), nu, nv)
            got = _panel(b)
            assert got["cell"] == f"36000,{float(at.sigma_start):g},{r},{q}"
            assert got["state"] == STATES[state[r, q]]
            truth = at["endpoint_bits"].transpose("v", "u", "bit").values[r, q]
            if state[r, q] != STATE_CODES["invalid"]:
                assert got["px"] == truth.tolist()
            t = int(at["endpoint_train_index"].transpose("v", "u").values[r, q])
            assert int(got["train"]) == t and (got["cap"] == f"copy of #{t}") == (t >= 0)
        assert b.js("document.querySelectorAll('#picks .card').length") == min(len(cells), 8)
        b.js("(() => { const s = document.getElementById('step-slider'); s.value = 0; "
             "s.dispatchEvent(new Event('input')); })()")      # the panel follows the slider for the same cell
        r, q = cells[-1]
        assert _panel(b)["cell"] == f"0,{float(at.sigma_start):g},{r},{q}"
        assert _panel(b)["state"] == STATES[bas["endpoint_state"].isel(step=0, sigma_start=sigma).transpose(
            "v", "u").values[r, q]]
        b.screenshot(tmp_path / "gallery.png")
        assert b.errors() == []
        assert [u for u in b.requests() if not u.startswith(("file:", "data:"))] == []


@needs_chromium
def test_puzzles_are_drawn_as_symbols_and_hostile_anchor_labels_as_text(tmp_path):
    """A Sudoku series of your own denoiser (its samples copy training items), on a plane whose anchors are
    named with markup: the gallery writes symbols 1..4 per cell, the anchors' names only as text."""
    from abuse_report import VECTORS
    from page_markup import injected_markup
    rule = sp.Sudoku(4)
    data = sp.make_dataset(rule, 24, 24, seed=0)
    D = sp.EmpiricalDenoiser(data.train)
    signed = 2.0 * data.train.astype(float) - 1
    plane = sp.Plane.through(signed[0], signed[1], 2.0 * data.heldout[0] - 1, labels=VECTORS[:3])
    store = tmp_path / "basins.zarr"
    from scoreprobe.loading.usercode import DenoiserSeries
    series = DenoiserSeries.of({0: D}, data)
    _quiet(sp.basins, series, plane, sigma_start=1.0, res=4, n_steps=4, keep_bits=True, out=str(store), progress=False)
    out = tmp_path / "sudoku.html"
    _quiet(sp.report, {0: D}, out, dataset=data, stores=[store], sections=("basins", "gallery"),
           sizes={"n_samples": 8, "n_steps": 6, "gallery": 4}, progress=False)
    assert injected_markup(out.read_text()) == []
    g = _data(out)["gallery"]
    assert g["rule"]["symbols"] and len(g["rule"]["outline"]) == 8         # the four 2x2 boxes: 8 inner edges
    with Browser() as b:
        b.goto(out.resolve().as_uri())
        assert wait_for(lambda: b.js("window.__report && window.__report.ready"))
        syms = b.js("[...document.querySelectorAll('.gallery-row .card')].map((c) => [c.dataset.train, "
                    "[...c.querySelectorAll('text.sym')].map((t) => t.textContent)])")
        copies = [(int(t), shown) for t, shown in syms if int(t) >= 0]
        assert len(syms) == 4 and copies                                          # the empirical denoiser copies
        for train_index, shown in copies:
            grid = data.train[train_index].reshape(4, 4, 4).argmax(axis=0) + 1      # (symbol, row, col) one-hot
            assert shown == [str(v) for v in grid.ravel()]
        caps = b.js("[...document.querySelectorAll('#anchor-strip .card .cap')].map((c) => c.textContent)")
        assert [c.split(": ")[0] for c in caps] == VECTORS[:3]                   # the names, as text
        assert b.js("document.title") == f"scoreprobe report — {series.path.name}"
        assert b.js("document.querySelectorAll('iframe, base, meta[http-equiv=refresh], [onerror], [onmouseover]')"
                    ".length") == 0
        assert b.errors() == []


def test_the_gallery_size_is_bounded_and_not_part_of_the_cache(tmp_path):
    from scoreprobe.errors import ConfigError
    from scoreprobe.reports.plan import default_cache
    from scoreprobe.reports.sizes import MAX_GALLERY, check_sizes
    series = sp.load_series()
    assert check_sizes({"gallery": "0"})["gallery"] == 0 and check_sizes({"gallery": MAX_GALLERY})["gallery"] == 64
    for bad in (MAX_GALLERY + 1, -1, 2.5):
        with pytest.raises(ConfigError, match="report size gallery"):
            check_sizes({"gallery": bad})
    page = tmp_path / "p.html"
    assert default_cache(page, series, {"gallery": 3}) == default_cache(page, series, {}) != \
        default_cache(page, series, {"res": 7})
