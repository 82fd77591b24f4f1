"""Circuits read per σ (issue 55, item 5): planted DiTs whose patching effects are known in closed form.

- a site whose effect is +1 at one σ and −1 at another (mean over σ: 0) is reported with both signs, not as
  "no effect"; pairs without a contrast leave the pooled effect NaN with the reason, and a warning;
- pooled effects over contrasts of mixed sign are NaN with the reason "mixed sign";
- basin flips along the PF-ODE split into to-clean / to-corrupt / to-a-third basin over the pairs that end
  apart unpatched, on a denoiser whose patched corrupt trajectory provably ends in a third basin.
"""
import warnings

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import scoreprobe as sp
from scoreprobe.models.dit import DiT
from scoreprobe.models.edm import EDMDenoiser
from scoreprobe.probes.circuits import reduce_pairs


def _identity_embed(net):
    """x_embedder = the 2x2 patch's 4 pixels as the 4 hidden units (token value k = pixel (k // 2, k % 2))."""
    w = torch.zeros(4, 1, 2, 2)
    for k in range(4):
        w[k, 0, k // 2, k % 2] = 1.0
    net.x_embedder.proj.weight.data.copy_(w)
    net.x_embedder.proj.bias.data.zero_()
    return net


def _tokens(img):
    """(B, 1, 6, 6) -> (B, 9, 4) in unpatchify's (row patch, column patch, p, q) order."""
    return img.reshape(-1, 3, 2, 3, 2).permute(0, 1, 3, 2, 4).reshape(-1, 9, 4)


class TwoPaths(DiT):
    """F(x) = α(σ)·e1 + β(σ)·e2 with e1 = hook_embed and e2 = blocks.0.hook_resid_pre two copies of the
    input's patches: α, β = (1, 0) for σ < 1 and (−1, 2) for σ ≥ 1. Patching hook_embed restores the
    fraction α / (α + β) of the contrast: +1 below σ = 1, −1 above (its mean over σ is 0)."""

    def forward(self, x, t, y=None):
        e1 = self.hook_embed(self.x_embedder(x))                                  # (B, 9, 4)
        e2 = self.blocks[0].hook_resid_pre(self.x_embedder(x))
        low = (torch.exp(4 * t) < 1)[:, None, None]                               # σ = exp(4 c_noise)
        a, b = torch.where(low, 1.0, -1.0), torch.where(low, 0.0, 2.0)
        return self.unpatchify(self.final_layer.hook_out(a * e1 + b * e2))


class ThirdBasin(DiT):
    """D(x, σ) = a vertex v, constant along each trajectory, so the PF-ODE ends exactly at v. A = sign of
    pixel 0 read from hook_embed (patched: the clean twin's), B = sign of pixel 0 of the row's own input.
    A = B (every unpatched row): v = sign(x). A ≠ B (a corrupt row with the clean twin's embedding, the pair
    differing at pixel 0): v = sign(x̂) (the clean basin) if pixel 1 of x̂ is +, else v = (sign x_0,
    −sign x̂_1..) (a third basin: pixel 0 as the corrupt one, every other pixel unlike both). Pixel 7 is
    always +1, so pairs differing only there end together unpatched."""

    def forward(self, x, t, y=None):
        sig = torch.exp(4 * t)[:, None]                                           # (B, 1)
        xin = x.reshape(len(x), -1) * (sig ** 2 + 1).sqrt()                      # the denoiser's own input
        own = torch.sign(xin)
        seen = self.hook_embed(self.x_embedder(x))                                 # (B, 9, 4)
        xhat = torch.sign(self.unpatchify(seen).reshape(len(x), -1))              # the (patched) input's signs
        third = torch.cat([own[:, :1], -xhat[:, 1:]], 1)
        to_clean = (xhat[:, 1:2] > 0).expand_as(own)
        v = torch.where((xhat[:, :1] == own[:, :1]).expand_as(own), own, torch.where(to_clean, xhat, third))
        v[:, 7] = 1.0
        c_skip, c_out = 1 / (sig ** 2 + 1), sig / (sig ** 2 + 1).sqrt()
        F = (v - c_skip * xin) / c_out                                            # so that D = v exactly
        return self.unpatchify(self.final_layer.hook_out(_tokens(F.reshape(-1, 1, 6, 6))))


def _planted(cls):
    return EDMDenoiser(_identity_embed(cls(hidden_size=4, depth=1, num_heads=1)).eval(), (1, 6, 6))


@pytest.fixture(scope="module")
def series():
    return sp.load_series()


def test_effect_of_opposite_sign_per_sigma_is_not_no_effect(series):
    D = _planted(TwoPaths)
    with pytest.warns(UserWarning, match="rule pooled effects.*left undefined.*< 0.01"):
        ds = sp.circuits({1: D}, sigmas=[0.5, 2.0], n_pairs=6, sites=["hook_embed", "blocks.0.hook_resid_pre"],
                         attention=False, dataset=series.dataset, rule=series.rule)
    e = ds.copy_effect.sel(step=1)
    np.testing.assert_allclose(e.sel(site="hook_embed").values, [1.0, -1.0], atol=1e-5)     # α / (α + β)
    np.testing.assert_allclose(e.sel(site="blocks.0.hook_resid_pre").values, [0.0, 2.0], atol=1e-5)
    assert abs(float(e.sel(site="hook_embed").mean())) < 1e-5            # what the mean over σ called "no effect"
    assert (ds.copy_effect_undefined.values == "").all()
    per_pair = ds.copy_effect_pair.sel(step=1, site="hook_embed").values                  # (σ, pair)
    np.testing.assert_allclose(per_pair, np.array([[1.0], [-1.0]]).repeat(6, 1), atol=1e-4)
    assert (ds.copy_total.values > 0).all()
    # a rule pair's metric reads the flipped bit's group mates, which a pixel-wise map never moves: no contrast
    assert np.isnan(ds.rule_effect.values).all() and (ds.rule_effect_undefined.values == "below floor").all()
    assert np.isnan(ds.rule_effect_pair.values).all()


def test_cli_table_reads_per_sigma_and_notes_undefined(series):
    from scoreprobe.cli.circuits import _table
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ds = sp.circuits({1: _planted(TwoPaths)}, sigmas=[0.5, 2.0], n_pairs=4, sites=["hook_embed"],
                         attention=False, dataset=series.dataset, rule=series.rule)
    import click

    @click.command()
    def show():
        _table(ds, 2)
    out = CliRunner().invoke(show).output
    copy = [line for line in out.splitlines() if " copy " in line]
    assert len(copy) == 2 and "hook_embed +1.00" in copy[0] and "hook_embed -1.00" in copy[1], out
    assert "σ 0.5" in copy[0] and "σ 2" in copy[1]
    assert "undefined" in out and "below floor" in out and "mean over σ" not in out


def test_pooled_over_mixed_sign_contrasts_is_nan_with_reason():
    num = np.array([[3.56 * 0.5, -2.11 * -0.4, 1.33 * 0.3]])                      # (site, pair)
    den = np.array([0.5, -0.4, 0.3])
    pooled, reason, per_pair = reduce_pairs(num, den)
    assert np.isnan(pooled[0]) and reason[0] == "mixed sign"
    np.testing.assert_allclose(per_pair[0], [3.56, -2.11, 1.33])                     # per pair: still defined
    pooled, reason, _ = reduce_pairs(num[:, [0, 2]], den[[0, 2]])
    np.testing.assert_allclose(pooled[0], (1.78 + 0.399) / 0.8)
    assert reason[0] == ""
    # a noise-sized contrast (|d| < floor) neither enters the sums nor makes the signs mixed
    pooled, reason, per_pair = reduce_pairs(np.array([[0.1, 0.2, 0.001]]), np.array([0.2, 0.4, -0.005]))
    np.testing.assert_allclose(pooled, [0.5])
    assert reason[0] == "" and np.isnan(per_pair[0, 2])
    _, reason, _ = reduce_pairs(np.array([[0.001, 0.002]]), np.array([0.004, 0.003]))
    assert reason[0] == "below floor"


def test_basin_flips_split_into_clean_corrupt_third(series):
    D = _planted(ThirdBasin)
    rng = np.random.default_rng(0)
    base = rng.integers(0, 2, (8, 36)).astype(np.uint8)
    base[:, 0] = 1
    base[:, 1] = [0, 0, 1, 1, 0, 1, 0, 1]                  # pairs 0-1: third basin, 2-3: clean basin
    corrupt = base.copy()
    flip_bit = [0, 0, 0, 0, 3, 3, 7, 7]                    # 4-5: A = B (no flip), 6-7: end together unpatched
    corrupt[np.arange(8), flip_bit] ^= 1
    ds = sp.patch_ode(D, base, corrupt, ["hook_embed", "none"], sigma_start=0.05, n_steps=4, seed=1)
    assert ds.attrs["n_apart"] == 6 and ds.attrs["n_together"] == 2
    assert ds.apart_unpatched.values.tolist() == [True] * 6 + [False] * 2
    h = ds.sel(site="hook_embed")
    assert h.to_third.values[:6].tolist() == [True, True, False, False, False, False]
    assert h.to_clean.values[:6].tolist() == [False, False, True, True, False, False]
    assert h.to_corrupt.values[:6].tolist() == [False, False, False, False, True, True]
    shares = [float(h[f"{k}_share"]) for k in ("to_clean", "to_corrupt", "to_third")]
    np.testing.assert_allclose(shares, [1 / 3, 1 / 3, 1 / 3])
    assert int(h.together_moved) == 0
    n = ds.sel(site="none")
    assert float(n.to_corrupt_share) == 1.0 and float(n.to_third_share) == 0.0 and not n.flip.values.any()
