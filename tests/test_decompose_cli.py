"""`scoreprobe decompose` on a stand-in series whose checkpoints are the oracles, and its figure."""
import pytest
from click.testing import CliRunner

from scoreprobe.data.datasets import make_dataset
from scoreprobe.data.rules import Parity
from tests.test_basins_cli import _OracleSeries


@pytest.fixture
def series_dir(tmp_path, monkeypatch):
    import scoreprobe.loading.series
    rule = Parity(G=2, shape=(4, 4), layout="contiguous")
    ds = make_dataset(rule, n_train=12, n_heldout=20, seed=0)
    monkeypatch.setattr(scoreprobe.loading.series, "load_series", lambda path=None: _OracleSeries(tmp_path, rule, ds))
    (tmp_path / "run.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_cli_decompose_table_store_and_figure(series_dir):
    from scoreprobe.cli import cli
    from scoreprobe.store import open_store
    args = ["decompose", str(series_dir), "--steps", "all", "--sigmas", "1,2,3", "--n-points", "40",
            "--out", "dec.zarr", "--plot", "dec.png", "--oracles", "memorizer,rule,local,local_equivariant",
            "--n-boot", "100"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    rows = {}
    for ln in r.output.splitlines():                              # the first line of a step: its calls
        if ln.split() and ln.split()[0].isdigit():
            rows.setdefault(ln.split()[0], ln.split()[1:])
    assert rows["0"][:3] == ["R", "R", "R"] and rows["100"][:3] == ["M", "M", "M"]
    called = [ln for ln in r.output.splitlines() if ln.split()[:2] == ["0", "σ"]]
    assert len(called) == 1 and called[0].count("rule +") == 3 and "[" in called[0]   # leads with intervals
    assert float(rows["0"][3 + 1]) == pytest.approx(1.0)          # the rule oracle's mean r² at step 0
    assert (series_dir / "dec.png").stat().st_size > 1000
    store = open_store("dec.zarr")
    assert list(store.step.values) == [0, 100] and set(store.oracle.values) == {"memorizer", "rule", "local",
                                                                                 "local_equivariant"}


@pytest.mark.parametrize("bad", [["--oracles", "memorizer,nope"], ["--patch", "2"], ["--sigmas", "0,1"],
                                 ["--n-points", "0"]])
def test_cli_decompose_bad_options(series_dir, bad, capsys):
    from scoreprobe.cli import main
    with pytest.raises(SystemExit) as e:
        main(["decompose", str(series_dir), *bad])
    lines = capsys.readouterr().err.splitlines()
    assert e.value.code == 2 and 1 <= len(lines) <= 2 and lines[0].startswith("error: "), lines
    assert len(lines) == 1 or lines[1].startswith("try 'scoreprobe"), lines
