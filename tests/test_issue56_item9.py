"""Issue 56 item 9, from the user's side: `sp.decompose_summary` / `sp.best_oracle` (ties and undefined
cells said as such), the decompose figure's legend outside every panel, and the extras (a user's install
pulls no test tools)."""
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
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


def _real(models, sigmas=(1.0,), oracles=("memorizer", "rule"), n_points=6):
    series = sp.load_series()
    return sp.decompose(models, dataset=series.dataset, rule=series.rule, sigmas=list(sigmas), n_points=n_points,
                        n_noise=1, oracles=oracles, progress=False)


def test_a_table_of_r2_alone_is_refused_it_cannot_carry_an_interval():
    """Issue 55: a call needs a paired bootstrap over points; a hand-made table of r² has no points."""
    ds = _cells([[0.2, 0.9, 0.1], [0.5, 0.505, 0.2]])
    for f in (sp.decompose_summary, sp.best_oracle, sp.mixture_weights):
        with pytest.raises(ConfigError, match="per-point statistics"):
            f(ds)


def test_one_oracle_has_no_runner_up_so_its_lead_stays_undefined():
    s = sp.decompose_summary(_real(sp.RuleDenoiser(sp.load_series().rule), oracles=("rule",)))
    assert (s.best_oracle.values == "undecided").all()
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
    ds = sp.decompose(models, dataset=series.dataset, rule=series.rule, sigmas=[1.0], n_points=40, n_noise=2,
                      oracles=("memorizer", "rule"), progress=False)
    s = sp.decompose_summary(ds)
    assert set(s.dims) == {"step", "sigma", "split"}
    assert s.best_oracle.sel(step=0, sigma=1.0, split="heldout").item() == "rule"
    assert s.best_oracle.sel(step=10, sigma=1.0, split="train").item() == "memorizer"
    named = np.isin(s.best_oracle.values, ["memorizer", "rule"])
    assert named.any() and (s.p_adjusted.values[named] <= 0.05).all() and (s.lead.values[named] > 0).all()


def test_cli_decompose_prints_the_summary(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScoreprobeWarning)
        main(["decompose", "--steps", "0,36000", "--sigmas", "0.5,1", "--n-points", "4", "--n-noise", "1",
              "--oracles", "memorizer,rule"])
    out = capsys.readouterr().out
    line = [ln for ln in out.splitlines() if ln.startswith("on heldout points: ")]
    assert len(line) == 1 and re.search(r"\d+ of 4 cells call one oracle", line[0]), out


def test_the_decompose_legend_covers_no_panel():
    from scoreprobe.viz.decompose import plot_decompose
    series = sp.load_series()
    ds = _real({0: sp.RuleDenoiser(series.rule), 10: lambda x, s: torch.full_like(x, float("nan"))},
               sigmas=(0.5, 1.0))
    fig = plot_decompose(ds)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert len(legends) == 1
    box = legends[0].get_window_extent(renderer)
    labels = [t.get_text() for t in legends[0].get_texts()]
    assert labels[:2] == ["memorizer", "rule"] and "undefined" in labels   # every colour the map uses, said
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
