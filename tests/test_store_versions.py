"""Stores across definitions versions: engine-only changes do not void results that used no engine."""
import json

import pytest
import xarray as xr

import scoreprobe as sp
from scoreprobe import store
from scoreprobe.store import versions as definitions
from scoreprobe.data.datasets import make_dataset
from scoreprobe.data.rules import Parity
from scoreprobe.defaults import DEFINITIONS_VERSION
from scoreprobe.errors import StoreError
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser


@pytest.fixture(scope="module")
def small():
    rule = Parity(2, shape=(3, 4))
    data = make_dataset(rule, 16, 16, seed=0)
    return rule, data, {0: RuleDenoiser(rule), 50: EmpiricalDenoiser(data.train)}


def _set_version(path, version):
    """Rewrite the definitions version recorded in a store's config (as an older scoreprobe wrote it)."""
    meta = json.loads((path / "zarr.json").read_text())
    config = json.loads(meta["attributes"]["scoreprobe_config"])
    meta["attributes"]["scoreprobe_config"] = json.dumps({**config, "definitions": version}, sort_keys=True)
    (path / "zarr.json").write_text(json.dumps(meta))


def test_history_names_every_version_and_engine_only_is_a_subset():
    assert set(definitions.HISTORY) == set(range(2, DEFINITIONS_VERSION + 1))
    assert definitions.ENGINE_ONLY <= set(definitions.HISTORY)


@pytest.mark.parametrize("config, engine", [
    ({"solver": "heun", "n_steps": 32}, False),
    ({"sampler": {"name": "heun"}, "source": {"name": "run"}}, False),
    ({"solver": "adaptive", "engine": {"rtol": 0.005}}, True),
    ({"sampler": {"name": "adaptive", "engine": {}}}, True),
    ({"sampler": {"name": "adaptive"}}, True),              # an older adaptive record without its settings
    ({"runs": [{"solver": "euler"}, {"solver": "adaptive"}]}, True),
])
def test_uses_engine(config, engine):
    assert definitions.uses_engine(config) is engine


def test_equivalence_needs_engine_only_changes_and_no_engine():
    heun, engine = {"sampler": {"name": "heun"}}, {"solver": "adaptive", "engine": {}}
    assert definitions.equivalent(DEFINITIONS_VERSION, engine)                # same version: always
    assert definitions.equivalent(2, heun, current=4)                         # 3 and 4 changed the engine only
    assert not definitions.equivalent(2, engine, current=4)                   # ... which this result used
    assert not definitions.equivalent(1, heun, current=4)                     # 2 changed the sample metrics
    assert not definitions.equivalent(5, heun, current=4)                     # written by a newer scoreprobe
    for bad in (None, "3", 3.0, True):
        assert not definitions.equivalent(bad, heun, current=4)


def test_a_heun_clocks_store_of_an_engine_only_older_version_is_resumed(small, tmp_path):
    rule, data, mapping = small
    out = tmp_path / "clocks.zarr"
    first = sp.clocks(mapping, n_samples=24, n_steps=6, dataset=data, rule=rule, out=out, progress=False)
    _set_version(out, 2)
    again = sp.clocks(mapping, n_samples=24, n_steps=6, dataset=data, rule=rule, out=out, progress=False)
    xr.testing.assert_equal(again.drop_attrs(), first.drop_attrs())
    assert json.loads(store.open_store(out).attrs["scoreprobe_config"])["definitions"] == 2   # kept as written
    _set_version(out, 1)                                                        # before version 2's metrics
    with pytest.raises(StoreError, match="config keys differ: definitions"):
        sp.clocks(mapping, n_samples=24, n_steps=6, dataset=data, rule=rule, out=out, progress=False)


def test_an_adaptive_store_of_an_older_version_is_refused(small, tmp_path):
    rule, data, mapping = small
    out = tmp_path / "clocks.zarr"
    sp.clocks({0: mapping[0]}, n_samples=24, dataset=data, rule=rule, out=out, progress=False, sampler="adaptive")
    assert json.loads(store.open_store(out).attrs["scoreprobe_config"])["sampler"]["engine"]["rtol"] > 0
    _set_version(out, 4)      # 5 changed the engine, which this store used (6 changed only how τ is read)
    with pytest.raises(StoreError, match="config keys differ: definitions"):
        sp.clocks(mapping, n_samples=24, dataset=data, rule=rule, out=out, progress=False, sampler="adaptive")


def test_a_reading_only_version_keeps_stores_and_rereads_their_taus(small, tmp_path):
    """Version 6 changed only how τ is read off the stored curves: a version-5 store (engine or not) is
    resumed, and τ stored under the earlier reading (no tau_definition) are re-read, never mixed."""
    from scoreprobe.reports.gather import _read
    assert definitions.READING_ONLY <= set(definitions.HISTORY)
    assert definitions.equivalent(5, {"solver": "adaptive", "engine": {}}, current=6)
    assert not definitions.equivalent(4, {"solver": "adaptive", "engine": {}}, current=6)
    rule, data, mapping = small
    out = tmp_path / "clocks.zarr"
    sp.clocks(mapping, n_samples=24, n_steps=6, dataset=data, rule=rule, out=out, progress=False)
    _set_version(out, 5)
    store.update_attrs(out, {"tau_rule": -1.0, "tau_definition": None})      # as an older reading left them
    assert not definitions.tau_attrs_current(store.open_store(out).attrs)
    assert _read("clocks", out).attrs["tau_rule"] != -1.0                    # re-read, not reported
    again = sp.clocks(mapping, n_samples=24, n_steps=6, dataset=data, rule=rule, out=out, progress=False)
    assert again.attrs["tau_definition"].startswith("reliable")
