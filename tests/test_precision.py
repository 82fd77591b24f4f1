"""autocast="bf16"/"fp16": the network runs under torch.autocast, the rest of a probe does not."""
import json

import pytest
import torch

import scoreprobe as sp
from scoreprobe.errors import ConfigError
from scoreprobe.oracles import RuleDenoiser
from scoreprobe.probes.basins import basins
from scoreprobe.stats.clocks import clocks
from scoreprobe.probes.field import score_field
from scoreprobe.data.rules import Parity
from scoreprobe.data.datasets import make_dataset
class Recorder:
    """The rule oracle, recording whether each call ran under CPU autocast and in which dtype."""
    def __init__(self, rule):
        self.inner, self.seen = RuleDenoiser(rule), []

    def __call__(self, x, sigma):
        self.seen.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"), x.dtype))
        return self.inner(x, sigma)


@pytest.fixture(scope="module")
def small():
    rule = Parity(G=3, shape=(3, 4), layout="random", seed=2)
    return rule, make_dataset(rule, 16, 16, seed=0)


def test_the_network_runs_under_autocast_and_the_ode_in_float32(small):
    rule, data = small
    plane = sp.auto_plane(data, rule)
    for run in (lambda D, a: basins({0: D}, plane, 1.0, res=4, n_steps=3, dataset=data, rule=rule, autocast=a),
                lambda D, a: score_field({0: D}, plane, [0.5], res=4, autocast=a),
                lambda D, a: clocks({0: D}, n_samples=4, n_steps=3, dataset=data, rule=rule, autocast=a)):
        on, off = Recorder(rule), Recorder(rule)
        ds, plain = run(on, "bf16"), run(off, None)
        assert on.seen and all(s == (True, torch.bfloat16, torch.float32) for s in on.seen)
        assert off.seen and not any(enabled for enabled, _, _ in off.seen)
        assert json.loads(ds.attrs["scoreprobe_config"])["autocast"] == "bf16"
        assert "autocast" not in json.loads(plain.attrs["scoreprobe_config"])   # float32 stores are as before


def test_bad_autocast_is_refused(small):
    rule, data = small
    with pytest.raises(ConfigError, match="autocast must be one of bf16, fp16"):
        basins(RuleDenoiser(rule), sp.auto_plane(data, rule), 1.0, res=4, dataset=data, rule=rule, autocast="fp8")


def test_a_float32_store_is_not_extended_in_bf16(small, tmp_path):
    rule, data = small
    plane, out = sp.auto_plane(data, rule), tmp_path / "b.zarr"
    basins({0: RuleDenoiser(rule)}, plane, 1.0, res=4, n_steps=3, dataset=data, rule=rule, out=out, progress=False)
    with pytest.raises(Exception, match="config keys differ: autocast"):
        basins({0: RuleDenoiser(rule), 1: RuleDenoiser(rule)}, plane, 1.0, res=4, n_steps=3, dataset=data,
               rule=rule, out=out, progress=False, autocast="bf16")


def _agreement(device, steps):
    s = sp.load_series()
    plane = sp.auto_plane(s.dataset, s.rule)
    kw = dict(sigma_start=1.0, res=16, steps=steps, device=device, progress=False)
    a, b = basins(s, plane, **kw), basins(s, plane, autocast="bf16", **kw)
    return float((a.endpoint_index == b.endpoint_index).mean())


def test_bf16_basins_of_the_shipped_network_agree_with_float32():
    """Measured on CPU at the checkpoint where the rule is learned: every endpoint the same here."""
    assert _agreement("cpu", [2368]) >= 0.99


@pytest.mark.gpu
def test_bf16_basins_agree_with_float32_on_cuda():
    assert _agreement("cuda", [1088, 2368, 36000]) >= 0.995
