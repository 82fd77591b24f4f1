"""--denoiser's denoisers are called through GuardedDenoiser (issue 33, section 5): copies of x and σ (an
in-place change of x cannot reach the integrator), checked outputs, a per-call timeout; a module keeps
its weights identity through the wrapper."""
import time

import pytest
import torch

from scoreprobe.data.datasets import make_dataset
from scoreprobe.data.rules import Parity
from scoreprobe.errors import ConfigError
from scoreprobe.loading.usercode import DenoiserSeries, GuardedDenoiser
from scoreprobe.ode import integrate
from scoreprobe.sweep import identity

DATA = make_dataset(Parity(2, shape=(2, 4)), 4, 4, seed=0)


def mutating(x, sigma):
    """0.5·x, computed by doubling its input in place (powers of two: exact)."""
    x.mul_(2.0)
    return 0.25 * x


def halved(x, sigma):
    return 0.5 * x


@pytest.mark.parametrize("solver", ["heun", "adaptive"])
def test_an_in_place_change_of_x_cannot_reach_the_integrator(solver):
    x0 = 2.0 * torch.randn(16, 8, generator=torch.Generator().manual_seed(0))
    want = integrate(halved, x0.clone(), 2.0, n_steps=6, solver=solver)
    got = integrate(GuardedDenoiser(mutating, 0, "user.py:make"), x0.clone(), 2.0, n_steps=6, solver=solver)
    assert torch.equal(got, want)
    bare = integrate(mutating, x0.clone(), 2.0, n_steps=6, solver=solver)
    assert not torch.allclose(bare, want)               # unguarded, the change corrupts the integration


def test_a_module_keeps_its_weights_identity_and_is_fingerprinted_through_the_wrapper():
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh())
    series = DenoiserSeries(lambda: {0: lambda x, s: net(x), 5: net.__call__}, DATA, "user.py:make")
    mod = DenoiserSeries(lambda: {3: _Net(net)}, DATA, "user.py:make").denoiser(3)
    assert isinstance(mod, GuardedDenoiser) and mod.__wrapped__.training is False        # put in eval mode
    ident = identity.model_identity(mod, 8)
    assert ident["weights"] == identity.weights_digest(mod.__wrapped__) and "outputs" in ident
    assert "weights" not in identity.model_identity(series.denoiser(0), 8)                # a function: fingerprint


class _Net(torch.nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, sigma):
        return self.net(x)


def test_the_timeout_bounds_a_call_and_lets_a_quick_one_pass():
    def slow(x, sigma):
        time.sleep(0.05)
        return torch.tanh(x)
    x, s = torch.zeros(2, 8), torch.ones(2)
    assert torch.equal(GuardedDenoiser(slow, 0, "u.py:m", timeout=5.0)(x, s), torch.zeros(2, 8))
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=r"u.py:m: the denoiser of step 7 took more than 0.2 s"):
        GuardedDenoiser(lambda x, s: time.sleep(30), 7, "u.py:m", timeout=0.2)(x, s)
    assert time.perf_counter() - t0 < 2
    assert torch.equal(GuardedDenoiser(slow, 0, "u.py:m", timeout=0.2)(x, s), torch.zeros(2, 8))   # alarm cleared
