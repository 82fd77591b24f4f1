"""GPT patching (issue 58 item 6): patching everything reproduces the clean run (effect 1), nothing the corrupt
run (0); the effect of a site equals a plain-torch reference (a forward hook on the module, the clean activation
put back by hand) on the log-likelihood of the clean tokens; AtP with `confirm` patches its top sites."""
import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe.errors import ConfigError
from scoreprobe.models.gpt import GPT, GPTConfig


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    return GPT(GPTConfig(n_layer=2, n_head=2, n_embd=16)).eval()


def _pairs(n=6, seed=0):
    rng = np.random.default_rng(seed)
    clean = rng.integers(0, 2, (n, 36))
    corrupt = clean.copy()
    corrupt[:, 5] ^= 1
    return clean, corrupt


def _clean_ll(g, prefix_bits, clean_bits, hook=None):
    """Σ_t log p(clean token t | the prefix of `prefix_bits`), a plain forward (optionally with a torch hook)."""
    tokens = g.bits_to_tokens(torch.as_tensor(prefix_bits))
    inp = torch.cat([torch.full((len(tokens), 1), g.bos), tokens[:, :-1]], 1)
    h = g.transformer.h[0].mlp.register_forward_hook(hook) if hook else None
    with torch.no_grad():
        logits = g(inp)
    if h:
        h.remove()
    target = g.bits_to_tokens(torch.as_tensor(clean_bits))
    return torch.log_softmax(logits.double(), -1).gather(2, target[:, :, None])[:, :, 0].sum(1)


def test_everything_is_one_nothing_is_zero_and_a_block_matches_plain_torch(gpt):
    clean, corrupt = _pairs()
    with pytest.warns(UserWarning, match="left undefined"):   # an untrained GPT: tiny contrasts; floor 0 keeps them
        ds = sp.patch(gpt, clean, corrupt, None, sites=["*", "none", "blocks.0.hook_mlp_out"], method="both", floor=0)
    np.testing.assert_allclose(ds.effect.sel(site="*").values, 1.0, atol=1e-9)
    np.testing.assert_allclose(ds.effect.sel(site="none").values, 0.0, atol=1e-9)
    kept = {}                                                   # plain torch: forward hooks on block 0's MLP
    m_c = _clean_ll(gpt, clean, clean, lambda m, i, o: kept.setdefault("c", o.detach()))
    m_p = _clean_ll(gpt, corrupt, clean, lambda m, i, o: kept["c"])
    m_r = _clean_ll(gpt, corrupt, clean)
    np.testing.assert_allclose(ds.effect.sel(site="blocks.0.hook_mlp_out").values, ((m_p - m_r) / (m_c - m_r)).numpy(),
                               rtol=1e-6, atol=1e-9)


def test_the_final_logits_are_the_clean_run_and_atp_confirms_its_top_sites(gpt):
    clean, corrupt = _pairs()
    with pytest.warns(UserWarning, match="left undefined"):
        ds = sp.patch(gpt, clean, corrupt, None, sites=["final.hook_out"], method="both", floor=0)
    # patching the final logits is the clean run itself: 1 (AtP is first order there: log-softmax is not linear)
    np.testing.assert_allclose(ds.effect.values[0], 1.0, atol=1e-9)
    with pytest.warns(UserWarning, match="left undefined"):
        grid = sp.patch(gpt, clean, corrupt, None, sites="head", method="atp", confirm=2)
    assert grid.sizes["site"] == 4 and np.isfinite(grid.effect.values).any(1).sum() == 2


def test_refusals(gpt):
    clean, corrupt = _pairs()
    with pytest.raises(ConfigError, match="sigma=None"):
        sp.patch(gpt, clean, corrupt, 0.7, sites="head")
    with pytest.raises(Exception, match="identical"):
        sp.patch(gpt, clean, clean, None, sites="head")
