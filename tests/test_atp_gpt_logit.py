"""The GPT patched with a logit metric (issue 55 item 7): `metric="logit_diff"` is the log-odds of the clean bits
from the first flipped position on, checked against plain torch; it is linear in the logits, so patching and AtP of
the final logits are both exactly 1; every hook point (the unbatched position embedding included) gets an AtP."""
import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe.errors import ConfigError, DataError
from scoreprobe.inside.cache import gpt_inputs
from scoreprobe.inside.hooks import hook_points
from scoreprobe.models.gpt import GPT, GPTConfig


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    g = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=16)).eval()
    with torch.no_grad():
        for p in g.parameters():                         # an untrained GPT's logits barely move: give it weights
            p.add_(0.3 * torch.randn_like(p))
            p.requires_grad_(False)                      # as a loaded model: AtP must not rely on parameter gradients
    return g


def _pairs(n=4, flip=(5, 20)):
    rng = np.random.default_rng(0)
    clean = rng.integers(0, 2, (n, 36))
    corrupt = clean.copy()
    corrupt[:, list(flip)] ^= 1
    return clean, corrupt


def _by_hand(g, bits, clean, corrupt):
    """Σ_{t ≥ t₀} logit_t[clean bit] − logit_t[other bit] of a plain forward on `bits` (raster order), t₀ the
    pair's first flipped bit."""
    with torch.no_grad():
        logits = g(gpt_inputs(g, torch.as_tensor(bits))).double().numpy()          # (B, T, V)
    t0 = [int(np.flatnonzero(c != r)[0]) for c, r in zip(clean, corrupt)]
    return np.array([sum(logits[b, t, c[t]] - logits[b, t, 1 - c[t]] for t in range(t0[b], len(c)))
                     for b, c in enumerate(clean)])


def test_logit_diff_matches_plain_torch_and_is_linear_in_the_logits(gpt):
    clean, corrupt = _pairs()
    ds = sp.patch(gpt, clean, corrupt, None, sites=["final.hook_out", "*", "none", "blocks.0.hook_mlp_out"],
                  method="both", metric="logit_diff")
    np.testing.assert_allclose(ds.metric_corrupt.values, _by_hand(gpt, corrupt, clean, corrupt), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ds.metric_clean.values, _by_hand(gpt, clean, clean, corrupt), rtol=1e-9, atol=1e-9)
    assert (np.abs(ds.metric_clean - ds.metric_corrupt) > 0.1).all()
    np.testing.assert_allclose(ds.effect.sel(site=["final.hook_out", "*"]).values, 1.0, atol=1e-9)
    assert np.array_equal(ds.effect.sel(site="none").values, np.zeros(4))
    np.testing.assert_allclose(ds.effect_atp.sel(site=["final.hook_out", "*"]).values, 1.0, atol=1e-4)


def test_at_the_flipped_position_alone_the_contrast_is_zero(gpt):
    """Why the metric reads from the first flip on: the logits at a flipped position see only earlier tokens."""
    clean, corrupt = _pairs(flip=(5,))
    with torch.no_grad():
        lc = gpt(gpt_inputs(gpt, torch.as_tensor(clean)))[:, 5]
        lr = gpt(gpt_inputs(gpt, torch.as_tensor(corrupt)))[:, 5]
    assert torch.equal(lc, lr)
    ds = sp.patch(gpt, clean, corrupt, None, sites=["final.hook_out"], metric="logit_diff")
    assert (np.abs(ds.metric_clean - ds.metric_corrupt) > 0.1).all()          # the later bits carry the contrast


def test_every_hook_point_including_the_unbatched_positions(gpt):
    clean, corrupt = _pairs()
    points = list(hook_points(gpt))
    ds = sp.patch(gpt, clean, corrupt, None, sites=points + ["*"], method="atp*", metric="logit_diff")
    assert ds.effect_atp_numerator.sel(site="hook_pos_embed").values.tolist() == [0.0] * 4
    assert (np.abs(ds.effect_atp_numerator.sel(site="hook_embed").values) > 0).all()
    assert np.isfinite(ds.effect_atp_numerator.values).all() and np.isfinite(ds.effect_atp_graddrop.values).all()


def test_metric_refusals(gpt, shipped):
    clean, corrupt = _pairs()
    with pytest.raises(ConfigError, match="log_lik"):
        sp.patch(gpt, clean, corrupt, None, sites="head", metric="prob")
    D, data = shipped
    with pytest.raises(ConfigError, match="for a GPT"):
        sp.patch(D, data.train[:2], data.heldout[:2], 0.5, sites="head", metric="logit_diff")


def test_positions_weight_the_logit_difference(gpt):
    """positions= (B, D) weights: one-hot at bit p reads logit_p[clean] − logit_p[other] of a plain forward;
    the default equals weights 1 from the first flipped bit on; patching the logits stays exactly 1."""
    clean, corrupt = _pairs()
    with torch.no_grad():
        lg = {k: gpt(gpt_inputs(gpt, torch.as_tensor(b))).double().numpy() for k, b in (("c", clean), ("r", corrupt))}
    hot = np.zeros(clean.shape)
    hot[:, 12] = 1.0
    ds = sp.patch(gpt, clean, corrupt, None, sites=["final.hook_out", "none"], metric="logit_diff", positions=hot)
    c12 = clean[:, 12]
    for k, name in (("c", "metric_clean"), ("r", "metric_corrupt")):
        want = lg[k][np.arange(4), 12, c12] - lg[k][np.arange(4), 12, 1 - c12]
        np.testing.assert_allclose(ds[name].values, want, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ds.effect.sel(site="final.hook_out").values, 1.0, atol=1e-9)
    after = (np.cumsum(clean != corrupt, 1) > 0).astype(float)
    a = sp.patch(gpt, clean, corrupt, None, sites=["final.hook_out"], metric="logit_diff", positions=after)
    b = sp.patch(gpt, clean, corrupt, None, sites=["final.hook_out"], metric="logit_diff")
    np.testing.assert_array_equal(a.metric_corrupt.values, b.metric_corrupt.values)
    with pytest.raises(DataError, match="no zero row"):
        sp.patch(gpt, clean, corrupt, None, sites="head", metric="logit_diff", positions=np.zeros(clean.shape))
    with pytest.raises(DataError, match="shape"):
        sp.patch(gpt, clean, corrupt, None, sites="head", metric="logit_diff", positions=hot[:, :5])
    with pytest.raises(ConfigError, match="logit_diff"):
        sp.patch(gpt, clean, corrupt, None, sites="head", positions=hot)
