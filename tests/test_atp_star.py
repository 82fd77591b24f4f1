"""AtP* (Kramár et al. 2024; issue 55 item 6) on planted networks: where a key patch flips a saturated attention
pattern, plain AtP sees a flat softmax (≈ 0) while AtP*'s exact softmax gives the real patching effect; GradDrop
is (1/(L−1)) Σ_ℓ |I_ℓ| and shows a head whose direct effect a later layer cancels."""
import numpy as np
import pytest
import torch
from torch import nn

import scoreprobe as sp
from scoreprobe.errors import ConfigError
from scoreprobe.models.dit import DiT
from scoreprobe.models.edm import EDMDenoiser

K_SITE, Q_SITE = "blocks.0.attn.hook_k[head=0]", "blocks.0.attn.hook_q[head=0]"


def saturated(depth=2, cancel=False):
    """A 2x2 image, one token per pixel, d_model 8: dims 0 x, 2 the head's output slot, 4-7 one-hot position.
    Block 0, head 0: only token 0 queries (weight 8 on its position), every key is 4·x, so token 0 attends to the
    pixel with the largest value, saturated (score gaps ≈ 32); values are positional: +1 at token 1, −1 at token 2.
    The head writes slot 2, which the output of pixel 0 reads. LayerNorms are the identity and the MLPs silent,
    so after the pattern everything is linear. cancel: block 1's MLP (linear) writes −slot 2 into slot 2, so the
    head's direct effect is undone by the later layer."""
    torch.manual_seed(0)
    net = DiT(input_size=(2, 2), patch_size=1, in_channels=1, hidden_size=8, depth=depth, num_heads=2, mlp_ratio=1.0)
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
        net.x_embedder.proj.weight[0] = 1.0
        net.pos_embed[0, torch.arange(4), 4 + torch.arange(4)] = 1.0
        for blk in net.blocks:
            blk.norm1, blk.norm2, blk.mlp.act = nn.Identity(), nn.Identity(), nn.Identity()
            blk.adaLN_modulation[1].bias[16:24] = 1.0                   # gate_msa
            blk.adaLN_modulation[1].bias[40:48] = 1.0                   # gate_mlp
        attn = net.blocks[0].attn
        W = attn.qkv.weight                                              # q rows 0-7, k 8-15, v 16-23
        W[0, 4], W[8, 0] = 8.0, 4.0
        W[16, 5], W[16, 6] = 1.0, -1.0
        attn.proj.weight[2, 0] = 1.0
        if cancel:
            mlp = net.blocks[1].mlp
            mlp.fc1.weight[2, 2], mlp.fc2.weight[2, 2] = 1.0, -1.0
        net.final_layer.norm_final = nn.Identity()
        net.final_layer.linear.weight[0, 2] = 1.0
    return EDMDenoiser(net.eval(), (1, 2, 2), sigma_data=1.0, time_scale=1.0)


def _pairs(n=8):
    """clean (0, 1, 0, 0): token 0 attends to token 1; corrupt (0, 0, 1, 0): to token 2. Metric: pixel 0."""
    clean = np.tile([0, 1, 0, 0], (n, 1))
    corrupt = np.tile([0, 0, 1, 0], (n, 1))
    direction = np.tile(np.array([1, 0, 0, 0], np.float32), (n, 1))
    return clean, corrupt, direction


def test_saturated_keys_plain_atp_misses_atp_star_matches():
    D = saturated()
    clean, corrupt, w = _pairs()
    sites = [K_SITE, Q_SITE, "blocks.0.attn.hook_attn_scores[head=0]", "blocks.0.attn.hook_pattern[head=0]",
             "blocks.0.attn.hook_z[head=0]", "blocks.0.attn.hook_q[head=0]+blocks.0.attn.hook_k[head=0]"]
    plain = sp.patch(D, clean, corrupt, 0.3, sites=sites, method="both", direction=w)
    star = sp.patch(D, clean, corrupt, 0.3, sites=sites, method="both", atp_star=True, direction=w)
    e = plain.effect_pooled.values
    np.testing.assert_allclose(e[[0, 2, 3, 4, 5]], 1.0, atol=0.01)          # the keys decide where token 0 looks
    assert abs(e[1]) < 1e-6                                                   # the query is positional: no change
    assert np.abs(plain.effect_atp_pooled.values[[0, 2]]).max() < 0.05       # flat softmax: AtP sees nothing
    np.testing.assert_allclose(star.effect_atp_pooled.values, e, atol=1e-5)   # exact softmax, linear after it
    np.testing.assert_allclose(plain.effect_atp_pooled.values[[3, 4]], e[[3, 4]], atol=1e-5)   # linear already
    assert star.attrs["atp"] == "AtP*" and plain.attrs["atp"] == "AtP"


def test_graddrop_is_the_mean_over_the_other_layers_of_the_absolute_estimates():
    """Depth 2: dropping block 0 zeroes a block-0 site, dropping block 1 (a silent block) leaves AtP*: the score is
    |AtP*| / (L − 1) · 1. A site downstream of block 0 (block 1's input, the output) keeps its estimate when
    either block is dropped (block 1 carries nothing of it): 2 |AtP*|."""
    D = saturated()
    clean, corrupt, w = _pairs()
    ds = sp.patch(D, clean, corrupt, 0.3, sites=[K_SITE, "final.hook_out", "blocks.1.hook_resid_pre"],
                  method="atp*", direction=w)
    a, g = ds.effect_atp.values, ds.effect_atp_graddrop.values
    np.testing.assert_allclose(g[0], np.abs(a[0]), rtol=1e-9)
    np.testing.assert_allclose(g[1], 2 * np.abs(a[1]), rtol=1e-9)
    np.testing.assert_allclose(g[2], 2 * np.abs(a[2]), rtol=1e-9)


def test_graddrop_shows_a_cancelled_direct_effect():
    """The head's slot is written by block 0 and erased by block 1's MLP: patching the head does nothing, and AtP*
    agrees (0); dropping block 1's gradient leaves the direct effect, which GradDrop reports."""
    D = saturated(cancel=True)
    clean, corrupt, w = _pairs()
    z = "blocks.0.attn.hook_z[head=0]"
    ds = sp.patch(D, clean, corrupt, 0.3, sites=[z], method="both", atp_star=True, direction=w, floor=0)
    num = ds.effect_numerator.values[0]
    assert np.abs(num).max() < 1e-6 and np.abs(ds.effect_atp_numerator.values[0]).max() < 1e-6
    direct = sp.patch(saturated(), clean, corrupt, 0.3, sites=[z], direction=w).effect_numerator.values[0]
    assert np.abs(direct).min() > 0.3
    np.testing.assert_allclose(ds.effect_atp_graddrop_numerator.values[0], np.abs(direct), rtol=1e-4)


def test_refusals_and_confirm_with_star(shipped):
    D, data = shipped
    c, r = data.train[:4], data.heldout[:4]
    with pytest.raises(ConfigError, match="atp_star"):
        sp.patch(D, c, r, 0.5, sites="head", method="patch", atp_star=True)
    with pytest.raises(ConfigError, match="method"):
        sp.patch(D, c, r, 0.5, sites="head", method="atp**")
    with pytest.raises(ConfigError, match="2 or more blocks"):
        sp.patch(saturated(depth=1), *_pairs()[:2], 0.3, sites=[K_SITE], method="atp*")
    ds = sp.patch(D, c, r, 0.5, sites="all", method="atp*", confirm=4)
    done = np.flatnonzero(np.isfinite(ds.effect_numerator.values).all(1))
    score = ds.effect_atp_graddrop_pooled.values
    if not np.isfinite(score).all():                                 # pooled undefined: the mean over pairs
        score = np.abs(np.nanmean(ds.effect_atp_graddrop.values, 1))
    assert set(done) == set(np.argsort(-score, kind="stable")[:4])
