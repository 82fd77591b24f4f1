"""Finer hook points and sites (issue 58 item 4): pre-softmax scores, per-head results after W_O and LayerNorm
scales read what they say (checked against recomputation in plain torch) and replace what they say; head × token
and neuron sites work in patching, AtP and ablation."""
import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe.errors import ConfigError
from scoreprobe.inside.hooks import hook_points
from tests.test_inside_intervene import _zero_head
from tests.test_inside_paths import flipped


def _x(n=3, seed=0):
    return torch.randn(n, 36, generator=torch.Generator().manual_seed(seed))


def test_new_points_exist_on_the_dit_and_the_gpt(shipped):
    from scoreprobe.models.gpt import GPT, GPTConfig
    D, _ = shipped
    names = set(hook_points(D.net))
    for i in range(4):
        assert {f"blocks.{i}.attn.hook_attn_scores", f"blocks.{i}.attn.hook_result", f"blocks.{i}.norm1.hook_scale",
                f"blocks.{i}.norm2.hook_scale"} <= names
    assert "final.norm_final.hook_scale" in names
    g = set(hook_points(GPT(GPTConfig(n_layer=1, n_head=2, n_embd=16))))
    assert {"blocks.0.attn.hook_attn_scores", "blocks.0.attn.hook_result", "blocks.0.ln_1.hook_scale",
            "final.ln_f.hook_scale"} <= g and not any(n.startswith("transformer") for n in g)


def test_scores_results_and_scales_read_what_they_say(shipped):
    D, _ = shipped
    x = _x()
    out, c = sp.run_with_cache(D, x, 0.7, names=["blocks.1.attn.hook_attn_scores", "blocks.1.attn.hook_pattern",
                                                  "blocks.1.attn.hook_z", "blocks.1.attn.hook_result",
                                                  "blocks.1.hook_resid_pre", "blocks.1.norm1.hook_scale",
                                                  "blocks.1.hook_attn_out", "blocks.1.hook_gate_msa"])
    assert torch.equal(out, D(x, 0.7).detach())                              # reading changes nothing
    s = c.attn_attn_scores.sel(layer=1).values
    np.testing.assert_allclose(torch.softmax(torch.as_tensor(s), -1).numpy(), c.attn_pattern.sel(layer=1).values,
                               atol=1e-6)
    W = D.net.blocks[1].attn.proj.weight.detach().numpy().reshape(-1, 4, 20)   # (D, h, hd)
    z, r = c.attn_z.sel(layer=1).values, c.attn_result.sel(layer=1).values     # (B, h, T, hd), (B, h, T, D)
    np.testing.assert_allclose(r, np.einsum("bhtd,ehd->bhte", z, W), atol=1e-5)
    gate = c.gate_msa.sel(layer=1).values[:, None, :]
    bias = D.net.blocks[1].attn.proj.bias.detach().numpy()
    np.testing.assert_allclose(gate * (r.sum(1) + bias), c.attn_out.sel(layer=1).values, atol=1e-5)
    resid = c.resid_pre.sel(layer=1).values
    np.testing.assert_allclose(c.norm1_scale.sel(layer=1).values, np.sqrt(resid.var(-1) + 1e-6), rtol=1e-5)


def test_scores_results_and_scales_replace_what_they_say(shipped):
    D, _ = shipped
    x = _x()

    def mask_key0(a, name):
        a = a.clone()
        a[..., 0] = float("-inf")
        return a
    seen = {}
    with sp.hooks(D, fwd_hooks=[("blocks.0.attn.hook_attn_scores", mask_key0)]):
        _, c = sp.run_with_cache(D, x, 0.7, names="blocks.0.attn.hook_pattern")
    assert float(np.abs(c.attn_pattern.sel(layer=0).values[..., 0]).max()) == 0.0
    zero_z = sp.run_with_hooks(D, x, 0.7, fwd_hooks=[("blocks.2.attn.hook_z", lambda a, n: _zero_head(a, 1))])
    zero_r = sp.run_with_hooks(D, x, 0.7, fwd_hooks=[("blocks.2.attn.hook_result", lambda a, n: _zero_head(a, 1))])
    np.testing.assert_allclose(zero_z.numpy(), zero_r.numpy(), atol=1e-5)
    same = sp.run_with_hooks(D, x, 0.7, fwd_hooks=[("blocks.*.norm*.hook_scale", lambda a, n: a.clone())])
    np.testing.assert_allclose(same.numpy(), D(x, 0.7).detach().numpy(), atol=1e-5)
    doubled = sp.run_with_hooks(D, x, 0.7, fwd_hooks=[("final.norm_final.hook_scale", lambda a, n: seen.setdefault(
        "s", a) * 2)])
    assert not torch.allclose(doubled, D(x, 0.7).detach())


@pytest.mark.slow   # 6-11 s: -m slow, for the default suite's 480-s budget
def test_head_token_and_neuron_sites(shipped):
    D, data = shipped
    clean, corrupt = flipped(data, 4, 3)
    site = "blocks.1.attn.hook_z[head=2,token=1]"
    ds = sp.patch(D, clean, corrupt, 0.7, sites=[site, "blocks.1.attn.hook_z[head=2]"], method="both")
    assert np.isfinite(ds.effect.values).all() and np.isfinite(ds.effect_atp.values).all()
    tokens = sp.patch(D, clean, corrupt, 0.7, sites=[f"blocks.1.attn.hook_z[head=2,token={t}]" for t in range(9)],
                      method="atp")
    whole = sp.patch(D, clean, corrupt, 0.7, sites="blocks.1.attn.hook_z[head=2]", method="atp")
    np.testing.assert_allclose(tokens.effect_atp.sum("site").values, whole.effect_atp.values[0], rtol=1e-6, atol=1e-9)
    ab = sp.ablate(D, torch.as_tensor(2.0 * clean - 1, dtype=torch.float32), 0.7, sites="neuron")
    assert ab.sizes["site"] == 4 * D.net.blocks[0].mlp.fc2.in_features
    assert str(ab.site.values[0]) == "blocks.0.mlp.hook_post[d_mlp=0]"
    with pytest.raises(ConfigError, match="axes"):
        sp.patch(D, clean, corrupt, 0.7, sites="blocks.1.attn.hook_z[head=2,head=1]")
