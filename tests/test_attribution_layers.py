"""Direct attribution at intermediate layers (issue 78 item 2): `layer=l` splits the readout of the stream entering
block l (through the final layer and the EDM preconditioning) over the components before block l. Checked against a
forward written out in plain torch with the same weights (the readout at every l bit for bit, each component's share
from the hand-made activations), and on a two-block planted circuit whose heads each carry one pixel."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import scoreprobe as sp
from scoreprobe.errors import ConfigError
from scoreprobe.models.dit import DiT
from scoreprobe.models.edm import EDMDenoiser
from scoreprobe.models.gpt import GPT, GPTConfig


def _hand_forward(D, x, sigma):
    """Plain torch (functional ops, the network's weights): c_in·x through the DiT, keeping per block l the stream
    entering it r_l (B, T, d) and the components (label, layer, (B, T, d)) added to it; plus the final adaLN."""
    net, sd = D.net, D.sigma_data
    s = torch.full((len(x), 1), float(sigma))
    c_in, c_noise = 1 / (s ** 2 + sd ** 2).sqrt(), D.time_scale * s[:, 0].log() / 4
    img = (c_in * x).view(-1, *D.image_shape)
    pe = net.x_embedder.proj
    h = F.conv2d(img, pe.weight, pe.bias, stride=pe.stride).flatten(2).transpose(1, 2) + net.pos_embed
    half = net.t_embedder.frequency_embedding_size // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
    args = c_noise[:, None] * freqs[None]
    m0, m2 = net.t_embedder.mlp[0], net.t_embedder.mlp[2]
    c = F.linear(F.silu(F.linear(torch.cat([args.cos(), args.sin()], -1), m0.weight, m0.bias)), m2.weight, m2.bias)
    c = c + net.y_embedder.embedding_table.weight[0]
    streams, comps = [], [("embed", -1, h)]
    for i, blk in enumerate(net.blocks):
        streams.append(h)
        ad = blk.adaLN_modulation[1]
        sh1, sc1, g1, sh2, sc2, g2 = F.linear(F.silu(c), ad.weight, ad.bias).chunk(6, dim=1)
        a = F.layer_norm(h, h.shape[-1:], eps=blk.norm1.eps) * (1 + sc1[:, None]) + sh1[:, None]
        B, T, d = a.shape
        H = blk.attn.num_heads
        qkv = F.linear(a, blk.attn.qkv.weight, blk.attn.qkv.bias).reshape(B, T, 3, H, d // H).permute(2, 0, 3, 1, 4)
        z = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])                  # (B, H, T, hd)
        W = blk.attn.proj.weight.double()
        for hh in range(H):
            part = z[:, hh].double() @ W[:, hh * (d // H):(hh + 1) * (d // H)].T
            comps.append((f"blocks.{i}.attn.hook_result[head={hh}]", i, g1.double()[:, None] * part))
        bias = g1.double()[:, None] * blk.attn.proj.bias.double()
        comps.append((f"blocks.{i}.attn.proj_bias", i, bias.expand(B, T, d)))
        attn = F.linear(z.transpose(1, 2).reshape(B, T, d), blk.attn.proj.weight, blk.attn.proj.bias)
        h = h + g1[:, None] * attn
        b = F.layer_norm(h, h.shape[-1:], eps=blk.norm2.eps) * (1 + sc2[:, None]) + sh2[:, None]
        mlp = F.linear(F.gelu(F.linear(b, blk.mlp.fc1.weight, blk.mlp.fc1.bias), approximate="tanh"),
                       blk.mlp.fc2.weight, blk.mlp.fc2.bias)
        comps.append((f"blocks.{i}.hook_mlp_out", i, g2[:, None] * mlp))
        h = h + g2[:, None] * mlp
    streams.append(h)
    fa = net.final_layer.adaLN_modulation[1]
    shift, scale = F.linear(F.silu(c), fa.weight, fa.bias).chunk(2, dim=1)
    return streams, comps, shift, scale


def _hand_readout(D, x, sigma, r, shift, scale):
    """D_l (B, D) float32 from the stream r: final LayerNorm, adaLN, linear, unpatchify, preconditioning."""
    net, sd = D.net, D.sigma_data
    lin = net.final_layer.linear
    y = F.linear(F.layer_norm(r, r.shape[-1:], eps=1e-6) * (1 + scale[:, None]) + shift[:, None], lin.weight, lin.bias)
    F_x = net.unpatchify(y)[:, :D.image_shape[0]].reshape(len(x), -1)
    s = torch.full((len(x), 1), float(sigma))
    return sd ** 2 / (s ** 2 + sd ** 2) * x + s * sd / (s ** 2 + sd ** 2).sqrt() * F_x


def _hand_share(D, sigma, comp, r, scale, w):
    """A component's share, from the hand forward: c_out·⟨U(W·[(c − mean c)/s_r·(1 + scale)]), w⟩ (float64)."""
    net, sd = D.net, D.sigma_data
    s_r, comp = (r.double().var(-1, unbiased=False, keepdim=True) + 1e-6).sqrt(), comp.double()
    W = net.final_layer.linear.weight.double()
    y = ((comp - comp.mean(-1, keepdim=True)) / s_r * (1 + scale.double()[:, None])) @ W.T
    F_x = net.unpatchify(y)[:, :D.image_shape[0]].reshape(len(r), -1)
    return (sigma * sd / math.sqrt(sigma ** 2 + sd ** 2) * F_x * w).sum(1)


@torch.no_grad()
def test_each_layer_against_a_forward_written_in_plain_torch(shipped):
    D, _ = shipped
    sigma = 0.7
    x = torch.randn(5, 36, generator=torch.Generator().manual_seed(3))
    w = torch.as_tensor(np.random.default_rng(4).standard_normal((5, 36)))
    streams, comps, shift, scale = _hand_forward(D, x, sigma)
    assert torch.equal(_hand_readout(D, x, sigma, streams[-1], shift, scale), D(x, sigma))   # the hand forward is D
    _, cache = sp.run_with_cache(D, x, sigma)
    for layer in range(len(D.net.blocks) + 1):
        ds = sp.direct_attribution(D, x, sigma, w.numpy(), layer=layer)
        ref = _hand_readout(D, x, sigma, streams[layer], shift, scale)
        assert np.array_equal(ds.total.values, (ref.double() * w).sum(1).numpy()), layer   # bit for bit
        if layer < len(D.net.blocks):
            assert torch.equal(cache.readout(cache["resid_pre", layer]), ref)             # the logit lens, the same
        assert ds.attrs["read_at"] == ("final layer input" if layer == 4 else f"blocks.{layer}.hook_resid_pre")
        mine = [c for c in comps if c[1] < layer]
        assert list(ds.component.values) == [c[0] for c in mine]
        for label, _, comp in mine:
            np.testing.assert_allclose(ds.share.sel(component=label).values,
                                       _hand_share(D, sigma, comp, streams[layer], scale, w).numpy(),
                                       rtol=1e-9, atol=1e-12, err_msg=label)
        np.testing.assert_allclose((ds.share.sum("component") + ds.skip + ds.bias).values, ds.total.values,
                                   rtol=1e-5, atol=1e-5)
    assert sp.direct_attribution(D, x, sigma, w.numpy(), layer=-1).attrs["read_at"] == "blocks.3.hook_resid_pre"
    xr_final = sp.direct_attribution(D, x, sigma, w.numpy())
    assert np.array_equal(xr_final.share.values, sp.direct_attribution(D, x, sigma, w.numpy(), layer=4).share.values)


def planted_two_blocks():
    """2x2 image, one token per pixel, d_model 8 = (x, −x, slot 2, slot 3, one-hot position of 4 tokens). Block 0,
    head 0: token 0 copies token 1's x into slot 2. Block 1, head 1: token 0 copies token 2's x into slot 3. Every
    other head and both MLPs write nothing. The output pixel 0 reads its own x, slot 2 and slot 3."""
    torch.manual_seed(0)
    net = DiT(input_size=(2, 2), patch_size=1, in_channels=1, hidden_size=8, depth=2, num_heads=2, mlp_ratio=1.0)
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
        net.x_embedder.proj.weight[0], net.x_embedder.proj.weight[1] = 1.0, -1.0
        net.pos_embed[0, torch.arange(4), 4 + torch.arange(4)] = 1.0
        for blk, head, key, slot in ((net.blocks[0], 0, 5, 2), (net.blocks[1], 1, 6, 3)):
            blk.adaLN_modulation[1].bias[16:24] = 1.0                                  # gate_msa; gate_mlp stays 0
            W, r = blk.attn.qkv.weight, 4 * head
            W[r, 4], W[8 + r, key] = 6.0, 6.0                                          # query token 0, its key
            W[16 + r, 0], W[16 + r, 1] = 0.5, -0.5                                     # value: x
            blk.attn.proj.weight[slot, r] = 1.0
        net.final_layer.linear.weight[0, :4] = torch.tensor([0.25, -0.25, 1.0, 1.0])
    return EDMDenoiser(net.eval(), (1, 2, 2), sigma_data=1.0, time_scale=1.0)


def test_the_planted_heads_appear_at_the_layer_after_them():
    D = planted_two_blocks()
    bits = np.random.default_rng(0).integers(0, 2, (64, 4))
    x = torch.as_tensor(2.0 * bits - 1.0, dtype=torch.float32)
    e0 = np.array([1.0, 0, 0, 0])
    h00, h11 = "blocks.0.attn.hook_result[head=0]", "blocks.1.attn.hook_result[head=1]"
    at0, at1, at2 = (sp.direct_attribution(D, x, 0.05, e0, layer=l) for l in (0, 1, 2))
    assert list(at0.component.values) == ["embed"]
    assert h00 in at1.component.values and h11 not in at1.component.values
    for ds in (at1, at2):                                        # head 0 of block 0 carries pixel 1's sign
        assert np.array_equal(np.sign(ds.share.sel(component=h00).values), x[:, 1].numpy())
    assert np.array_equal(np.sign(at2.share.sel(component=h11).values), x[:, 2].numpy())   # block 1's head: pixel 2
    for ds, heads in ((at1, [h00]), (at2, [h00, h11])):          # the planted heads carry the pixel, the others ~0
        share = np.abs(ds.share).mean("sample")
        rest = share.drop_sel(component=heads + ["embed"]).values
        assert share.sel(component=heads).min() > 20 * rest.max(), (ds.attrs["read_at"], share.values)
    np.testing.assert_allclose((at1.share.sum("component") + at1.skip + at1.bias).values, at1.total.values, atol=1e-5)


def test_gpt_layer_and_refusals(shipped):
    torch.manual_seed(0)
    g = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=16)).eval()
    bits = torch.randint(0, 2, (3, 36), generator=torch.Generator().manual_seed(1))
    w = np.random.default_rng(2).standard_normal((36, g.lm_head.weight.shape[0]))
    _, cache = sp.run_with_cache(g, bits)
    ds = sp.direct_attribution(g, bits, None, w, layer=1)
    lens = cache.readout(cache["resid_pre", 1]).double()
    assert np.array_equal(ds.total.values, (lens * torch.as_tensor(w)).sum((1, 2)).numpy())
    assert set(ds.layer.values) == {-1, 0}
    np.testing.assert_allclose((ds.share.sum("component") + ds.bias).values, ds.total.values, rtol=1e-5, atol=1e-5)
    D, _ = shipped
    for bad in (5, -5, 1.5, True, "1"):
        with pytest.raises(ConfigError, match="layer must be"):
            sp.direct_attribution(D, torch.zeros(2, 36), 0.5, np.ones(36), layer=bad)
