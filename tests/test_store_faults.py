"""scoreprobe.store under faults (issue #21, item 7): deleted array folders repaired on the next run,
a full disk or a read-only mount (one StoreError, nothing committed lost, a rerun resumes), --out
values the system will not take. The store's own abuse (swaps, damage, locks, races): test_store_abuse.py."""
import errno
import warnings

import pytest
import xarray as xr

from scoreprobe import store
from scoreprobe.errors import StoreDamageWarning, StoreError, StoreRepairWarning
from scoreprobe.sweep import sweep
from abuse_stores import SPECIAL_OUTS, STORE_CASES
from test_store import CONFIG, STEPS, _full, drop_history, mapping, toy_probe


@pytest.mark.parametrize("name, breaker, n_recomputed", STORE_CASES, ids=[c[0] for c in STORE_CASES])
def test_a_deleted_array_folder_is_repaired_on_the_next_run(tmp_path, name, breaker, n_recomputed):
    ref = drop_history(store.open_store(_full(tmp_path / "ref.zarr")))
    path = _full(tmp_path / "a.zarr")
    breaker(path)
    calls = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = sweep(lambda s: calls.append(s) or toy_probe(s), mapping(), out=path, config=CONFIG, progress=False)
    said = {(w.category, str(w.message).partition(": ")[2][:40]) for w in caught}
    assert any(c is StoreRepairWarning and "had no metadata" in str(w.message) for w in caught for c in [w.category])
    assert any(w.category is StoreDamageWarning for w in caught) == (n_recomputed > 0), said
    assert len(calls) == n_recomputed                    # what was lost, and no more
    xr.testing.assert_identical(drop_history(out), ref)
    xr.testing.assert_identical(drop_history(store.open_store(path)), ref)
    calls.clear()
    sweep(lambda s: calls.append(s) or toy_probe(s), mapping(), out=path, config=CONFIG, progress=False)
    assert calls == []                                   # repaired for good: the next run has nothing to do


def _open_writes(args, kwargs):
    """Whether open(file, mode, ...) opens for writing."""
    mode = args[1] if len(args) > 1 else kwargs.get("mode", "r")
    return not mode.startswith("r") or "+" in mode


class FaultyDisk:
    """File system calls under `root` fail with OSError(`err`) from the `after`-th write on (a full
    disk stays full; a read-only mount refuses renames and deletions too), as the kernel would say:
    open for writing (builtins and io, which pathlib and zarr use), os.open with write flags,
    os.mkdir, and with EROFS os.replace, rename, unlink, rmdir. `count` is the writes seen."""

    def __init__(self, monkeypatch, root, err, after):
        import builtins
        import io
        import os
        self.root, self.err, self.after, self.count = str(root), err, after, 0
        write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT
        for module in (builtins, io):
            monkeypatch.setattr(module, "open", self._wrap(io.open, _open_writes))
        monkeypatch.setattr(os, "open", self._wrap(os.open, lambda a, k: a[1] & write_flags))
        always = lambda a, k: True   # noqa: E731
        for name in ["mkdir"] + (["replace", "rename", "unlink", "rmdir"] if err == errno.EROFS else []):
            monkeypatch.setattr(os, name, self._wrap(getattr(os, name), always))

    def _wrap(self, real, writes):
        import os

        def call(*a, **k):
            if a and isinstance(a[0], (str, os.PathLike)) and os.fspath(a[0]).startswith(self.root) and writes(a, k):
                self.count += 1
                if self.count >= self.after:
                    raise OSError(self.err, os.strerror(self.err), os.fspath(a[0]))
            return real(*a, **k)
        return call


def _writes_of_a_full_run(tmp_path, monkeypatch):
    with monkeypatch.context() as m:
        disk = FaultyDisk(m, tmp_path / "count", errno.ENOSPC, float("inf"))
        sweep(toy_probe, mapping(), out=tmp_path / "count" / "a.zarr", config=CONFIG, progress=False)
    return disk.count


@pytest.mark.parametrize("err, hint", [(errno.ENOSPC, "the disk is full: free some space and rerun"),
                                       (errno.EROFS, "read-only")], ids=["ENOSPC", "EROFS"])
def test_a_full_disk_or_a_read_only_mount_is_one_store_error_and_nothing_is_lost(tmp_path, monkeypatch, err, hint):
    ref = drop_history(store.open_store(_full(tmp_path / "ref.zarr")))
    n = _writes_of_a_full_run(tmp_path, monkeypatch)
    assert n > 50
    for after in sorted({1, 2, 3, n - 3, n - 1, *range(7, n, n // 8)}):   # every part of a run
        root = tmp_path / f"at{after}"
        root.mkdir()
        path = root / "a.zarr"
        if after % 2:                                    # half of them resume an existing store
            sweep(toy_probe, mapping(), steps=STEPS[:2], out=path, config=CONFIG, progress=False)
        with monkeypatch.context() as m:
            FaultyDisk(m, root, err, after)
            try:
                sweep(toy_probe, mapping(), out=path, config=CONFIG, progress=False)
            except StoreError as e:
                assert hint in str(e) and "\n" not in str(e), str(e)
        kept = store.written_steps(path) if path.exists() else []
        if after % 2:
            assert kept[:2] == STEPS[:2]                 # what was committed before stays
        if kept:
            xr.testing.assert_equal(store.open_store(path), ref.sel(step=kept))   # plain readers too:
            xr.testing.assert_equal(xr.open_zarr(path, chunks=None), ref.sel(step=kept))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StoreRepairWarning)
            out = sweep(toy_probe, mapping(), out=path, config=CONFIG, progress=False)
        xr.testing.assert_identical(drop_history(out), ref)      # the space back: resumes to the full store
        assert sorted(p.name for p in root.iterdir()) == ["a.zarr"], after
        assert not [f for f in path.rglob("*") if f.name.endswith((".tmp", ".partial"))]


def test_an_overwrite_on_a_full_disk_keeps_the_old_store(tmp_path, monkeypatch):
    path, other = _full(tmp_path / "a.zarr"), {"probe": "toy", "n": 6}
    old = store.open_store(path).load()
    for after in (1, 5, 20, 40):
        with monkeypatch.context() as m, pytest.raises(StoreError, match="the disk is full"), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore", StoreRepairWarning)   # the previous try's unfinished store goes
            FaultyDisk(m, tmp_path, errno.ENOSPC, after)
            sweep(toy_probe, mapping(), out=path, config=other, overwrite=True, progress=False)
        xr.testing.assert_identical(store.open_store(path).load(), old)


@pytest.mark.parametrize("out", SPECIAL_OUTS)
def test_special_outs_are_one_store_error(out):
    with pytest.raises(StoreError, match=r"cannot (create|write)|is a file") as e:
        store.check_writable(out)
    with pytest.raises(StoreError, match=r"cannot (create|write)|is a file") as e:
        sweep(toy_probe, mapping(), out=out, config=CONFIG, progress=False)
    assert "\n" not in str(e.value)
