"""Figures that explain themselves: what the legends, titles and marks say (matplotlib artists)."""
import numpy as np
import pytest
import xarray as xr
from matplotlib.text import Annotation

from scoreprobe.data.datasets import make_dataset
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.probes.basins import basins
from scoreprobe.probes.dsm import dsm_by_sigma
from scoreprobe.probes.field import score_field
from scoreprobe.data.rules import Parity
from scoreprobe.slices import auto_plane
from scoreprobe.viz import plot_basins, plot_clocks, plot_dsm, plot_dsm_gap, plot_field_panels
from scoreprobe.viz.dsm import DSM_BAND


@pytest.fixture(scope="module")
def toy():
    rule = Parity(G=2, shape=(2, 4), layout="random", seed=0)
    ds = make_dataset(rule, n_train=6, n_heldout=6, seed=0)
    plane = auto_plane(ds, rule, seed=0)
    m = {1: RuleDenoiser(rule), 100: EmpiricalDenoiser(ds.train)}
    return rule, ds, plane, m, basins(m, plane, sigma_start=(0.5, 3.0), res=12, dataset=ds, rule=rule,
                                      progress=False)


def _legend(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_basin_map_outlines_and_items_are_in_the_legend(toy):
    *_, b = toy
    d = b.sel(step=100, sigma_start=3.0)
    t = d.endpoint_train_index.values                                          # (V, U)
    items = [int(i) for i in np.unique(t[t >= 0])]
    assert len(items) >= 2                                                     # the memorizer copies several
    ax = plot_basins(b, sigma_start=3.0, step=100).axes[0]
    labels = _legend(ax)
    assert any(label.startswith("basin of ") for label in labels)              # what the outlines are
    assert {f"copies train:{i}" for i in items} <= set(labels)
    rgba = ax.images[1].get_array()                                            # (V, U, 4): the item layer
    colours = {i: {tuple(c) for c in np.asarray(rgba)[t == i]} for i in items}
    assert all(len(c) == 1 for c in colours.values())                         # one shade per item ...
    assert len({next(iter(c)) for c in colours.values()}) == len(items)      # ... a different one each
    anchored = {str(a) for a in d.anchor_label.values}
    texts = {x.get_text() for x in ax.texts}
    assert {f"#{i}" for i in items if f"train:{i}" not in anchored} <= texts   # the index on each region
    one = plot_basins(b, sigma_start=0.5, step=1).axes[0]                      # the rule oracle copies nothing
    assert not any(label.startswith("copies") for label in _legend(one)) and len(one.images) == 1


def _clocks(ci_rule, ci_mem):
    steps = np.array([0, 10, 100, 1000, 10000])
    ds = xr.Dataset({"rule_acc": ("step", [0.0, 0.5, 0.95, 0.95, 0.9]), "mem_ratio": ("step", [0, 0, 0.01, 0.05, 0.3])},
                    coords={"step": steps})
    ds.attrs.update(tau_rule=40.0, tau_rule_ci=ci_rule, tau_mem=3000.0, tau_mem_ci=ci_mem, rule_threshold=0.9,
                    mem_threshold=0.1, ci=0.95, window_intervals=[[40.0, 3000.0]])
    return ds


def test_clocks_plot_draws_the_tau_cis_and_an_unbounded_one_as_an_arrow():
    ax = plot_clocks(_clocks([20.0, 80.0], [2000.0, float("inf")])).axes[0]
    bars = [ln for ln in ax.lines if list(ln.get_xdata()) == [20.0, 80.0]]
    assert len(bars) == 1 and list(bars[0].get_ydata()) == [0.9, 0.9]           # on the rule threshold
    assert not any(np.isinf(np.asarray(ln.get_xdata(), dtype=float)).any() for ln in ax.lines)   # no finite bar to inf
    arrows = [a for a in ax.texts if isinstance(a, Annotation) and a.arrow_patch is not None]
    assert len(arrows) == 1
    assert arrows[0].xyann == (2000.0, 0.1) and arrows[0].xy == (ax.get_xlim()[1], 0.1)   # lo -> the right edge
    assert any("95% CI" in label for label in _legend(ax))
    none = plot_clocks(_clocks(None, None)).axes[0]                              # no CIs: nothing claimed
    assert not any("CI" in label for label in _legend(none))
    assert not [a for a in none.texts if isinstance(a, Annotation) and a.arrow_patch is not None]
    nulls = plot_clocks(_clocks([20.0, None], [float("nan"), float("nan")])).axes[0]   # None (JSON) = unbounded
    assert len([a for a in nulls.texts if isinstance(a, Annotation) and a.arrow_patch is not None]) == 1


def test_field_panels_say_which_checkpoint_they_show(toy):
    rule, ds, plane, m, _ = toy
    f = score_field(m, plane, (0.3,), res=5, oracles=True, dataset=ds, rule=rule, progress=False)
    title = plot_field_panels(f)._suptitle.get_text()
    assert title.startswith("model field at step 100 (the last of 2 computed: 1, 100)") and "oracles" in title
    assert plot_field_panels(f, step=1)._suptitle.get_text().startswith("model field at step 1 (one of 2")


def test_dsm_legends_are_complete_and_name_the_sigma_band(toy):
    rule, ds, _, m, _ = toy
    d = dsm_by_sigma(m, sigmas=np.geomspace(0.05, 5, 5), n_noise=2, dataset=ds, rule=rule, progress=False)
    ax = plot_dsm(d).axes[0]
    labels, band = _legend(ax), f"σ band {DSM_BAND[0]:g}–{DSM_BAND[1]:g} (intermediate noise)"
    assert {"step 1", "step 100", band, "training items (mean)", "held-out items (mean)"} <= set(labels)
    assert {"memorizer (reference)", "rule oracle (reference)"} <= set(labels)
    assert ax.get_legend().get_title().get_text() == "colour: step; line style: items"
    assert {band, "computed checkpoints (one column each)"} <= set(_legend(plot_dsm_gap(d).axes[0]))


def test_animation_says_which_sigma_start_it_shows(toy, tmp_path):
    from click.testing import CliRunner
    from scoreprobe.cli import cli
    rule, ds, plane, m, _ = toy
    out = tmp_path / "b.zarr"
    basins(m, plane, sigma_start=(0.5, 3.0), res=4, dataset=ds, rule=rule, out=out, progress=False)
    r = CliRunner().invoke(cli, ["animate", str(out), "--out", str(tmp_path / "a.gif"), "--dpi", "30"])
    assert r.exit_code == 0 and "sigma_start 3 (of 0.5, 3)" in r.output, r.output


def test_basin_map_names_non_finite_colours_each_anchor_and_explains_u_and_v(toy):
    """Issue 34, item 8: state 0 is 'non-finite' (not 'invalid', which read as 'breaks the rule'); each anchor's
    outline has its own colour, that of its marker, named in the legend; the axes say what u and v run along."""
    from matplotlib.colors import to_hex
    from scoreprobe.viz.common import ANCHOR_COLORS
    *_, b = toy
    d = b.sel(step=1, sigma_start=3.0)
    ax = plot_basins(b, sigma_start=3.0, step=1).axes[0]
    labels = _legend(ax)
    assert "non-finite" in labels and "invalid" not in labels and "rule violating" in labels
    names = [str(x) for x in d.anchor_label.values]
    outlined = [k for k in range(3) if (d.endpoint_anchor.values == k).any() and not (d.endpoint_anchor.values == k).all()]
    assert len(outlined) >= 2                                   # the rule oracle: several anchors have a basin
    legend = {t.get_text(): h for t, h in zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles)}
    for k in outlined:
        handle = legend[f"basin of {names[k]}\n(ends on it)"]
        assert to_hex(handle.get_color()) == to_hex(ANCHOR_COLORS[k])
    contour_colours = {to_hex(c.get_edgecolor()[0]) for c in ax.collections if len(c.get_edgecolor())}
    assert {to_hex(ANCHOR_COLORS[k]) for k in outlined} <= contour_colours
    assert len({to_hex(ANCHOR_COLORS[k]) for k in range(3)}) == 3
    markers = [ln for ln in ax.lines if ln.get_marker() in ("o", "s", "^") and len(ln.get_xdata()) == 1]
    assert [to_hex(ln.get_markeredgecolor()) for ln in markers] == [to_hex(c) for c in ANCHOR_COLORS]
    assert ax.get_xlabel() == f"u: along {names[0]} → {names[1]}" and ax.get_ylabel() == f"v: towards {names[2]}, ⊥ u"


def test_dsm_legend_lists_every_step_of_a_report_sized_series(toy):
    """Eight checkpoints (the report's): all eight in the legend (it showed 6); over 10, the title says how many."""
    rule, ds, _, m, _ = toy
    many = {s: (m[1] if s < 50 else m[100]) for s in (1, 2, 5, 10, 20, 50, 100, 200, 300, 400, 500, 600)}
    d = dsm_by_sigma(many, sigmas=np.geomspace(0.05, 5, 3), n_noise=1, dataset=ds, rule=rule, progress=False)
    eight = plot_dsm(d.isel(step=slice(0, 8))).axes[0]
    assert {f"step {s}" for s in (1, 2, 5, 10, 20, 50, 100, 200)} <= set(_legend(eight))
    assert "drawn" not in eight.get_title()
    twelve = plot_dsm(d).axes[0]
    assert sum(t.startswith("step ") for t in _legend(twelve)) == 10 and "(10 of 12 checkpoints drawn)" in twelve.get_title()
    assert not any("table" in t for t in _legend(plot_dsm_gap(d).axes[0]))
