"""scoreprobe.store under abuse (issue #12): the overwrite swap and its resumption, damaged chunks and
attributes, locks and races, odd --out paths, leftovers of killed writes, kill injection."""
import json

import numpy as np
import pytest
import xarray as xr

from scoreprobe import store
from scoreprobe.errors import StoreDamageWarning, StoreError, StoreRepairWarning
from scoreprobe.sweep import sweep
from test_store import CONFIG, STEPS, _full, drop_history, mapping, toy_probe


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
    from scoreprobe.store.commit import sibling
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
    with pytest.raises(StoreError, match=r"damaged step-independent data \(sigma\).*overwrite=True"):
        store.open_store(path)
    out = sweep(toy_probe, mapping(), out=path, config=CONFIG, overwrite=True, progress=False)
    np.testing.assert_array_equal(out.sigma.values, [0.1, 1.0, 10.0])


def test_a_second_writer_is_refused_and_a_stale_lock_is_taken_over(tmp_path):
    from scoreprobe.store.lock import StoreLock, lock_path
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


@pytest.mark.slow   # two real writer processes started at the same instant
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
    from scoreprobe.store.commit import clean_leftovers, sibling
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


def test_stores_written_before_commit_records_are_read_but_resumed_only_with_overwrite(tmp_path):
    ref = store.open_store(_full(tmp_path / "ref.zarr"))
    path = tmp_path / "old.zarr"  # the previous layout: no consolidated metadata, no record
    first = sweep(toy_probe, mapping(), steps=STEPS[:2], config=CONFIG, progress=False)
    first.attrs.update({"Conventions": "CF-1.11", "history": "earlier", "scoreprobe_steps_written": 2,
                        "scoreprobe_config": json.dumps(store.normalize_config(CONFIG), sort_keys=True)})
    first.to_zarr(path, zarr_format=3, consolidated=False, encoding=store.encoding(first))
    assert store.written_steps(path) == STEPS[:2]
    with pytest.raises(StoreError, match="written before scoreprobe recorded which model each step measured.*overwrite=True"):
        sweep(toy_probe, mapping(), out=path, config=CONFIG, progress=False)   # which model it measured is unknown
    xr.testing.assert_equal(store.open_store(path), ref.isel(step=slice(0, 2)))   # nothing lost
    with pytest.raises(StoreError, match="written before scoreprobe recorded"):   # also for steps it does not hold
        sweep(toy_probe, mapping(), steps=STEPS[2:], out=path, config=CONFIG, progress=False)
    out = sweep(toy_probe, mapping(), out=path, config=CONFIG, progress=False, overwrite=True)
    xr.testing.assert_identical(drop_history(out), drop_history(ref))


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
