"""What the API says (issue 34, item 11): store errors in API words (out=, overwrite=True; the CLI says --out,
--overwrite), a source of another kind named once (not its source.rule.* keys), 'reused N steps' reaching
Python, `scoreprobe --version`."""
import logging
import warnings

import pytest

import scoreprobe as sp
from scoreprobe.errors import ScoreprobeWarning, StoreError

RULE = sp.Parity(G=2, shape=(4, 4))


@pytest.fixture(scope="module")
def data():
    return sp.make_dataset(RULE, 6, 6, seed=0)


def _clocks(source, data, out, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScoreprobeWarning)
        return sp.clocks(source, dataset=data, n_samples=8, n_steps=2, out=str(out), progress=False, **kw)


def test_a_store_of_another_source_kind_is_named_once_in_api_words(tmp_path, data):
    from scoreprobe.loading.usercode import DenoiserSeries
    D = sp.EmpiricalDenoiser(data.train)
    _clocks({1: D}, data, tmp_path / "c.zarr")
    with pytest.raises(StoreError) as e:
        _clocks(DenoiserSeries.of({1: D}, data), None, tmp_path / "c.zarr")   # the same rule and data, as a series
    text = str(e.value)
    assert "source (the store measured a {step: denoiser} mapping, this is a checkpoint series)" in text
    assert "source.rule" not in text and "source.type" not in text
    assert "write to another out= or pass overwrite=True" in text and "--" not in text


def test_the_cli_says_the_same_in_its_words(tmp_path, data):
    from scoreprobe.cli import cli_phrasing
    from scoreprobe.store.format import check_config
    _clocks({1: sp.EmpiricalDenoiser(data.train)}, data, tmp_path / "c.zarr")
    import json
    root = json.loads((tmp_path / "c.zarr" / "zarr.json").read_text())
    with pytest.raises(StoreError) as e:
        check_config(tmp_path / "c.zarr", root, {"probe": "clocks"})
    assert "another --out or pass --overwrite" in cli_phrasing(str(e.value))
    with pytest.raises(StoreError) as e:
        sp.open_store(tmp_path / "nothing.zarr")
    assert str(e.value).endswith(f"run the analysis with out={str(tmp_path / 'nothing.zarr')!r} first")
    assert cli_phrasing(str(e.value)).endswith(f"run the analysis with --out {tmp_path / 'nothing.zarr'} first")


def test_the_api_records_the_steps_it_reused(tmp_path, data, caplog):
    """The CLI prints 'reused N ... written by an earlier run'; the API says it as a log record (INFO)."""
    models = {1: sp.EmpiricalDenoiser(data.train[:3]), 5: sp.EmpiricalDenoiser(data.train)}
    _clocks({1: models[1]}, data, tmp_path / "c.zarr")
    with caplog.at_level(logging.INFO, logger="scoreprobe.sweep"):
        _clocks(models, data, tmp_path / "c.zarr")
    said = [r.getMessage() for r in caplog.records if r.name == "scoreprobe.sweep"]
    assert said == [f"{tmp_path / 'c.zarr'}: reused 1 steps written by an earlier run, computing 1 of the 2 asked for"]


def test_version_flag(capsys):
    from scoreprobe.cli import main
    assert main(["--version"]) == 0 and capsys.readouterr().out.strip() == f"scoreprobe {sp.__version__}"
