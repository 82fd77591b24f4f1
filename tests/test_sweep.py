"""scoreprobe.sweep: source normalization, lazy one-at-a-time loading, step selection, static variables."""
import gc
import json
import weakref

import numpy as np
import pytest
import xarray as xr

from scoreprobe.errors import ConfigError
from scoreprobe.sweep import as_steps, is_series, source_identity, sweep


class Model:
    """A weightless toy denoiser of 4 bits; its behaviour (hence its fingerprint) depends on its step."""
    dim = 4

    def __init__(self, step):
        self.step = step

    def __call__(self, x, sigma):
        return x * 0 + self.step


class FakeSeries:
    """Duck-typed CheckpointSeries that records what is alive when a model is loaded."""

    def __init__(self, steps):
        self.steps, self.path, self.kind = list(steps), "runs/fake", "dit"
        self.loaded, self.alive, self.refs = [], [], []

    def denoiser(self, step, device="cpu"):
        gc.collect()
        self.alive.append(sum(r() is not None for r in self.refs))
        self.loaded.append((step, device))
        model = Model(step)
        self.refs.append(weakref.ref(model))
        return model


def probe(model):
    return xr.Dataset({"value": ((), float(model.step)), "vec": (("sample",), np.full(3, model.step))},
                      coords={"sample": np.arange(3)})


def test_as_steps_normalizes_sources():
    d = Model(0)
    assert [(s, g() is d) for s, g in as_steps(d)] == [(0, True)]
    pairs = as_steps({30: Model(30), 1: Model(1), 5: Model(5)})
    assert [s for s, _ in pairs] == [1, 5, 30] and [g().step for _, g in pairs] == [1, 5, 30]
    series = FakeSeries([10, 0, 100])
    pairs = as_steps(series, device="meta")
    assert series.loaded == [] and [s for s, _ in pairs] == [0, 10, 100]  # nothing loaded yet
    assert pairs[1][1]().step == 10 and series.loaded == [(10, "meta")]
    assert is_series(series) and not is_series({1: d})
    with pytest.raises(ConfigError, match="integer training steps"):
        as_steps({"a": d})
    with pytest.raises(ConfigError, match="expected a denoiser"):
        as_steps(42)


def test_sweep_loads_one_model_at_a_time():
    series = FakeSeries([0, 1, 10, 100])
    ds = sweep(probe, series, progress=False)
    assert [s for s, _ in series.loaded] == [0, 1, 10, 100]
    assert max(series.alive) == 0  # the previous step's model was freed before the next load
    assert list(ds.step.values) == [0, 1, 10, 100] and ds.step.dtype == np.int64
    np.testing.assert_array_equal(ds.value.values, [0, 1, 10, 100])
    assert ds.vec.dims == ("step", "sample") and ds.step.attrs["units"] == "1"


def test_step_selection():
    series = FakeSeries([0, 1, 10, 100])
    ds = sweep(probe, series, steps=[100, 1], progress=False)
    assert list(ds.step.values) == [1, 100] and [s for s, _ in series.loaded] == [1, 100]
    with pytest.raises(ConfigError, match=r"steps \[7\] are not in the series"):
        sweep(probe, series, steps=[7], progress=False)
    with pytest.raises(ConfigError, match=r"no steps selected; choose one or more of \[0, 1, 10, 100\]"):
        sweep(probe, series, steps=[], progress=False)  # not a bare xarray error from an empty concat


def test_static_variables_have_no_step(tmp_path):
    static = xr.Dataset({"ref": (("sample",), np.array([1.0, 2.0, 3.0]))}, coords={"sample": np.arange(3)})
    mapping = {s: Model(s) for s in (0, 5)}
    mem = sweep(probe, mapping, static=static, progress=False)
    disk = sweep(probe, mapping, static=static, out=tmp_path / "s.zarr", config={"p": 1}, progress=False)
    for ds in (mem, disk):
        assert ds.ref.dims == ("sample",) and ds.vec.dims == ("step", "sample")
        np.testing.assert_array_equal(ds.ref.values, [1.0, 2.0, 3.0])
    xr.testing.assert_equal(mem, disk)


def test_source_identity_is_json_friendly():
    assert source_identity(FakeSeries([0])) == {"type": "series", "name": "fake", "kind": "dit"}
    assert source_identity({0: Model(0)}) == {"type": "mapping", "models": ["Model"]}
    assert source_identity(Model(0)) == {"type": "denoiser", "model": "Model"}


def test_source_identity_has_no_machine_paths_and_tells_series_apart(tmp_path):
    import shutil
    from scoreprobe.loading.series import load_series
    from scoreprobe.loading.sources import open_source
    shipped = load_series()
    ident = source_identity(shipped)
    assert str(shipped.path) not in json.dumps(ident) and ident["name"] == shipped.path.name
    copy = tmp_path / shipped.path.name   # the same run elsewhere: the same identity
    shutil.copytree(shipped.path, copy, ignore=lambda d, names: [n for n in names if n.startswith("step_")][2:])
    assert source_identity(load_series(copy)) == ident
    files = open_source([shipped.checkpoint_path(s) for s in shipped.steps[:2]])
    other = open_source([shipped.checkpoint_path(s) for s in shipped.steps[:2]], ema=True)
    a, b = source_identity(files), source_identity(other)
    assert a["files"][0] == shipped.checkpoint_path(shipped.steps[0]).name and a["data_sha256"] == ident["data_sha256"] and a != b


def test_dataset_and_rule_prefers_arguments_then_series_then_the_datasets_rule():
    from types import SimpleNamespace
    from scoreprobe.sweep import dataset_and_rule
    ds_a, ds_b = SimpleNamespace(rule="rule-of-a"), SimpleNamespace(rule=None)
    series = SimpleNamespace(dataset=ds_a, rule="series-rule")
    assert dataset_and_rule(series) == (ds_a, "series-rule")
    assert dataset_and_rule(series, ds_b, "given") == (ds_b, "given")
    assert dataset_and_rule({}, ds_a) == (ds_a, "rule-of-a")                 # a mapping: the dataset's rule
    assert dataset_and_rule({}, ds_b, need_rule=False) == (ds_b, None)
    with pytest.raises(ConfigError, match="basins needs .* dataset= and rule="):
        dataset_and_rule({}, ds_b, who="basins")
    with pytest.raises(ConfigError, match="dsm_by_sigma needs .* pass dataset= "):
        dataset_and_rule(lambda x, s: x, need_rule=False, who="dsm_by_sigma")


def test_progress_is_one_line_per_computed_step_outside_a_terminal(capsys, tmp_path):
    import xarray as xr

    def probe(model):
        return xr.Dataset({"v": ((), float(model.step))})
    series = FakeSeries([0, 10, 100])
    sweep(probe, series, steps=[0], out=tmp_path / "s.zarr", config={"probe": "toy"})   # one step already written
    capsys.readouterr()
    sweep(probe, series, out=tmp_path / "s.zarr", config={"probe": "toy"})
    lines = capsys.readouterr().err.strip().splitlines()
    assert [line.split(" in ")[0] for line in lines] == ["toy: step 10 (2/3)", "toy: step 100 (3/3)"], lines
    assert "s left" in lines[0] and "left" not in lines[1]   # the first computed step estimates the rest
    sweep(probe, series, out=tmp_path / "t.zarr", config={"probe": "toy"}, progress=False)
    assert capsys.readouterr().err == ""
