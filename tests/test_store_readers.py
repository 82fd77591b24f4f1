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
