"""Hooks as an API and ablations (issue 58 items 1 and 2), against plain-torch references and the planted circuit:
hooks run in order and compose with a cache taken during the intervention; a backward hook sees the gradient
autograd gives; ablating the planted head destroys the rule output and the decoy changes nothing."""
import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe.errors import ConfigError
from scoreprobe.inside.hooks import hook_points
from tests.test_inside_patch import _pairs, planted


def _x(n=4, seed=0):
    return torch.randn(n, 36, generator=torch.Generator().manual_seed(seed))


def test_hooks_run_in_order_and_clear(shipped):
    D, _ = shipped
    x = _x()
    base = D(x, 0.7).detach()
    add = lambda a, name: a + 1.0                                            # noqa: E731
    dbl = lambda a, name: a * 2.0                                            # noqa: E731
    one = sp.run_with_hooks(D, x, 0.7, fwd_hooks=[("final.hook_out", add), ("final.hook_out", dbl)])
    two = sp.run_with_hooks(D, x, 0.7, fwd_hooks=[("final.hook_out", dbl), ("final.hook_out", add)])
    for fn, got in ((lambda o: (o + 1) * 2, one), (lambda o: o * 2 + 1, two)):   # plain torch: a forward hook
        h = D.net.final_layer.register_forward_hook(lambda m, i, o, fn=fn: fn(o))  # on the layer hook_out ends
        with torch.no_grad():
            ref = D(x, 0.7)
        h.remove()
        assert torch.equal(got, ref)
    assert all(p.fn is None for p in hook_points(D.net).values())
    assert torch.equal(D(x, 0.7).detach(), base)
    assert torch.equal(sp.run_with_hooks(D, x, 0.7, fwd_hooks=[("final.hook_out", lambda a, n: None)]), base)


def test_a_cache_taken_during_an_intervention_reads_the_intervened_activations(shipped):
    D, _ = shipped
    x = _x()
    zero = lambda a, name: torch.zeros_like(a)                               # noqa: E731
    hooked = sp.run_with_hooks(D, x, 0.7, fwd_hooks=[("blocks.0.attn.hook_z", zero)])
    with sp.hooks(D, fwd_hooks=[("blocks.0.attn.hook_z", zero)]):
        out, cache = sp.run_with_cache(D, x, 0.7, names="blocks.*.attn.hook_z")
    assert torch.equal(out, hooked) and not torch.equal(out, D(x, 0.7).detach())
    assert float(np.abs(cache.attn_z.sel(layer=0)).max()) == 0.0 and float(np.abs(cache.attn_z.sel(layer=1)).max()) > 0
    seen = []
    sp.run_with_hooks(D, x, 0.7, fwd_hooks=[(lambda n: n.endswith("hook_mlp_out"), lambda a, n: seen.append(n))])
    assert seen == [f"blocks.{i}.hook_mlp_out" for i in range(4)]


def test_a_backward_hook_sees_the_gradient_autograd_gives(shipped):
    D, _ = shipped
    x = _x()
    got = {}
    out = sp.run_with_hooks(D, x, 0.7, bwd_hooks=[("blocks.2.hook_resid_post", lambda g, n: got.setdefault(n, g))])
    out[:, 5].sum().backward()
    kept = {}                                                               # the reference: plain retain_grad

    def keep(a, name):
        a = a.view_as(a)
        a.retain_grad()
        kept["a"] = a
        return a
    ref_out = sp.run_with_hooks(D, x, 0.7, fwd_hooks=[("blocks.2.hook_resid_post", keep)], bwd_hooks=[
        ("blocks.0.hook_resid_pre", lambda g, n: None)])
    ref_out[:, 5].sum().backward()
    assert torch.allclose(got["blocks.2.hook_resid_post"], kept["a"].grad, atol=1e-7)


def test_ablating_the_planted_head_destroys_the_rule_output_and_the_decoy_changes_nothing():
    """Head 0 carries the rule bit to the output pixel 0; head 1 is a distractor that writes a slot the output
    does not read (it still moves the final LayerNorm's statistics: a small effect), and with its output
    projection zeroed, a decoy that writes nothing: its ablation changes nothing, exactly."""
    D = planted(leak=0.0)
    clean, _ = _pairs()
    x = torch.as_tensor(2.0 * clean - 1.0, dtype=torch.float32) + 0.3 * torch.randn(16, 4, generator=torch.Generator()
                                                                                        .manual_seed(3))
    e0 = np.zeros(4)
    e0[0] = 1.0                                                             # the output pixel the circuit writes
    heads = ["blocks.0.attn.hook_z[head=0]", "blocks.0.attn.hook_z[head=1]"]
    for how in ("zero", "mean", "resample"):
        ds = sp.ablate(D, x, 0.3, sites="head", how=how, direction=e0, reference=-x if how != "zero" else None)
        circuit, distractor = (float(np.abs(ds.effect.sel(site=h)).mean()) for h in heads)
        assert circuit > 0.3 and circuit > 4 * distractor, (how, circuit, distractor)
    with torch.no_grad():
        D.net.blocks[0].attn.proj.weight[:, 4:8] = 0.0                   # head 1 now writes nothing
    for how in ("zero", "mean", "resample"):
        ds = sp.ablate(D, x, 0.3, sites="head", how=how, direction=e0, reference=-x if how != "zero" else None)
        assert float(np.abs(ds.effect.sel(site=heads[1])).max()) == 0.0
        assert float(ds.rel_change.sel(site=heads[1]).max()) == 0.0 and float(np.abs(ds.effect.sel(site=heads[0])).mean()) > 0.3
    zero = sp.ablate(D, x, 0.3, sites=heads[0], direction=e0)
    ref = sp.run_with_hooks(D, x, 0.3, fwd_hooks=[("blocks.0.attn.hook_z", lambda a, n: _zero_head(a, 0))])
    z = float(((ref.double() - D(x, 0.3).detach().double()) @ torch.as_tensor(e0)).mean())
    assert float(zero.effect_mean[0]) == pytest.approx(z, abs=1e-6)


def _zero_head(a, h):
    a = a.clone()
    a[:, h] = 0
    return a


def test_mean_ablation_is_the_reference_mean_and_resample_uses_reference_rows(shipped):
    D, _ = shipped
    x, ref = _x(4, 0), _x(6, 1)
    site = "blocks.1.hook_mlp_out"
    _, cache = sp.run_with_cache(D, ref, 0.7, names=site)
    mean = torch.as_tensor(cache.mlp_out.sel(layer=1).values).mean(0)
    want = sp.run_with_hooks(D, x, 0.7, fwd_hooks=[(site, lambda a, n: mean.expand_as(a).to(a.dtype))])
    ds = sp.ablate(D, x, 0.7, sites=site, how="mean", reference=ref)
    got = ((want - D(x, 0.7).detach()).double().norm(dim=1) / D(x, 0.7).detach().double().norm(dim=1)).numpy()
    np.testing.assert_allclose(ds.rel_change.values[0], got, rtol=1e-5)
    same = sp.ablate(D, x, 0.7, sites=site, how="resample", reference=ref, seed=4)
    assert np.array_equal(same.rel_change.values, sp.ablate(D, x, 0.7, sites=site, how="resample", reference=ref,
                                                            seed=4).rel_change.values)


def test_gpt_ablation_reads_the_log_likelihood_and_bad_input_is_refused(shipped):
    from scoreprobe.models.gpt import GPT, GPTConfig
    torch.manual_seed(0)
    g = GPT(GPTConfig(n_layer=1, n_head=2, n_embd=16)).eval()
    bits = torch.randint(0, 2, (5, 36))
    ds = sp.ablate(g, bits, None, sites="head")
    assert ds.sizes == {"site": 2, "sample": 5} and np.isfinite(ds.effect.values).all()
    np.testing.assert_allclose(ds.metric_base.values, g.log_prob(bits).detach().double().numpy(), rtol=1e-6)
    D, _ = shipped
    with pytest.raises(ConfigError, match="how must be"):
        sp.ablate(D, _x(), 0.7, how="noise")
    with pytest.raises(ConfigError, match="a hook is"):
        sp.run_with_hooks(D, _x(), 0.7, fwd_hooks=["final.hook_out"])
    with pytest.raises(ConfigError, match="no hook point matches"):
        sp.run_with_hooks(D, _x(), 0.7, fwd_hooks=[("blocks.9.hook_z", lambda a, n: a)])


def test_a_transformerlens_style_dict_cache_in_a_lower_dtype(shipped):
    D, _ = shipped
    x = _x()
    out, ds = sp.run_with_cache(D, x, 0.7, names="blocks.*.attn.hook_z")
    out2, d = sp.run_with_cache(D, x, 0.7, names="blocks.*.attn.hook_z", return_type="dict", dtype=torch.float16)
    assert torch.equal(out, out2) and sorted(d) == [f"blocks.{i}.attn.hook_z" for i in range(4)]
    z = d["blocks.1.attn.hook_z"]
    assert z.dtype == torch.float16 and tuple(z.shape) == (4, 4, 9, 20)
    np.testing.assert_allclose(z.float().numpy(), ds.attn_z.sel(layer=1).values, rtol=1e-3, atol=1e-3)
    with pytest.raises(ConfigError, match="return_type"):
        sp.run_with_cache(D, x, 0.7, return_type="list")
    with pytest.raises(ConfigError, match="dtype"):
        sp.run_with_cache(D, x, 0.7, dtype=torch.bfloat16, return_type="dataset")
    _, c16 = sp.run_with_cache(D, x, 0.7, names="blocks.1.attn.hook_z", dtype=torch.bfloat16)   # the default cache
    assert c16["blocks.1.attn.hook_z"].dtype == torch.bfloat16 and c16.to_xarray().attn_z.dtype == np.float32
