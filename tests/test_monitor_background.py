"""Monitor(background=True) (issue 59): the measurement runs on a copy of the model on a worker thread,
and gives the same store, curves and τ as the foreground monitor, even when the loop changes the model's
weights in place right after the call."""
import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe.data.datasets import make_dataset
from scoreprobe.data.rules import Parity
from scoreprobe.errors import ConfigError
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.training import monitor as monitor_mod
from scoreprobe.training.monitor import Monitor


class Blend(torch.nn.Module):
    """w·memorizer + (1 − w)·rule oracle, with w a parameter the "loop" moves in place."""

    def __init__(self, rule, train):
        super().__init__()
        self.rule_D, self.mem_D = RuleDenoiser(rule), EmpiricalDenoiser(train)
        self.w = torch.nn.Parameter(torch.zeros(()))
        self.dim = rule.n_bits

    def forward(self, x, sigma):
        return self.w * self.mem_D(x, sigma) + (1 - self.w) * self.rule_D(x, sigma)


@pytest.fixture(scope="module")
def setting():
    rule = Parity(2, shape=(2, 4))
    return rule, make_dataset(rule, n_train=6, n_heldout=4, seed=0)


def _loop(monitor, model, steps=(0, 10, 20, 30)):
    """Each step: the monitor, then an in-place update of the weights (as an optimizer step)."""
    for step in range(steps[-1] + 1):
        monitor(step, model)
        with torch.no_grad():
            model.w.add_(1.0 / steps[-1])


def test_background_equals_foreground_while_the_loop_moves_the_weights(setting, tmp_path):
    rule, data = setting
    fg = Monitor(data, rule, every=10, out=tmp_path / "fg.zarr", n_samples=60)
    bg = Monitor(data, rule, every=10, out=tmp_path / "bg.zarr", n_samples=60, background=True)
    _loop(fg, Blend(rule, data.train))
    _loop(bg, Blend(rule, data.train))
    assert bg.steps == fg.steps == [0, 10, 20, 30]
    got, want = bg.result(), fg.result()
    np.testing.assert_array_equal(got["state"].values, want["state"].values)
    np.testing.assert_array_equal(got["mem_ratio"].values, want["mem_ratio"].values)
    assert want["mem_ratio"].values[-1] > want["mem_ratio"].values[0]       # the weights did move
    np.testing.assert_equal(got.attrs["tau_mem"], want.attrs["tau_mem"])
    stored = sp.compare([bg.out])
    np.testing.assert_equal(float(stored["tau_mem"].values[0]), want.attrs["tau_mem"])


def test_a_due_call_returns_at_once_and_wait_commits(setting, monkeypatch):
    rule, data = setting
    started, release = [], __import__("threading").Event()
    real = monitor_mod.clock_step

    def slow(*a, **k):
        started.append(1)
        release.wait(10)
        return real(*a, **k)
    monkeypatch.setattr(monitor_mod, "clock_step", slow)
    mon = Monitor(data, rule, every=10, n_samples=20, background=True)
    model = Blend(rule, data.train)
    assert mon(0, model) is None and mon._pending                            # not committed yet
    assert mon.parts == {}
    release.set()
    assert mon.wait().steps == [0] and not mon._pending
    assert model.training and model.w.requires_grad                         # the loop's model untouched


def test_pending_measurements_are_bounded(setting, monkeypatch):
    rule, data = setting
    monkeypatch.setattr(monitor_mod, "MAX_PENDING", 1)
    mon = Monitor(data, rule, every=1, n_samples=20, background=True)
    model = Blend(rule, data.train)
    for step in range(3):
        mon(step, model)
        assert len(mon._pending) <= 1
    assert mon.steps == [0, 1, 2]


def test_a_model_that_cannot_be_copied_is_a_config_error(setting):
    rule, data = setting
    import threading

    class Locked:
        """A denoiser holding a lock (not copyable)."""
        dim = rule.n_bits

        def __init__(self):
            self.lock, self.D = threading.Lock(), RuleDenoiser(rule)

        def __call__(self, x, sigma):
            with self.lock:
                return self.D(x, sigma)
    mon = Monitor(data, rule, every=10, n_samples=20, background=True)
    with pytest.raises(ConfigError, match="cannot be copied"):
        mon(0, Locked())
