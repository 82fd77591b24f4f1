"""Stores keyed on what was measured (issue 20, item 1): every step records the identity of its model
(a digest of the loaded tensors, a behavioural fingerprint, or the user's model_id) and a resume
compares it step by step; each case of the issue, end to end."""
import json
import re
import shutil

import numpy as np
import pytest
import torch

from scoreprobe.sweep import identity
from scoreprobe.loading.series import load_series
from scoreprobe.data.datasets import make_dataset
from scoreprobe.errors import StoreError
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.probes.basins import basins
from scoreprobe.stats.clocks import clocks
from scoreprobe.data.rules import Parity
from scoreprobe.slices import auto_plane
from test_sources import _cli, _sd

SHIPPED = load_series()
RULE = Parity(2, shape=(6, 6))
CLOCKS = ["--n-samples", "6", "--n-steps", "2", "--device", "cpu", "--set", "num_heads=6", "--set", "num_classes=1",
          "--set", "parameterization=ddpm_eps", "--set", "schedule=linear", "--rule", json.dumps(RULE.spec())]
KW = dict(n_samples=6, n_steps=2, n_boot=10, progress=False)


def _models(path):
    return json.loads((path / "zarr.json").read_text())["attributes"]["scoreprobe_record"]["models"]


@pytest.fixture
def seeds(tmp_path):
    """seedA/checkpoints and seedB/checkpoints: the same names and sizes, other weights; data.npz."""
    make_dataset(RULE, 20, 10, seed=0).save(tmp_path / "data.npz")
    for name, seed in (("seedA", 0), ("seedB", 7)):
        (tmp_path / name / "checkpoints").mkdir(parents=True)
        for i, step in enumerate((1500, 2000)):
            torch.save(_sd(seed + i), tmp_path / name / "checkpoints" / f"{step:07d}.pt")
    a, b = (sorted((tmp_path / n / "checkpoints").iterdir()) for n in ("seedA", "seedB"))
    assert [f.name for f in a] == [f.name for f in b] and [f.stat().st_size for f in a] == [f.stat().st_size for f in b]
    return tmp_path


def _clocks(d, folder, *extra, capsys):
    return _cli(["clocks", str(d / folder / "checkpoints" / "*.pt"), "--dataset", d / "data.npz", "--out",
                 d / "clocks.zarr", *CLOCKS, *extra], capsys)


def test_two_folders_with_the_same_names_and_sizes_are_told_apart(seeds, capsys):
    code, out, err = _clocks(seeds, "seedA", capsys=capsys)
    assert code == 0, err
    stored = _models(seeds / "clocks.zarr")
    code, out, err = _clocks(seeds, "seedB", capsys=capsys)
    assert code == 2 and len([line for line in err.splitlines() if not line.startswith("warning:")]) == 1, err
    assert re.search(f"step 1500 was measured on another model \\(stored: weights {stored[0]['weights']}(, outputs "
                     r"fingerprint \[[^]]*\])?; now: weights ", err) and "--overwrite" in err, err
    code, out, err = _clocks(seeds, "seedB", "-q", capsys=capsys)   # the same refusal when quiet
    assert code == 2 and "measured on another model" in err, err
    code, out, err = _clocks(seeds, "seedB", "--overwrite", capsys=capsys)
    assert code == 0, err
    assert _models(seeds / "clocks.zarr") != stored


def test_a_checkpoint_overwritten_in_place_by_one_of_the_same_size_is_refused(seeds, capsys):
    assert _clocks(seeds, "seedA", capsys=capsys)[0] == 0
    f = seeds / "seedA" / "checkpoints" / "0002000.pt"
    size = f.stat().st_size
    torch.save(_sd(99), f)
    assert f.stat().st_size == size
    code, out, err = _clocks(seeds, "seedA", capsys=capsys)
    assert code == 2 and "step 2000 was measured on another model" in err, err   # step 1500 is unchanged


def test_a_file_resaved_with_equal_tensors_and_a_moved_store_still_resume(seeds, capsys):
    assert _clocks(seeds, "seedA", capsys=capsys)[0] == 0
    f = seeds / "seedA" / "checkpoints" / "0001500.pt"
    size = f.stat().st_size
    torch.save(torch.load(f, weights_only=True), f, _use_new_zipfile_serialization=False)   # another file format
    assert f.stat().st_size != size
    code, out, err = _clocks(seeds, "seedA", capsys=capsys)
    assert code == 0 and "all 2 steps were already written; reused them, computed nothing" in out, out + err
    elsewhere = seeds / "elsewhere"
    shutil.copytree(seeds / "seedA", elsewhere / "seedA")          # the checkpoints and the store, moved
    shutil.move(seeds / "clocks.zarr", elsewhere / "clocks.zarr")
    shutil.copy(seeds / "data.npz", elsewhere / "data.npz")
    code, out, err = _clocks(elsewhere, "seedA", capsys=capsys)
    assert code == 0 and "reused them, computed nothing" in out, out + err


def test_a_mapping_of_other_callables_is_refused(tmp_path):
    ds = make_dataset(RULE, 20, 10, seed=0)
    mem, gen = EmpiricalDenoiser(ds.train), RuleDenoiser(RULE)
    first = clocks({2000: lambda x, s: mem(x, s)}, out=tmp_path / "own.zarr", dataset=ds, rule=RULE, **KW)
    again = clocks({2000: lambda x, s: EmpiricalDenoiser(ds.train)(x, s)}, out=tmp_path / "own.zarr", dataset=ds,
                   rule=RULE, **KW)   # another function object, the same behaviour: resumed
    np.testing.assert_array_equal(first.mem_ratio.values, again.mem_ratio.values)
    with pytest.raises(StoreError, match="step 2000 was measured on another model .stored: outputs fingerprint"):
        clocks({2000: lambda x, s: gen(x, s)}, out=tmp_path / "own.zarr", dataset=ds, rule=RULE, **KW)
    clocks({2000: lambda x, s: gen(x, s)}, out=tmp_path / "own.zarr", dataset=ds, rule=RULE, overwrite=True, **KW)
    assert "outputs" in _models(tmp_path / "own.zarr")[0]


def test_model_id_names_what_cannot_be_fingerprinted(tmp_path):
    ds = make_dataset(RULE, 20, 10, seed=0)
    mem = EmpiricalDenoiser(ds.train)

    def picky(x, s):   # fails on the fingerprint's probe batch (128 rows), works on the sampler's
        if x.shape[0] == 128:
            raise RuntimeError("picky")
        return mem(x, s)
    path, kw = tmp_path / "own.zarr", dict(dataset=ds, rule=RULE, **KW)
    clocks({5: picky}, out=path, **kw)
    assert _models(path) == [None]
    with pytest.raises(StoreError, match="step 5 cannot tell whether it is the same model.*pass model_id="):
        clocks({5: picky}, out=path, **kw)
    clocks({5: picky}, out=path, overwrite=True, model_id="memorizer-v1", **kw)
    assert _models(path) == [{"model_id": "memorizer-v1"}]
    clocks({5: picky}, out=path, model_id={5: "memorizer-v1"}, **kw)   # resumed
    with pytest.raises(StoreError, match="stored: model_id 'memorizer-v1'; now: model_id 'v2'"):
        clocks({5: picky}, out=path, model_id="v2", **kw)


def test_a_retrained_run_with_the_same_config_is_refused(tmp_path):
    run = tmp_path / SHIPPED.path.name
    keep = {SHIPPED.checkpoint_path(s).name for s in SHIPPED.steps[-2:]}
    shutil.copytree(SHIPPED.path, run, ignore=lambda d, names: [n for n in names if n.startswith("step_") and n not in keep])
    clocks(load_series(run), out=tmp_path / "c.zarr", **KW)
    f = run / "ckpt" / sorted(keep)[-1]
    ckpt = torch.load(f, weights_only=True)
    for part in {"model", "ema"} & set(ckpt):   # "another machine": the same config, other weights
        ckpt[part] = {k: v + 1e-4 if v.is_floating_point() else v for k, v in ckpt[part].items()}
    torch.save(ckpt, f)
    with pytest.raises(StoreError, match=f"step {SHIPPED.steps[-1]} was measured on another model"):
        clocks(load_series(run), out=tmp_path / "c.zarr", **KW)


def test_stacked_and_one_at_a_time_record_the_same_models(tmp_path):
    plane, steps = auto_plane(SHIPPED.dataset, SHIPPED.rule, seed=0), SHIPPED.steps[-3:]
    kw = dict(sigma_start=[1.0], res=3, n_steps=2, steps=steps, progress=False)
    basins(SHIPPED, plane, out=tmp_path / "one.zarr", **kw)
    basins(SHIPPED, plane, out=tmp_path / "two.zarr", models_per_pass=2, **kw)
    one = _models(tmp_path / "one.zarr")
    assert one == _models(tmp_path / "two.zarr") and len({m["weights"] for m in one}) == 3
    assert one[-1] == identity.model_identity(SHIPPED.denoiser(steps[-1]))


def test_the_fingerprint_survives_float_noise_and_tells_checkpoints_apart():
    ds = SHIPPED.dataset
    x, s = identity.probe_batch(36)
    rng = np.random.default_rng(0)
    for D in (RuleDenoiser(SHIPPED.rule), EmpiricalDenoiser(ds.train)):
        base = identity.fingerprint(D, 36)
        out64 = D(x.double(), s.double()).numpy()              # float64 instead of float32
        assert identity.same({"outputs": base}, {"outputs": identity.project(out64, 36).tolist()})
        for _ in range(20):                                     # 1e-6 relative noise on every output
            noisy = D(x, s).double().numpy() * (1 + 1e-6 * rng.standard_normal(x.shape))
            assert identity.same({"outputs": base}, {"outputs": identity.project(noisy, 36).tolist()})
    a, b = (identity.fingerprint(SHIPPED.denoiser(step), 36) for step in SHIPPED.steps[-2:])
    assert np.abs(np.subtract(a, b)).max() > 100 * identity.FINGERPRINT_TOL   # neighbouring checkpoints differ


def test_weights_digests_depend_on_tensors_and_settings_only():
    D = SHIPPED.denoiser(SHIPPED.steps[-1])
    again = SHIPPED.denoiser(SHIPPED.steps[-1])
    assert identity.weights_digest(D) == identity.weights_digest(again)
    again.sigma_data = 0.5   # a setting that changes D(x, σ) changes the digest
    assert identity.weights_digest(D) != identity.weights_digest(again)
    assert identity.weights_digest(lambda x, s: x) is None and identity.weights_digest(torch.nn.ReLU()) is None
