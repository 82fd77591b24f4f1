"""DiT: shapes, the documented embeddings, adaLN-Zero at init, state_dict round trips, and a state_dict
built by hand in the facebookresearch/DiT layout."""
import math

import numpy as np
import pytest
import torch

from scoreprobe.models.build import build_model
from scoreprobe.models.dit import DIT_SIZES, DiT, dit_from_config, sincos_2d, timestep_embedding
from scoreprobe.models.edm import EDMDenoiser


def _randomize(model, seed=0, scale=0.2):
    """Random non-zero values in every trainable weight (adaLN-Zero starts with zeros)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.copy_(torch.randn(p.shape, generator=g) * scale)
    return model


@pytest.mark.parametrize("C,H,W,p", [(1, 6, 6, 2), (1, 6, 6, 3), (1, 6, 6, 1), (4, 4, 4, 2), (1, 4, 8, 2),
                                     (3, 6, 9, 3)])
@pytest.mark.parametrize("learn_sigma", [False, True])
def test_shapes(C, H, W, p, learn_sigma):
    net = DiT(input_size=(H, W), patch_size=p, in_channels=C, hidden_size=32, depth=2, num_heads=4,
              learn_sigma=learn_sigma)
    assert net.pos_embed.shape == (1, H * W // p ** 2, 32)
    out = net(torch.randn(3, C, H, W), torch.randn(3))
    assert out.shape == (3, 2 * C if learn_sigma else C, H, W)
    D = EDMDenoiser(net, (C, H, W))
    x = torch.randn(5, C * H * W)
    assert D(x, torch.rand(5) + 0.1).shape == x.shape
    assert D(x.double(), torch.rand(5, dtype=torch.float64) + 0.1).dtype == torch.float64


def test_patch_size_must_divide_the_image():
    with pytest.raises(ValueError):
        DiT(input_size=(6, 6), patch_size=4)


def test_unpatchify_inverts_the_documented_token_layout():
    """Token (i, j) holds the p×p×C values of its patch in (row-in-patch, col-in-patch, channel) order."""
    C, H, W, p = 2, 4, 6, 2
    net = DiT(input_size=(H, W), patch_size=p, in_channels=C, hidden_size=16, depth=1, num_heads=2)
    img = torch.randn(2, C, H, W)
    tokens = torch.empty(2, (H // p) * (W // p), p * p * C)
    for i in range(H // p):
        for j in range(W // p):
            for a in range(p):
                for b in range(p):
                    for c in range(C):
                        tokens[:, i * (W // p) + j, (a * p + b) * C + c] = img[:, c, i * p + a, j * p + b]
    assert torch.equal(net.unpatchify(tokens), img)


def test_fixed_positions_and_timestep_embedding_follow_the_formulas():
    D, gh, gw = 16, 2, 3
    pos = sincos_2d(D, gh, gw)                                   # (6, 16)
    omega = 1.0 / 10000 ** (np.arange(D // 4) / (D / 4))
    for r in range(gh):
        for c in range(gw):
            want = np.concatenate([np.sin(c * omega), np.cos(c * omega), np.sin(r * omega), np.cos(r * omega)])
            np.testing.assert_allclose(pos[r * gw + c], want, atol=1e-12)
    t = torch.tensor([0.0, 1.5, -3.0])
    emb = timestep_embedding(t, 8)
    freqs = np.exp(-math.log(10000) * np.arange(4) / 4)
    want = np.concatenate([np.cos(t.numpy()[:, None] * freqs), np.sin(t.numpy()[:, None] * freqs)], axis=1)
    np.testing.assert_allclose(emb.numpy(), want, atol=1e-6)


@pytest.mark.parametrize("sigma_data", [1.0, 0.5])
def test_adaln_zero_init_gives_c_skip_times_x(sigma_data):
    torch.manual_seed(0)
    net = dit_from_config({"size": "tiny", "input_size": [6, 6], "patch_size": 2, "in_channels": 1})
    D = EDMDenoiser(net, (1, 6, 6), sigma_data=sigma_data, time_scale=250.0)
    x = torch.randn(8, 36) * 3
    sigma = torch.logspace(-2, 1.5, 8)
    c_skip = sigma_data ** 2 / (sigma ** 2 + sigma_data ** 2)
    torch.testing.assert_close(D(x, sigma), c_skip[:, None] * x, atol=1e-6, rtol=1e-6)


def test_strict_state_dict_round_trip(tmp_path):
    arch = {"net": {**DIT_SIZES["tiny"], "input_size": [6, 6], "patch_size": 2, "in_channels": 1,
                    "mlp_ratio": 4.0, "learn_sigma": False, "num_label_rows": 1},
            "image_shape": [1, 6, 6], "sigma_data": 1.0, "time_scale": 250.0}
    a = _randomize(build_model("dit", arch), seed=1)
    torch.save(a.state_dict(), tmp_path / "sd.pt")
    torch.manual_seed(123)
    b = build_model("dit", arch)
    b.load_state_dict(torch.load(tmp_path / "sd.pt", weights_only=True), strict=True)
    x, s = torch.randn(4, 36), torch.tensor([0.1, 0.5, 1.0, 5.0])
    assert torch.equal(a(x, s), b(x, s))
    assert not torch.allclose(a(x, s), build_model("dit", arch)(x, s))     # fresh weights differ


def facebook_dit_state_dict(C, p, hidden, depth, grid, learn_sigma, label_rows=1, seed=0):
    """A state_dict written out by hand from the names and shapes of facebookresearch/DiT `models.py`."""
    g = torch.Generator().manual_seed(seed)
    r = lambda *shape: torch.randn(*shape, generator=g) * 0.2               # noqa: E731
    c_out = 2 * C if learn_sigma else C
    sd = {"pos_embed": r(1, grid * grid, hidden),
          "x_embedder.proj.weight": r(hidden, C, p, p), "x_embedder.proj.bias": r(hidden),
          "t_embedder.mlp.0.weight": r(hidden, 256), "t_embedder.mlp.0.bias": r(hidden),
          "t_embedder.mlp.2.weight": r(hidden, hidden), "t_embedder.mlp.2.bias": r(hidden),
          "y_embedder.embedding_table.weight": r(label_rows, hidden),
          "final_layer.linear.weight": r(p * p * c_out, hidden), "final_layer.linear.bias": r(p * p * c_out),
          "final_layer.adaLN_modulation.1.weight": r(2 * hidden, hidden),
          "final_layer.adaLN_modulation.1.bias": r(2 * hidden)}
    for i in range(depth):
        b = f"blocks.{i}."
        sd.update({b + "attn.qkv.weight": r(3 * hidden, hidden), b + "attn.qkv.bias": r(3 * hidden),
                   b + "attn.proj.weight": r(hidden, hidden), b + "attn.proj.bias": r(hidden),
                   b + "mlp.fc1.weight": r(4 * hidden, hidden), b + "mlp.fc1.bias": r(4 * hidden),
                   b + "mlp.fc2.weight": r(hidden, 4 * hidden), b + "mlp.fc2.bias": r(hidden),
                   b + "adaLN_modulation.1.weight": r(6 * hidden, hidden),
                   b + "adaLN_modulation.1.bias": r(6 * hidden)})
    return sd


def test_facebook_layout_loads_strictly_and_learn_sigma_channels_are_ignored():
    C, p, hidden, depth, grid = 2, 2, 24, 2, 3
    sd = facebook_dit_state_dict(C, p, hidden, depth, grid, learn_sigma=True)
    net = DiT(input_size=(grid * p, grid * p), patch_size=p, in_channels=C, hidden_size=hidden, depth=depth,
              num_heads=4, learn_sigma=True, num_label_rows=1)
    net.load_state_dict(sd, strict=True)
    D = EDMDenoiser(net, (C, grid * p, grid * p), sigma_data=0.5, time_scale=1.0)
    x, sigma = torch.randn(3, C * 36), torch.tensor([0.3, 1.0, 4.0])
    # EDM preconditioning written out here, with the prediction = the first C of 2C output channels
    sd2 = 0.25
    c_in = (1 / (sigma ** 2 + sd2).sqrt())[:, None]
    raw = net((c_in * x).view(3, C, 6, 6), sigma.log() / 4)                # (3, 2C, 6, 6)
    assert raw.shape[1] == 2 * C
    want = sd2 / (sigma ** 2 + sd2)[:, None] * x + (sigma * 0.5 / (sigma ** 2 + sd2).sqrt())[:, None] * \
        raw[:, :C].reshape(3, -1)
    torch.testing.assert_close(D(x, sigma), want, atol=1e-5, rtol=1e-5)
    # per-token outputs are ordered (p, q, c): rows with c >= C are the learned-variance channels
    rows = torch.arange(p * p * 2 * C)
    sigma_rows, mean_rows = rows[rows % (2 * C) >= C], rows[rows % (2 * C) < C]
    with torch.no_grad():
        before = D(x, sigma)
        net.final_layer.linear.weight[sigma_rows] += 5.0
        torch.testing.assert_close(D(x, sigma), before)                   # variance channels unused
        net.final_layer.linear.weight[mean_rows] += 5.0
        assert not torch.allclose(D(x, sigma), before, atol=1e-3)
