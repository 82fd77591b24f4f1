"""Direct attribution (issue 58 item 3): the components' shares, the skip term and the final layer's bias sum to
⟨D(x, σ), w⟩ on the shipped model; on the planted circuit the circuit head carries the output pixel it writes and
the distractor's share is what its slot feeds (nothing, through the final linear map); refusals."""
import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe.errors import ConfigError
from tests.test_inside_patch import _pairs, planted


@pytest.mark.parametrize("sigma", [0.3, 2.0])
def test_shares_sum_to_the_projected_output(shipped, sigma):
    D, _ = shipped
    x = torch.randn(6, 36, generator=torch.Generator().manual_seed(0))
    w = np.random.default_rng(1).standard_normal((6, 36))
    ds = sp.direct_attribution(D, x, sigma, w)
    total = (D(x, sigma).detach().double().numpy() * w).sum(1)
    np.testing.assert_allclose(ds.total.values, total, rtol=1e-6)
    recon = ds.share.sum("component") + ds.skip + ds.bias
    np.testing.assert_allclose(recon.values, total, rtol=1e-5, atol=1e-5)
    assert ds.sizes["component"] == 1 + 4 * (4 + 2)                       # embed; per block 4 heads, bias, MLP


def test_the_planted_head_carries_its_pixel():
    D = planted(leak=0.0)
    clean, _ = _pairs()
    x = torch.as_tensor(2.0 * clean - 1.0, dtype=torch.float32)
    e0 = np.array([1.0, 0, 0, 0])
    ds = sp.direct_attribution(D, x, 0.3, e0)
    share = np.abs(ds.share).mean("sample")
    heads = share.sel(component=["blocks.0.attn.hook_result[head=0]", "blocks.0.attn.hook_result[head=1]"]).values
    assert heads[0] > 0.1 and heads[0] > 5 * heads[1]
    np.testing.assert_allclose((ds.share.sum("component") + ds.skip + ds.bias).values, ds.total.values, atol=1e-5)


def test_refusals(shipped):
    D, _ = shipped
    with pytest.raises(ConfigError, match="direction"):
        sp.direct_attribution(D, torch.zeros(2, 36), 0.5, np.ones(5))
    with pytest.raises(ConfigError, match="EDM denoiser"):
        sp.direct_attribution(D.net, torch.zeros(2, 36), 0.5, np.ones(36))
