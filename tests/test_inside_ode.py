"""Patching along the PF-ODE (issue #37): nothing patched, or patched only below every evaluated σ,
flips no basin; the corrupt rows of the paired integration are the corrupt trajectory itself."""
import numpy as np
import torch

import scoreprobe as sp
from scoreprobe.inside.hooks import hook_points
from scoreprobe.inside.ode import PairedPatch
from scoreprobe.inside.patch import pair_inputs
from scoreprobe.inside.sites import parse_site


def test_no_patch_no_flip_and_paired_rows_are_the_plain_trajectory(shipped):
    D, data = shipped
    clean, corrupt = data.train[:6], data.heldout[:6]
    ds = sp.patch_ode(D, clean, corrupt, ["none", "*"], sigma_star=1e-6, sigma_start=1.0, n_steps=8)
    assert not ds.flip.values.any() and ds.to_corrupt_share.values.tolist() == [1.0, 1.0]   # never patched
    xc, xr, _, _ = pair_inputs(D, clean, corrupt, 1.0, 0)
    x0 = torch.stack([xc, xr], 1).reshape(12, -1)
    paired = sp.integrate(PairedPatch(D, parse_site("none", hook_points(D.net)), 1.0), x0, 1.0, 8,
                          solver="heun", progress=False)
    alone = sp.integrate(D, xr, 1.0, 8, solver="heun", progress=False)
    np.testing.assert_allclose(paired[1::2].numpy(), alone.numpy(), atol=1e-4)


def test_patching_everything_leaves_only_the_skip_term(shipped):
    """Every activation clean at every step: the corrupt row's drift differs from its clean twin's only
    by the EDM skip term, so e = x_r − x_c obeys de/dσ = σ e / (σ² + σ_d²): at σ = 0 the endpoints differ
    by e₀ / √(1 + σ_start²) (σ_d = 1) whatever the network (on Heun's grid: Heun applied to that
    linear ODE, checked here). From σ_start = 4 that is 2/√17 < 1
    on each differing pixel: the corrupt row ends in the clean basin; from σ_start = 1 (2/√2 > 1) it
    cannot, however much of the network is patched."""
    D, data = shipped
    clean, corrupt = data.train[:8], data.heldout[:8]
    star = parse_site("*", hook_points(D.net))
    for s0 in (4.0, 1.0):
        xc, xr, _, _ = pair_inputs(D, clean, corrupt, s0, 2)
        x0 = torch.stack([xc, xr], 1).reshape(16, -1)
        end = sp.integrate(PairedPatch(D, star, s0), x0, s0, 12, solver="heun", progress=False)
        diff = (end[1::2] - end[0::2]).double()
        skip_only = sp.integrate(lambda x, s: x / (1 + s[:, None] ** 2), (xr - xc).double(), s0, 12,
                                 solver="heun", progress=False)              # the same grid, the skip term alone
        np.testing.assert_allclose(diff.numpy(), skip_only.numpy(), atol=1e-4)
        np.testing.assert_allclose(diff.abs().max(), 2 / np.sqrt(1 + s0 ** 2), rtol=0.05)   # the ODE's exact value
    ds = sp.patch_ode(D, clean, corrupt, ["*", "none"], sigma_start=4.0, n_steps=12, seed=2)
    assert ds.attrs["n_apart"] > 0 and ds.to_clean_share.sel(site="*") == 1.0
    assert not ds.flip.sel(site="none").any()
    low = sp.patch_ode(D, clean, corrupt, ["*"], sigma_start=1.0, n_steps=12, seed=2)
    assert low.to_clean.sel(site="*").sum() == 0 and low.attrs["n_apart"] > 0
