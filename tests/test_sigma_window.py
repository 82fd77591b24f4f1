"""Interventions over a σ window of the sampling loop (issue 78 item 3): sp.sample(..., fwd_hooks=, sigma_window=)
hooks exactly the evaluations of D whose σ lies in the window: a window that holds no sampling σ gives the unhooked
samples bit for bit, a window over every σ gives the samples of the permanently hooked network, and a window in the
middle leaves the trajectory untouched until its first σ."""
import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe.errors import ConfigError

ZERO_HEADS = [("blocks.*.attn.hook_z", lambda a, name: torch.zeros_like(a))]


def _traj(D, **kw):
    xs = {}
    out = sp.sample(D, 6, seed=0, n_steps=6, callback=lambda i, s, x: xs.__setitem__(i, (float(s), x.clone())), **kw)
    return out, xs


def test_a_window_without_sampling_sigmas_changes_nothing_and_a_full_window_is_the_hooked_network(shipped):
    D, _ = shipped
    base, _ = _traj(D)
    for window in ((100.0, 200.0), (0.0, 1e-4)):                    # above σ_max, below σ_min (σ = 0 is not evaluated)
        got, _ = _traj(D, fwd_hooks=ZERO_HEADS, sigma_window=window)
        assert torch.equal(got, base), window
    full, _ = _traj(D, fwd_hooks=ZERO_HEADS)
    D.add_hook(*ZERO_HEADS[0])
    try:
        ref, _ = _traj(D)
    finally:
        D.reset_hooks()
    assert torch.equal(full, ref) and not torch.equal(full, base)


def test_a_middle_window_changes_the_trajectory_only_from_its_first_sigma(shipped):
    D, _ = shipped
    base, bx = _traj(D)
    sig = [bx[i][0] for i in sorted(bx)]                            # 80, ..., 0.002, 0
    lo, hi = sig[4] * 0.99, sig[2] * 1.01                          # holds σ_2, σ_3, σ_4
    got, gx = _traj(D, fwd_hooks=ZERO_HEADS, sigma_window=(lo, hi))
    for i in sorted(bx):
        same = torch.equal(gx[i][1], bx[i][1])
        assert same == (sig[i] > hi), (i, sig[i])                   # x_2 is the first reached by a hooked evaluation
    assert not torch.equal(got, base)


def test_rows_inside_and_outside_the_window_in_one_call(shipped):
    D, _ = shipped
    x = torch.randn(4, 36, generator=torch.Generator().manual_seed(0))
    s = torch.tensor([0.5, 3.0, 0.7, 10.0])
    W = sp.SigmaWindowHooks(D, ZERO_HEADS, (0.4, 1.0))
    with torch.no_grad():
        got, plain = W(x, s), D(x, s)
    hooked = sp.run_with_hooks(D, x, s, fwd_hooks=ZERO_HEADS)
    inside = np.array([True, False, True, False])
    torch.testing.assert_close(got[inside], hooked[inside], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(got[~inside], plain[~inside], rtol=1e-6, atol=1e-6)
    assert not torch.allclose(hooked[~inside], plain[~inside])


def test_bad_windows_and_hooks_are_clear_errors(shipped):
    D, ds = shipped
    with pytest.raises(ConfigError, match="needs fwd_hooks"):
        sp.sample(D, 2, seed=0, sigma_window=(0.1, 1.0))
    for bad in ((1.0, 0.1), (float("nan"), 1.0), "ab", (1.0,), (-1.0, 2.0)):
        with pytest.raises(ConfigError, match="sigma_window"):
            sp.sample(D, 2, seed=0, fwd_hooks=ZERO_HEADS, sigma_window=bad)
    with pytest.raises(ConfigError, match="no hook point"):
        sp.sample(D, 2, seed=0, fwd_hooks=[("blocks.9.hook_nothing", lambda a, n: a)])
    with pytest.raises(ConfigError, match="no hook points"):
        sp.sample(sp.EmpiricalDenoiser(ds.train), 2, seed=0, fwd_hooks=ZERO_HEADS)
