"""Issue 56 item 9, from the user's side: `sp.decompose_summary` / `sp.best_oracle` (ties and undefined
cells said as such), the decompose figure's legend outside every panel, and the extras (a user's install
pulls no test tools)."""
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import scoreprobe as sp
from scoreprobe.cli import main
from scoreprobe.errors import ConfigError, ScoreprobeWarning

ROOT = Path(__file__).resolve().parents[1]


def _cells(rows, names=("memorizer", "rule", "local")):
    """A decompose-like Dataset (sigma, oracle) of r² rows, one per σ."""
    r2 = np.array(rows, np.float64)
    return xr.Dataset({"r2": (("sigma", "oracle"), r2)},
                      coords={"sigma": np.arange(len(r2)) + 1.0, "oracle": list(names[:r2.shape[1]])})


def test_best_oracle_and_the_summary_are_public_and_say_ties_and_undefined_cells():
    ds = _cells([[0.2, 0.9, 0.1],            # rule leads by 0.7
                 [0.5, 0.505, 0.2],          # memorizer and rule within 0.01: a tie
                 [np.nan, np.nan, np.nan],   # an all-NaN column (constant network output): undefined
                 [0.3, np.nan, 0.9],         # one oracle undefined: it might be the best, so no name
                 [0.8, 0.8, 0.8]])           # all equal: a tie of three
    s = sp.decompose_summary(ds)
    assert s.best_oracle.values.tolist() == ["rule", "tie", "undefined", "undefined", "tie"]
    assert sp.best_oracle(ds).values.tolist() == s.best_oracle.values.tolist()
    np.testing.assert_allclose(s.lead.values, [0.7, 0.005, np.nan, np.nan, 0.0], atol=1e-12)
    np.testing.assert_allclose(s.best_value.values, [0.9, 0.505, np.nan, np.nan, 0.8])
    assert s.within_margin.values.tolist() == ["rule", "memorizer+rule", "", "", "memorizer+rule+local"]
    assert s.n_undefined_oracles.values.tolist() == [0, 0, 3, 1, 0]
    assert s.attrs["sentence"].startswith("1 of 5 cells name one oracle") and "2 are ties; 2 are undefined" in \
        s.attrs["sentence"]
    # a wider margin turns the 0.7 lead into a tie; margin 0 names the leader of the 0.005 cell
    assert sp.best_oracle(ds, margin=1.0).values.tolist()[0] == "tie"
    assert sp.best_oracle(ds, margin=0).values.tolist()[1] == "rule"


def test_one_oracle_has_no_runner_up_so_its_lead_stays_undefined():
    s = sp.decompose_summary(_cells([[0.4], [np.nan]]))
    assert s.best_oracle.values.tolist() == ["memorizer", "undefined"]
    assert np.isnan(s.lead.values).all()


@pytest.mark.parametrize("bad", [dict(margin=-0.1), dict(margin=float("nan")), dict(margin=True), dict(var="nope")])
def test_summary_refuses_what_it_cannot_read(bad):
    with pytest.raises(ConfigError):
        sp.decompose_summary(_cells([[0.1, 0.2]]), **bad)


def test_summary_of_a_real_decompose_over_steps():
    """The shipped rule's oracles as the 'network': the rule oracle is named at σ = 1 on held-out points,
    the memorizer on training items at the checkpoint that is the memorizer."""
    series = sp.load_series()
    models = {0: sp.RuleDenoiser(series.rule), 10: sp.EmpiricalDenoiser(series.dataset.train)}
    ds = sp.decompose(models, dataset=series.dataset, rule=series.rule, sigmas=[1.0], n_points=6, n_noise=1,
                      oracles=("memorizer", "rule"), progress=False)
    s = sp.decompose_summary(ds)
    assert set(s.dims) == {"step", "sigma", "split"}
    assert s.best_oracle.sel(step=0, sigma=1.0, split="heldout").item() == "rule"
    assert s.best_oracle.sel(step=10, sigma=1.0, split="train").item() == "memorizer"
    named = s.best_oracle.values != "tie"
    assert (s.lead.values[named] >= 0.01).all()


def test_cli_decompose_prints_the_summary(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScoreprobeWarning)
        main(["decompose", "--steps", "0,36000", "--sigmas", "0.5,1", "--n-points", "4", "--n-noise", "1",
              "--oracles", "memorizer,rule"])
    out = capsys.readouterr().out
    line = [ln for ln in out.splitlines() if ln.startswith("on heldout points: ")]
    assert len(line) == 1 and re.search(r"\d+ of 4 cells name one oracle", line[0]), out


def test_the_decompose_legend_covers_no_panel():
    from scoreprobe.viz.decompose import plot_decompose
    rows = np.array([[[0.2, 0.9], [0.5, 0.505]], [[0.9, 0.1], [np.nan, 0.3]]])   # (step, sigma, oracle)
    ds = xr.Dataset({"r2": (("step", "sigma", "split", "oracle"), rows[:, :, None, :])},
                    coords={"step": [0, 10], "sigma": [0.5, 1.0], "split": ["heldout"], "oracle": ["memorizer", "rule"]})
    fig = plot_decompose(ds)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert len(legends) == 1
    box = legends[0].get_window_extent(renderer)
    labels = [t.get_text() for t in legends[0].get_texts()]
    assert labels == ["memorizer", "rule", "tie", "undefined"]      # every colour the map uses, said
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            continue
        assert not box.overlaps(ax.get_window_extent(renderer)), f"the legend covers {ax.get_title()!r}"
    fig_box = fig.bbox
    assert box.x0 >= fig_box.x0 - 1 and box.x1 <= fig_box.x1 + 1    # and stays on the figure


def _toml(path):
    if sys.version_info >= (3, 11):
        import tomllib
    else:   # pragma: no cover
        tomllib = pytest.importorskip("tomli")
    return tomllib.loads(path.read_text())


def test_a_users_install_pulls_no_test_tools_and_the_test_extra_does():
    project = _toml(ROOT / "pyproject.toml")["project"]
    names = lambda reqs: {re.split(r"[<>=!\[ ;]", r, maxsplit=1)[0].lower() for r in reqs}   # noqa: E731
    extras = project["optional-dependencies"]
    assert not names(project["dependencies"]) & {"pytest", "hypothesis"}
    assert {"pytest", "hypothesis"} <= names(extras["test"])
    assert extras["dev"] == ["scoreprobe[test]"]               # the old name keeps working (.ci/run uses it)
    ci = (ROOT / ".ci" / "run").read_text()
    for group in re.findall(r'-e "\.\[([^\]]+)\]"', ci):
        assert set(group.split(",")) <= set(extras), group
