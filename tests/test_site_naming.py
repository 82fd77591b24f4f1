"""One site naming across sp.patch, sp.ablate and sp.path_patch (issue 78 item 2): the same hook names, with a head as
'[head=h]' or as a (hook name, head) pair, accepted by all three; path_patch's older receiver names still taken by it
(bit for bit the same as the new ones) and refused by patch / ablate with the site to write. Mean ablation over a
reference set of activations (an ActivationCache or a dict, e.g. of a whole dataset), checked against a mean ablation
written out with run_with_hooks, over rows or over rows and tokens; on the planted circuit it removes the head."""
import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe.errors import ConfigError
from tests.test_inside_patch import _pairs, planted


def test_a_head_pair_is_its_label_in_patch_and_ablate():
    D = planted()
    clean, corrupt = _pairs(8)
    a = sp.patch(D, clean, corrupt, 0.3, sites=[("blocks.0.attn.hook_z", 0), ("blocks.0.attn.hook_z", {"head": 1})])
    b = sp.patch(D, clean, corrupt, 0.3, sites=["blocks.0.attn.hook_z[head=0]", "blocks.0.attn.hook_z[head=1]"])
    assert list(a.site.values) == list(b.site.values) and np.array_equal(a.effect.values, b.effect.values)
    x = torch.as_tensor(2.0 * clean - 1.0, dtype=torch.float32)
    one = sp.ablate(D, x, 0.3, sites=("blocks.0.attn.hook_z", 0))
    two = sp.ablate(D, x, 0.3, sites="blocks.0.attn.hook_z[head=0]")
    assert list(one.site.values) == ["blocks.0.attn.hook_z[head=0]"]
    assert np.array_equal(one.rel_change.values, two.rel_change.values)


def test_path_patch_takes_the_site_names_and_its_older_ones_give_the_same(shipped):
    D, data = shipped
    clean, corrupt = data.train[:4], data.heldout[:4]
    new = sp.path_patch(D, clean, corrupt, 0.7, senders=[("blocks.0.attn.hook_z", 1), "blocks.1.hook_mlp_out"],
                        receivers=[("blocks.2.attn.hook_q", 0), "blocks.2.mlp.hook_pre", "final.hook_out"])
    old = sp.path_patch(D, clean, corrupt, 0.7, senders=["blocks.0.attn.hook_z[head=1]", "blocks.1.hook_mlp_out"],
                        receivers=["blocks.2.attn[head=0]", "blocks.2.mlp", "final"], which="q")
    assert list(new.sender.values)[0] == "blocks.0.attn.hook_z[head=1]"
    assert list(new.receiver.values)[0] == "blocks.2.attn.hook_q[head=0]"
    assert np.array_equal(new.effect_numerator.values, old.effect_numerator.values)
    assert np.isfinite(new.effect_numerator.values).all()
    for receiver in ("blocks.2.mlp.hook_pre", "blocks.2.attn.hook_q[head=0]"):   # the same names patch / ablate take
        assert sp.patch(D, clean, corrupt, 0.7, sites=receiver).sizes["site"] == 1
        assert sp.ablate(D, torch.zeros(2, 36), 0.7, sites=receiver).sizes["site"] == 1


@pytest.mark.parametrize("call, site, names", [
    ("patch", "blocks.2.mlp", "blocks.2.mlp.hook_pre"),
    ("ablate", "blocks.1.attn[head=3]", "blocks.1.attn.hook_q[head=3]"),
    ("ablate", "final", "final.hook_out"),
    ("receiver", "blocks.2.attn.hook_z[head=0]", "blocks.2.attn.hook_q[head=0]"),
    ("receiver", "blocks.2.hook_mlp_out", "blocks.2.mlp.hook_pre"),
    ("sender", "blocks.0.attn[head=1]", "blocks.0.attn.hook_z[head=1]"),
    ("patch", ("blocks.0.attn.hook_z", -1), "hook name, head"),
])
def test_the_other_spellings_are_refused_naming_the_site_to_write(shipped, call, site, names):
    D, data = shipped
    clean, corrupt = data.train[:2], data.heldout[:2]
    run = {"patch": lambda: sp.patch(D, clean, corrupt, 0.7, sites=site),
           "ablate": lambda: sp.ablate(D, torch.zeros(2, 36), 0.7, sites=site),
           "receiver": lambda: sp.path_patch(D, clean, corrupt, 0.7, "blocks.0.hook_mlp_out", site),
           "sender": lambda: sp.path_patch(D, clean, corrupt, 0.7, site, "final")}[call]
    with pytest.raises(ConfigError, match=names.replace("[", r"\[").replace("]", r"\]")):
        run()


def _hand_mean_ablation(D, x, sigma, ref_z, head, axes, w):
    """⟨D(x), w⟩ with head `head`'s z replaced by the mean of ref_z (R, H, T, hd) over `axes`, by run_with_hooks."""
    mean = ref_z.mean(axes, keepdim=True)

    def fn(a, name):
        a = a.clone()
        a[:, head] = mean.expand_as(a)[:, head]
        return a
    out = sp.run_with_hooks(D, x, sigma, fwd_hooks=[("blocks.0.attn.hook_z", fn)])
    return (out.double() * torch.as_tensor(w)).sum(1).numpy()


def test_mean_ablation_over_reference_activations():
    D = planted()
    rng = np.random.default_rng(0)
    x = torch.as_tensor(2.0 * rng.integers(0, 2, (6, 4)) - 1.0, dtype=torch.float32)
    data = torch.as_tensor(2.0 * rng.integers(0, 2, (200, 4)) - 1.0, dtype=torch.float32)   # the reference set
    _, cache = sp.run_with_cache(D, data, 0.3)
    _, kept = sp.run_with_cache(D, data, 0.3, names="blocks.0.attn.hook_z", return_type="dict")
    e0 = np.array([1.0, 0, 0, 0])
    heads = [("blocks.0.attn.hook_z", 0), ("blocks.0.attn.hook_z", 1)]
    base = sp.run_with_hooks(D, x, 0.3).double()[:, 0].numpy()
    runs = {ref_name: sp.ablate(D, x, 0.3, sites=heads, how="mean", reference=ref, direction=e0)
            for ref_name, ref in (("cache", cache), ("dict", kept), ("inputs", data))}
    for h in range(2):
        want = _hand_mean_ablation(D, x, 0.3, cache.raw("blocks.0.attn.hook_z"), h, (0,), e0) - base
        for ds in runs.values():
            assert np.array_equal(ds.effect.values[h], want)                            # bit for bit
        tok = sp.ablate(D, x, 0.3, sites=heads[h], how="mean", reference=cache, direction=e0,
                        mean_over=("sample", "token"))
        want_tok = _hand_mean_ablation(D, x, 0.3, cache.raw("blocks.0.attn.hook_z"), h, (0, 2), e0) - base
        assert np.array_equal(tok.effect.values[0], want_tok) and not np.array_equal(want_tok, want)
    eff = np.abs(runs["cache"].effect.values).mean(1)
    assert eff[0] > 0.3 and eff[0] > 10 * eff[1], eff                                  # the circuit head, not the decoy
    with pytest.raises(ConfigError, match="lack"):
        sp.ablate(D, x, 0.3, sites="blocks.0.hook_mlp_out", how="mean", reference=kept)
    with pytest.raises(ConfigError, match="shape"):
        sp.ablate(D, x, 0.3, sites=heads[0], how="mean", reference={"blocks.0.attn.hook_z": torch.zeros(5, 2, 3, 4)})
    with pytest.raises(ConfigError, match="mean_over"):
        sp.ablate(D, x, 0.3, sites=heads[0], how="mean", reference=cache, mean_over=("sample", "query"))
