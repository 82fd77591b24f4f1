"""The adaptive engine as sampler from σ_max (issue 59): `Sampler("adaptive")` runs the engine at
`defaults.SAMPLE_ENGINE` (or at given settings), records them, and draws what the exact oracles say."""
import json

import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe import store
from scoreprobe.data.datasets import make_dataset
from scoreprobe.data.rules import Parity
from scoreprobe.defaults import SAMPLE_ENGINE
from scoreprobe.errors import ConfigError, StoreError
from scoreprobe.ode import integrate, randn_per_sample
from scoreprobe.ode.engine import EngineSettings
from scoreprobe.ode.samplers import Sampler, as_sampler, sample
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser

F64 = torch.float64


def test_the_adaptive_sampler_runs_and_records_the_sampling_engine():
    spec = Sampler("adaptive")
    assert spec.engine == EngineSettings(**SAMPLE_ENGINE)
    assert spec.config() == {"name": "adaptive", "engine": EngineSettings(**SAMPLE_ENGINE).spec()}
    assert Sampler(**spec.config()) == spec                                     # a store's record rebuilds it
    own = as_sampler(EngineSettings(rtol=0.01))
    assert own.name == "adaptive" and own.config()["engine"]["rtol"] == 0.01 and own != spec
    with pytest.raises(ConfigError, match="adaptive sampler only"):
        Sampler("heun", engine={"rtol": 0.01})


def test_adaptive_samples_are_the_engine_from_sigma_max_bit_for_bit():
    rule = Parity(3)
    D = RuleDenoiser(rule)
    x0 = 80.0 * randn_per_sample(4, np.arange(64), rule.n_bits)                 # float32, as `sample` draws
    want = integrate(D, x0, 80.0, solver=EngineSettings(**SAMPLE_ENGINE))
    assert torch.equal(sample(D, 64, 4, sampler="adaptive"), want)
    other = EngineSettings(**{**SAMPLE_ENGINE, "rtol": 1e-4, "atol": 1e-4})
    assert torch.equal(sample(D, 64, 4, sampler=other), integrate(D, x0, 80.0, solver=other))


@pytest.mark.parametrize("which", ["rule", "empirical"])
def test_the_sampling_engine_draws_the_oracles_support_with_fewer_evaluations(which):
    """Every sample of the rule oracle is valid and every sample of the memorizer a training item, as with
    32 Heun steps (63 evaluations), at well under half the evaluations per sample."""
    rule = Parity(3)
    train = rule.sample(32, seed=1)
    D = RuleDenoiser(rule) if which == "rule" else EmpiricalDenoiser(train)
    x0 = 80.0 * randn_per_sample(0, np.arange(300), rule.n_bits, dtype=F64)
    r = integrate(D, x0, 80.0, solver=Sampler("adaptive").engine, info=True)
    bits = (r.x > 0).to(torch.uint8).numpy()
    if which == "rule":
        assert rule.is_valid(bits).all()
    else:
        assert sp.BitIndex(train).lookup(bits).min() >= 0
    assert r.nfe.mean() < 63 / 2


def test_a_clocks_store_of_other_sampling_settings_is_refused(tmp_path):
    rule = Parity(2, shape=(2, 4))
    data = make_dataset(rule, n_train=6, n_heldout=4, seed=0)
    mapping = {0: RuleDenoiser(rule), 10: EmpiricalDenoiser(data.train)}
    out = tmp_path / "clocks.zarr"
    loose = EngineSettings(**{**SAMPLE_ENGINE, "rtol": 0.05})
    sp.clocks({0: mapping[0]}, n_samples=24, dataset=data, rule=rule, out=out, progress=False, sampler=loose)
    assert json.loads(store.open_store(out).attrs["scoreprobe_config"])["sampler"]["engine"]["rtol"] == 0.05
    with pytest.raises(StoreError, match="config keys differ"):
        sp.clocks(mapping, n_samples=24, dataset=data, rule=rule, out=out, progress=False, sampler="adaptive")


def test_the_monitor_with_the_adaptive_sampler_equals_clocks(tmp_path):
    """`Monitor(..., sampler="adaptive")` measures what `clocks(..., sampler="adaptive")` does at the same steps."""
    from scoreprobe.training.monitor import Monitor
    rule = Parity(2, shape=(2, 4))
    data = make_dataset(rule, n_train=6, n_heldout=4, seed=0)
    mapping = {0: RuleDenoiser(rule), 10: EmpiricalDenoiser(data.train), 20: EmpiricalDenoiser(data.train[:3])}
    monitor = Monitor(data, rule, every=10, out=tmp_path / "m.zarr", n_samples=40, sampler="adaptive")
    for step, D in mapping.items():
        monitor(step, D)
    got = monitor.result()
    want = sp.clocks(mapping, dataset=data, rule=rule, n_samples=40, progress=False, sampler="adaptive")
    np.testing.assert_array_equal(got["state"].values, want["state"].values)
    for key in ("rule_acc", "mem_ratio"):
        np.testing.assert_array_equal(got[key].values, want[key].values)
    assert json.loads(got.attrs["scoreprobe_config"])["sampler"] == Sampler("adaptive").config()


def test_the_adaptive_sampler_describes_its_settings():
    text = Sampler("adaptive").describe()
    assert "adaptive engine" in text and "rtol 0.02" in text and "sigma knee 1" in text and "safety 0.7" in text
    assert "sigma knee" not in Sampler("adaptive", engine=EngineSettings()).describe()
