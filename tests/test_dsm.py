"""DSM loss by σ: ground truth from the oracles, brute-force nearest neighbours and a known-noise denoiser;
non-finite counting, standard errors and significance against hand computations."""
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from scoreprobe.data.datasets import make_dataset
from scoreprobe.errors import ConfigError, NonFiniteWarning, SettingWarning
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.probes.dsm import MAX_DEFAULT_HELDOUT, _select_items, dsm_by_sigma
from scoreprobe.stats.dsm_stats import dsm_summary
from scoreprobe.data.rules import Parity


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
    ax = plot_dsm_gap(ds).axes[0]
    np.testing.assert_allclose(np.asarray(ax.collections[0].get_array()).reshape(len(sig), 2), ds.gap.values.T)
    dots = [ln for ln in ax.get_lines() if ln.get_label().startswith("smallest σ")]
    np.testing.assert_array_equal(dots[0].get_ydata(), [np.nan, 0.1])   # rule oracle: none; memorizer: 0.1
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
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ds = dsm_by_sigma(D, sigma_data=arg, **kw)
        ignored = [str(w.message) for w in caught if issubclass(w.category, SettingWarning)]
        assert ignored == (["the denoiser states sigma_data=0.5; ignoring sigma_data=2"] if source == "denoiser"
                           else [])     # an ignored argument reaches the user, once per call
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
    import scoreprobe.loading.series
    from scoreprobe.cli import main
    from scoreprobe.store import open_store

    rule, data = small
    monkeypatch.setattr(scoreprobe.loading.series, "load_series", lambda path=None: _FakeSeries(rule, data, "fake"))
    monkeypatch.chdir(tmp_path)
    args = ["dsm", "--sigmas", "12", "--n-noise", "2", "--n-train", "6", "--device", "cpu", "--plot", "dsm.png"]
    with pytest.raises(SystemExit) as exc:
        main(args + ["--steps", "10,55"])
    assert exc.value.code == 2 and "55" in capsys.readouterr().err
    main(args)
    text = capsys.readouterr().out
    rows = _table_rows(text, ("10", "100", "memorizer", "rule"))
    # the checkpoint that is the memorizer (rule oracle) reproduces the memorizer (rule) reference row
    np.testing.assert_array_equal(rows["100"], rows["memorizer"])        # NaN σ* (none significant) == NaN
    np.testing.assert_array_equal(rows["10"], rows["rule"])
    assert rows["memorizer"][2] > rows["rule"][2] + 0.1                  # memorizing opens a gap
    assert "nonfinite" not in text and "σ*" in text
    assert (tmp_path / "dsm.png").stat().st_size > 10_000
    ds = open_store(tmp_path / "fake.dsm.zarr")                          # named after the source
    # default held-out: all 32 held-out items of the dataset (not as many as the 6 training items)
    assert list(ds.step.values) == [10, 100] and ds.sizes["sample"] == 6 + 32 and "mem_loss" in ds.variables
    # the printed gap, its SE and σ* are the numbers of the cube (band of σ in [0.2, 2])
    band = (ds.sigma.values >= 0.2) & (ds.sigma.values <= 2.0)
    loss, tr = ds.loss.sel(step=100).values[band], ds.split.values == "train"
    y_tr, y_ho = loss[:, tr].mean(0), loss[:, ~tr].mean(0)               # per-item band means
    se = np.sqrt(y_tr.var(ddof=1) / tr.sum() + y_ho.var(ddof=1) / (~tr).sum())
    assert rows["100"][3] == pytest.approx(se, abs=6e-5)
    assert rows["100"][4] == pytest.approx(float(ds.first_significant_sigma.sel(step=100)), rel=1e-3)


def _table_rows(text, labels):
    """{label: [numbers]} of the CLI table lines whose first word is in `labels` ('-' -> NaN)."""
    return {ln.split()[0]: [float("nan") if t == "-" else float(t) for t in ln.split()[1:]]
            for ln in text.splitlines() if ln.split() and ln.split()[0] in labels}


# ---------------------------------------------------------------------------------------------
# Non-finite losses, standard errors, significance, the held-out default
# ---------------------------------------------------------------------------------------------

class Poisoned:
    """Identity, except NaN for σ < 0.02 on items whose first bit is 1 and +inf for 0.02 <= σ < 0.05
    on items whose second bit is 1 (σ is tiny, so the sign of x + σε is the clean item)."""

    def __call__(self, x, sigma):
        out = x.clone()
        out[(sigma < 0.02) & (x[:, 0] > 0)] = float("nan")
        out[(sigma >= 0.02) & (sigma < 0.05) & (x[:, 1] > 0), 2] = float("inf")
        return out


def test_nonfinite_counted_excluded_and_warned_once(small):
    _, data = small
    sig = np.array([0.01, 0.03, 0.5])
    kw = dict(sigmas=sig, n_noise=3, n_train=20, n_heldout=12, dataset=data, oracles=False, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NonFiniteWarning)                   # a clean run does not warn
        clean = dsm_by_sigma({0: Identity(), 1: Identity()}, **kw)
    with pytest.warns(NonFiniteWarning) as rec:
        ds = dsm_by_sigma({0: Poisoned(), 1: Poisoned()}, **kw)              # two steps, one warning
    assert sum(issubclass(w.category, NonFiniteWarning) for w in rec) == 1
    # expected bad cells from the bits alone
    tr_bits, ho_bits = data.train[:20], data.heldout[:12]
    bad_tr = np.stack([tr_bits[:, 0] == 1, tr_bits[:, 1] == 1, np.zeros(20, bool)])       # (sigma, item)
    bad_ho = np.stack([ho_bits[:, 0] == 1, ho_bits[:, 1] == 1, np.zeros(12, bool)])
    assert 0 < bad_tr[0].sum() < 20 and 0 < bad_ho[1].sum() < 12
    for step in (0, 1):
        np.testing.assert_array_equal(ds.n_nonfinite_train.sel(step=step).values, bad_tr.sum(1))
        np.testing.assert_array_equal(ds.n_nonfinite_heldout.sel(step=step).values, bad_ho.sum(1))
    assert ds.n_nonfinite_train.dtype == np.int64 and ds.n_nonfinite_train.attrs["units"] == "1"
    total = 2 * (bad_tr.sum() + bad_ho.sum())
    assert f"{total} non-finite" in str(rec[0].message)
    assert np.isnan(ds.loss.values[0, 0, :20][bad_tr[0]]).all() and np.isinf(ds.loss.values[0, 1, 20:][bad_ho[1]]).all()
    # finite cells are untouched; means / gap over the finite items of the clean cube
    ref = clean.loss.sel(step=0).values                                       # (sigma, sample)
    exp_tr = np.array([ref[j, :20][~bad_tr[j]].mean() for j in range(3)])
    exp_ho = np.array([ref[j, 20:][~bad_ho[j]].mean() for j in range(3)])
    np.testing.assert_allclose(ds.loss_train_mean.sel(step=1).values, exp_tr, rtol=1e-12)
    np.testing.assert_allclose(ds.gap.sel(step=1).values, exp_ho - exp_tr, rtol=1e-10, atol=1e-15)
    assert np.isfinite(ds.gap.values).all() and np.isfinite(ds.gap_se.values).all()
    # band summaries = mean over the band's σ of those finite means, for the plain and weighted loss
    summ = dsm_summary(ds, (0.005, 0.04))
    np.testing.assert_allclose(summ.train.values, [exp_tr[:2].mean()] * 2, rtol=1e-12)
    np.testing.assert_allclose(summ.gap.values, [(exp_ho - exp_tr)[:2].mean()] * 2, rtol=1e-10)
    lam = (sig**2 + 1) / sig**2
    np.testing.assert_allclose(dsm_summary(ds, (0.005, 0.04), var="loss_weighted").heldout.values,
                               [(lam * exp_ho)[:2].mean()] * 2, rtol=1e-12)
    assert np.isfinite(summ.gap_se.values).all()
    # the figure's curves are the finite means too
    from scoreprobe.viz import plot_dsm
    ys = [ln.get_ydata() for ln in plot_dsm(ds, steps=[1]).axes[0].get_lines()]
    assert any(np.allclose(y, exp_tr, rtol=1e-12) for y in ys if len(y) == 3)


class Offset:
    """D(y, σ) = sign(y) + t·1 with t = (fraction of +1 bits of sign(y)) · (1 + 10σ): at tiny σ the
    sign is the clean item, so the loss of an item is exactly t²."""

    def __call__(self, x, sigma):
        s = torch.sign(x)
        return s + ((s > 0).double().mean(1) * (1 + 10 * sigma))[:, None]


def test_standard_errors_and_z_by_hand(small):
    _, data = small
    sig = np.array([0.01, 0.02])
    ds = dsm_by_sigma(Offset(), sigmas=sig, n_noise=2, n_train=5, n_heldout=7, dataset=data, oracles=False,
                      dtype=torch.float64)
    frac_tr, frac_ho = data.train[:5].mean(1), data.heldout[:7].mean(1)
    for j, s in enumerate(sig):
        lt, lh = (frac_tr * (1 + 10 * s)) ** 2, (frac_ho * (1 + 10 * s)) ** 2
        se_t, se_h = np.std(lt, ddof=1) / np.sqrt(5), np.std(lh, ddof=1) / np.sqrt(7)
        gap, gap_se = lh.mean() - lt.mean(), np.sqrt(lt.var(ddof=1) / 5 + lh.var(ddof=1) / 7)
        np.testing.assert_allclose(ds.loss.values[j], np.concatenate([lt, lh]), rtol=1e-12)
        got = [float(ds[v][j]) for v in ("loss_train_se", "loss_heldout_se", "gap", "gap_se", "gap_z")]
        np.testing.assert_allclose(got, [se_t, se_h, gap, gap_se, gap / gap_se], rtol=1e-9)
        assert np.isclose(gap_se, np.hypot(se_t, se_h))
    # band summary: per-item band means, independent-samples SE
    summ = dsm_summary(ds, (0.005, 0.05))
    yt = ((frac_tr[:, None] * (1 + 10 * sig)) ** 2).mean(1)
    yh = ((frac_ho[:, None] * (1 + 10 * sig)) ** 2).mean(1)
    np.testing.assert_allclose([float(summ.train_se), float(summ.gap_se)],
                               [yt.std(ddof=1) / np.sqrt(5), np.sqrt(yt.var(ddof=1) / 5 + yh.var(ddof=1) / 7)],
                               rtol=1e-9)


class LateMemorizer:
    """Exact (sign of the input) below σ = 0.05, the memorizer of `train` from there on."""

    def __init__(self, train):
        self.mem = EmpiricalDenoiser(train)

    def __call__(self, x, sigma):
        return torch.where((sigma < 0.05)[:, None], torch.sign(x), self.mem(x, sigma))


def test_first_significant_sigma(small):
    rule, data = small
    kw = dict(n_noise=2, n_train=16, n_heldout=16, dataset=data, oracles=False, dtype=torch.float64)
    # the memorizer: train loss ~ 0, held-out loss 4·d_H/D at small σ -> significant at the smallest σ,
    # whatever the order of the grid
    ds = dsm_by_sigma(EmpiricalDenoiser(data.train), sigmas=[40.0, 0.01, 0.002, 0.3], **kw)
    assert float(ds.first_significant_sigma) == 0.002 and float(ds.gap_z[2]) > 3
    assert "smallest σ" in ds.first_significant_sigma.attrs["long_name"]
    # exact below 0.05 (gap 0, z NaN), memorizer above: the first significant σ is 0.1
    ds = dsm_by_sigma(LateMemorizer(data.train), sigmas=[0.01, 0.02, 0.1, 0.2], **kw)
    np.testing.assert_array_equal(ds.gap.values[:2], 0.0)
    assert float(ds.first_significant_sigma) == 0.1
    # a denoiser that ignores the split, paired noise, equal sizes: gap 0 (up to rounding) -> z ~ 0 -> none
    ds = dsm_by_sigma(Identity(), sigmas=[0.01, 0.5, 3.0], **kw)
    assert np.all(ds.gap_se.values > 0) and np.all(np.abs(ds.gap_z.values) < 1e-6)
    assert np.isnan(float(ds.first_significant_sigma))
    # a series: one value per step
    ds = dsm_by_sigma({1: Identity(), 2: EmpiricalDenoiser(data.train)}, sigmas=[0.002, 0.01], **kw)
    assert ds.first_significant_sigma.dims == ("step",)
    np.testing.assert_array_equal(ds.first_significant_sigma.values, [np.nan, 0.002])


def test_heldout_default_all_capped(small):
    _, data = small
    ds = dsm_by_sigma(Identity(), sigmas=2, n_noise=1, n_train=3, dataset=data, oracles=False)
    assert int((ds.split == "heldout").sum()) == len(data.heldout) == 32
    big = SimpleNamespace(train=np.zeros((5, 4), np.uint8), heldout=np.zeros((1500, 4), np.uint8))
    _, split, _, _ = _select_items(big, None, None)
    assert (split == "train").sum() == 5 and (split == "heldout").sum() == MAX_DEFAULT_HELDOUT == 512
    _, split, _, _ = _select_items(big, None, 1500)                           # explicit: no cap
    assert (split == "heldout").sum() == 1500


def test_cli_dsm_reports_nonfinite(small, tmp_path, monkeypatch, capsys):
    import scoreprobe.loading.series
    from scoreprobe.cli import main

    rule, data = small
    series = _FakeSeries(rule, data, "fake")
    series.denoiser = lambda step, device="cpu", ema=True: Poisoned() if step == 10 else Identity()
    monkeypatch.setattr(scoreprobe.loading.series, "load_series", lambda path=None: series)
    monkeypatch.chdir(tmp_path)
    with pytest.warns(NonFiniteWarning):
        main(["dsm", "--sigmas", "12", "--n-noise", "2", "--n-train", "6", "--n-heldout", "6", "--device", "cpu",
              "--out", "d.zarr"])
    out = capsys.readouterr()
    assert "nonfinite" in out.out
    rows = _table_rows(out.out, ("10", "100"))
    # 12 σ in [0.002, 80]: three below 0.02 (NaN where bit 0 is 1), one in [0.02, 0.05) (inf where bit 1 is 1)
    sig = np.geomspace(0.002, 80, 12)
    assert ((sig < 0.02).sum(), ((sig >= 0.02) & (sig < 0.05)).sum()) == (3, 1)
    items = np.concatenate([data.train[:6], data.heldout[:6]])
    assert rows["10"][-1] == 3 * (items[:, 0] == 1).sum() + (items[:, 1] == 1).sum() > 0
    assert rows["100"][-1] == 0 and np.isfinite(rows["10"][:4]).all()
