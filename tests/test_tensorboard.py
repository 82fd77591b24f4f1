"""training/tensorboard.py: TensorBoard event files written from the documented formats, read back."""
import json
import math
import struct

import numpy as np
import pytest

import scoreprobe as sp
from scoreprobe.cli import main
from scoreprobe.errors import ConfigError, DataError
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.training.tensorboard import crc32c, event, export_tb, frame, masked_crc, read_events, records
from scoreprobe.training.trainlog import bucket_tag


def test_crc32c_matches_the_rfc_3720_check_values():
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(bytes(32)) == 0x8A9136AA                  # RFC 3720 B.4: 32 bytes of zeros
    assert crc32c(b"\xff" * 32) == 0x62A8AB43               # 32 bytes of ones
    assert crc32c(bytes(range(32))) == 0x46DD794E           # incrementing
    c = crc32c(b"abc")
    assert masked_crc(b"abc") == (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def test_event_bytes_follow_the_protobuf_wire_format():
    """Event{wall_time: 1.5, step: 300, summary{value{tag: "a", simple_value: 0.25}}}, encoded by hand."""
    want = (b"\x09" + struct.pack("<d", 1.5) + b"\x10" + bytes([0xAC, 0x02])
            + b"\x2a\x0a" + b"\x0a\x08" + b"\x0a\x01a" + b"\x15" + struct.pack("<f", 0.25))
    assert event(1.5, 300, {"a": 0.25}) == want
    rec = frame(want)
    assert rec[:8] == struct.pack("<Q", len(want)) and records(rec) == [want]
    with pytest.raises(DataError, match="checksum"):
        records(rec[:-1] + bytes([rec[-1] ^ 1]))


def test_export_writes_training_log_and_clocks_that_read_back(tmp_path):
    from scoreprobe.training.train import TrainConfig, train_run
    cfg = TrainConfig(rule={"name": "parity", "G": 2, "shape": [4, 4], "layout": "random", "seed": 0}, n_train=16,
                      n_heldout=16, hidden_size=32, depth=1, num_heads=2, batch_size=16, total_steps=10,
                      n_checkpoints=3, log_every=5, resume_every=7)
    run = train_run(cfg, tmp_path / "run", progress=False)
    rule = sp.Parity(2, shape=(3, 4))
    data = sp.make_dataset(rule, 12, 12, seed=0)
    store = tmp_path / "clk.zarr"
    ds = sp.clocks({0: RuleDenoiser(rule), 50: EmpiricalDenoiser(data.train)}, dataset=data, rule=rule,
                   n_samples=64, out=store, progress=False)
    files = export_tb([run, store], tmp_path / "tb")
    assert [f.parent.name for f in files] == ["run", "clk.zarr"] and all("tfevents" in f.name for f in files)
    events = read_events(files[0])
    assert events[0][2] == {"file_version": "brain.Event:2"}
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    assert [e[1] for e in events[1:]] == [r["step"] for r in log]
    for (_, _, got), rec in zip(events[1:], log):
        assert got["train/loss"] == pytest.approx(rec["loss"], rel=1e-6)      # float32 in the file
        assert got["heldout/loss"] == pytest.approx(rec["heldout"]["loss"], rel=1e-6)
        for k, v in rec["loss_by_sigma"].items():
            assert math.isnan(got[f"train/loss_by_sigma/{bucket_tag(k)}"]) if v is None else \
                got[f"train/loss_by_sigma/{bucket_tag(k)}"] == pytest.approx(v, rel=1e-6)
    clk = read_events(files[1])
    curves = [e for e in clk[1:] if "clocks/rule_acc" in e[2]]
    assert [e[1] for e in curves] == [0, 50]
    np.testing.assert_allclose([e[2]["clocks/mem_ratio"] for e in curves], ds["mem_ratio"].values,
                               rtol=1e-6)
    tau = [e for e in clk if "tau/tau_mem" in e[2]][0]
    assert tau[1] == 50 and tau[2]["tau/tau_mem"] == pytest.approx(ds.attrs["tau_mem"], rel=1e-6)
    main(["export-tb", str(run), "--logdir", str(tmp_path / "tb2")])
    assert len(list((tmp_path / "tb2" / "run").glob("events.out.tfevents.*"))) == 1


def test_bad_items_are_refused_before_anything_is_written(tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(ConfigError, match="neither"):
        export_tb([tmp_path / "plain"], tmp_path / "tb")
    assert not (tmp_path / "tb").exists()
