"""scoreprobe.store: zarr v3 round trip, CF attrs, resume after an interrupted write, config refusal."""
import json
import warnings

import numpy as np
import pytest
import xarray as xr
import zarr

from scoreprobe import store
from scoreprobe.errors import StoreError
from scoreprobe.sweep import sweep

STEPS = [0, 3, 10, 30, 100]
CONFIG = {"probe": "toy", "n": 5, "shape": (2, 3)}


def toy_probe(step):
    """A deterministic per-step slab with float (with NaN), int, flag and per-sample variables."""
    rng = np.random.default_rng(step)
    ds = xr.Dataset(
        {"loss": (("sigma", "sample"), rng.normal(size=(3, 5)).astype(np.float32), {"units": "1", "long_name": "loss"}),
         "state": (("sample",), rng.integers(0, 5, 5).astype(np.int8),
                   {"flag_values": np.arange(5), "flag_meanings": "a b c d e", "long_name": "state"}),
         "acc": ((), np.float64(step / 100), {"units": "1", "long_name": "accuracy"})},
        coords={"sigma": ("sigma", [0.1, 1.0, 10.0], {"units": "1"}), "sample": np.arange(5)},
        attrs={"note": "toy"})
    ds["loss"][0, 0] = np.nan
    return ds


class Toy(int):
    """The "model" of a step is the step itself: an int, and a weightless 2-bit denoiser whose
    outputs (hence its behavioural fingerprint, which resuming compares) depend on the step."""
    dim = 2

    def __call__(self, x, sigma):
        return x * 0 + int(self)


def mapping():
    return {s: Toy(s) for s in STEPS}


def drop_history(ds):
    ds = ds.copy()
    ds.attrs.pop("history")
    return ds


def test_round_trip_layout_and_attrs(tmp_path):
    path = tmp_path / "a.zarr"
    direct = sweep(toy_probe, mapping(), config=CONFIG, progress=False)
    stored = sweep(toy_probe, mapping(), out=path, config=CONFIG, progress=False)
    xr.testing.assert_equal(direct, stored)
    assert np.isnan(stored.loss.values[:, 0, 0]).all()
    assert stored.step.dtype == np.int64 and stored.step.attrs["long_name"] == "training step"
    assert stored.state.attrs["flag_values"] == [0, 1, 2, 3, 4]  # JSON-safe list of ints
    assert stored.attrs["Conventions"] == "CF-1.11" and "scoreprobe" in stored.attrs["history"]
    assert json.loads(stored.attrs["scoreprobe_config"]) == {"probe": "toy", "n": 5, "shape": [2, 3]}
    group = zarr.open_group(str(path), mode="r")
    assert group.metadata.zarr_format == 3
    root = json.loads((path / "zarr.json").read_text())
    assert set(root["consolidated_metadata"]["metadata"]) == set(stored.variables)  # published commit
    assert root["attributes"]["scoreprobe_record"]["steps"] == STEPS
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "failed to open with consolidated metadata" warning
        plain = xr.open_zarr(path, chunks=None)
    xr.testing.assert_equal(plain.sortby("step"), stored)
    assert group["loss"].chunks == (1, 3, 5) and group["acc"].chunks == (1,) and group["step"].chunks == (1,)
    assert np.isnan(group["loss"].fill_value)
    assert store.written_steps(path) == STEPS


def test_rerun_skips_written_steps(tmp_path):
    path, calls = tmp_path / "a.zarr", []

    def probe(step):
        calls.append(step)
        return toy_probe(step)

    sweep(probe, mapping(), steps=STEPS[:3], out=path, config=CONFIG, progress=False)
    assert calls == STEPS[:3]
    out = sweep(probe, mapping(), out=path, config=CONFIG, progress=False)
    assert calls == STEPS  # only the two new steps were computed
    assert list(out.step.values) == STEPS
    assert len(out.attrs["history"].splitlines()) == 2  # created, then resumed
    xr.testing.assert_equal(out, sweep(toy_probe, mapping(), config=CONFIG, progress=False))


def test_mismatched_config_refused(tmp_path):
    path = tmp_path / "a.zarr"
    sweep(toy_probe, mapping(), steps=[0], out=path, config=CONFIG, progress=False)
    with pytest.raises(StoreError, match=r"config keys differ: n, shape.*another out=.*overwrite=True"):
        sweep(toy_probe, mapping(), out=path, config={"probe": "toy", "n": 6, "shape": (2, 4)}, progress=False)
    with pytest.raises(StoreError, match=r"holds a different analysis \(toy, not other\); write to another out="):
        sweep(toy_probe, mapping(), out=path, config={"probe": "other", "n": 5}, progress=False)
    assert store.written_steps(path) == [0]  # nothing mixed in
    out = sweep(toy_probe, mapping(), out=path, config={"probe": "toy", "n": 6}, overwrite=True, progress=False)
    assert list(out.step.values) == STEPS and json.loads(out.attrs["scoreprobe_config"])["n"] == 6


def test_duplicates_and_mismatched_variables_refused(tmp_path):
    path = tmp_path / "a.zarr"
    store.append_step(path, toy_probe(0).expand_dims(step=[0]), CONFIG)
    with pytest.raises(StoreError, match="already in"):
        store.append_step(path, toy_probe(0).expand_dims(step=[0]), CONFIG)
    with pytest.raises(StoreError, match="variables differ"):
        store.append_step(path, toy_probe(1).drop_vars("acc").expand_dims(step=[1]), CONFIG)
    moved = toy_probe(1).assign_coords(sigma=[0.2, 1.0, 10.0]).expand_dims(step=[1])
    with pytest.raises(StoreError, match="coordinate sigma differs"):
        store.append_step(path, moved, CONFIG)
    assert store.written_steps(path) == [0]


def test_foreign_paths_refused(tmp_path):
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "notes.txt").write_text("mine")
    with pytest.raises(StoreError, match="not a zarr store"):
        store.prepare_store(tmp_path / "dir", CONFIG)
    with pytest.raises(StoreError, match="not a zarr store"):
        store.prepare_store(tmp_path / "dir", CONFIG, overwrite=True)
    xr.Dataset({"a": ("x", np.arange(3))}).to_zarr(tmp_path / "other.zarr", zarr_format=3, consolidated=False)
    with pytest.raises(StoreError, match="not written by scoreprobe"):
        store.prepare_store(tmp_path / "other.zarr", CONFIG)
    with pytest.raises(StoreError, match="no zarr store"):
        store.open_store(tmp_path / "missing.zarr")


def test_probe_crash_then_rerun_equals_uninterrupted(tmp_path):
    ref = store.open_store(_full(tmp_path / "ref.zarr"))
    path = tmp_path / "a.zarr"

    def crashing(step):
        if step == STEPS[3]:
            raise RuntimeError("boom")
        return toy_probe(step)

    with pytest.raises(RuntimeError, match="boom"):
        sweep(crashing, mapping(), out=path, config=CONFIG, progress=False)
    assert store.written_steps(path) == STEPS[:3]
    out = sweep(toy_probe, mapping(), out=path, config=CONFIG, progress=False)
    xr.testing.assert_identical(drop_history(out), drop_history(ref))


def _full(path):
    sweep(toy_probe, mapping(), out=path, config=CONFIG, progress=False)
    return path


@pytest.mark.parametrize("crash_at_write", [1, 2, 4])
def test_crash_inside_an_append_is_repaired(tmp_path, monkeypatch, crash_at_write):
    """Kill the writer after some arrays of step k were resized/written: unequal lengths on disk."""
    ref = store.open_store(_full(tmp_path / "ref.zarr"))
    path = tmp_path / "a.zarr"
    sweep(toy_probe, mapping(), steps=STEPS[:2], out=path, config=CONFIG, progress=False)
    real_setitem, count = zarr.Array.__setitem__, [0]

    def dying_setitem(self, key, value):
        count[0] += 1
        if count[0] == crash_at_write:
            raise KeyboardInterrupt("killed")
        return real_setitem(self, key, value)

    monkeypatch.setattr(zarr.Array, "__setitem__", dying_setitem)
    with pytest.raises(KeyboardInterrupt):
        sweep(toy_probe, mapping(), out=path, config=CONFIG, progress=False)
    monkeypatch.setattr(zarr.Array, "__setitem__", real_setitem)
    group = zarr.open_group(str(path), mode="r", use_consolidated=False)  # the arrays' own metadata
    lengths = {n: a.shape[0] for n, a in group.arrays() if "step" in a.metadata.dimension_names}
    assert max(lengths.values()) == 3  # the crash left part of step STEPS[2] on disk
    assert store.written_steps(path) == STEPS[:2]  # but it is not committed
    assert list(store.open_store(path).step.values) == STEPS[:2]  # readers see the last commit
    assert list(xr.open_zarr(path, chunks=None).step.values) == STEPS[:2]  # plain readers too
    out = sweep(toy_probe, mapping(), out=path, config=CONFIG, progress=False)
    xr.testing.assert_identical(drop_history(out), drop_history(ref))


def test_nan_attrs_are_strict_json(tmp_path):
    path = _full(tmp_path / "a.zarr")
    store.update_attrs(path, {"tau_mem": float("nan"), "tau_rule": 12.5, "window_open": True})
    text = (path / "zarr.json").read_text()
    def no_constants(name):
        raise AssertionError(f"non-JSON constant {name} in zarr.json")
    json.loads(text, parse_constant=no_constants)  # strict JSON (zarr's fill value is the string "NaN")
    assert json.loads(text)["attributes"]["tau_mem"] is None
    ds = store.open_store(path)
    assert np.isnan(ds.attrs["tau_mem"]) and ds.attrs["tau_rule"] == 12.5 and ds.attrs["window_open"] is True


def test_open_store_sorts_steps_written_out_of_order(tmp_path):
    path = tmp_path / "a.zarr"
    sweep(toy_probe, mapping(), steps=[10, 30], out=path, config=CONFIG, progress=False)
    out = sweep(toy_probe, mapping(), steps=[0, 3, 10, 30, 100], out=path, config=CONFIG, progress=False)
    assert store.written_steps(path) == [10, 30, 0, 3, 100]
    assert list(out.step.values) == STEPS
    assert len(out.attrs["history"].splitlines()) == 2  # created, then resumed
    xr.testing.assert_equal(out, sweep(toy_probe, mapping(), config=CONFIG, progress=False))


def test_strings_use_the_specified_zarr_v3_string_type(tmp_path):
    import warnings

    def probe(step):
        return toy_probe(step).assign_coords(split=("sample", ["train"] * 3 + ["heldout"] * 2)).assign(
            label=((), f"step {step}"))

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. zarr's UnstableSpecificationWarning for fixed-width unicode
        out = sweep(probe, mapping(), out=tmp_path / "s.zarr", config=CONFIG, progress=False)
    xr.testing.assert_equal(out, sweep(probe, mapping(), config=CONFIG, progress=False))
    assert list(out.label.values) == [f"step {s}" for s in STEPS]
    assert str(zarr.open_group(str(tmp_path / "s.zarr"))["split"].metadata.data_type).startswith("VariableLengthUTF8")
