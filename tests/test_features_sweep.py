"""sae_sweep: one SAE per (site, step, σ) of a cached store — each cell equals train_sae + sae_scores on that cell
alone, the Dataset's dims and coordinates follow the store, and a rerun with out_dir trains nothing again."""
import numpy as np
import pytest
import torch
import xarray as xr

import scoreprobe as sp
from scoreprobe.errors import ConfigError, DataError
from scoreprobe.features import train as train_mod
from tests.test_inside_patch import planted

pytest.importorskip("safetensors")

RULE = sp.Parity(G=2, shape=(2, 2))
KW = dict(k=2, steps=20, lr=0.01, seed=1)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    bits = np.random.default_rng(0).integers(0, 2, (48, 4))
    x = torch.tensor(2.0 * bits - 1, dtype=torch.float32)
    out = tmp_path_factory.mktemp("sweep") / "c.zarr"
    ds = sp.cache_series({1: planted(), 2: planted()}, x, sigmas=[0.5, 1.0], names=["hook_embed", "blocks.0.hook_resid_post"],
                         out=str(out), progress=False)
    truth = sp.rule_features(RULE, bits)
    return ds, truth


def test_each_cell_is_its_own_sae_scored(store):
    ds, truth = store
    sites = ["hook_embed", "blocks.0.hook_resid_post"]
    got = sp.sae_sweep(ds, sites, 8, ground_truth=truth, progress=False, **KW)
    assert dict(got.sizes) == {"site": 2, "step": 2, "sigma": 2, "feature": truth.sizes["feature"]}
    assert got.step.values.tolist() == [1, 2] and got.sigma.values.tolist() == [0.5, 1.0]
    for site in sites:
        for step in (1, 2):
            for sigma in (0.5, 1.0):
                sae = sp.train_sae(ds, 8, site=site, sae_steps=[step], sigmas=[sigma], progress=False, **KW)
                one = sp.sae_scores(sae, ds, truth, site=site, steps=[step], sigmas=[sigma])
                cell = got.sel(site=site, step=step, sigma=sigma)
                assert float(cell.explained_variance) == float(one.explained_variance)
                assert float(cell.coverage) == float(one.coverage)
                np.testing.assert_array_equal(cell.best_f1.values, one.best_f1.values)


def test_a_rerun_with_out_dir_trains_nothing_and_a_callable_truth_is_per_cell(store, tmp_path, monkeypatch):
    ds, truth = store
    seen = []

    def per_cell(step, sigma):
        seen.append((step, sigma))
        return truth
    first = sp.sae_sweep(ds, "hook_embed", 8, ground_truth=per_cell, out_dir=tmp_path, progress=False, **KW)
    assert sorted(seen) == [(1, 0.5), (1, 1.0), (2, 0.5), (2, 1.0)]
    assert (tmp_path / "hook_embed" / "step2_sigma0.5" / "cfg.json").is_file()
    cfg = sp.load_sae(tmp_path / "hook_embed" / "step2_sigma0.5").config       # where its rows came from
    assert (cfg["site"], cfg["step"], cfg["sigma"]) == ("hook_embed", 2, 0.5)
    monkeypatch.setattr(train_mod, "_loss", lambda *a, **k: (_ for _ in ()).throw(AssertionError("trained")))
    again = sp.sae_sweep(ds, "hook_embed", 8, ground_truth=truth, out_dir=tmp_path, progress=False, **KW)
    xr.testing.assert_identical(first, again)
    with pytest.raises(ConfigError, match="other rows or settings"):
        sp.sae_sweep(ds, "hook_embed", 8, out_dir=tmp_path, progress=False, **dict(KW, k=3))


def test_bad_input_is_refused_before_any_training(store, monkeypatch):
    ds, _ = store
    monkeypatch.setattr(train_mod, "_loss", lambda *a, **k: (_ for _ in ()).throw(AssertionError("trained")))
    with pytest.raises(ConfigError, match="sites"):
        sp.sae_sweep(ds, [], 8, **KW)
    with pytest.raises(DataError, match="layer 9"):
        sp.sae_sweep(ds, ["hook_embed", "blocks.9.hook_resid_post"], 8, **KW)
    with pytest.raises(DataError, match="sigma"):
        sp.sae_sweep(ds, "hook_embed", 8, sigmas=[0.7], **KW)
    with pytest.raises(ConfigError, match="cached Dataset"):
        sp.sae_sweep(torch.zeros(3, 4), "hook_embed", 8, **KW)
