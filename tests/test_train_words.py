"""What `scoreprobe train` says (issue 34, items 9–11): geometry errors that blame the failing setting and name
the fix, --shape refused where it does not apply, the default first checkpoint, -q, progress without a terminal."""
import pytest

from scoreprobe.errors import ConfigError
from test_sources import _cli

TINY = ["--n-train", "8", "--n-heldout", "8", "--hidden-size", "16", "--depth", "1", "--num-heads", "2",
        "--batch-size", "4", "--device", "cpu", "--threads", "1"]


def test_a_patch_that_does_not_tile_the_image_is_blamed_with_its_fix_and_cost(tmp_path, capsys):
    """4x9 at patch 2: the error was 'hidden_size 64 must be divisible by num_heads 4, and the 4x9 image by
    patch_size 2' (num_heads was fine); now it names patch_size alone, the fix and what it costs."""
    code, out, err = _cli(["train", tmp_path / "run", "--shape", "4x9", "--layout", "contiguous",
                           "--hidden-size", "64", "--num-heads", "4", "--total-steps", "2"], capsys)
    line = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert code == 2 and len(line) == 1, err
    assert "patch_size 2 does not tile the 4x9 image (9 is not a multiple of 2)" in line[0]
    assert "--patch-size 1" in line[0] and "36 tokens instead of about 9" in line[0]
    assert "num_heads" not in line[0] and "hidden_size" not in line[0]
    assert not (tmp_path / "run").exists()


def test_heads_that_do_not_divide_the_width_are_blamed_alone():
    from scoreprobe.data.rules import Parity
    from scoreprobe.models.build import check_arch, model_arch
    from scoreprobe.training.config import TrainConfig
    arch = model_arch(TrainConfig(hidden_size=48, depth=1, num_heads=5), Parity(2, (6, 6)))
    with pytest.raises(ConfigError, match=r"num_heads 5 does not divide hidden_size 48: choose num_heads among "
                                          r"1, 2, 3, 4, 6, 8, 12, 16") as e:
        check_arch("dit", arch, ConfigError)
    assert "patch" not in str(e.value)


def test_shape_is_refused_for_latin_squares_not_ignored(tmp_path, capsys):
    code, out, err = _cli(["train", tmp_path / "run", "--rule", "latin", "--shape", "6x6", "--total-steps", "2",
                           *TINY], capsys)
    assert code == 2 and "--shape applies to parity, exactk and rowk; a latin grid is --n N" in err, err
    assert not (tmp_path / "run").exists()


def test_the_default_first_checkpoint_comes_from_the_length_and_batch(tmp_path):
    """Issue 34, item 10: with first_checkpoint 1 a 3000-step run put 3 of its 8 checkpoints at steps 1, 4, 14."""
    import json
    from scoreprobe.training.config import TrainConfig, auto_first_checkpoint
    from scoreprobe.training.config import checkpoint_steps
    from scoreprobe.training.run_dir import check_run_dir, init_run_dir
    assert auto_first_checkpoint(36000, 96) == 500             # the shipped series' own first checkpoint
    assert auto_first_checkpoint(3000, 128) == 42 and auto_first_checkpoint(10**6, 128) == 375
    assert auto_first_checkpoint(20, 128) == 1
    assert checkpoint_steps(3000, 8, 1)[1:4] == [1, 4, 14]        # the old default, as the issue measured
    cfg = TrainConfig(total_steps=3000, n_checkpoints=8, n_train=8, n_heldout=8, batch_size=128)
    init_run_dir(cfg, tmp_path / "run")
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["config"]["first_checkpoint"] == 42 and meta["checkpoint_steps"][:2] == [0, 42]
    assert meta["checkpoint_steps"] == checkpoint_steps(3000, 8, 42) and meta["checkpoint_steps"][-1] == 3000
    assert check_run_dir(cfg, tmp_path / "run")                 # a rerun without the option resumes it
    old = tmp_path / "old"                                      # a run made when the default was 1
    init_run_dir(TrainConfig(total_steps=3000, n_checkpoints=8, n_train=8, n_heldout=8, first_checkpoint=1), old)
    assert check_run_dir(cfg, old) and json.loads((old / "run.json").read_text())["checkpoint_steps"][1] == 1
    with pytest.raises(ConfigError, match="first_checkpoint: 1 in the run, 7 now"):
        check_run_dir(TrainConfig(total_steps=3000, n_checkpoints=8, n_train=8, n_heldout=8, first_checkpoint=7), old)


def test_quiet_train_prints_nothing_but_warnings(tmp_path, capsys):
    """`-q` silenced the progress but not train's header and 'done:' line (issue 34, item 11)."""
    args = ["train", tmp_path / "run", "--layout", "contiguous", "--total-steps", "3", "--n-checkpoints", "2", *TINY]
    code, out, err = _cli(["-q", *args], capsys)
    assert code == 0 and out == "", out
    assert [ln for ln in err.splitlines() if not ln.startswith("warning:")] == [], err
    code, out, err = _cli(["train", tmp_path / "loud", *args[2:]], capsys)   # without -q: both lines
    assert code == 0 and out.startswith("training dit on") and f"done: {tmp_path / 'loud'}" in out


def test_training_without_a_terminal_writes_a_line_at_least_every_interval(tmp_path, capsys, monkeypatch):
    """Between checkpoints a batch job's log got nothing for minutes; now a line comes at least every
    progress.LINE_EVERY seconds (30; here 0, so every step between the two checkpoints writes one)."""
    import scoreprobe.progress as progress
    from scoreprobe.training.config import TrainConfig
    from scoreprobe.training.train import train_run
    monkeypatch.setattr(progress, "LINE_EVERY", 0.0)
    cfg = TrainConfig(total_steps=6, n_checkpoints=2, first_checkpoint=6, n_train=8, n_heldout=8, hidden_size=16,
                      depth=1, num_heads=2, batch_size=4)
    train_run(cfg, tmp_path / "run")                                   # stderr captured: not a terminal
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("train: ")]
    assert [ln.split(",")[0] for ln in lines] == [f"train: step {n}/6" for n in range(1, 6)] + \
        ["train: step 6/6 (checkpoint 2 of 2)"]
    assert all("left" in ln for ln in lines[:-1])
    monkeypatch.setattr(progress, "LINE_EVERY", 30.0)                  # the default: only the checkpoint here
    train_run(TrainConfig(**{**cfg.to_dict(), "seed": 1}), tmp_path / "run2")
    assert len([ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("train: ")]) == 1
