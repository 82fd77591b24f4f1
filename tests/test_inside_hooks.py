"""Hook points and run_with_cache (issue #37): the checkpoints still load and give the outputs of the
modules before hooks existed (tests/data/hooks_golden.npz, written at the parent commit: bit for bit on a
CPU whose float32 kernels round as that machine's did, to float32 rounding on others, e.g. AMD EPYC with
AVX-512, where 83% of the outputs differ in their last digits), and bit for bit the same with hooks idle or
reading as without them on any one machine; the cache holds what the network computed."""
from pathlib import Path

import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe.errors import ConfigError
from scoreprobe.inside.hooks import hook_points, installed
from scoreprobe.models.dit import DiT
from scoreprobe.models.edm import EDMDenoiser
from scoreprobe.models.gpt import GPT, GPTConfig
from scoreprobe.models.stack import StackedDenoiser

GOLDEN = np.load(Path(__file__).parent / "data" / "hooks_golden.npz")


def _state(prefix):
    return {k[len(prefix):]: torch.from_numpy(GOLDEN[k]) for k in GOLDEN.files if k.startswith(prefix)}


@pytest.fixture(scope="module")
def series():
    return sp.load_series()


@pytest.fixture(scope="module")
def glu_net():
    net = DiT(hidden_size=16, depth=2, num_heads=2, mlp="glu", global_token=True)
    net.load_state_dict(_state("glu_sd."), strict=True)
    return net.eval()


@pytest.fixture(scope="module")
def gpt():
    g = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=16))
    g.load_state_dict(_state("gpt_sd."), strict=True)
    return g.eval()


def _golden(out, key):
    """`out` (numpy) is the pre-hooks module's output `key` up to float32 rounding (|Δ| ≤ 1.5e-6 seen)."""
    np.testing.assert_allclose(out, GOLDEN[key], rtol=1e-5, atol=1e-5, err_msg=key)
    return out


def _read_everything(net):
    return {n: (lambda a: a) for n in hook_points(net)}


@pytest.mark.parametrize("step", [2876, 36000])
def test_shipped_checkpoints_bit_identical_to_before_hooks(series, step):
    D = series.denoiser(step)
    x, sigma = torch.from_numpy(GOLDEN["dit_x"]), torch.from_numpy(GOLDEN["dit_sigma"])
    with torch.no_grad():
        want = _golden(D(x, sigma).numpy(), f"dit_out_{step}")
        with installed(D.net, _read_everything(D.net)):      # every hook reading, pattern included
            assert np.array_equal(D(x, sigma).numpy(), want)
    out, cache = sp.run_with_cache(D, x, sigma)
    assert np.array_equal(out.numpy(), want)
    assert cache.sizes["layer"] == 4 and cache.sizes["head"] == 4 and cache.sizes["token"] == 9


def test_state_dict_keys_unchanged(series, glu_net):
    D = series.denoiser(36000)
    saved = torch.load(series.checkpoint_path(36000), weights_only=True)
    assert set(D.state_dict()) == set(saved["ema"])
    assert set(glu_net.state_dict()) == set(_state("glu_sd."))


def test_glu_register_dit_and_gpt_bit_identical(glu_net, gpt):
    img, t = torch.from_numpy(GOLDEN["glu_img"]), torch.from_numpy(GOLDEN["glu_t"])
    bits = torch.from_numpy(GOLDEN["gpt_bits"])
    with torch.no_grad():
        glu, logp = _golden(glu_net(img, t).numpy(), "glu_out"), _golden(gpt.log_prob(bits).numpy(), "gpt_logp")
        with installed(glu_net, _read_everything(glu_net)), installed(gpt, _read_everything(gpt)):
            assert np.array_equal(glu_net(img, t).numpy(), glu)
            assert np.array_equal(gpt.log_prob(bits).numpy(), logp)
    assert np.array_equal(gpt.sample(3, seed=0), GOLDEN["gpt_sample"])


def test_names_follow_transformerlens(glu_net, gpt):
    dit = set(hook_points(glu_net))
    for i in range(2):
        for n in ("hook_resid_pre", "attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_pattern",
                  "attn.hook_z", "hook_attn_out", "hook_resid_mid", "mlp.hook_pre", "mlp.hook_post",
                  "mlp.hook_pre_linear", "hook_mlp_out", "hook_resid_post", "hook_shift_msa", "hook_gate_mlp"):
            assert f"blocks.{i}.{n}" in dit
    assert {"hook_embed", "hook_cond", "final.hook_out", "final.hook_shift", "final.hook_scale"} <= dit
    g = set(hook_points(gpt))
    assert {"hook_embed", "hook_pos_embed", "blocks.1.attn.hook_pattern", "final.hook_out"} <= g
    assert not any(n.startswith("transformer") for n in g)


def test_cache_matches_recomputation(series):
    """The cached pattern is softmax(q kᵀ/√d) of the cached q, k; z = pattern v; the residual stream
    adds up: resid_mid = resid_pre + attn_out, resid_post = resid_mid + mlp_out; embed + pos = resid_pre[0]."""
    D = series.denoiser(36000)
    x = torch.randn(5, 36, generator=torch.Generator().manual_seed(3))
    out, c = sp.run_with_cache(D, x, 0.7)
    q, k, v = c.attn_q.values, c.attn_k.values, c.attn_v.values             # (B, L, h, T, hd)
    s = np.einsum("blhqd,blhkd->blhqk", q, k) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(c.attn_pattern.values, p, atol=1e-5)
    np.testing.assert_allclose(c.attn_z.values, np.einsum("blhqk,blhkd->blhqd", p, v), atol=1e-5)
    assert np.array_equal(c.resid_mid.values, (c.resid_pre + c.attn_out).values)
    assert np.array_equal(c.resid_post.values, (c.resid_mid + c.mlp_out).values)
    np.testing.assert_array_equal(c.resid_pre.sel(layer=0).values,
                                  c.embed.values + D.net.pos_embed.detach().numpy())
    assert np.array_equal(c.resid_pre.sel(layer=1).values, c.resid_post.sel(layer=0).values)
    assert c.attn_pattern.dims == ("sample", "layer", "head", "query", "key")
    assert c.cond.dims == ("sample", "d_model") and c.sigma.values.tolist() == [0.7] * 5


def test_names_select_and_gpt_cache(series, gpt):
    D = series.denoiser(36000)
    _, c = sp.run_with_cache(D, torch.zeros(2, 36), 1.0, names="blocks.*.attn.hook_pattern")
    assert list(c.data_vars) == ["attn_pattern"] and c.layer.values.tolist() == [0, 1, 2, 3]
    bits = torch.from_numpy(GOLDEN["gpt_bits"])
    logits, g = sp.run_with_cache(gpt, bits)
    lp = torch.log_softmax(logits, -1).gather(2, gpt.bits_to_tokens(bits)[:, :, None])[:, :, 0].sum(1)
    _golden(lp.numpy(), "gpt_logp")
    pat = g.attn_pattern.values                                                # causal: no weight on the future
    assert np.all(np.triu(np.ones(pat.shape[-2:]), 1)[None, None, None] * pat == 0)
    np.testing.assert_allclose(pat.sum(-1), 1, atol=1e-6)


def test_refusals(series, gpt):
    D = series.denoiser(36000)
    with pytest.raises(ConfigError, match="plain callable"):
        sp.run_with_cache(lambda x, s: x, torch.zeros(1, 36), 1.0)
    with pytest.raises(ConfigError, match="no hook point matches"):
        sp.run_with_cache(D, torch.zeros(1, 36), 1.0, names="blocks.9.hook_nothing")
    with pytest.raises(ConfigError, match="not the bare DiT"):
        sp.run_with_cache(D.net, torch.zeros(1, 36), 1.0)
    with pytest.raises(ConfigError, match="no noise level"):
        sp.run_with_cache(gpt, torch.zeros(1, 36, dtype=torch.long), 1.0)
    with pytest.raises(ConfigError, match="stack"):
        sp.run_with_cache(StackedDenoiser([D, D]), torch.zeros(2, 36), 1.0)


def test_foreign_layout_gets_hooks(series, tmp_path):
    """A facebookresearch/DiT-layout state_dict loads into the same module and so has the hooks."""
    D = series.denoiser(36000)
    path = tmp_path / "dit.pt"
    torch.save({"ema": D.net.state_dict()}, path)
    F_ = sp.load_checkpoint(path, image_shape=(1, 6, 6), parameterization="edm", sigma_data=1.0,
                            time_scale=250.0, num_heads=4)
    x = torch.randn(3, 36, generator=torch.Generator().manual_seed(0))
    out, c = sp.run_with_cache(F_, x, 0.5)
    assert np.array_equal(out.numpy(), F_(x, 0.5).detach().numpy())
    assert "attn_pattern" in c


def test_hook_replaces_and_clears(series):
    D = series.denoiser(36000)
    x = torch.randn(2, 36, generator=torch.Generator().manual_seed(1))
    base = D(x, 1.0).detach()
    with installed(D.net, {"final.hook_out": torch.zeros_like}):
        zeroed = D(x, 1.0).detach()
    c_skip = 1 / (1 + 1.0)
    np.testing.assert_allclose(zeroed.numpy(), c_skip * x.numpy(), atol=1e-7)   # only the skip term remains
    assert np.array_equal(D(x, 1.0).detach().numpy(), base.numpy())
    assert all(p.fn is None for p in hook_points(D.net).values())
    with pytest.raises(ConfigError, match="unknown hook"):
        with installed(D.net, {"blocks.0.nothing": torch.zeros_like}):
            pass
    assert isinstance(EDMDenoiser, type)


def test_fast_lookup_keeps_the_module_tree(glu_net):
    """Hook points are also plain instance attributes (fast in forward) and still submodules; a deep copy
    keeps one object in both places."""
    import copy
    blk = glu_net.blocks[0]
    assert blk.__dict__["hook_resid_pre"] is blk._modules["hook_resid_pre"]
    twin = copy.deepcopy(glu_net)
    assert twin.blocks[0].__dict__["hook_resid_pre"] is twin.blocks[0]._modules["hook_resid_pre"]
    assert twin.blocks[0].hook_resid_pre is not blk.hook_resid_pre
    img, t = torch.from_numpy(GOLDEN["glu_img"]), torch.from_numpy(GOLDEN["glu_t"])
    with torch.no_grad():
        plain = glu_net(img, t).numpy()
    with installed(twin, {"blocks.0.hook_resid_pre": torch.zeros_like}):
        with torch.no_grad():
            assert not np.allclose(twin(img, t).numpy(), plain, rtol=1e-3, atol=1e-3)
            assert np.array_equal(glu_net(img, t).numpy(), plain)


def test_the_docs_table_lists_every_hook_point(glu_net, gpt):
    """docs/inside.md's table names every hook point of a GLU + register DiT and of a GPT (with {i} for blocks),
    and names nothing that does not exist."""
    import re
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "docs/inside.md").read_text()
    table = text[text.index("## Hook points"):text.index("## Patching sites")]
    cells = [c for line in table.splitlines() if line.startswith("| `") for c in re.findall(r"`([^`]+)`",
                                                                                           line.split("|")[1])]
    documented, prefix = set(), ""
    for c in cells:            # 'blocks.{i}.attn.hook_q', 'hook_k' (same prefix as the cell before it)
        if "." in c:
            prefix = c.rsplit(".", 1)[0] + "."
            documented.add(c)
        else:
            documented.add(prefix + c if prefix and not c.startswith("hook_embed") and c not in (
                "hook_embed", "hook_pos_embed", "hook_cond") else c)
    names = set()
    for net in (glu_net, gpt):
        names |= {re.sub(r"^blocks\.\d+\.", "blocks.{i}.", n) for n in hook_points(net)}
    gpt_alias = {"blocks.{i}.ln_1.hook_scale", "blocks.{i}.ln_2.hook_scale", "final.ln_f.hook_scale"}
    assert names - gpt_alias <= documented, sorted(names - gpt_alias - documented)
    assert gpt_alias & names == gpt_alias and "ln_1" in table and "ln_f" in table
