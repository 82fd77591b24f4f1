import numpy as np
import pytest
from matplotlib.figure import Figure
from PIL import Image

from scoreprobe.data import STATES, make_dataset
from scoreprobe.errors import ConfigError
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.probes.basins import basins, retention
from scoreprobe.probes.field import score_field
from scoreprobe.rules import Parity
from scoreprobe.slices import auto_plane
from scoreprobe.viz import animate_basins, plot_basins, plot_field, plot_retention


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
    assert labels == [s.replace("_", " ") for s in STATES]
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
