"""Live TensorBoard events read back (issue 78 item 4): the tags, the Custom Scalars layout (a margin chart per curve:
value, lower and upper tags), wall times that increase from one measurement to the next, and each measurement's
sample grid decoded from its PNG equal to the grid of that step's bits. `train_run(..., tensorboard_samples=N)`
measures every checkpoint into the same event file as the losses, leaving the training itself bit for bit as it was.
Read with our TFRecord reader (CRCs checked) and tensorboardX's protobuf classes."""
import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe.oracles import EmpiricalDenoiser
from scoreprobe.training.live import CURVES, LiveBoard, sample_grid
from scoreprobe.training.monitor import live_monitor
from scoreprobe.training.tensorboard import records

event_pb2 = pytest.importorskip("tensorboardX.proto.event_pb2")
layout_pb2 = pytest.importorskip("tensorboardX.proto.layout_pb2")
Image = pytest.importorskip("PIL.Image")


def _read(folder):
    """[(wall_time, step, tag, value)] of every event file under `folder`, in file order; value: a float, the
    decoded image (H, W) uint8, or the Layout for the custom-scalars config."""
    out = []
    for path in sorted(Path(folder).rglob("events.out.tfevents.*")):
        for data in records(path.read_bytes()):
            e = event_pb2.Event.FromString(data)
            for v in e.summary.value:
                if v.HasField("image"):
                    val = np.asarray(Image.open(io.BytesIO(v.image.encoded_image_string)))
                elif v.tag == "custom_scalars__config__":
                    val = layout_pb2.Layout.FromString(v.tensor.string_val[0])
                else:
                    val = v.simple_value
                out.append((e.wall_time, e.step, v.tag, val))
    return out


def _check_layout(events):
    (layout,) = [v for _, _, t, v in events if t == "custom_scalars__config__"]
    charts = {c.title: c for cat in layout.category for c in cat.chart}
    for c in CURVES:
        s = charts[c].margin.series[0]
        assert (s.value, s.lower, s.upper) == (f"clocks/{c}", f"clocks/{c}_lo", f"clocks/{c}_hi")


def test_monitor_events_read_back(tmp_path):
    rule = sp.Parity(2, shape=(3, 4))
    data = sp.make_dataset(rule, 12, 12, seed=0)
    board = LiveBoard(tmp_path / "tb")
    mon = sp.Monitor(data, steps=[0, 5, 9], n_samples=20, n_steps=4, sampler="heun", keep_bits=True, n_boot=0,
                     tensorboard=board)                                     # a LiveBoard given: written to as it is
    parts = {}
    for step in range(10):
        board.log_record({"step": step, "loss": 1.0 / (step + 1)})
        part = mon(step, EmpiricalDenoiser(data.train))
        if part is not None:
            parts[step] = part
    mon.close()
    ev = _read(tmp_path / "tb")
    assert len(list((tmp_path / "tb").glob("events.out.tfevents.*"))) == 1   # losses and clocks: one file
    _check_layout(ev)
    walls = [w for w, *_ in ev]
    assert walls == sorted(walls)                                            # in file order
    rule_acc = [(w, s) for w, s, t, _ in ev if t == "clocks/rule_acc"]
    assert [s for _, s in rule_acc] == [0, 5, 9] and rule_acc[0][0] < rule_acc[1][0] < rule_acc[2][0]
    losses = [w for w, _, t, _ in ev if t == "train/loss"]
    assert len(losses) == 10 and len(set(losses)) == 10                     # a wall time per event, as it was made
    images = [(s, v) for _, s, t, v in ev if t == "samples"]
    assert [s for s, _ in images] == [0, 5, 9]
    for step, img in images:                                                 # the grid of that step's first 16 samples
        want = sample_grid(parts[step]["bits"].values.reshape(20, -1), rule.image_shape)
        assert img.shape == want.shape + (3,) and img.dtype == np.uint8                   # tensorboardX's grey RGB
        assert all(np.array_equal(img[..., c], want) for c in range(3)), step


def test_tensorboard_samples_needs_a_board(tmp_path):
    from click.testing import CliRunner
    from scoreprobe.cli.app import cli
    with pytest.raises(sp.ConfigError, match="needs tensorboard="):
        live_monitor(None, tmp_path, [0], None, 5)
    assert live_monitor(None, tmp_path, [0], None, 0) is None
    r = CliRunner().invoke(cli, ["train", str(tmp_path / "run"), "--layout", "contiguous", "--tensorboard-samples", "5"])
    assert r.exit_code == 2 and "--tensorboard-samples" in r.output and not (tmp_path / "run").exists()


@pytest.mark.slow          # trains two tiny runs (about 6 s cold: imports, the first training and sampling steps)
def test_training_measures_each_checkpoint_live_and_trains_the_same(tmp_path):
    from scoreprobe.training.train import TrainConfig, train_run
    cfg = TrainConfig(rule={"name": "parity", "G": 2, "shape": [4, 4], "layout": "random", "seed": 0}, n_train=16,
                      n_heldout=16, hidden_size=16, depth=1, num_heads=2, batch_size=8, total_steps=6,
                      n_checkpoints=2, log_every=2, resume_every=7)
    with_tb = train_run(cfg, tmp_path / "a", progress=False, tensorboard=tmp_path / "tb", tensorboard_samples=20)
    plain = train_run(cfg, tmp_path / "b", progress=False)
    for ck in sorted((plain / "ckpt").iterdir()):                           # the monitor leaves training untouched
        a, b = torch.load(with_tb / "ckpt" / ck.name), torch.load(ck)
        assert all(torch.equal(a["ema"][k], b["ema"][k]) for k in b["ema"]), ck.name
    steps = json.loads((plain / "run.json").read_text())["checkpoint_steps"]
    ev = _read(tmp_path / "tb")
    _check_layout(ev)
    assert [s for _, s, t, _ in ev if t == "samples"] == steps
    assert [s for _, s, t, _ in ev if t == "clocks/rule_acc"] == steps
    assert [s for _, s, t, _ in ev if t == "train/loss"] == [2, 4, 6]
    walls = [w for w, *_ in ev]
    assert walls == sorted(walls)
