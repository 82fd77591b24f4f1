"""Training loop: checkpoint schedule, run directory, loss goes down, bitwise resume."""
import json

import numpy as np
import pytest
import torch

from scoreprobe.training import train as train_mod
from scoreprobe.errors import ConfigError
from scoreprobe.training.train import TrainConfig, checkpoint_steps, ckpt_path, lr_at, train_run
from tests.kill import killed_at

RULE = {"name": "parity", "G": 2, "shape": [4, 4], "layout": "random", "seed": 0}


def tiny_cfg(**kw):
    base = dict(rule=RULE, n_train=16, n_heldout=16, hidden_size=32, depth=1, num_heads=2,
                batch_size=16, total_steps=30, n_checkpoints=5, log_every=5, resume_every=7)
    return TrainConfig(**{**base, **kw})


@pytest.mark.parametrize("total,n", [(1, 2), (10, 5), (100, 24), (20000, 24), (30, 40)])
def test_checkpoint_steps_are_unique_log_spaced_and_include_ends(total, n):
    steps = checkpoint_steps(total, n)
    assert steps[0] == 0 and steps[-1] == total
    assert steps == sorted(set(steps))
    assert len(steps) == min(n, total + 1)
    assert checkpoint_steps(total, n, first=min(5, total))[1] == min(5, total)
    if total >= 1000:  # log spacing: ratios between consecutive late steps are roughly constant
        r = np.diff(np.log(steps[-6:]))
        assert r.max() / r.min() < 1.5


def test_run_directory_layout_and_safe_loading(tmp_path):
    run = train_run(tiny_cfg(total_steps=12, n_checkpoints=4), tmp_path / "run", progress=False)
    meta = json.loads((run / "run.json").read_text())
    assert meta["checkpoint_steps"] == checkpoint_steps(12, 4)
    assert set(np.load(run / "dataset.npz")) >= {"train", "heldout"}
    for s in meta["checkpoint_steps"]:
        ck = torch.load(ckpt_path(run, s), weights_only=True)   # tensors and plain values only
        assert ck["step"] == s and "ema" in ck and "opt" not in ck
    assert not (run / "resume.pt").exists()
    assert (run / "train_log.jsonl").read_text().count("\n") >= 2


def test_training_lowers_the_dsm_loss(tmp_path):
    cfg = tiny_cfg(total_steps=300, n_checkpoints=3, log_every=50, lr=2e-3)
    run = train_run(cfg, tmp_path / "run", progress=False)
    losses = [json.loads(l)["loss"] for l in (run / "train_log.jsonl").read_text().splitlines()]
    assert losses[-1] < 0.8 * losses[0]


@pytest.mark.parametrize("schedule", ["constant", "cosine", "step"])
def test_resume_after_kill_equals_uninterrupted_run(tmp_path, monkeypatch, schedule):
    cfg = tiny_cfg(lr_schedule=schedule, warmup_steps=4, lr_min=2e-4, lr_drop_step=12)
    full = train_run(cfg, tmp_path / "full", progress=False)

    # simulated kill between resume points
    killed_at(monkeypatch, train_mod, "_train_step", 19, lambda: train_run(cfg, tmp_path / "killed", progress=False))
    assert (tmp_path / "killed" / "resume.pt").exists()
    resumed = train_run(cfg, tmp_path / "killed", progress=False)
    log_steps = lambda run: [json.loads(l)["step"] for l in (run / "train_log.jsonl").read_text().splitlines()]  # noqa: E731
    assert log_steps(resumed) == log_steps(full)   # no step logged twice after the resume
    # the same loss means too: the losses since the last log line travel in resume.pt
    assert (resumed / "train_log.jsonl").read_text() == (full / "train_log.jsonl").read_text()
    for s in checkpoint_steps(cfg.total_steps, cfg.n_checkpoints):
        a = torch.load(ckpt_path(full, s), weights_only=True)["ema"]
        b = torch.load(ckpt_path(resumed, s), weights_only=True)["ema"]
        for k in a:
            assert torch.equal(a[k], b[k]), (s, k)


def test_kill_before_the_first_resume_point_leaves_no_duplicate_log_lines(tmp_path, monkeypatch):
    """A run killed before its first resume.pt restarts from step 0: the log lines it wrote (and a
    last line the kill cut short) are dropped, so the finished log equals an uninterrupted one."""
    cfg = tiny_cfg(resume_every=1000)
    full = train_run(cfg, tmp_path / "full", progress=False)
    # after two log lines (log_every 5), before any resume point but step 0
    killed_at(monkeypatch, train_mod, "_train_step", 12, lambda: train_run(cfg, tmp_path / "killed", progress=False))
    log = tmp_path / "killed" / "train_log.jsonl"
    (tmp_path / "killed" / "resume.pt").unlink(missing_ok=True)   # as if killed before step 0's resume write
    log.write_text(log.read_text() + '{"step": 15, "lo')          # a line the kill cut short
    resumed = train_run(cfg, tmp_path / "killed", progress=False)
    assert (resumed / "train_log.jsonl").read_text() == (full / "train_log.jsonl").read_text()


def test_rerun_of_a_finished_run_changes_nothing(tmp_path):
    cfg = tiny_cfg(total_steps=6, n_checkpoints=3)
    run = train_run(cfg, tmp_path / "run", progress=False)
    before = {p.name: p.stat().st_mtime_ns for p in (run / "ckpt").iterdir()}
    train_run(cfg, run, progress=False)
    assert {p.name: p.stat().st_mtime_ns for p in (run / "ckpt").iterdir()} == before


def test_rerun_with_other_settings_is_refused(tmp_path):
    train_run(tiny_cfg(total_steps=3, n_checkpoints=2), tmp_path / "run", progress=False)
    with pytest.raises(ConfigError, match="different settings.*lr"):
        train_run(tiny_cfg(total_steps=3, n_checkpoints=2, lr=5e-4), tmp_path / "run", progress=False)


def test_lr_schedules_against_their_formulas():
    const = tiny_cfg(lr=1e-3, total_steps=100, warmup_steps=10)
    assert [lr_at(const, s) for s in (0, 4, 9, 10, 99)] == pytest.approx([1e-4, 5e-4, 1e-3, 1e-3, 1e-3])
    cos = tiny_cfg(lr=1e-3, lr_min=1e-5, lr_schedule="cosine", total_steps=110, warmup_steps=10)
    assert lr_at(cos, 9) == pytest.approx(1e-3)                       # end of warm-up
    assert lr_at(cos, 10) == pytest.approx(1e-3)                      # decay starts at the peak
    assert lr_at(cos, 60) == pytest.approx((1e-3 + 1e-5) / 2)         # half-way: the mean
    assert lr_at(cos, 110) == pytest.approx(1e-5)                     # lr_min at total_steps
    lrs = [lr_at(cos, s) for s in range(10, 111)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:]))                  # monotone decay
    step = tiny_cfg(lr=1e-3, lr_min=2e-4, lr_schedule="step", lr_drop_step=50, total_steps=100, warmup_steps=10)
    assert [lr_at(step, s) for s in (0, 9, 10, 49, 50, 99)] == pytest.approx([1e-4, 1e-3, 1e-3, 1e-3, 2e-4, 2e-4])


def test_run_json_from_before_a_setting_existed_still_resumes(tmp_path):
    cfg = tiny_cfg(total_steps=3, n_checkpoints=2)
    run = train_run(cfg, tmp_path / "run", progress=False)
    meta = json.loads((run / "run.json").read_text())
    for k in ("lr_schedule", "lr_min"):                              # as written by an older version
        del meta["config"][k]
    (run / "run.json").write_text(json.dumps(meta))
    train_run(cfg, run, progress=False)                               # same settings: accepted
    with pytest.raises(ConfigError, match="lr_schedule"):
        train_run(tiny_cfg(total_steps=3, n_checkpoints=2, lr_schedule="cosine"), run, progress=False)


@pytest.mark.parametrize("bad", [dict(model="vae"), dict(batch_size=0), dict(save_dtype="int8"),
                                 dict(ema_decay=1.0), dict(lr_schedule="linear"), dict(lr_min=1.0),
                                 dict(lr_schedule="step"), dict(lr_schedule="step", lr_drop_step=10**9)])
def test_bad_settings_raise_config_error(tmp_path, bad):
    with pytest.raises(ConfigError):
        train_run(tiny_cfg(**bad), tmp_path / "run", progress=False)


def test_float16_step_files_are_half_size(tmp_path):
    a = train_run(tiny_cfg(total_steps=2, n_checkpoints=2), tmp_path / "a", progress=False)
    b = train_run(tiny_cfg(total_steps=2, n_checkpoints=2, save_dtype="float16"), tmp_path / "b", progress=False)
    sa, sb = ckpt_path(a, 2).stat().st_size, ckpt_path(b, 2).stat().st_size
    assert sb < 0.6 * sa


def test_train_command_writes_a_run_and_refuses_bad_settings(tmp_path, capsys):
    from click.testing import CliRunner
    from scoreprobe.cli import cli, main
    threads = torch.get_num_threads()
    args = ["train", str(tmp_path / "run"), "--G", "2", "--layout", "offset", "--n-train", "16", "--n-heldout", "16",
            "--hidden-size", "32", "--depth", "1", "--num-heads", "2", "--batch-size", "8", "--total-steps", "6",
            "--n-checkpoints", "3", "--lr-schedule", "step", "--lr-drop-step", "3", "--lr-min", "1e-4",
            "--device", "cpu", "--threads", "1"]
    try:
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 0, r.output
        meta = json.loads((tmp_path / "run" / "run.json").read_text())
        assert meta["torch_threads"] == 1 and meta["config"]["lr_drop_step"] == 3
        assert meta["config"]["rule"]["layout"] == "offset" and meta["checkpoint_steps"][-1] == 6
        args[args.index("--lr-drop-step") + 1] = "6"                   # not before total_steps
        with pytest.raises(SystemExit) as e:
            main(args)
    finally:
        torch.set_num_threads(threads)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "lr_drop_step" in err and "Traceback" not in err


def test_progress_outside_a_terminal_is_one_line_per_checkpoint(tmp_path, capsys):
    cfg = tiny_cfg()
    train_run(cfg, tmp_path / "run")   # progress=None, stderr captured (not a terminal)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("train: ")]
    assert len(lines) == cfg.n_checkpoints - 1, lines   # step 0 is saved before any step is timed
    assert lines[-1].startswith(f"train: step {cfg.total_steps}/{cfg.total_steps} (checkpoint {cfg.n_checkpoints} of")
    assert "left" in lines[0] and "left" not in lines[-1]
    train_run(cfg, tmp_path / "quiet", progress=False)
    assert "train: " not in capsys.readouterr().err
