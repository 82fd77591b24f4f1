"""Direct attribution for the GPT (issue 78 item 2): the components' shares of ⟨logits, w⟩ add up to it (plain
torch), and one component's share is exactly what removing it changes with ln_f's scale frozen (run_with_hooks)."""
import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe.errors import ConfigError
from scoreprobe.inside.cache import gpt_inputs
from scoreprobe.models.gpt import GPT, GPTConfig


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    return GPT(GPTConfig(n_layer=2, n_head=2, n_embd=16)).eval()


def test_gpt_shares_add_up_and_each_is_what_removing_it_changes(gpt):
    bits = torch.randint(0, 2, (3, 36), generator=torch.Generator().manual_seed(1))
    w = np.zeros((36, gpt.vocab_size))
    w[10, 0], w[10, 1] = 1.0, -1.0                                            # a logit difference at position 10
    ds = sp.direct_attribution(gpt, bits, None, w)
    with torch.no_grad():
        logits = gpt(gpt_inputs(gpt, bits)).double()
    ref = (logits[:, 10, 0] - logits[:, 10, 1]).numpy()
    np.testing.assert_allclose(ds.total.values, ref, rtol=1e-6)
    np.testing.assert_allclose(ds.share.sum("component") + ds.bias, ref, rtol=1e-4, atol=1e-6)
    _, c = sp.run_with_cache(gpt, bits, names="final.ln_f.hook_scale", return_type="dict")
    frozen = ("final.ln_f.hook_scale", lambda a, n: c["final.ln_f.hook_scale"])
    out = sp.run_with_hooks(gpt, bits, None, fwd_hooks=[frozen, ("blocks.1.hook_mlp_out", lambda a, n: a * 0)])
    removed = (out[:, 10, 0] - out[:, 10, 1]).double().numpy()
    np.testing.assert_allclose(ref - removed, ds.share.sel(component="blocks.1.hook_mlp_out").values,
                               rtol=1e-4, atol=1e-5)
    assert ds.sizes["component"] == 2 + 2 * (2 + 2)                          # embeds; per block 2 heads, bias, mlp


def test_gpt_attribution_input_is_checked(gpt):
    bits = torch.zeros(2, 36, dtype=torch.long)
    with pytest.raises(ConfigError, match="sigma=None"):
        sp.direct_attribution(gpt, bits, 0.5, np.ones(gpt.vocab_size))
    with pytest.raises(ConfigError, match="direction"):
        sp.direct_attribution(gpt, bits, None, np.ones(5))
