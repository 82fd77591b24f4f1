"""Path patching through a set of receivers, and receivers named as the patch sites of their inputs (issue 78
item 2): 'blocks.2.attn[head=0]' with which="q" is 'blocks.2.attn.hook_q[head=0]'; a head's q, k and v joined with
'+' are the head; a two-head set equals a path patching written out by hand with run_with_hooks."""
import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe.errors import ConfigError
from scoreprobe.inside.patch import metric, pair_inputs
from tests.test_inside_paths import flipped

SENDER = "blocks.0.attn.hook_z[head=1]"


def test_receiver_names_and_sets_agree_with_each_other(shipped):
    D, data = shipped
    clean, corrupt = flipped(data, 4, 0)
    rcv = ["blocks.2.attn[head=0]", "blocks.2.attn.hook_q[head=0]+blocks.2.attn.hook_k[head=0]+"
           "blocks.2.attn.hook_v[head=0]", "blocks.1.mlp", "blocks.1.mlp.hook_pre", "final", "final.hook_out"]
    ds = sp.path_patch(D, clean, corrupt, 0.7, senders=SENDER, receivers=rcv)
    num = ds.effect_numerator.sel(sender=SENDER).values                                # (receiver, sample)
    np.testing.assert_array_equal(num[0], num[1])
    np.testing.assert_array_equal(num[2], num[3])
    np.testing.assert_array_equal(num[4], num[5])
    q = sp.path_patch(D, clean, corrupt, 0.7, senders=SENDER, receivers="blocks.2.attn[head=0]", which="q")
    q_site = sp.path_patch(D, clean, corrupt, 0.7, senders=SENDER, receivers="blocks.2.attn.hook_q[head=0]")
    np.testing.assert_array_equal(q.effect_numerator.values, q_site.effect_numerator.values)


def test_a_two_head_receiver_set_equals_path_patching_written_by_hand(shipped):
    D, data = shipped
    clean, corrupt = flipped(data, 4, 0)
    ds = sp.path_patch(D, clean, corrupt, 0.7, senders=SENDER,
                       receivers=["blocks.2.attn[head=0]+blocks.2.attn[head=3]", "blocks.2.attn[head=0]"], which="v")
    xc, xr, s, delta = pair_inputs(D, clean, corrupt, 0.7, 0)
    names = [f"blocks.{i}.{h}" for i in range(4) for h in ("attn.hook_z", "hook_mlp_out")]
    _, c = sp.run_with_cache(D, xc, s, names=names, return_type="dict")
    _, r = sp.run_with_cache(D, xr, s, names=names, return_type="dict")

    def frozen(a, name):                                   # every head and MLP at corrupt, the sender's head clean
        out = r[name].clone()
        if name == "blocks.0.attn.hook_z":
            out[:, 1] = c[name][:, 1]
        return out
    rec = {}
    sp.run_with_hooks(D, xr, s, fwd_hooks=[(n, frozen) for n in names] +
                      [("blocks.2.attn.hook_v", lambda a, n: rec.setdefault("v", a.clone()))])

    def put(a, name):
        a = a.clone()
        a[:, [0, 3]] = rec["v"][:, [0, 3]]
        return a
    m = metric(sp.run_with_hooks(D, xr, s, fwd_hooks=[("blocks.2.attn.hook_v", put)]), delta)
    m_r = metric(D(xr, s).detach(), delta)
    np.testing.assert_allclose(ds.effect_numerator.values[0, 0], (m - m_r).numpy(), rtol=1e-6, atol=1e-9)
    assert not np.allclose(ds.effect_numerator.values[0, 0], ds.effect_numerator.values[0, 1])


@pytest.mark.parametrize("bad", ["blocks.2.attn.hook_q[head=9]", "blocks.9.mlp", "blocks.1.mlp+blocks.9.mlp",
                                 "blocks.2.attn.hook_z[head=0]", "final+"])
def test_bad_receivers_are_named(shipped, bad):
    D, data = shipped
    clean, corrupt = flipped(data, 2, 0)
    with pytest.raises(ConfigError, match="unknown receiver"):
        sp.path_patch(D, clean, corrupt, 0.7, senders=SENDER, receivers=bad)


def test_gpt_path_patching_equals_patching_where_nothing_else_responds():
    from scoreprobe.models.gpt import GPT, GPTConfig
    torch.manual_seed(0)
    g = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=16)).eval()
    clean = torch.randint(0, 2, (4, 36), generator=torch.Generator().manual_seed(2)).numpy()
    corrupt = clean.copy()
    corrupt[:, 3] ^= 1
    last = "blocks.1.hook_mlp_out"
    for metric in ("log_lik", "logit_diff"):
        paths = sp.path_patch(g, clean, corrupt, None, senders=[last, "blocks.0.attn.hook_z[head=1]"],
                              receivers=["final", "blocks.1.attn[head=0]+blocks.1.mlp"], metric=metric)
        patched = sp.patch(g, clean, corrupt, None, sites=last, metric=metric)
        np.testing.assert_allclose(paths.effect_numerator.sel(sender=last, receiver="final").values,
                                   patched.effect_numerator.values[0], rtol=1e-6, atol=1e-8)
        assert np.isfinite(paths.effect_numerator.sel(sender="blocks.0.attn.hook_z[head=1]")).all()
    with pytest.raises(ConfigError, match="sigma=None"):
        sp.path_patch(g, clean, corrupt, 0.5, senders=last, receivers="final")
