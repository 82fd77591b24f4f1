"""training/monitor.py: the clocks inside any training loop equal `clocks` on the same checkpoints; resume; the
loop's random streams and modes are left alone; the Lightning adapter (with a stand-in Lightning module)."""
import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe.errors import ConfigError, StoreError
from scoreprobe.training.monitor import Monitor, lightning_callback

DOC = Path(__file__).resolve().parents[1] / "docs" / "monitor.md"


def _doc_loop():
    return re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)


@pytest.fixture(scope="module")
def doc_run(tmp_path_factory):
    """The 30-line loop of docs/monitor.md, run with fewer steps and samples."""
    code = _doc_loop()
    assert len(code.strip().splitlines()) <= 40
    code, n = re.subn(r"^TOTAL, EVERY, N_SAMPLES = .*$", "TOTAL, EVERY, N_SAMPLES = 2500, 500, 300", code, flags=re.M)
    assert n == 1
    code = code.replace('"monitor.zarr"', repr(str(tmp_path_factory.mktemp("mon") / "monitor.zarr")))
    env = {}
    exec(compile(code.replace("print(", "summary = ("), str(DOC), "exec"), env)   # noqa: S102  (our own doc)
    return env


@pytest.mark.slow   # shares a 15-30 s module fixture: -m slow, for the default suite's 480-s budget
def test_monitor_gives_the_taus_of_clocks_on_the_same_checkpoints(doc_run):
    monitor, checkpoints, data, rule = (doc_run[k] for k in ("monitor", "checkpoints", "data", "rule"))
    assert monitor.steps == [0, 500, 1000, 1500, 2000, 2500] == sorted(checkpoints)
    got = monitor.result()
    assert monitor.spec == sp.Sampler("adaptive")   # the monitor's default sampler: clocks with it read the same
    want = sp.clocks(checkpoints, dataset=data, rule=rule, n_samples=300, sampler="adaptive", progress=False)
    np.testing.assert_array_equal(got["state"].values, want["state"].values)
    for key in ("rule_acc", "mem_ratio", "novel_valid"):
        np.testing.assert_array_equal(got[key].values, want[key].values)
    for key in ("tau_rule", "tau_novel", "tau_mem", "window_log10_width", "window_open"):
        np.testing.assert_equal(got.attrs[key], want.attrs[key])
        np.testing.assert_equal(got[key].values, want[key].values)
    np.testing.assert_equal(got.attrs["tau_mem_ci"], want.attrs["tau_mem_ci"])
    assert np.isfinite(got.attrs["tau_mem"])   # the loop memorizes within its 2500 steps: a τ that was read
    # the store holds the same, and compare reads it as a clocks store
    stored = sp.compare([monitor.out])
    assert float(stored["tau_mem"].values[0]) == want.attrs["tau_mem"]
    assert doc_run["summary"].loc["tau_mem"].iloc[0] == want.attrs["tau_mem"]   # the printed table (transposed)


@pytest.mark.slow   # shares a 15-30 s module fixture: -m slow, for the default suite's 480-s budget
def test_a_restarted_loop_skips_measured_steps_and_refuses_another_model(doc_run):
    monitor, checkpoints, data, rule = (doc_run[k] for k in ("monitor", "checkpoints", "data", "rule"))
    again = Monitor(data, rule, every=500, out=monitor.out, n_samples=300)
    assert again.steps == monitor.steps
    np.testing.assert_equal(again.result().attrs["tau_mem"], monitor.result().attrs["tau_mem"])
    part = again(1000, checkpoints[1000])            # the same model: the stored step, nothing recomputed
    np.testing.assert_array_equal(part["state"].values, monitor.parts[1000]["state"].values)
    with pytest.raises(StoreError, match="another model"):
        again(1000, checkpoints[2000])
    with pytest.raises(StoreError):                  # other settings into the same store
        Monitor(data, rule, every=500, out=monitor.out, n_samples=100)
    assert again(1001, checkpoints[2000]) is None    # not due


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(12, 12)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x, sigma):
        return torch.tanh(self.drop(self.lin(x)))


def _loop(monitor, steps=6):
    torch.manual_seed(3)
    net = _Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    modes = []
    for step in range(steps):
        if monitor is not None:
            monitor(step, net)
        modes.append(net.training)
        x = torch.randn(8, 12)
        loss = ((net(x, torch.ones(8)) - x.sign()) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net, modes


def test_the_loop_is_unchanged_by_the_monitor():
    rule = sp.Parity(2, shape=(3, 4))
    data = sp.make_dataset(rule, 8, 8, seed=0)
    plain, _ = _loop(None)
    watched, modes = _loop(Monitor(data, rule, every=2, n_samples=20, n_steps=4))
    assert all(modes)                                # back in training mode after each measurement
    for a, b in zip(plain.state_dict().values(), watched.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_bad_settings_are_config_errors():
    rule = sp.Parity(2, shape=(3, 4))
    data = sp.make_dataset(rule, 8, 8, seed=0)
    for kw in ({"every": 0}, {"every": 1.5}, {"n_samples": 0}, {"seed": -1}):
        with pytest.raises(ConfigError):
            Monitor(data, rule, **kw)
    with pytest.raises(ConfigError, match="training data"):
        Monitor(np.zeros((4, 12), np.uint8), rule)
    with pytest.raises(ConfigError, match="no step"):
        Monitor(data, rule).result()
    with pytest.raises(ConfigError, match=">= 0"):
        Monitor(data, rule)(-1, _Net())
    for bad in ([], [-1, 5], [1.5], ["x"]):
        with pytest.raises(ConfigError, match="steps="):
            Monitor(data, rule, steps=bad)


def test_explicit_steps_replace_every():
    rule = sp.Parity(2, shape=(3, 4))
    data = sp.make_dataset(rule, 8, 8, seed=0)
    monitor = Monitor(data, rule, steps=[0, 3, 17], n_samples=10, n_steps=4)
    net = _Net()
    measured = [s for s in range(20) if monitor(s, net) is not None]
    assert measured == [0, 3, 17] == monitor.steps


def test_lightning_adapter_calls_the_monitor_with_the_global_step(monkeypatch):
    try:
        import lightning  # noqa: F401
        have_lightning = True
    except ImportError:
        have_lightning = False
    if not have_lightning:   # a stand-in module with Lightning's Callback base: the adapter's own logic
        fake = types.ModuleType("lightning.pytorch")
        fake.Callback = type("Callback", (), {})
        monkeypatch.setitem(sys.modules, "lightning", types.ModuleType("lightning"))
        monkeypatch.setitem(sys.modules, "lightning.pytorch", fake)
    calls = []
    cb = lightning_callback(lambda step, model: calls.append((step, model)), use_ema="ema")
    trainer, module = types.SimpleNamespace(global_step=40), types.SimpleNamespace(ema="the ema model")
    cb.on_train_batch_end(trainer, module, None, None, 0)
    assert calls == [(40, "the ema model")]


def test_lightning_adapter_without_lightning_is_a_config_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "lightning", None)
    monkeypatch.setitem(sys.modules, "lightning.pytorch", None)
    monkeypatch.setitem(sys.modules, "pytorch_lightning", None)
    with pytest.raises(ConfigError, match="Lightning"):
        lightning_callback(lambda s, m: None)


def test_overwrite_starts_afresh_in_an_existing_store(tmp_path):
    rule = sp.Parity(2, shape=(3, 4))
    data = sp.make_dataset(rule, 8, 8, seed=0)
    out = tmp_path / "m.zarr"
    first = Monitor(data, rule, every=1, out=out, n_samples=10, n_steps=4)
    first(0, sp.RuleDenoiser(rule))
    first(1, sp.RuleDenoiser(rule))
    assert sp.written_steps(out) == [0, 1]
    fresh = Monitor(data, rule, every=1, out=out, n_samples=10, n_steps=4, overwrite=True)
    assert fresh.steps == [] and sp.written_steps(out) == [0, 1]        # the old store stays until the first write
    fresh(5, sp.EmpiricalDenoiser(data.train))
    assert sp.written_steps(out) == [5] and fresh.steps == [5]
    assert float(sp.open_store(out)["mem_ratio"].values[0]) == 1.0


def test_the_default_schedule_is_log_spaced_and_needs_no_total():
    from scoreprobe.training.monitor import log_steps
    rule = sp.Parity(G=2, shape=(4, 4))
    monitor = Monitor(sp.make_dataset(rule, n_train=8, n_heldout=8, seed=0))
    due = [s for s in range(36001) if monitor.due(s)]
    assert due[:8] == [0, 100, 126, 158, 200, 251, 316, 398] and due[-1] == 31623 and len(due) == 27
    assert all(b / a < 1.27 for a, b in zip(due[1:], due[2:]))   # 10 per decade: ratio 10 ** 0.1 = 1.259
    assert "log-spaced" in repr(monitor) and monitor.spec == sp.Sampler("adaptive")
    assert sorted(log_steps(first=10, per_decade=1))[:4] == [0, 10, 100, 1000]
    assert Monitor(monitor.dataset, every=7).due(14) and not Monitor(monitor.dataset, every=7).due(100)
    with pytest.raises(ConfigError, match="not both"):
        Monitor(monitor.dataset, every=7, steps=[1])


def test_a_token_model_is_refused_under_the_default_sampler_with_the_setting_that_works():
    rule = sp.Parity(G=2, shape=(4, 4))

    class Tokens(torch.nn.Module):   # a GPT-like model: it samples itself
        def sample(self, n, seed):
            return np.zeros((n, 16), np.uint8)

    monitor = Monitor(sp.make_dataset(rule, n_train=8, n_heldout=8, seed=0), n_samples=4)
    with pytest.raises(ConfigError, match="sampler='heun'"):
        monitor(0, Tokens())
