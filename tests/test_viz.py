import itertools

import numpy as np
import pytest
from matplotlib.figure import Figure
from PIL import Image

from scoreprobe.data.datasets import STATES, make_dataset
from scoreprobe.errors import ConfigError
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.probes.basins import basins
from scoreprobe.probes.retention import retention
from scoreprobe.probes.field import score_field
from scoreprobe.data.rules import Parity
from scoreprobe.slices import auto_plane
from scoreprobe.viz import (animate_basins, new_figure, plot_basins, plot_clocks, plot_dsm_gap, plot_field,
                            plot_field_panels, plot_retention, plot_states)


@pytest.fixture(scope="module")
def setup():
    rule = Parity(G=2, shape=(2, 4), layout="random", seed=0)
    ds = make_dataset(rule, n_train=6, n_heldout=6, seed=0)
    plane = auto_plane(ds, rule, seed=0)
    m = {1: RuleDenoiser(rule), 10: EmpiricalDenoiser(ds.train[:3]), 100: EmpiricalDenoiser(ds.train)}
    b = basins(m, plane, sigma_start=(0.5, 1.0), res=8, dataset=ds, rule=rule)
    return rule, ds, plane, m, b


def test_plot_basins_shows_the_map_with_a_legend(setup):
    *_, b = setup
    fig = plot_basins(b, sigma_start=1.0, step=10)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    img = ax.images[0].get_array()
    np.testing.assert_array_equal(np.asarray(img), b.endpoint_state.sel(step=10, sigma_start=1.0).values)
    assert ax.images[0].origin == "lower"                        # row 0 = smallest v, at the bottom
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    from scoreprobe.viz.common import STATE_LABELS
    assert labels[:len(STATES)] == [STATE_LABELS[s] for s in STATES]    # then outlines / items (test_viz_explain)
    assert "step 10" in ax.get_title()
    assert len([ln for ln in ax.lines if ln.get_marker() in ("o", "s", "^")]) == 3   # anchors marked
    fig.savefig(__import__("io").BytesIO(), format="png")


def test_plot_field_and_retention(setup):
    rule, ds, plane, m, _ = setup
    f = score_field(m, plane, (0.3, 1.0), res=6, oracles=True, dataset=ds, rule=rule)
    fig = plot_field(f, sigma=0.3, step=1)
    assert isinstance(fig, Figure) and "sigma=0.3" in fig.axes[0].get_title()
    assert plot_field(f, sigma=1.0, prefix="mem_").axes[0].get_title().startswith("score field (memorizer)")
    r = retention(m, None, (0.2, 1.0), n_noise=2, n_train=2, n_heldout=2, dataset=ds, rule=rule)
    fig = plot_retention(r)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and len(ax.lines) == 4
    # the plotted curve is the held-out mean retention at the last step
    ho = r.isel(step=-1).sel(sample=r.split == "heldout").retained.mean("sample").values
    np.testing.assert_allclose(ax.lines[2].get_ydata(), ho)
    with pytest.raises(ConfigError):
        plot_basins(f)


def test_animate_gif_has_one_frame_per_step(setup, tmp_path):
    *_, b = setup
    path = animate_basins(b, tmp_path / "basins.gif", fps=4, dpi=40)
    with Image.open(path) as im:
        assert im.n_frames == 3
        assert im.info["duration"] == 250


def test_animate_from_a_store_and_errors(setup, tmp_path, monkeypatch):
    rule, ds, plane, m, _ = setup
    out = tmp_path / "b.zarr"
    basins({1: m[1], 10: m[10]}, plane, sigma_start=1.0, res=4, dataset=ds, rule=rule, out=out)
    with Image.open(animate_basins(out, tmp_path / "s.gif", dpi=30)) as im:
        assert im.n_frames == 2
    with pytest.raises(ConfigError, match="gif"):
        animate_basins(out, tmp_path / "x.avi")
    from matplotlib import animation
    monkeypatch.setattr(animation.writers, "is_available", lambda name: False)
    with pytest.raises(ConfigError, match="ffmpeg"):
        animate_basins(out, tmp_path / "x.mp4")


# ---------------------------------------------------------------------------------------------
# Score-field panels on one colour scale; animation size; step axes whose labels never overlap
# ---------------------------------------------------------------------------------------------


def _log_score(f, sigma, prefix, step=None):
    d = f.sel(sigma=sigma)
    if step is not None and "step" in d[prefix + "score_u"].dims:
        d = d.sel(step=step)
    return np.log10(np.sqrt(sum(d[prefix + k].values ** 2 for k in ("score_u", "score_v", "score_off_norm"))) + 1e-12)


def test_field_panels_share_one_colour_scale(setup):
    rule, ds, plane, m, _ = setup
    f = score_field(m, plane, (0.1, 0.3, 1.0), res=6, oracles=True, dataset=ds, rule=rule)
    fig = plot_field_panels(f, sigmas=[0.1, 1.0])
    panels, bars = fig.axes[:6], fig.axes[6:]
    assert len(bars) == 1 and bars[0].get_ylabel() == "log10 |score|"          # one shared colorbar
    titles = [ax.get_title() for ax in panels]
    assert [t.split(",")[0] for t in titles[:3]] == ["score field (model)", "score field (memorizer)",
                                                     "score field (rule oracle)"]
    assert all("sigma=0.1" in t for t in titles[:3]) and all("sigma=1" in t for t in titles[3:])
    shown = [_log_score(f, s, p, step=100) for s in (0.1, 1.0) for p in ("", "mem_", "rule_")]
    norms = {(ax.images[0].norm.vmin, ax.images[0].norm.vmax) for ax in panels}
    assert norms == {(min(x.min() for x in shown), max(x.max() for x in shown))}
    for ax, x in zip(panels, shown):     # row-major: σ rows, field columns; colours are the shared norm of x
        np.testing.assert_allclose(np.asarray(ax.images[0].get_array()), x)
    lo, hi = min(x.min() for x in shown), max(x.max() for x in shown)
    assert shown[0].max() - shown[0].min() < (hi - lo) / 2           # a per-panel scale would differ
    assert bars[0].get_ylim() == pytest.approx((lo, hi))


def test_field_panels_defaults_and_errors(setup):
    rule, ds, plane, m, b = setup
    f = score_field(m[10], plane, (0.3, 1.0), res=6)                   # model only, no step dim
    fig = plot_field_panels(f, vmin=-1.0, vmax=3.0)
    assert len(fig.axes) == 2 + 1                                   # every σ, one column, one colorbar
    assert {(ax.images[0].norm.vmin, ax.images[0].norm.vmax) for ax in fig.axes[:2]} == {(-1.0, 3.0)}
    assert len(plot_field(f, sigma=1.0, colorbar=False).axes) == 1
    with pytest.raises(ConfigError, match="score_field"):
        plot_field_panels(b)
    with pytest.raises(ConfigError, match="sigma"):
        plot_field_panels(f, sigmas=[])


def test_animation_frames_have_the_requested_size(setup, tmp_path):
    *_, b = setup
    with Image.open(animate_basins(b, tmp_path / "default.gif")) as im:
        assert im.size == (992, 704) and im.n_frames == 3          # 6.2 x 4.4 in at 160 dpi: slide-sized
    with Image.open(animate_basins(b, tmp_path / "small.gif", 4, 1.0, 50)) as im:   # the old positional call
        assert im.size == (310, 220)
    with Image.open(animate_basins(b, tmp_path / "wide.gif", dpi=40, size=(10, 4))) as im:
        assert im.size == (400, 160)
    for bad in ({"size": (5,)}, {"size": (5, -1)}, {"dpi": 0}, {"size": (40, 30), "dpi": 200}):
        with pytest.raises(ConfigError):
            animate_basins(b, tmp_path / "bad.gif", **bad)
    assert not (tmp_path / "bad.gif").exists()


SHIPPED_STEPS = np.array([0, 500, 607, 738, 896, 1088, 1322, 1605, 1950, 2368, 2876, 3493, 4243, 5153, 6259, 7602,
                          9233, 11214, 13620, 16543, 20092, 24404, 29640, 36000])


def _tick_labels(ax):
    """(text, window extent) of the drawn, non-empty x tick labels inside the axes' horizontal span."""
    ax.figure.canvas.draw()
    renderer = ax.figure.canvas.get_renderer()
    x0, x1 = ax.get_window_extent(renderer).intervalx
    out = []
    for label in ax.xaxis.get_majorticklabels() + ax.xaxis.get_minorticklabels():
        box = label.get_window_extent(renderer)
        if label.get_visible() and label.get_text() and x0 - 1 <= (box.x0 + box.x1) / 2 <= x1 + 1:
            out.append((label.get_text(), box))
    return out


def _assert_readable(ax):
    labels = _tick_labels(ax)
    assert len(labels) >= 2, labels
    for (a, box_a), (b, box_b) in itertools.combinations(labels, 2):
        assert not box_a.overlaps(box_b), f"tick labels {a!r} and {b!r} overlap"
    return [t for t, _ in labels]


def _clocks_data(steps):
    import xarray as xr
    n, u = len(steps), np.linspace(0, 1, len(steps))
    state = np.random.default_rng(0).integers(0, 5, (n, 20)).astype(np.int8)
    return xr.Dataset({"rule_acc": ("step", u), "group_acc": ("step", u ** 0.5), "mem_ratio": ("step", u ** 3),
                       "state": (("step", "sample"), state)}, coords={"step": steps})


def _gap_data(steps):
    import xarray as xr
    gap = np.random.default_rng(0).normal(size=(len(steps), 6))
    return xr.Dataset({"gap": (("step", "sigma"), gap)}, coords={"step": steps, "sigma": np.geomspace(0.01, 10, 6)})


def _step_figures(steps, figsize):
    """The axes of plot_clocks, plot_states and plot_dsm_gap over `steps`, each alone on a `figsize` figure."""
    return [plot(data, ax=new_figure(figsize).add_subplot()).axes[0]
            for plot, data in ((plot_clocks, _clocks_data(steps)), (plot_states, _clocks_data(steps)),
                               (plot_dsm_gap, _gap_data(steps)))]


@pytest.mark.parametrize("figsize", [(6.0, 4.0), (3.2, 2.6)])
@pytest.mark.parametrize("steps", [SHIPPED_STEPS, SHIPPED_STEPS[1:]], ids=["with_step_0", "positive"])
def test_step_axis_tick_labels_do_not_overlap(steps, figsize):
    for ax in _step_figures(steps, figsize):
        texts = _assert_readable(ax)
        assert not any("10^" in t or "times" in t for t in texts), texts    # plain numbers, no powers
        if steps[0] == 0 and ax.get_xscale() == "symlog":
            assert texts[0] == "0"


def test_step_axis_side_by_side_and_many_steps():
    fig = new_figure((12, 4.2))                       # the CLI's clocks figure: two axes in one row
    left, right = fig.subplots(1, 2)
    plot_clocks(_clocks_data(SHIPPED_STEPS), ax=left)
    plot_states(_clocks_data(SHIPPED_STEPS), ax=right)
    assert _assert_readable(left) == _assert_readable(right)
    many = np.unique(np.concatenate([[0], np.geomspace(1, 36000, 150).astype(int)]))   # gap: one column per step
    for ax in _step_figures(many, (6.2, 4.4)):
        _assert_readable(ax)
