"""plot_circuits draws one panel per kind and σ: opposite signs across σ are never averaged away."""
import numpy as np
import pytest
import xarray as xr

from scoreprobe.errors import ConfigError
from scoreprobe.viz.circuits import plot_circuits


def _ds(rule_values):
    steps, sites = [500, 2000, 9000], ["blocks.0", "blocks.1"]
    arr = np.broadcast_to(np.asarray(rule_values, float)[None, :, None], (3, len(rule_values), 2)).copy()
    return xr.Dataset({"rule_effect": (("step", "sigma", "site"), arr)},
                      coords={"step": steps, "sigma": [0.3, 1.5][:len(rule_values)], "site": sites})


def _meshes(fig):
    return [c for ax in fig.axes for c in ax.collections if getattr(c, "get_array", lambda: None)() is not None]


def test_signs_per_sigma_are_kept():
    fig = plot_circuits(_ds([1.0, -1.0]), kinds=("rule",))
    vals = sorted(float(np.ma.getdata(m.get_array()).mean()) for m in _meshes(fig))
    assert -1.0 in vals and 1.0 in vals                               # the mean over σ would be 0


def test_an_undefined_sigma_is_said_not_drawn():
    fig = plot_circuits(_ds([1.0, np.nan]), kinds=("rule",))
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert any("undefined at every checkpoint" in t for t in texts)
    with pytest.raises(ConfigError, match="no checkpoint"):
        plot_circuits(_ds([np.nan, np.nan]), kinds=("rule",))
