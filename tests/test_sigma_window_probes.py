"""σ-window interventions in basin maps and clocks (issue 78 item 3): sp.basins and sp.clocks take fwd_hooks and
sigma_window as sp.sample does. A window that holds no σ the ODE visits changes nothing bit for bit, a window over every
σ equals the network hooked for good (add_hook), and a window in the middle changes the endpoints; refusals before
any work."""
import json

import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe.errors import ConfigError
from scoreprobe.slices import auto_plane

ZERO_HEADS = [("blocks.*.attn.hook_z", lambda a, name: torch.zeros_like(a))]
KEYS = ("endpoint_state", "endpoint_index", "nearest_train_hamming")


def _always_hooked(D, run):
    D.add_hook(*ZERO_HEADS[0])
    try:
        return run()
    finally:
        D.reset_hooks()


def test_basins_hooked_only_inside_the_window(shipped):
    D, data = shipped
    plane = auto_plane(data, data.rule, seed=0)
    kw = dict(sigma_start=1.0, res=6, n_steps=5, solver="heun", refine=False, dataset=data)
    base = sp.basins(D, plane, **kw)
    for window in ((2.0, 80.0), (1e-5, 1e-4)):                   # above σ_start, below the last σ visited
        got = sp.basins(D, plane, fwd_hooks=ZERO_HEADS, sigma_window=window, **kw)
        for k in KEYS:
            assert np.array_equal(got[k].values, base[k].values), (window, k)
    full = sp.basins(D, plane, fwd_hooks=ZERO_HEADS, sigma_window=(0.0, float("inf")), **kw)
    ref = _always_hooked(D, lambda: sp.basins(D, plane, **kw))
    for k in KEYS:
        assert np.array_equal(full[k].values, ref[k].values), k
    assert not np.array_equal(full.nearest_train_hamming.values, base.nearest_train_hamming.values)
    config = json.loads(full.attrs["scoreprobe_config"])
    assert config["interventions"] == {"fwd_hooks": ["blocks.*.attn.hook_z"], "sigma_window": [0.0, "inf"]}
    assert "interventions" not in json.loads(base.attrs["scoreprobe_config"])


def test_clocks_hooked_only_inside_the_window(shipped):
    D, data = shipped
    kw = dict(n_samples=12, seed=0, n_steps=6, keep_bits=True, dataset=data)
    base = sp.clocks(D, **kw)
    quiet = sp.clocks(D, fwd_hooks=ZERO_HEADS, sigma_window=(1e-5, 1e-4), **kw)   # below σ_min: never evaluated
    assert np.array_equal(quiet.bits.values, base.bits.values) and np.array_equal(quiet.state.values, base.state.values)
    full = sp.clocks(D, fwd_hooks=ZERO_HEADS, **kw)                                # sigma_window None: every σ
    ref = _always_hooked(D, lambda: sp.clocks(D, **kw))
    assert np.array_equal(full.bits.values, ref.bits.values)
    middle = sp.clocks(D, fwd_hooks=ZERO_HEADS, sigma_window=(0.2, 2.0), **kw)
    assert not np.array_equal(middle.bits.values, base.bits.values)
    assert not np.array_equal(middle.bits.values, full.bits.values)


def test_refusals_before_any_work(shipped, tmp_path):
    D, data = shipped
    with pytest.raises(ConfigError, match="needs fwd_hooks"):
        sp.clocks(D, n_samples=4, sigma_window=(0.1, 1.0), dataset=data)
    with pytest.raises(ConfigError, match="store cannot identify"):
        sp.clocks({36000: D}, n_samples=4, fwd_hooks=ZERO_HEADS, out=str(tmp_path / "c.zarr"), dataset=data)
    with pytest.raises(ConfigError, match="lo <= hi"):
        sp.basins(D, auto_plane(data, data.rule, seed=0), res=4, fwd_hooks=ZERO_HEADS, sigma_window=(2.0, 1.0),
                  dataset=data)
    with pytest.raises(ConfigError, match="fwd_hooks is"):
        sp.clocks(D, n_samples=4, fwd_hooks=[("blocks.0.attn.hook_z",)], dataset=data)
    assert not (tmp_path / "c.zarr").exists()
