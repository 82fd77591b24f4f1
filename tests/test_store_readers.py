"""Stored string coordinates (`state`, `split`, `anchor_label`) open in plain readers: xarray and zarr-python
without warnings, as Python strings, in the zarr v3 `string` data type (zarr-extensions; read by zarr-python
3.0 as well), not the zarr-python-3.1-only `fixed_length_utf32`."""
import json
import warnings

import pytest
import xarray as xr
import zarr

from scoreprobe.data.datasets import STATES, make_dataset
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.probes.basins import basins
from scoreprobe.data.rules import Parity
from scoreprobe.slices import auto_plane


@pytest.fixture(scope="module")
def basins_store(tmp_path_factory):
    rule = Parity(G=2, shape=(2, 4), layout="random", seed=0)
    ds = make_dataset(rule, n_train=6, n_heldout=6, seed=0)
    plane = auto_plane(ds, rule, seed=0)
    path = tmp_path_factory.mktemp("readers") / "b.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # writing strings warns about no unstable zarr data type either
        basins({1: RuleDenoiser(rule), 10: EmpiricalDenoiser(ds.train)}, plane, sigma_start=1.0, res=4,
               dataset=ds, rule=rule, out=path)
    return path


@pytest.mark.parametrize("name", ["state", "anchor_label"])
def test_string_coordinates_are_stored_as_the_zarr_v3_string_type(basins_store, name):
    meta = json.loads((basins_store / name / "zarr.json").read_text())
    assert meta["data_type"] == "string"                                 # not {"name": "fixed_length_utf32"}
    assert [c["name"] for c in meta["codecs"]][0] == "vlen-utf8"
    assert meta["fill_value"] == ""


def test_xarray_opens_the_state_coordinate_without_warnings(basins_store):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = xr.open_zarr(basins_store)
        eager = xr.open_zarr(basins_store, chunks=None)
        assert ds.state.values.tolist() == list(STATES) == eager.state.values.tolist()
        assert all(type(s) is str for s in ds.state.values.tolist())
        total = sum(eager.fraction.sel(state=name) for name in STATES)    # label lookups on the index
        assert total.values.ravel().tolist() == pytest.approx([1.0] * total.size)


def test_zarr_python_reads_python_strings(basins_store):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        group = zarr.open_group(str(basins_store), mode="r")
        values = group["state"][:]
    assert values.shape == (len(STATES),)
    assert [type(s) for s in values] == [str] * len(STATES)
    assert list(values) == list(STATES)


# ---------------------------------------------------------------------------------------------
# Which readers are safe while a writer runs (docs/stores.md, "Reading a store that is being written")
# ---------------------------------------------------------------------------------------------

def _read_with(reader, path):
    """{array: values} of the step-dependent arrays, as `reader` sees the store at `path`."""
    import numpy as np
    from scoreprobe import store
    if reader.startswith("zarr"):
        group = (zarr.open_consolidated(str(path), mode="r") if reader == "zarr.open_consolidated" else
                 zarr.open_group(str(path), mode="r", use_consolidated=reader != "zarr use_consolidated=False"))
        return {name: np.asarray(arr[...]) for name, arr in group.arrays()
                if "step" in (arr.metadata.dimension_names or ())}
    ds = {"open_store": lambda: store.open_store(path),
          "xr.open_zarr": lambda: xr.open_zarr(path, chunks=None),
          "xr.open_zarr consolidated=True": lambda: xr.open_zarr(path, chunks=None, consolidated=True),
          "xr.open_dataset engine=zarr": lambda: xr.open_dataset(path, engine="zarr", chunks=None),
          "xr.open_zarr consolidated=False": lambda: xr.open_zarr(path, chunks=None, consolidated=False)}[reader]()
    return {name: var.values for name, var in ds.variables.items() if "step" in var.dims}


SAFE_READERS = ["open_store", "xr.open_zarr", "xr.open_zarr consolidated=True", "xr.open_dataset engine=zarr",
                "zarr.open_group", "zarr.open_consolidated"]
UNSAFE_READERS = ["xr.open_zarr consolidated=False", "zarr use_consolidated=False"]


def _consistent(seen, committed_steps):
    """Every step array has the committed length, and `step` holds the committed steps."""
    return (len({len(v) for v in seen.values()}) == 1 and list(seen["step"]) == list(committed_steps))


def test_safe_readers_see_only_committed_steps_between_the_writes_and_the_commit(tmp_path, monkeypatch):
    """Paused where a writer has resized and written every array but not yet committed (the state a
    kill there leaves too): the safe readers see the committed steps only, the unsafe ones do not."""
    from scoreprobe.store import commit as storecommit
    from scoreprobe.sweep import sweep
    from test_store import CONFIG, mapping, toy_probe
    path, views, real = tmp_path / "a.zarr", [], storecommit.commit

    def commit_after_looking(target, attrs, metas):
        committed = attrs["scoreprobe_record"]["steps"][:-1]
        if target == path and committed:    # a step is on disk, not yet published
            views.append({r: _consistent(_read_with(r, path), committed) for r in SAFE_READERS + UNSAFE_READERS})
        real(target, attrs, metas)
    monkeypatch.setattr(storecommit, "commit", commit_after_looking)
    sweep(toy_probe, mapping(), out=path, config=CONFIG, progress=False)
    assert len(views) == 4
    assert all(v[r] for v in views for r in SAFE_READERS), views
    assert not any(v[r] for v in views for r in UNSAFE_READERS), views    # they see the uncommitted step
    assert all(_consistent(_read_with(r, path), [0, 3, 10, 30, 100]) for r in SAFE_READERS + UNSAFE_READERS)


WRITER = """
import sys, time
import numpy as np, xarray as xr
from scoreprobe.sweep import sweep
def probe(step):
    time.sleep(0.02)
    return xr.Dataset({"v": (("i",), np.full(64, float(step))), "w": (("j",), np.full(8, -float(step)))},
                      coords={"i": np.arange(64), "j": np.arange(8)})
sweep(probe, {s: s for s in range(int(sys.argv[2]))}, out=sys.argv[1], config={"probe": "readers"}, progress=False)
"""


@pytest.mark.slow   # readers polling a store while a real writer commits steps
def test_safe_readers_never_fail_during_a_write(tmp_path):
    """A writer process appends steps while this one reads with every safe reader in turn: each
    read succeeds without a warning and shows complete steps (values and step coordinate agree).
    (The unsafe readers, measured the same way: 17 of 118 reads failed or saw arrays of different
    lengths, e.g. "conflicting sizes for dimension 'step'".)"""
    import subprocess
    import sys
    import time
    import numpy as np
    path, n_steps = tmp_path / "w.zarr", 60
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(n_steps)], stderr=subprocess.PIPE,
                              text=True)
    reads, bad, deadline = 0, [], time.monotonic() + 120
    try:
        while writer.poll() is None and time.monotonic() < deadline:
            if not (path / "zarr.json").exists():
                continue
            for reader in SAFE_READERS:
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("error")   # not even a warning (zarr's about stray files, say)
                        seen = _read_with(reader, path)
                    steps = seen["step"]
                    ok = (_consistent(seen, range(len(steps))) and np.array_equal(seen["v"][:, 0], steps)
                          and np.array_equal(seen["w"][:, 0], -steps))
                except Exception as e:   # noqa: BLE001 (any failure of a read is what is counted)
                    ok, seen = False, f"{type(e).__name__}: {e}"
                reads += 1
                if not ok:
                    bad.append((reader, seen))
    finally:
        writer.kill() if writer.poll() is None else None
        err = writer.communicate()[1]
    assert writer.returncode == 0, err
    assert reads >= 2 * len(SAFE_READERS) and bad == [], (reads, bad[:3])
