"""store.py: zarr v3 round trip, CF attrs, resume after an interrupted write, config refusal."""
import json
import warnings

import numpy as np
import pytest
import xarray as xr
import zarr

from scoreprobe import store
from scoreprobe.errors import StoreDamageWarning, StoreError, StoreRepairWarning
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


def mapping():
    return {s: s for s in STEPS}  # the "model" of a step is the step itself


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
    with pytest.raises(StoreError, match=r"config keys differ: n, shape.*--out.*--overwrite"):
        sweep(toy_probe, mapping(), out=path, config={"probe": "toy", "n": 6, "shape": (2, 4)}, progress=False)
    with pytest.raises(StoreError, match=r"holds a different analysis \(toy, not other\); write to another --out"):
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


# ---------------------------------------------------------------------------------------------
# Reliability under abuse (issue #12): overwrite swap, damage, locks, odd --out paths, races
# ---------------------------------------------------------------------------------------------


def crash_at(step):
    def probe(s):
        if s == step:
            raise RuntimeError("boom")
        return toy_probe(s)
    return probe


def test_overwrite_keeps_the_old_store_until_the_new_one_is_complete(tmp_path):
    path, other = tmp_path / "a.zarr", {"probe": "toy", "n": 6}
    old = store.open_store(_full(path))
    with pytest.raises(RuntimeError, match="boom"):
        sweep(crash_at(STEPS[3]), mapping(), out=path, config=other, overwrite=True, progress=False)
    leftover = tmp_path / "a.zarr.scoreprobe-new"
    assert leftover.is_dir()  # the unfinished replacement, clearly named
    xr.testing.assert_identical(store.open_store(path), old)  # the old store is untouched
    xr.testing.assert_equal(xr.open_zarr(path, chunks=None).sortby("step"), old)  # for plain readers too
    out = sweep(toy_probe, mapping(), out=path, config=CONFIG, progress=False)  # resume the old one: nothing to do
    assert not leftover.exists() and store.written_steps(path) == STEPS
    out = sweep(toy_probe, mapping(), out=path, config=other, overwrite=True, progress=False)
    assert json.loads(out.attrs["scoreprobe_config"])["n"] == 6 and list(out.step.values) == STEPS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.zarr"]  # no lock, no leftovers


def test_an_interrupted_overwrite_resumes_its_replacement(tmp_path):
    path, other = tmp_path / "a.zarr", {"probe": "toy", "n": 6}
    old = store.open_store(_full(path))
    with pytest.raises(RuntimeError, match="boom"):
        sweep(crash_at(STEPS[3]), mapping(), out=path, config=other, overwrite=True, progress=False)
    calls = []

    def counting(s):
        calls.append(s)
        return toy_probe(s)
    with pytest.raises(RuntimeError, match="boom"):   # a rerun with another config: the leftover goes
        sweep(crash_at(STEPS[0]), mapping(), out=path, config={"probe": "toy", "n": 7}, overwrite=True,
              progress=False)
    xr.testing.assert_identical(store.open_store(path), old)
    with pytest.raises(RuntimeError, match="boom"):
        sweep(crash_at(STEPS[3]), mapping(), out=path, config=other, overwrite=True, progress=False)
    with pytest.warns(StoreRepairWarning, match="resuming a.zarr.scoreprobe-new"):
        out = sweep(counting, mapping(), out=path, config=other, overwrite=True, progress=False)
    assert calls == STEPS[3:]   # the three finished steps of the replacement were kept
    ref = sweep(toy_probe, mapping(), out=tmp_path / "ref.zarr", config=other, progress=False)
    xr.testing.assert_identical(drop_history(out), drop_history(ref))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.zarr", "ref.zarr"]


def test_a_new_store_killed_before_its_first_publication_is_published(tmp_path):
    from scoreprobe.storecommit import sibling
    path = tmp_path / "a.zarr"
    _full(sibling(path, "new"))   # committed beside `path`, not yet renamed into place
    path.mkdir()                  # and an empty directory where it belongs
    calls = []
    out = sweep(lambda s: calls.append(s) or toy_probe(s), mapping(), out=path, config=CONFIG, progress=False)
    assert calls == [] and list(out.step.values) == STEPS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.zarr"]


def test_legacy_prepare_store_overwrite_defers_the_replacement(tmp_path):
    path = _full(tmp_path / "a.zarr")
    assert store.prepare_store(path, None, overwrite=True) == []
    assert store.written_steps(path) == STEPS  # nothing removed yet
    out = sweep(toy_probe, mapping(), steps=[0, 3], out=path, config={"probe": "toy", "n": 7}, progress=False)
    assert list(out.step.values) == [0, 3] and json.loads(out.attrs["scoreprobe_config"])["n"] == 7


@pytest.mark.parametrize("damage", ["delete", "random"])
def test_damaged_chunks_are_detected_and_recomputed(tmp_path, damage):
    path, calls = _full(tmp_path / "a.zarr"), []
    ref = store.open_store(path)
    chunk = path / "loss" / "c" / "2" / "0" / "0"  # step index 2 = step 10
    if damage == "delete":
        chunk.unlink()
    else:
        chunk.write_bytes(np.random.default_rng(0).bytes(chunk.stat().st_size))
    with pytest.raises(StoreError, match=r"damaged data at steps \[10\]; rerun"):
        store.open_store(path)

    def probe(step):
        calls.append(step)
        return toy_probe(step)

    with pytest.warns(StoreDamageWarning, match=r"damaged data at steps \[10\] \(loss\); recomputing"):
        out = sweep(probe, mapping(), out=path, config=CONFIG, progress=False)
    assert calls == [10]
    assert store.written_steps(path) == STEPS  # rewritten in place, order kept
    xr.testing.assert_identical(drop_history(out), drop_history(ref))


def test_damaged_coordinates_are_refused(tmp_path):
    path = _full(tmp_path / "a.zarr")
    for f in (path / "sigma" / "c").rglob("*"):
        if f.is_file():
            f.write_bytes(b"junk")
    with pytest.raises(StoreError, match=r"damaged step-independent data \(sigma\).*--overwrite"):
        store.open_store(path)
    out = sweep(toy_probe, mapping(), out=path, config=CONFIG, overwrite=True, progress=False)
    np.testing.assert_array_equal(out.sigma.values, [0.1, 1.0, 10.0])


def test_a_second_writer_is_refused_and_a_stale_lock_is_taken_over(tmp_path):
    from scoreprobe.storelock import StoreLock, lock_path
    path, calls = tmp_path / "a.zarr", []

    def probe(step):
        calls.append(step)
        return toy_probe(step)

    with StoreLock(path):  # another writer (a separate lock handle behaves like another process)
        with pytest.raises(StoreError, match=r"a.zarr is being written by pid \d+ on .*one writer per store"):
            store.check_writable(path)
        with pytest.raises(StoreError, match="being written by pid"):
            sweep(probe, mapping(), out=path, config=CONFIG, progress=False)
    assert calls == [] and not path.exists()
    lock_path(path).write_text('{"pid": 999999999, "host": "gone", "since": "earlier"}')  # crashed owner
    sweep(probe, mapping(), out=path, config=CONFIG, progress=False)
    assert calls == STEPS and not lock_path(path).exists()


def test_empty_and_partial_directories_are_replaced(tmp_path):
    ref = store.open_store(_full(tmp_path / "ref.zarr"))
    empty = tmp_path / "empty.zarr"
    empty.mkdir()  # e.g. a crash before the first write of an older version
    assert store.check_writable(empty, CONFIG) == []
    xr.testing.assert_identical(drop_history(sweep(toy_probe, mapping(), out=empty, config=CONFIG, progress=False)),
                                drop_history(ref))
    partial = tmp_path / "partial.zarr"  # scoreprobe-marked, nothing committed
    toy_probe(0).expand_dims(step=[0]).assign_attrs(scoreprobe_config="{}", scoreprobe_steps_written=0).to_zarr(
        partial, zarr_format=3, consolidated=False)
    out = sweep(toy_probe, mapping(), out=partial, config=CONFIG, progress=False)
    xr.testing.assert_identical(drop_history(out), drop_history(ref))


def test_symlinks_and_files_as_out(tmp_path):
    dangling = tmp_path / "link.zarr"
    dangling.symlink_to(tmp_path / "missing" / "x.zarr")
    with pytest.raises(StoreError, match="symbolic link to .*missing.*which does not exist"):
        store.check_writable(dangling)
    with pytest.raises(StoreError, match="symbolic link"):
        sweep(crash_at(-1), mapping(), out=dangling, config=CONFIG, progress=False)
    (tmp_path / "real").mkdir()
    good = tmp_path / "good.zarr"
    good.symlink_to(tmp_path / "real")
    sweep(toy_probe, mapping(), out=good, config=CONFIG, progress=False)
    assert good.is_symlink() and store.written_steps(good) == STEPS
    (tmp_path / "file.zarr").write_text("x")
    with pytest.raises(StoreError, match="is a file"):
        store.check_writable(tmp_path / "file.zarr")


def test_check_writable_changes_nothing(tmp_path):
    path = tmp_path / "a.zarr"
    assert store.check_writable(path, CONFIG) == [] and not path.exists()
    sweep(toy_probe, mapping(), steps=[0, 3], out=path, config=CONFIG, progress=False)
    assert store.check_writable(path, CONFIG) == [0, 3]
    assert store.check_writable(path, {"probe": "toy"}, overwrite=True) == []
    with pytest.raises(StoreError, match="config keys differ: n, shape"):
        store.check_writable(path, {"probe": "toy"})


RACER = """
import os, sys, time
from pathlib import Path
import numpy as np, xarray as xr
from scoreprobe.errors import StoreError, first_line
from scoreprobe.sweep import sweep
def probe(step):
    time.sleep(0.3)
    return xr.Dataset({"v": (("i",), np.full(4, float(step)))}, coords={"i": np.arange(4)})
gate = Path(sys.argv[2])
(gate / str(os.getpid())).touch()  # imports done: wait for the other writer, then both go at once
while len(list(gate.iterdir())) < 2:
    pass
try:
    sweep(probe, {s: s for s in range(4)}, out=sys.argv[1], config={"probe": "race"}, progress=False)
except StoreError as e:
    print(first_line(e)); sys.exit(3)
print("ok")
"""


def test_two_writers_at_the_same_instant(tmp_path):
    import subprocess
    import sys
    path, gate = tmp_path / "race.zarr", tmp_path / "gate"
    gate.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", RACER, str(path), str(gate)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in procs]
    assert sorted(rc for rc, _, _ in results) == [0, 3], results
    loser = next(out for rc, out, _ in results if rc == 3)
    assert loser.count("\n") == 1 and loser.startswith("StoreError: ") and "being written by pid" in loser
    ds = store.open_store(path)
    assert list(ds.step.values) == [0, 1, 2, 3]
    np.testing.assert_array_equal(ds.v.values[:, 0], [0, 1, 2, 3])


def test_leftovers_of_an_interrupted_swap_are_finished_or_restored(tmp_path):
    from scoreprobe.storecommit import clean_leftovers, sibling
    path = tmp_path / "a.zarr"
    _full(tmp_path / "new")
    _full(tmp_path / "old")
    (tmp_path / "new").rename(sibling(path, "new"))  # killed between the two renames of a swap
    (tmp_path / "old").rename(sibling(path, "old"))
    assert "finished replacing" in clean_leftovers(path)
    assert store.written_steps(path) == STEPS and sorted(p.name for p in tmp_path.iterdir()) == ["a.zarr"]
    path.rename(sibling(path, "old"))  # only the old copy left: it is put back, never removed
    assert "restored" in clean_leftovers(path) and store.written_steps(path) == STEPS


@pytest.mark.slow
def test_kill_injection(tmp_path):
    """SIGKILL a writer at a few points (new store and replacement): plain readers see complete
    steps only, resuming equals an uninterrupted run (the full run: bench/kill_injection.py)."""
    import subprocess
    import sys
    from pathlib import Path
    script = Path(__file__).resolve().parents[1] / "bench" / "kill_injection.py"
    p = subprocess.run([sys.executable, str(script), "--n", "4", "--workdir", str(tmp_path)],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "fresh: 4 injection points, 4 writers killed, plain reader ok 4/4, resume equal 4/4" in p.stdout
    assert "overwrite: 4 injection points, 4 writers killed, plain reader ok 4/4, resume equal 4/4" in p.stdout


def test_temporary_files_of_a_killed_write_are_removed(tmp_path):
    path = tmp_path / "a.zarr"
    sweep(toy_probe, mapping(), steps=[0, 3], out=path, config=CONFIG, progress=False)
    stray = [path / ".zarr.json.123.tmp", path / "loss" / "c" / "zarr.abc.partial"]
    for f in stray:
        f.write_text("half")
    sweep(toy_probe, mapping(), out=path, config=CONFIG, progress=False)
    assert not any(f.exists() for f in stray) and store.written_steps(path) == STEPS


def test_stores_written_before_commit_records_are_resumed_and_upgraded(tmp_path):
    ref = store.open_store(_full(tmp_path / "ref.zarr"))
    path = tmp_path / "old.zarr"  # the previous layout: no consolidated metadata, no record
    first = sweep(toy_probe, mapping(), steps=STEPS[:2], config=CONFIG, progress=False)
    first.attrs.update({"Conventions": "CF-1.11", "history": "earlier", "scoreprobe_steps_written": 2,
                        "scoreprobe_config": json.dumps(store.normalize_config(CONFIG), sort_keys=True)})
    first.to_zarr(path, zarr_format=3, consolidated=False, encoding=store.encoding(first))
    assert store.written_steps(path) == STEPS[:2]
    out = sweep(toy_probe, mapping(), out=path, config=CONFIG, progress=False)
    xr.testing.assert_identical(drop_history(out), drop_history(ref))
    record = json.loads((path / "zarr.json").read_text())["attributes"]["scoreprobe_record"]
    assert record["steps"] == STEPS and all(record["digests"])  # old steps checksummed on first use


@pytest.mark.parametrize("attr, value, message", [
    ("scoreprobe_steps_written", "a string", "commit marker scoreprobe_steps_written is 'a string'"),
    ("scoreprobe_steps_written", -1, "not a step count"),
    ("scoreprobe_config", "{not json", "scoreprobe_config attribute is not a JSON object"),
    ("scoreprobe_config", "[1, 2]", "scoreprobe_config attribute is not a JSON object")])
def test_damaged_root_attributes_are_typed_errors(tmp_path, attr, value, message):
    path = tmp_path / "a.zarr"
    sweep(toy_probe, mapping(), steps=[0, 3], out=path, config=CONFIG, progress=False)
    root = json.loads((path / "zarr.json").read_text())
    root["attributes"][attr] = value
    (path / "zarr.json").write_text(json.dumps(root))
    with pytest.raises(StoreError, match=message):   # resuming into it: one typed error, nothing written
        sweep(toy_probe, mapping(), out=path, config=CONFIG, progress=False)
    with pytest.raises(StoreError, match=message):
        store.stored_config(path) if attr == "scoreprobe_config" else store.open_store(path)
