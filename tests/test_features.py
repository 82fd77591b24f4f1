"""Sparse autoencoders and their scores (issue 77) against planted structure: a planted dictionary recovered
(MCC and explained variance), a planted parity feature found by F1, the Hungarian MCC against brute force,
F1 against hand counts, rows from a cache against the cache itself, and a latent ablation that changes what
its feature predicts while other latents do not."""
import itertools

import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe.errors import ConfigError, DataError
from scoreprobe.features.scores import mcc_scores
from tests.test_inside_patch import planted


def _planted(n=2048, d_in=16, n_features=16, p=0.05, seed=0):
    return sp.planted_dictionary(n, d_in, n_features, p=p, seed=seed)


def test_sae_has_saelens_names_unit_decoder_rows_and_is_deterministic_by_seed():
    d = _planted(n=256)
    a = sp.train_sae(d.x, 8, k=2, steps=20, seed=3)
    b = sp.train_sae(torch.tensor(d.x), 8, k=2, steps=20, seed=3)
    c = sp.train_sae(d.x, 8, k=2, steps=20, seed=4)
    assert a.W_enc.shape == (16, 8) and a.W_dec.shape == (8, 16) and a.b_enc.shape == (8,) and a.b_dec.shape == (16,)
    assert torch.allclose(a.W_dec.norm(dim=1), torch.ones(8), atol=1e-5)
    assert all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))
    assert not torch.equal(a.W_dec, c.W_dec)
    x = torch.tensor(d.x[:5])
    f = a.encode(x)
    assert f.shape == (5, 8) and (f >= 0).all() and ((f > 0).sum(1) <= 2).all()
    h = (x - a.b_dec) @ a.W_enc + a.b_enc                                 # b_dec subtracted before the encoder
    top = torch.topk(h, 2, dim=1)
    assert torch.equal(f, torch.zeros_like(h).scatter(1, top.indices, top.values.relu()))
    assert torch.allclose(a(x), f @ a.W_dec + a.b_dec)


def test_a_planted_dictionary_is_recovered():
    """16 unit directions in 16 dimensions, each on with probability 0.05: MCC and EV >= 0.9 (k at its
    default, d_sae // 16 = 2; a short run: the full defaults are the slow test below)."""
    d = _planted()
    sae = sp.train_sae(d.x, 32, steps=300, lr=0.01, seed=0)
    s = sp.sae_scores(sae, d.x, ground_truth=d.active, directions=d.directions)
    assert float(s.mcc) >= 0.9 and float(s.explained_variance) >= 0.9
    shuffled = sp.sae_scores(sae, d.x, directions=np.random.default_rng(1).standard_normal((16, 16)))
    assert float(shuffled.mcc) < 0.6                                       # random directions are not found


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["topk", "batchtopk", "jumprelu", "standard"])
def test_a_planted_dictionary_in_superposition_is_recovered_at_the_defaults(arch):
    """64 directions in 32 dimensions (p 0.03), d_sae 64, every setting at its default (docs/features.md)."""
    d = sp.planted_dictionary(4096, 32, 64, p=0.03, seed=0)
    s = sp.sae_scores(sp.train_sae(d.x, 64, arch=arch), d.x, ground_truth=d.active, directions=d.directions)
    assert float(s.mcc) >= 0.9
    if arch == "topk":
        assert float(s.explained_variance) >= 0.9


def _parity_acts(n=1024, seed=0, pixels=0.15):
    """Bits of a 2x3 parity rule (3 groups of 2), one bit flipped in 30% of the rows; activations: the signed
    pixels at scale 0.15 plus a planted direction of norm 2 per group (orthonormal directions) whenever that group is odd."""
    rule = sp.Parity(G=2, shape=(2, 3))
    rng = np.random.default_rng(seed)
    bits = rule.sample(n, seed)
    flip = np.flatnonzero(rng.random(n) < 0.3)
    bits[flip, rng.integers(0, 6, flip.size)] ^= 1
    E = np.linalg.qr(rng.standard_normal((12, 12)))[0][:9]               # 9 orthonormal directions
    odd = ~rule.group_valid(bits)
    acts = pixels * (2.0 * bits - 1) @ E[:6] + 2.0 * odd @ E[6:] + 0.02 * rng.standard_normal((n, 12))
    return rule, bits, acts.astype(np.float32)


def test_a_planted_parity_feature_is_found_with_f1():
    rule, bits, acts = _parity_acts()
    truth = sp.rule_features(rule, bits)
    sae = sp.train_sae(acts, 16, arch="batchtopk", k=2, steps=300, lr=0.01, seed=0)
    s = sp.sae_scores(sae, acts, ground_truth=truth)
    odd = s.best_f1.sel(feature=[f"group{j}=odd" for j in range(3)])
    assert (odd >= 0.9).all(), odd.values
    assert int(s.coverage) >= 3
    # the same latents score low against a feature they do not carry: a pixel
    assert float(s.f1.sel(feature="pixel0=1").isel(latent=s.best_latent.sel(feature="group0=odd").item())) < 0.8


def test_mcc_is_the_best_one_to_one_matching_on_abs_cos():
    rng = np.random.default_rng(0)
    W = rng.standard_normal((4, 5))
    W /= np.linalg.norm(W, axis=1, keepdims=True)
    dirs = rng.standard_normal((3, 5))
    cos = np.abs(dirs / np.linalg.norm(dirs, axis=1, keepdims=True) @ W.T)
    brute = max(np.mean([cos[i, p[i]] for i in range(3)]) for p in itertools.permutations(range(4), 3))
    assert float(mcc_scores(W, dirs).mcc) == pytest.approx(brute)
    W[1] *= -1                                                             # a flipped row matches as well
    assert float(mcc_scores(W, dirs).mcc) == pytest.approx(brute)
    more = np.concatenate([dirs, rng.standard_normal((3, 5))])             # 6 directions, 4 rows: 2 count 0
    s = mcc_scores(W, more)
    assert (s.matched_latent >= 0).sum() == 4 and float(s.mcc) == pytest.approx(np.nansum(s.matched_cos) / 6)
    nan_dir = dirs.copy()
    nan_dir[0] = np.nan                                                    # an undefined probe: left out
    s = mcc_scores(W, nan_dir)
    assert np.isnan(s.matched_cos[0]) and s.matched_latent[0] == -1


def test_f1_precision_recall_against_hand_counts_and_undefined_features():
    from scoreprobe.features.scores import classifier_scores
    import xarray as xr
    active = np.array([[1, 0], [1, 0], [0, 1], [0, 0]], bool)              # 4 rows, 2 latents
    truth = xr.DataArray(np.array([[1, 1], [0, 1], [0, 1], [0, 1]], bool), dims=("row", "feature"),
                         coords={"feature": ["a", "always"]})
    s = classifier_scores(active, truth)
    # latent 0 vs a: tp 1, predicted 2, true 1 -> precision 0.5, recall 1, F1 2/3
    assert float(s.precision[0, 0]) == 0.5 and float(s.recall[0, 0]) == 1.0
    assert float(s.f1[0, 0]) == pytest.approx(2 / 3) and float(s.f1[1, 0]) == 0.0
    assert np.isnan(s.best_f1.sel(feature="always")) and int(s.best_latent.sel(feature="always")) == -1
    assert int(s.coverage) == 0 and int(s.n_defined) == 1


def test_rule_features_match_the_rule_and_the_training_set():
    rule = sp.Parity(G=2, shape=(2, 2))
    bits = np.array([[1, 1, 0, 1], [0, 0, 0, 0], [1, 0, 1, 0]], np.uint8)
    train = np.array([[0, 0, 0, 0], [1, 1, 1, 1]], np.uint8)
    t = sp.rule_features(rule, bits, train=train)
    assert t.sel(feature="group0=even").values.tolist() == [True, True, False]
    assert t.sel(feature="group1=odd").values.tolist() == [True, False, True]
    assert t.sel(feature="pixel3=0").values.tolist() == [False, True, True]
    assert t.sel(feature="item0").values.tolist() == [False, True, False]
    assert not t.sel(feature="item1").values.any()
    with pytest.raises(DataError):
        sp.rule_features(rule, bits[:, :3])


def test_probe_directions_read_a_planted_linear_feature_and_leave_a_constant_one_undefined():
    rng = np.random.default_rng(0)
    rule = sp.Parity(G=2, shape=(2, 2))
    bits = rng.integers(0, 2, (400, 4)).astype(np.uint8)
    u = rng.standard_normal(10)
    acts = np.outer(2.0 * bits[:, 2] - 1, u) + 0.5 * rng.standard_normal((400, 10))
    truth = sp.rule_features(rule, bits)
    truth.loc[:, "pixel0=1"] = True                                        # made constant
    p = sp.probe_directions(acts, truth)
    assert float(p.accuracy.sel(feature="pixel2=1")) > 0.97
    assert abs(float(p.direction.sel(feature="pixel2=1").values @ u / np.linalg.norm(u))) > 0.95
    assert float(p.mean_difference.sel(feature="pixel2=1").values @ u / np.linalg.norm(u)) > 0.95   # + side
    assert float(p.mean_difference.sel(feature="pixel2=0").values @ u / np.linalg.norm(u)) < -0.95
    assert np.isnan(p.mean_difference.sel(feature="pixel0=1")).all()
    assert 0.35 < float(p.accuracy.sel(feature="pixel1=1")) < 0.65        # pixel 1 is not in the activations
    assert np.isnan(p.accuracy.sel(feature="pixel0=1")) and np.isnan(p.direction.sel(feature="pixel0=1")).all()


def test_site_rows_flatten_a_cached_site_per_input():
    D = planted()
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    _, cache = sp.run_with_cache(D, x, 0.7, names=["blocks.0.hook_resid_post", "hook_embed"])
    _, raw = sp.run_with_cache(D, x, 0.7, names="blocks.0.hook_resid_post", return_type="dict")
    from scoreprobe.features.rows import site_rows
    X = site_rows(cache, "blocks.0.hook_resid_post")
    assert X.shape == (6, 32) and np.array_equal(X.values, raw["blocks.0.hook_resid_post"].reshape(6, -1).numpy())
    assert X["sample"].values.tolist() == list(range(6))
    with pytest.raises(DataError, match="layer 3"):
        site_rows(cache, "blocks.3.hook_resid_post")
    with pytest.raises(DataError, match="no variable"):
        site_rows(cache, "blocks.0.attn.hook_z")


def _pixel_sae():
    """An SAE on the planted DiT's `hook_embed` (4 tokens x d_model 8) whose latents are the signed pixels:
    latent 2i carries +x_i on token i (its embedding holds c_in·(x_i, −x_i) in slots 0, 1), latent 2i+1 −x_i."""
    sae = sp.SAE(32, 8, arch="topk", k=4)
    with torch.no_grad():
        for i in range(4):
            for sign, latent in ((1.0, 2 * i), (-1.0, 2 * i + 1)):
                sae.W_dec[latent, 8 * i] = sign / np.sqrt(2)
                sae.W_dec[latent, 8 * i + 1] = -sign / np.sqrt(2)
        sae.W_enc.copy_(sae.W_dec.T)
    return sae


def test_ablating_a_latent_changes_what_its_feature_predicts_and_other_latents_do_not():
    """Planted DiT: output pixel 0 reads x_1 through head 0's copy (weight 1.0, its own x only 0.25). On the
    inputs where pixel 1 is on, ablating the latent 'pixel 1 = +1' at hook_embed moves D(x)_0 by more than 1
    downwards; each of the 7 other latents moves it less than a third as much (they reach it only through the
    attention's leak and the MLP), and steering along the latent raises it."""
    D = planted()
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2, (64, 4))
    x = torch.tensor(2.0 * bits - 1, dtype=torch.float32)
    sae = _pixel_sae()
    _, cache = sp.run_with_cache(D, x, 1.0, names="hook_embed")
    s = sp.sae_scores(sae, cache, sp.rule_features(sp.Parity(G=2, shape=(2, 2)), bits), site="hook_embed")
    assert float(s.explained_variance) > 0.999 and int(s.best_latent.sel(feature="pixel1=1")) == 2
    assert float(s.best_f1.sel(feature="pixel1=1")) == 1.0
    base = D(x, 1.0).detach()
    on = bits[:, 1] == 1

    def change(latents, **kw):                                             # mean change of D(x)_0, pixel 1 on
        out = sp.run_with_hooks(D, x, 1.0, fwd_hooks=[("hook_embed", sp.latent_hook(sae, latents, **kw))])
        return float((out - base)[on, 0].mean())
    matched = change([2])
    others = [abs(change([latent])) for latent in range(8) if latent != 2]
    assert matched < -1.0 and max(others) < abs(matched) / 3, (matched, others)
    assert change([2], how="steer", scale=1.0) > 0.1
    with pytest.raises(ConfigError):
        sp.latent_hook(sae, [8])


def test_bad_inputs_are_refused_before_training():
    x = np.zeros((10, 4), np.float32)
    with pytest.raises(ConfigError, match="all equal"):
        sp.train_sae(x, 4, steps=1)
    with pytest.raises(ConfigError, match="arch"):
        sp.train_sae(x + np.arange(4), 4, arch="gated")
    with pytest.raises(ConfigError, match="k must be"):
        sp.train_sae(np.random.default_rng(0).standard_normal((10, 4)), 4, k=5)
    with pytest.raises(ConfigError, match="k is for"):
        sp.train_sae(np.random.default_rng(0).standard_normal((10, 4)), 4, arch="jumprelu", k=2)
    with pytest.raises(DataError, match="NaN"):
        sp.train_sae(np.array([[1.0, np.nan], [0.0, 1.0]]), 2)
    with pytest.raises(DataError, match="site="):
        import xarray as xr
        sp.train_sae(xr.Dataset(), 2)


def test_site_rows_of_a_cache_series_select_steps_and_sigmas(tmp_path):
    D = planted()
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(1))
    ds = sp.cache_series({1: D, 2: D}, x, sigmas=[0.5, 1.0], names="hook_embed", out=str(tmp_path / "c.zarr"),
                         progress=False)
    from scoreprobe.features.rows import site_rows
    X = site_rows(ds, "hook_embed", steps=[2], sigmas=[1.0])
    _, one = sp.run_with_cache(D, x, 1.0, names="hook_embed")
    assert np.allclose(X.values, one.embed.values.reshape(5, -1))
    assert X["step"].values.tolist() == [2] * 5 and X["sigma"].values.tolist() == [1.0] * 5
    assert site_rows(ds, "hook_embed").shape == (2 * 2 * 5, 32)
    with pytest.raises(DataError, match="sigma"):
        site_rows(ds, "hook_embed", sigmas=[0.7])
