"""The engine's settings for sampling from σ_max (issue 59): the σ knee of the tolerance and the
controller's safety factor. Both default to the behaviour before them (off, 0.9), and stores' records
of the earlier settings do not change."""
import numpy as np
import pytest
import torch

from scoreprobe.data.rules import Parity
from scoreprobe.errors import ConfigError
from scoreprobe.ode import randn_per_sample
from scoreprobe.ode.engine import EngineSettings, _knee_step, solve
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser

F64 = torch.float64


def test_the_record_of_earlier_settings_is_unchanged():
    spec = EngineSettings().spec()
    assert "sigma_knee" not in spec and "safety" not in spec
    assert set(spec) == {"pair", "rtol", "atol", "decide_tol", "patience", "max_steps", "h0", "h_max"}
    on = EngineSettings(sigma_knee=1.0, safety=0.7).spec()
    assert on["sigma_knee"] == 1.0 and on["safety"] == 0.7
    assert EngineSettings.of(on) == EngineSettings(sigma_knee=1.0, safety=0.7)


@pytest.mark.parametrize("bad", [{"sigma_knee": -1.0}, {"sigma_knee": float("inf")}, {"safety": 0.0},
                                 {"safety": 1.5}, {"safety": float("nan")}])
def test_bad_values_are_refused(bad):
    with pytest.raises(ConfigError):
        EngineSettings(**bad)


@pytest.mark.parametrize("which", ["rule", "empirical"])
def test_the_knee_changes_nothing_below_it(which):
    """From σ_start <= σ_k every tolerance factor is 1: the same steps, endpoints and counts, bit for bit."""
    rule = Parity(3)
    D = RuleDenoiser(rule) if which == "rule" else EmpiricalDenoiser(rule.sample(32, seed=1))
    x0 = randn_per_sample(2, np.arange(40), 36, dtype=F64)                      # (40, 36) at σ = 1
    a, b = solve(D, x0, 1.0), solve(D, x0, 1.0, EngineSettings(sigma_knee=1.0))
    assert torch.equal(a.x, b.x)
    assert (a.nfe == b.nfe).all() and (a.rejected == b.rejected).all()
    assert np.array_equal(a.decided_sigma, b.decided_sigma)


def test_the_knee_step_shortens_only_a_step_into_tighter_tolerance():
    h = torch.tensor([-3.0, -0.5, -1.0], dtype=F64)
    start = torch.tensor([80.0, 80.0, 0.5], dtype=F64)
    end = torch.tensor([10.0, 10.0, 0.5], dtype=F64)
    out = _knee_step(h, start, end, 1.0, order=2)
    target = 80.0 * np.exp(-3.0)                                                 # 3.98: tolerance × 3.98 there, × 10 here
    assert out[0].item() == pytest.approx(-3.0 * (target / 10.0) ** (1 / 3))
    assert out[1].item() == -0.5                                                 # ends at 48.5: looser, not grown
    assert out[2].item() == -1.0                                                 # below the knee: unchanged


def _samples(D, settings, n=300):
    x0 = 80.0 * randn_per_sample(0, np.arange(n), 36, dtype=F64)
    return solve(D, x0, 80.0, settings)


def test_from_sigma_max_the_knee_and_safety_save_evaluations_and_keep_the_rule():
    """The rule oracle's flow from σ = 80 ends on valid images with the default engine; with the knee
    and a lower safety factor it still does, with fewer evaluations and fewer rejected steps."""
    rule = Parity(3)
    D = RuleDenoiser(rule)
    base = _samples(D, EngineSettings())
    fast = _samples(D, EngineSettings(sigma_knee=1.0, safety=0.7, h0=2.0))
    bits = lambda r: (r.x > 0).to(torch.uint8).numpy()
    assert rule.is_valid(bits(base)).all() and rule.is_valid(bits(fast)).all()
    assert fast.nfe.mean() < base.nfe.mean()
    assert fast.rejected.mean() <= base.rejected.mean()


def test_a_lower_safety_factor_rejects_fewer_steps():
    D = EmpiricalDenoiser(Parity(3).sample(32, seed=1))
    high = _samples(D, EngineSettings(safety=1.0, patience=0))
    low = _samples(D, EngineSettings(safety=0.5, patience=0))
    assert low.rejected.mean() < high.rejected.mean()
    assert low.accepted.mean() > high.accepted.mean()
