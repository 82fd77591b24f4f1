"""DSM loss by σ: ground truth from the oracles, brute-force nearest neighbours and a known-noise denoiser."""
import numpy as np
import pytest
import torch

from scoreprobe.data import make_dataset
from scoreprobe.errors import ConfigError
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.probes.dsm import dsm_by_sigma, dsm_summary
from scoreprobe.rules import Parity


@pytest.fixture(scope="module")
def small():
    rule = Parity(G=3, shape=(4, 6))                        # D = 24, 8 groups, 2^16 valid images
    return rule, make_dataset(rule, n_train=64, n_heldout=32, seed=1)


class Identity:
    """D(x, σ) = x: its loss is σ²‖ε‖²/D, which exposes the noise bank."""

    def __init__(self, sigma_data=None):
        if sigma_data is not None:
            self.sigma_data = sigma_data

    def __call__(self, x, sigma):
        return x.clone()


def _split_mean(da, name):
    return da.where(da.split == name).mean("sample").values


def test_memorizer_vs_rule_oracle(small):
    rule, data = small
    sig = np.array([0.002, 0.6, 1.0, 40.0, 80.0])
    ds = dsm_by_sigma(EmpiricalDenoiser(data.train), sigmas=sig, n_noise=4, n_train=16, n_heldout=16,
                      dataset=data, rule=rule)
    mem_tr, rule_tr = _split_mean(ds.mem_loss, "train"), _split_mean(ds.rule_loss, "train")
    small_s = (sig > 0.5) & (sig <= 1)
    # the memorizer knows the training items; the rule oracle confuses them with valid neighbours
    assert np.all(mem_tr[small_s] < 0.5 * rule_tr[small_s]) and np.all(rule_tr[small_s] > 1e-3)
    # at large σ both predict about the mean of their set: losses agree up to ‖mean‖²/D ~ 1/N
    big = sig > 20
    for split in ("train", "heldout"):
        np.testing.assert_allclose(_split_mean(ds.mem_loss, split)[big], _split_mean(ds.rule_loss, split)[big],
                                   rtol=0.05)
    # the model here is the memorizer itself: same items, same noise -> the same numbers
    np.testing.assert_array_equal(ds.loss.values, ds.mem_loss.values)
    # σ -> 0: the memorizer maps a held-out item to its Hamming-nearest training item,
    # so the loss is 4·d_H/D (brute force); the rule oracle keeps every valid item in place
    ho = ds.split.values == "heldout"
    held = data.heldout[ds.item_index.values[ho]].astype(int)
    dist = np.abs(held[:, None, :] - data.train[None].astype(int)).sum(-1)            # (n_ho, N)
    d_sorted = np.sort(dist, axis=1)
    unique = d_sorted[:, 0] < d_sorted[:, 1]
    assert unique.sum() >= 4
    np.testing.assert_allclose(ds.mem_loss.values[0, ho][unique], 4 * d_sorted[unique, 0] / rule.n_bits, rtol=1e-5)
    assert np.all(ds.rule_loss.values[0] < 1e-6)
    assert np.all(ds.mem_loss.values[0, ~ho] < 1e-6)


def test_chunk_size_invariance(small):
    rule, data = small
    mem = EmpiricalDenoiser(data.train)
    # float64: a float32 matmul may round differently for another batch size (BLAS kernels), ~1e-7
    runs = [dsm_by_sigma(mem, sigmas=7, n_noise=3, n_train=10, n_heldout=6, dataset=data, rule=rule,
                         chunk_size=c, dtype=torch.float64) for c in (13, 64, None)]
    for r in runs[1:]:
        for name in ("loss", "gap", "mem_loss", "rule_loss"):
            np.testing.assert_allclose(r[name].values, runs[0][name].values, rtol=1e-12, atol=1e-15)


def test_noise_paired_across_splits_and_sigmas(small):
    _, data = small
    sig = np.array([0.01, 0.5, 3.0])
    ds = dsm_by_sigma(Identity(), sigmas=sig, n_noise=5, n_train=12, n_heldout=8, dataset=data,
                      oracles=False, dtype=torch.float64)
    per_eps = ds.loss.values / sig[:, None] ** 2                       # mean_k ‖ε_k‖²/D  (sigma, sample)
    np.testing.assert_allclose(per_eps, np.broadcast_to(per_eps[:1], per_eps.shape), rtol=1e-10)
    tr, ho = per_eps[0, ds.split.values == "train"], per_eps[0, ds.split.values == "heldout"]
    np.testing.assert_allclose(tr[:8], ho, rtol=1e-13)                 # j-th train == j-th held-out
    assert np.all(np.abs(tr[:, None] - tr[None]) + np.eye(len(tr)) > 1e-6)  # but differs between positions
    assert abs(per_eps.mean() - 1.0) < 0.2                              # E‖ε‖²/D = 1 (20 items × 5 × 24 draws)
    # pairing makes the gap of a denoiser that ignores the split ~0 over the paired positions
    ds8 = dsm_by_sigma(Identity(), sigmas=sig, n_noise=5, n_train=8, n_heldout=8, dataset=data, oracles=False,
                       dtype=torch.float64)
    np.testing.assert_allclose(ds8.gap.values, 0.0, atol=1e-12)


def test_two_steps_give_step_dim_and_shared_noise(small, tmp_path):
    rule, data = small
    mem, gen = EmpiricalDenoiser(data.train), RuleDenoiser(rule)
    sig = np.geomspace(0.1, 10, 5)
    kw = dict(sigmas=sig, n_noise=2, n_train=8, n_heldout=8, dataset=data, rule=rule)
    ds = dsm_by_sigma({300: mem, 20: gen}, **kw)
    assert ds.loss.dims == ("step", "sigma", "sample") and list(ds.step.values) == [20, 300]
    assert ds.mem_loss.dims == ("sigma", "sample") and ds.gap.dims == ("step", "sigma")
    np.testing.assert_array_equal(ds.loss.sel(step=300).values, ds.mem_loss.values)
    np.testing.assert_array_equal(ds.loss.sel(step=20).values, ds.rule_loss.values)
    np.testing.assert_allclose(ds.gap.sel(step=300).values, ds.mem_gap.values)
    # the same through a zarr store, and a rerun on the finished store is a no-op
    out = tmp_path / "dsm.zarr"
    stored = dsm_by_sigma({300: mem, 20: gen}, out=out, **kw)
    again = dsm_by_sigma({300: mem, 20: gen}, out=out, **kw)
    for r in (stored, again):
        np.testing.assert_array_equal(r.loss.values, ds.loss.values)
        np.testing.assert_array_equal(r.mem_loss.values, ds.mem_loss.values)
        assert "mem_loss" in r.data_vars and list(r.split.values) == list(ds.split.values)
    # figures: the heatmap holds gap as (σ rows, step columns); the curves are the split means
    from scoreprobe.viz import plot_dsm, plot_dsm_gap
    mesh = plot_dsm_gap(ds).axes[0].collections[0]
    np.testing.assert_allclose(np.asarray(mesh.get_array()).reshape(len(sig), 2), ds.gap.values.T)
    lines = plot_dsm(ds, steps=[300]).axes[0].get_lines()
    assert any(np.allclose(ln.get_ydata(), ds.mem_loss.values[:, 8:].mean(1)) for ln in lines)
    summ = dsm_summary(ds, (0.2, 2.0))
    band = (sig >= 0.2) & (sig <= 2.0)
    tr = ds.split.values == "train"
    np.testing.assert_allclose(summ.train.values, ds.loss.values[:, band][:, :, tr].mean((1, 2)))
    np.testing.assert_allclose(summ.gap.values, ds.loss.values[:, band][:, :, ~tr].mean((1, 2)) - summ.train.values)


def test_edm_weight_and_sigma_data_source(small):
    _, data = small
    sig = np.array([0.05, 1.0, 20.0])
    kw = dict(sigmas=sig, n_noise=2, n_train=4, n_heldout=4, dataset=data, oracles=False)
    for D, arg, expect, source in ((Identity(0.5), 2.0, 0.5, "denoiser"), (Identity(), 2.0, 2.0, "argument"),
                                   (Identity(), None, 1.0, "default")):
        ds = dsm_by_sigma(D, sigma_data=arg, **kw)
        lam = (sig**2 + expect**2) / (sig * expect) ** 2
        np.testing.assert_allclose(ds.loss_weighted.values, lam[:, None] * ds.loss.values, rtol=1e-12)
        assert float(ds.sigma_data) == expect and ds.sigma_data.attrs["source"] == source
    assert ds.loss.attrs["units"] and ds.loss.attrs["long_name"] and "scoreprobe_config" in ds.attrs


def test_bad_inputs(small):
    rule, data = small
    mem = EmpiricalDenoiser(data.train)
    with pytest.raises(ConfigError, match="n_train"):
        dsm_by_sigma(mem, n_train=999, dataset=data)
    with pytest.raises(ConfigError, match="dataset"):
        dsm_by_sigma(mem)
    with pytest.raises(ConfigError, match="sigmas"):
        dsm_by_sigma(mem, sigmas=[0.1, -1.0], dataset=data)
    with pytest.raises(ConfigError, match="steps"):
        dsm_by_sigma({1: mem}, sigmas=3, n_train=2, dataset=data, steps=[5], oracles=False)


class _FakeSeries:
    """A checkpoint series whose 'checkpoints' are the two oracles (step 10: rule, step 100: memorizer)."""

    def __init__(self, rule, dataset, path):
        self.rule, self.dataset, self.path, self.kind, self.config = rule, dataset, path, "dit", {}
        self.steps = [10, 100]

    def denoiser(self, step, device="cpu", ema=True):
        return RuleDenoiser(self.rule) if step == 10 else EmpiricalDenoiser(self.dataset.train)


def test_cli_dsm_table_store_and_plot(small, tmp_path, monkeypatch, capsys):
    import scoreprobe.checkpoints
    from scoreprobe.cli import main
    from scoreprobe.store import open_store

    rule, data = small
    monkeypatch.setattr(scoreprobe.checkpoints, "load_series", lambda path=None: _FakeSeries(rule, data, "fake"))
    monkeypatch.chdir(tmp_path)
    args = ["dsm", "--sigmas", "12", "--n-noise", "2", "--n-train", "6", "--device", "cpu", "--plot", "dsm.png"]
    with pytest.raises(SystemExit) as exc:
        main(args + ["--steps", "10,55"])
    assert exc.value.code == 2 and "55" in capsys.readouterr().err
    main(args)
    rows = {ln.split()[0]: [float(t) for t in ln.split()[1:]] for ln in capsys.readouterr().out.splitlines()
            if ln.split() and ln.split()[0] in ("10", "100", "memorizer", "rule")}
    # the checkpoint that is the memorizer (rule oracle) reproduces the memorizer (rule) reference row
    assert rows["100"] == rows["memorizer"] and rows["10"] == rows["rule"]
    assert rows["memorizer"][2] > rows["rule"][2] + 0.1                  # memorizing opens a gap
    assert (tmp_path / "dsm.png").stat().st_size > 10_000
    ds = open_store(tmp_path / "dsm.zarr")
    assert list(ds.step.values) == [10, 100] and ds.sizes["sample"] == 12 and "mem_loss" in ds.variables
