"""Live TensorBoard events (issue 78 item 4): `train_run(..., tensorboard=)` / `scoreprobe train --tensorboard` and
`sp.Monitor(..., tensorboard=)` write through tensorboardX while they run: each logged record's losses, each measured
step's curves with their Wilson interval ends (margin charts), τ and a grid of samples, at real wall times. Read back
with tensorboardX's own protobuf classes over our TFRecord reader (CRCs checked)."""
import json
from pathlib import Path

import numpy as np
import pytest

import scoreprobe as sp
from scoreprobe.oracles import EmpiricalDenoiser
from scoreprobe.probes.wilson import wilson_interval
from scoreprobe.training.tensorboard import records

event_pb2 = pytest.importorskip("tensorboardX.proto.event_pb2")


def _events(folder):
    """{tag: [(wall_time, step, value or 'image')]} of every event file under `folder`, in file order."""
    out = {}
    for path in sorted(Path(folder).rglob("events.out.tfevents.*")):
        for data in records(path.read_bytes()):
            e = event_pb2.Event.FromString(data)
            for v in e.summary.value:
                out.setdefault(v.tag, []).append((e.wall_time, e.step, "image" if v.HasField("image") else
                                                  v.simple_value))
    return out


@pytest.mark.slow          # 0.4 s after other tests, 8 s alone on a busy machine (imports, first training step)
def test_training_writes_its_log_as_live_events(tmp_path):
    from scoreprobe.training.train import TrainConfig, train_run
    cfg = TrainConfig(rule={"name": "parity", "G": 2, "shape": [4, 4], "layout": "random", "seed": 0}, n_train=16,
                      n_heldout=16, hidden_size=16, depth=1, num_heads=2, batch_size=8, total_steps=6,
                      n_checkpoints=2, log_every=2, resume_every=7)
    run = train_run(cfg, tmp_path / "run", progress=False, tensorboard=tmp_path / "tb")
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    ev = _events(tmp_path / "tb")
    assert [e[1] for e in ev["train/loss"]] == [r["step"] for r in log] == [2, 4, 6]
    np.testing.assert_allclose([e[2] for e in ev["train/loss"]], [r["loss"] for r in log], rtol=1e-6)
    np.testing.assert_allclose([e[2] for e in ev["heldout/loss"]], [r["heldout"]["loss"] for r in log], rtol=1e-6)
    walls = [e[0] for e in ev["train/loss"]]
    assert walls == sorted(walls) and len(set(walls)) == len(walls)          # each written when it was logged


def test_a_monitor_writes_curves_with_intervals_tau_and_samples(tmp_path):
    rule = sp.Parity(2, shape=(3, 4))
    data = sp.make_dataset(rule, 12, 12, seed=0)
    mon = sp.Monitor(data, every=10, n_samples=40, n_steps=4, sampler="heun", keep_bits=True, n_boot=0,
                     tensorboard=str(tmp_path / "tb"))
    for step in (0, 10, 20):
        mon(step, EmpiricalDenoiser(data.train))
    mon.close()
    ev = _events(tmp_path / "tb")
    assert [e[1] for e in ev["clocks/rule_acc"]] == [0, 10, 20]
    y = mon.result()["rule_acc"].values
    lo, hi = wilson_interval(y, 40, 1.959963984540054)
    for tag, ref in (("clocks/rule_acc", y), ("clocks/rule_acc_lo", lo), ("clocks/rule_acc_hi", hi)):
        np.testing.assert_allclose([e[2] for e in ev[tag]], ref, rtol=1e-5, atol=1e-7)
    taus = ev["tau/tau_mem"]                                                # the memorizer copies from step 0
    assert taus and all(np.isfinite(e[2]) for e in taus) and set(e[1] for e in taus) <= {0, 10, 20}
    assert [e[1:] for e in ev["samples"]] == [(0, "image"), (10, "image"), (20, "image")]


def test_without_tensorboardx_asking_for_live_events_is_one_clear_error(tmp_path, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    rule = sp.Parity(2, shape=(3, 4))
    with pytest.raises(sp.ConfigError, match="pip install 'scoreprobe\\[tensorboard\\]'"):
        sp.Monitor(sp.make_dataset(rule, 12, 12, seed=0), every=10, tensorboard=str(tmp_path / "tb"))
