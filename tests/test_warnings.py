"""Things a user must know reach API users as warnings (ScoreprobeWarning subclasses, attributed to the
caller's line), not only as log records that the package's NullHandler swallows."""
import json
import warnings

import numpy as np
import pytest
import xarray as xr

from scoreprobe import store
from scoreprobe.data.datasets import make_dataset
from scoreprobe.errors import ConfigError, ScoreprobeWarning, SettingWarning, StoreRepairWarning
from scoreprobe.probes import dsm
from scoreprobe.data.rules import Parity
from scoreprobe.sweep import sweep

STEPS = [0, 10, 100]
CONFIG = {"probe": "toy"}


def toy_probe(step):
    """A per-step slab: (sample,) floats that depend on the step."""
    return xr.Dataset({"loss": (("sample",), np.arange(4.0) + step, {"units": "1", "long_name": "loss"})},
                      coords={"sample": np.arange(4)})


def test_repairing_an_interrupted_write_warns_the_caller(tmp_path):
    path = tmp_path / "old.zarr"   # the layout before commit records: arrays one step ahead of the marker
    first = sweep(toy_probe, {s: s for s in STEPS[:2]}, config=CONFIG, progress=False)
    first.attrs.update({"scoreprobe_steps_written": 1,
                        "scoreprobe_config": json.dumps(store.normalize_config(CONFIG), sort_keys=True)})
    first.to_zarr(path, zarr_format=3, consolidated=False, encoding=store.encoding(first))
    with pytest.warns(StoreRepairWarning, match="truncating it to the 1 committed") as caught:
        store.update_attrs(path, {"note": "repaired"})   # (resuming such an old store is refused: it names no models)
    assert {w.filename for w in caught if w.category is StoreRepairWarning} == {__file__}
    out = store.open_store(path)
    assert out.step.values.tolist() == STEPS[:1] and out.attrs["note"] == "repaired"
    np.testing.assert_array_equal(out.loss.values, np.arange(4.0) + np.array(STEPS[:1])[:, None])


class Identity:
    sigma_data = 0.5

    def __call__(self, x, sigma):
        return x


@pytest.fixture(scope="module")
def small():
    rule = Parity(G=2, shape=(2, 4))
    return rule, make_dataset(rule, n_train=4, n_heldout=4, seed=0)


def test_a_rule_without_an_exact_oracle_warns_and_leaves_the_reference_out(small, monkeypatch):
    rule, data = small
    kw = dict(sigmas=[0.5, 1.0], n_noise=1, dataset=data, rule=rule)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScoreprobeWarning)
        assert "rule_loss" in dsm.dsm_by_sigma(Identity(), **kw)

    def no_oracle(rule):
        raise ConfigError(f"no exact oracle exists for {rule!r}")

    monkeypatch.setattr(dsm, "RuleDenoiser", no_oracle)
    with pytest.warns(SettingWarning, match="no rule-oracle reference .*no exact oracle exists") as caught:
        ds = dsm.dsm_by_sigma(Identity(), **kw)
    assert "rule_loss" not in ds and "mem_loss" in ds
    assert [w.filename for w in caught] == [__file__]
