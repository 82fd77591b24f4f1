"""models/stack.py: K checkpoints of one architecture in one batched (vmapped) forward, identical to
evaluating them one at a time; basin maps of a stack equal the single maps (issue #14)."""
import numpy as np
import pytest
import torch

from scoreprobe.data.datasets import make_dataset, to_signed
from scoreprobe.errors import ConfigError
from scoreprobe.models.dit import DiT
from scoreprobe.models.edm import EDMDenoiser
from scoreprobe.models.stack import StackedDenoiser, can_stack, chunk_rows, replicate, split
from scoreprobe.probes.basins import basin_map
from scoreprobe.probes.field import plane_field
from scoreprobe.data.rules import Parity
from scoreprobe.slices import Plane


def _model(seed, hidden=32, **kw):
    torch.manual_seed(seed)
    net = DiT(input_size=(6, 6), patch_size=2, in_channels=1, hidden_size=hidden, depth=2, num_heads=2,
              learn_sigma=False)
    for p in net.parameters():   # adaLN-Zero starts at zero: give every weight a value
        torch.nn.init.normal_(p, std=0.2)
    return EDMDenoiser(net, (1, 6, 6), time_scale=250.0, **kw).eval()


def test_a_stack_equals_its_models_row_by_row():
    models = [_model(s) for s in range(3)]
    S = StackedDenoiser(models)
    x, sig = torch.randn(20, 36), torch.rand(20) * 3 + 0.01
    with torch.no_grad():
        got = split(S(replicate(x, 3), replicate(sig[:, None], 3)[:, 0]), 3)
        for model, out in zip(models, got):
            torch.testing.assert_close(out, model(x, sig), rtol=1e-5, atol=1e-5)   # float32 rounding (see _same_kernels)
    assert not torch.equal(got[0], got[1])   # the models differ, so the test can tell them apart


def test_what_cannot_be_stacked_is_refused():
    assert not can_stack([_model(0), _model(1, hidden=16)])              # another width
    assert not can_stack([_model(0), _model(1, sigma_data=0.5)])         # another setting
    with pytest.raises(ConfigError, match="one architecture"):
        StackedDenoiser([_model(0), _model(1, hidden=16)])
    with pytest.raises(ConfigError, match="multiple of 2 rows"):
        StackedDenoiser([_model(0), _model(1)])(torch.zeros(3, 36), torch.ones(3))
    assert chunk_rows(100, 3) == 99 and chunk_rows(2, 3) == 3 and chunk_rows(None, 3) is None


def _same_kernels(models):
    """Whether this CPU's kernels give the stack (vmapped) and the single models the same float32 bits: then
    every probe of a stack must equal the loop's exactly; where they round differently (AMD EPYC, AVX-512:
    ≈ 1e-6 relative) adaptive steps and boundary points may follow the rounding."""
    x, sig = torch.randn(8, 36, generator=torch.Generator().manual_seed(1)), torch.linspace(0.1, 3, 8)
    with torch.no_grad():
        got = split(StackedDenoiser(models)(replicate(x, len(models)), replicate(sig[:, None], len(models))[:, 0]),
                    len(models))
        return all(torch.equal(g, m(x, sig)) for g, m in zip(got, models))


def _setup():
    rule = Parity(2, shape=(6, 6))
    data = make_dataset(rule, 12, 12, seed=0)
    plane = Plane.through(*to_signed(np.concatenate([data.train[:2], data.heldout[:1]])))
    return rule, data, plane, [_model(s) for s in range(3)]


def test_fields_of_a_stack_equal_the_single_fields():
    rule, data, plane, models = _setup()
    one = [plane_field(D, plane, [0.3, 1.0], res=5, chunk_size=7) for D in models]
    many = plane_field(StackedDenoiser(models), plane, [0.3, 1.0], res=5, chunk_size=7)
    assert len(many) == 3 and not np.array_equal(one[0]["score_u"], one[1]["score_u"])
    for a, b in zip(one, many):
        for key in a:
            np.testing.assert_allclose(b[key], a[key], rtol=1e-4, atol=1e-5, err_msg=key)


@pytest.mark.slow   # integrates 3 models' maps one at a time and stacked; the row-by-row equality stays in the default suite
def test_basin_maps_of_a_stack_equal_the_single_maps():
    rule, data, plane, models = _setup()
    one = [basin_map(D, plane, [0.5, 1.0], 6, 4, data, rule, chunk_size=10) for D in models]
    many = basin_map(StackedDenoiser(models), plane, [0.5, 1.0], 6, 4, data, rule, chunk_size=10)
    assert len(many) == 3
    exact = _same_kernels(models)
    for a, b in zip(one, many):
        assert a.keys() == b.keys()
        for key in a:
            if exact or key in ("decided_sigma",):
                np.testing.assert_allclose(a[key], b[key], rtol=0 if exact else 1e-4, err_msg=key)
            else:   # an adaptive step or a point on a basin boundary may follow the rounding: a few points
                assert np.mean(np.asarray(a[key]) == np.asarray(b[key])) >= 0.9, key


def test_clocks_of_a_stack_equal_the_single_clocks():
    import xarray as xr

    from scoreprobe.probes.clocks import clock_step
    rule, data, plane, models = _setup()
    one = [clock_step(D, data, rule, n_samples=12, seed=3, n_steps=4, chunk_size=5) for D in models]
    many = clock_step(StackedDenoiser(models), data, rule, n_samples=12, seed=3, n_steps=4, chunk_size=5)
    assert len(many) == 3
    for a, b in zip(one, many):
        xr.testing.assert_identical(a, b)


@pytest.mark.slow   # restarts the adaptive ODE for 3 models × 2 σ × 8 items; the row-by-row, field, clocks and dsm equalities stay in the default suite
def test_retention_of_a_stack_equals_the_single_retention():
    from scoreprobe.probes.retention import retention, retention_counts
    rule, data, plane, models = _setup()
    kw = dict(sigmas=[0.3, 1.0], n_noise=3, n_train=4, n_heldout=4, n_steps=4, dataset=data, rule=rule,
              chunk_size=7, progress=False)
    loop = retention(dict(enumerate(models)), **kw)
    stacked = retention(dict(enumerate(models)), models_per_pass=3, **kw)
    assert stacked.sizes["step"] == 3
    exact = _same_kernels(models)
    if exact:
        xr_equal(stacked, loop)
    else:
        for key in stacked.data_vars:
            _restarts_agree(loop[key].values, stacked[key].values, 3, key)
    points = np.sign(np.random.default_rng(0).standard_normal((5, data.train.shape[1]))).astype(np.float32)
    args = (points, [0.3, 1.0], 3, 0, 4, data, rule)
    one = [retention_counts(D, *args, chunk_size=7) for D in models]
    many = retention_counts(StackedDenoiser(models), *args, chunk_size=7)       # one batched pass
    assert len(many) == 3
    for a, b in zip(one, many):
        for key in a:
            if exact:
                np.testing.assert_array_equal(a[key], b[key], err_msg=key)
            else:
                _restarts_agree(a[key], b[key], 3, key)


def _restarts_agree(a, b, n_noise, key):
    """Where this CPU rounds the stack differently (see _same_kernels), a restart that ends on a basin
    boundary may follow the rounding: at least 90% of the (σ, item) outcomes equal, and a fraction of the
    restarts (every outcome but the distance ratio) off by at most one restart of n_noise."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    assert same.mean() >= 0.9, key
    if key != "capture_distance_ratio":
        assert np.nanmax(np.abs(a - b), initial=0) <= 1 / n_noise + 1e-12, key


def test_dsm_of_a_stack_equals_the_single_dsm():
    from scoreprobe.probes.dsm import dsm_by_sigma, dsm_losses
    rule, data, plane, models = _setup()
    bits = data.train[:5]
    one = [dsm_losses(D, bits, np.arange(5), [0.1, 1.0, 3.0], n_noise=2, chunk_size=7) for D in models]
    many = dsm_losses(StackedDenoiser(models), bits, np.arange(5), [0.1, 1.0, 3.0], n_noise=2, chunk_size=7)
    assert len(many) == 3
    for a, b in zip(one, many):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=0)     # vmapped matmuls may round differently
    kw = dict(sigmas=[0.1, 1.0], n_noise=2, n_train=4, n_heldout=4, dataset=data, rule=rule, progress=False)
    loop = dsm_by_sigma(dict(enumerate(models)), **kw)
    stacked = dsm_by_sigma(dict(enumerate(models)), models_per_pass=2, **kw)   # a group of 2 and one alone
    assert stacked.sizes["step"] == 3
    for name in ("loss", "gap", "mem_loss"):
        np.testing.assert_allclose(stacked[name].values, loop[name].values, rtol=1e-5, err_msg=name)


def xr_equal(a, b):
    import xarray as xr
    xr.testing.assert_identical(a.drop_attrs(), b.drop_attrs())


@pytest.mark.slow   # basin sweeps of the shipped series' last 5 checkpoints twice; the row-by-row equality stays in the default suite
def test_a_sweep_with_stacked_checkpoints_writes_the_store_of_the_loop(tmp_path, capsys):
    import xarray as xr

    from scoreprobe.loading.series import load_series
    from scoreprobe.cli import main
    from scoreprobe.probes.basins import basins
    from scoreprobe.slices import auto_plane
    from scoreprobe.store import open_store
    s = load_series()
    plane, steps = auto_plane(s.dataset, s.rule, seed=0), s.steps[-5:]
    kw = dict(sigma_start=[1.0], res=5, n_steps=3, steps=steps, progress=False)
    basins(s, plane, out=tmp_path / "one.zarr", **kw)
    basins(s, plane, out=tmp_path / "three.zarr", models_per_pass=3, **kw)   # groups of 3 and 2
    a, b = (open_store(tmp_path / n) for n in ("one.zarr", "three.zarr"))
    for ds in (a, b):
        ds.attrs.pop("history")
    # the engine's step sizes follow the network's float32 rounding, which differs between a stack (vmap)
    # and a single model: the σ at which a point is decided moves at that level, labels do not
    np.testing.assert_allclose(a.endpoint_decided_sigma, b.endpoint_decided_sigma, rtol=1e-4)
    xr.testing.assert_identical(a.drop_vars("endpoint_decided_sigma"), b.drop_vars("endpoint_decided_sigma"))
    for command, extra in (("clocks", ["--n-samples", "6", "--n-steps", "2"]), ("field", ["--res", "3", "--plot", ""])):
        outs = []
        for k in ("1", "2"):
            main([command, "--steps", ",".join(map(str, steps[:3])), "--models-per-pass", k, "--device", "cpu",
                  "--out", str(tmp_path / f"{command}{k}.zarr"), *extra])
            outs.append(open_store(tmp_path / f"{command}{k}.zarr").drop_attrs())
        if command == "clocks":   # states: identical
            xr.testing.assert_identical(*outs)
        else:                     # score fields: the stack's float32 rounding
            xr.testing.assert_allclose(*outs, rtol=1e-4, atol=1e-5)
            assert outs[0].data_vars.keys() == outs[1].data_vars.keys()
    with pytest.raises(SystemExit):
        main(["basins", "--models-per-pass", "0"])
    assert "expected a positive integer or auto" in capsys.readouterr().err
