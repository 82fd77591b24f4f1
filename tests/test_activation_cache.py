"""TransformerLens's habits (issue 78 item 2): the default run_with_cache result answers cache["blocks.0.attn.hook_z"]
(batch, pos, head, d_head), cache["pattern", 0] and to_xarray(); persistent add_hook / reset_hooks and a hooks()
block; stack_head_results, decompose_resid, accumulated_resid and a readout of D(x, σ) from any residual point,
checked against plain torch (a forward hook, a network cut after block l, heads ablated one by one)."""
import copy

import numpy as np
import pytest
import torch
import xarray as xr

import scoreprobe as sp
from scoreprobe.inside.hooks import hook_points
from scoreprobe.models.gpt import GPT, GPTConfig


def _x(n=3, seed=0):
    return torch.randn(n, 36, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def cached(shipped):
    D, _ = shipped
    x = _x()
    out, cache = sp.run_with_cache(D, x, 0.7)
    return D, x, out, cache


def test_the_default_cache_answers_hook_names_shorthands_and_the_dataset_form(cached):
    D, x, out, cache = cached
    seen = {}
    h = hook_points(D.net)["blocks.0.attn.hook_z"].register_forward_hook(lambda m, i, o: seen.setdefault("z", o))
    with torch.no_grad():
        D(x, 0.7)
    h.remove()
    z = cache["blocks.0.attn.hook_z"]
    B, H, T, hd = seen["z"].shape
    assert z.shape == (B, T, H, hd) and torch.equal(z, seen["z"].transpose(1, 2))   # (batch, pos, head, d_head)
    assert torch.equal(cache["z", 0], z) and torch.equal(cache["pattern", 0], cache["blocks.0.attn.hook_pattern"])
    assert torch.equal(cache["resid_post", -1], cache["blocks.3.hook_resid_post"])
    assert torch.equal(cache["scale", 1, "ln2"], cache["blocks.1.norm2.hook_scale"])
    assert torch.equal(cache["embed"], cache["hook_embed"]) and torch.equal(cache["out"], cache["final.hook_out"])
    names = ["hook_embed", "blocks.*.attn.hook_z", "blocks.*.attn.hook_pattern"]
    _, ds = sp.run_with_cache(D, x, 0.7, names=names, return_type="dataset")
    _, few = sp.run_with_cache(D, x, 0.7, names=names)
    xr.testing.assert_identical(few.to_xarray(), ds)
    assert np.array_equal(few.attn_pattern.values, ds.attn_pattern.values)            # the old Dataset answers
    assert few["attn_z"].dims == ds.attn_z.dims and few.sigma.values.tolist() == [0.7] * 3
    assert list(cache)[0] == "hook_embed" and "blocks.0.attn.hook_z" in cache
    with pytest.raises(KeyError, match="not cached"):
        few["blocks.1.hook_mlp_out"]


def test_readout_of_any_residual_point_equals_the_network_cut_there(cached):
    D, x, out, cache = cached
    assert torch.equal(cache.readout(cache["resid_post", -1]), out)                  # the last point: D(x, σ) itself
    lens, labels = cache.accumulated_resid(return_labels=True)
    assert labels == ["0_pre", "1_pre", "2_pre", "3_pre", "final_post"] and lens.shape[:2] == (5, 3)
    read = cache.readout(lens)                                                       # (5, B, D): a logit lens
    for layer in range(4):                                                           # ground truth: blocks >= l removed
        cut = copy.deepcopy(D)
        cut.net.blocks = cut.net.blocks[:layer]
        with torch.no_grad():
            ref = cut(x, 0.7)
        torch.testing.assert_close(read[layer], ref, rtol=1e-5, atol=1e-5)
    assert torch.equal(read[-1], out)


def test_head_results_and_the_resid_decomposition_add_up(cached):
    D, x, out, cache = cached
    heads, labels = cache.stack_head_results(return_labels=True)
    assert heads.shape[0] == 16 and labels[:2] == ["L0H0", "L0H1"]
    gate = cache["blocks.2.hook_gate_msa"][:, None, :]
    bias = gate * D.net.blocks[2].attn.proj.bias
    torch.testing.assert_close(heads[8:12].sum(0) + bias, cache["attn_out", 2], rtol=1e-5, atol=1e-5)
    keep = 1                                                                        # plain torch: only head 1 left
    only = {}

    def zero_others(a, name):
        a = a.clone()
        a[:, [h for h in range(4) if h != keep]] = 0
        return a
    sp.run_with_hooks(D, x, 0.7, fwd_hooks=[("blocks.2.attn.hook_z", zero_others),
                                             ("blocks.2.hook_attn_out", lambda a, n: only.setdefault("a", a))])
    torch.testing.assert_close(heads[8 + keep] + bias, only["a"], rtol=1e-5, atol=1e-5)
    parts, names = cache.decompose_resid(return_labels=True)
    assert names[:3] == ["embed", "pos_embed", "0_attn_out"] and len(names) == 10
    torch.testing.assert_close(parts.sum(0), cache["resid_post", -1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(cache.decompose_resid(layer=2).sum(0), cache["resid_pre", 2], rtol=1e-5, atol=1e-5)
    assert cache.decompose_resid(mode="mlp").shape[0] == 6


def test_gpt_cache_readout_and_decomposition():
    torch.manual_seed(0)
    g = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=16)).eval()
    bits = torch.randint(0, 2, (3, 36), generator=torch.Generator().manual_seed(1))
    logits, cache = sp.run_with_cache(g, bits)
    assert torch.equal(cache.readout(cache["resid_post", 1]), logits)
    torch.testing.assert_close(cache.decompose_resid().sum(0), cache["resid_post", 1], rtol=1e-5, atol=1e-5)
    heads = cache.stack_head_results(layer=1)
    torch.testing.assert_close(heads.sum(0) + g.transformer.h[0].attn.c_proj.bias, cache["attn_out", 0],
                               rtol=1e-5, atol=1e-5)


def test_persistent_hooks_and_a_hooks_block(shipped):
    D, _ = shipped
    x = _x()
    zero = lambda a, name: torch.zeros_like(a)                                      # noqa: E731
    ref = sp.run_with_hooks(D, x, 0.7, fwd_hooks=[("blocks.1.hook_mlp_out", zero)])
    with torch.no_grad():
        base = D(x, 0.7)
    D.add_hook("blocks.1.hook_mlp_out", zero)
    try:
        with torch.no_grad():
            assert torch.equal(D(x, 0.7), ref) and torch.equal(D(x, 0.7), ref)     # stays until reset
        assert torch.equal(sp.run_with_hooks(D, x, 0.7), ref)
    finally:
        D.reset_hooks()
    with torch.no_grad():
        assert torch.equal(D(x, 0.7), base)
        with D.hooks(fwd_hooks=[(lambda n: n == "blocks.1.hook_mlp_out", zero)]):
            assert torch.equal(D(x, 0.7), ref)
        assert torch.equal(D(x, 0.7), base)
    grads = []
    D.add_hook("blocks.0.hook_resid_post", lambda g, n: grads.append(g), dir="bwd")
    try:
        xr_ = x.clone().requires_grad_(True)
        D(xr_, 0.7).sum().backward()
    finally:
        D.reset_hooks()
    assert len(grads) == 1 and grads[0].shape == cached_shape(D)


def cached_shape(D):
    _, c = sp.run_with_cache(D, _x(), 0.7, names="blocks.0.hook_resid_post", return_type="dict")
    return c["blocks.0.hook_resid_post"].shape
