"""AtP gives one joint first-order estimate per site (issue 55 item 6): atoms in series are not counted twice, atoms
in parallel add; a network affine in the patched activations makes AtP equal patching exactly, and with curvature δ
the difference is the second-order term (∝ δ); σ-only activations get exactly 0 instead of a crash."""
import re

import numpy as np
import torch
from torch import nn

import scoreprobe as sp
from scoreprobe.inside.hooks import hook_points
from scoreprobe.models.dit import DiT
from scoreprobe.models.edm import EDMDenoiser

SERIES = ["hook_embed+blocks.0.hook_resid_pre",                 # the same signal twice in a row
          "blocks.0",                                            # attn_out feeds the MLP that writes mlp_out
          "blocks.1.hook_resid_mid+blocks.1.hook_mlp_out",
          "blocks.0.attn.hook_z[head=0]+blocks.1.hook_resid_pre[token=4]"]
PARALLEL = ["blocks.1.attn.hook_z[head=0]+blocks.1.attn.hook_v[head=1]",   # neither feeds the other
            "blocks.1.attn.hook_z[head=0]+blocks.1.attn.hook_z[head=1]"]
SIGMA_ONLY = re.compile(r"^(hook_cond|blocks\.\d+\.hook_(shift|scale|gate)_(msa|mlp)|final\.hook_(shift|scale))$")


class Curved(nn.Module):
    """h + δ h²: affine at δ = 0."""

    def __init__(self, delta):
        super().__init__()
        self.delta = delta

    def forward(self, h):
        return h + self.delta * h * h


def affine_dit(delta=0.0, seed=0):
    """A 6x6 DiT (patch 2, width 16, 2 blocks, 2 heads) with random weights, made affine in every activation:
    query and key weights zero (uniform attention: the pattern is a constant), the LayerNorms and the MLP's GELU
    the identity; the final LayerNorm replaced by Curved(delta)."""
    torch.manual_seed(seed)
    net = DiT(hidden_size=16, depth=2, num_heads=2, mlp_ratio=2.0)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(0.3 * torch.randn_like(p))
        for blk in net.blocks:
            blk.attn.qkv.weight[:32].zero_()
            blk.attn.qkv.bias[:32].zero_()
            blk.norm1, blk.norm2, blk.mlp.act = nn.Identity(), nn.Identity(), nn.Identity()
    net.final_layer.norm_final = Curved(delta)
    return EDMDenoiser(net.eval(), (1, 6, 6), sigma_data=1.0, time_scale=1.0)


def _pairs(n=6, seed=0):
    rng = np.random.default_rng(seed)
    clean = rng.integers(0, 2, (n, 36))
    corrupt = clean.copy()
    corrupt[:, [3, 14, 20]] ^= 1
    return clean, corrupt


def _error(ds):
    """max over sites of Σ_pairs |AtP − patching| / Σ_pairs |contrast|."""
    den = np.abs((ds.metric_clean - ds.metric_corrupt).values).sum()
    return np.abs(ds.effect_atp_numerator.values - ds.effect_numerator.values).sum(1) / den


def test_affine_network_atp_is_exact_for_joint_sites_and_the_per_atom_sum_is_not():
    D = affine_dit()
    clean, corrupt = _pairs()
    atoms = sorted({a.strip() for s in SERIES + PARALLEL for a in s.split("+")})
    ds = sp.patch(D, clean, corrupt, 0.5, sites=SERIES + PARALLEL + atoms, method="both", floor=0)
    assert _error(ds).max() < 1e-4, _error(ds)                    # float32 rounding
    one = dict(zip(ds.site.values, ds.effect_atp_numerator.values))
    first = lambda s: [a.strip() for a in s.split("+")] if "+" in s else None          # noqa: E731
    for s in PARALLEL:                                   # parallel atoms: the joint estimate is the sum
        np.testing.assert_allclose(one[s], sum(one[a] for a in first(s)), rtol=1e-5, atol=1e-6)
    for s in SERIES[:1] + SERIES[2:3]:                   # in series: the per-atom sum counts the shared path twice
        total = sum(one[a] for a in first(s))
        assert np.abs(total - one[s]).sum() > 0.3 * np.abs(one[s]).sum(), s
    # embed feeds resid_pre and nothing else: the joint estimate is resid_pre's alone, the sum twice it
    np.testing.assert_allclose(one[SERIES[0]], one["blocks.0.hook_resid_pre"], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(one["hook_embed"], one["blocks.0.hook_resid_pre"], rtol=1e-5, atol=1e-6)


def test_with_curvature_the_error_is_second_order():
    """Curvature δ downstream of every site: the joint AtP misses exactly the second-order term (∝ δ)."""
    clean, corrupt = _pairs()
    runs = {d: sp.patch(affine_dit(d), clean, corrupt, 0.5, sites=SERIES + PARALLEL, method="both", floor=0)
            for d in (0.0, 0.02, 0.04)}
    assert _error(runs[0.0]).max() < 1e-4
    # out = lin(h + δh²): patching moves it by lin(Δh + δ(h_c² − h_r²)), AtP by lin(Δh + 2δ h_r Δh);
    # they differ by δ lin(Δh²): in metric units, proportional to δ
    err = {d: np.abs(r.effect_atp_numerator.values - r.effect_numerator.values).sum(1) for d, r in runs.items()}
    assert (err[0.04] > 1e-3 * np.abs(runs[0.04].effect_numerator.values).sum(1)).all(), err
    np.testing.assert_allclose(err[0.04] / err[0.02], 2.0, rtol=1e-3)


def test_sigma_only_hooks_get_exactly_zero_and_everything_is_one(shipped):
    """Every hook point as a site, and '*': AtP and AtP* run; the σ conditioning's activations are the same in
    both runs, so real patching and AtP give exactly 0 there; AtP of '*' is exactly the output's change: 1."""
    D, data = shipped
    points = list(hook_points(D.net))
    sites = points + ["*", "hook_embed+blocks.0.hook_resid_pre"]
    only = [p for p in points if SIGMA_ONLY.search(p)]
    assert len(only) == 1 + 6 * 4 + 2
    for method in ("both", "atp*"):
        ds = sp.patch(D, data.train[:6], data.heldout[:6], 0.7, sites=sites, method=method)
        a = ds.effect_atp_numerator.sel(site=only).values
        assert np.array_equal(a, np.zeros_like(a)), method
        assert np.isfinite(ds.effect_atp_numerator.values).all()
        np.testing.assert_allclose(ds.effect_atp.sel(site="*").values, 1.0, atol=1e-4)
        np.testing.assert_allclose(ds.effect_atp.sel(site=sites[-1]).values,
                                   ds.effect_atp.sel(site="blocks.0.hook_resid_pre").values, rtol=1e-5)
        if method == "both":
            e = ds.effect_numerator.sel(site=only).values
            assert np.array_equal(e, np.zeros_like(e))


def test_an_atom_whose_every_path_passes_through_another_adds_nothing():
    """embed → resid_pre is its only path: in a curved network the joint estimate is resid_pre's, bit for bit."""
    D = affine_dit(0.05)
    clean, corrupt = _pairs()
    ds = sp.patch(D, clean, corrupt, 0.5, sites=[SERIES[0], "blocks.0.hook_resid_pre"], method="atp", floor=0)
    np.testing.assert_array_equal(ds.effect_atp_numerator.values[0], ds.effect_atp_numerator.values[1])
