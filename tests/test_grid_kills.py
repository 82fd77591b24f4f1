"""Issue 76 items 1-2: a Grid run killed at any point is resumed or restarted by the next `run(grid)`, never stuck.

A process runs a tiny grid and is killed for real (SIGKILL, tests/kill_grid.py) after run.json and before the first
checkpoint, in the middle of writing a checkpoint, or in the middle of writing the export; each kill leaves the
trainer's lock file of a dead process where it held it. The next run(grid) here completes the run and its export
equals, array for array, the export of the same grid run without a kill (training resumes bitwise on the CPU). Before
the fix the first kill left the run stuck: every rerun failed with "has no checkpoints yet". Also: a finished run
whose intermediate checkpoint was deleted is trained again and exported with every planned step (it was exported
with one step fewer), and a damaged run.json or training log fails the run with a message naming the file. The
runs take seconds each (slow); the default suite checks the same states without training (the last four tests)."""
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scoreprobe.errors import CheckpointError, DataError
from scoreprobe.studies.divergence import _losses
from scoreprobe.studies.execute import run
from scoreprobe.studies.export import read_export
from scoreprobe.studies.queue import finished
from scoreprobe.training.config import ckpt_path
from scoreprobe.training.guard import LOCK_NAME
from scoreprobe.training.run_dir import init_run_dir
from tests.kill_grid import POINTS, SIZES, grid

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The grid run once without a kill: its export."""
    g = grid(tmp_path_factory.mktemp("ref"))
    assert run(g, **SIZES).done == ["N2"]
    return read_export(g.exports / "N2.npz")


def killed(out, point):
    """Run the grid at `out` in another process, killed (SIGKILL) at `point`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "tests.kill_grid", str(out), point], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -9, proc.stderr[-2000:]      # really killed there, not ended otherwise


def same_export(a, b):
    assert a["config"] == b["config"]
    np.testing.assert_array_equal(a["ds"].step.values, b["ds"].step.values)
    np.testing.assert_array_equal(a["ds"].state.values, b["ds"].state.values)


def _resumed(tmp_path, point, reference, **kw):
    killed(tmp_path, point)
    g = grid(tmp_path)
    run_dir = g.run_dir(g.runs[0])
    if point != "mid_export":   # the trainer was killed holding its lock: the file of a dead process is left
        assert (run_dir / LOCK_NAME).exists()
    summary = run(g, **SIZES, **kw)
    assert summary.done == ["N2"] and summary.complete
    same_export(read_export(g.exports / "N2.npz"), reference)
    assert not (run_dir / LOCK_NAME).exists() and not list(run_dir.rglob("*.tmp"))


@pytest.mark.slow
def test_a_run_left_before_its_first_checkpoint_is_not_stuck(tmp_path):
    """The stuck state of the issue, made here (the real kill is the slow test below): run.json and dataset.npz
    written, no checkpoint, and the lock file a dead trainer leaves (its flock gone with the process). Before the fix
    every rerun failed with "has no checkpoints yet"."""
    g = grid(tmp_path)
    run_dir = g.run_dir(g.runs[0])
    init_run_dir(g.runs[0].cfg, run_dir)                    # the test process trains with one thread (conftest)
    (run_dir / LOCK_NAME).write_text('{"pid": 999999999, "host": "gone", "since": "2026-12-07T00:00:00Z"}')
    assert run(g, **SIZES).done == ["N2"]
    np.testing.assert_array_equal(read_export(g.exports / "N2.npz")["ds"].step.values, [0, 10, 30])
    assert not (run_dir / LOCK_NAME).exists()


@pytest.mark.slow
@pytest.mark.parametrize("point", POINTS)
def test_a_run_killed_anywhere_is_resumed(tmp_path, reference, point):
    """SIGKILL for real (~25 s each: the killed process imports torch)."""
    _resumed(tmp_path, point, reference)


@pytest.mark.slow
def test_a_run_killed_before_its_first_checkpoint_resumes_on_dask(tmp_path, reference):
    pytest.importorskip("distributed")
    _resumed(tmp_path, "after_run_json", reference, scheduler=("local", 1))


@pytest.mark.slow
def test_a_deleted_checkpoint_is_trained_again_not_exported_without(tmp_path, caplog):
    g = grid(tmp_path)
    assert run(g, **SIZES).done == ["N2"]
    reference = read_export(g.exports / "N2.npz")
    (g.exports / "N2.npz").unlink()
    (g.run_dir(g.runs[0]) / "ckpt" / "step_0000010.pt").unlink()
    with caplog.at_level(logging.WARNING, logger="grid"):
        assert run(g, **SIZES).done == ["N2"]
    same_export(read_export(g.exports / "N2.npz"), reference)          # steps 0, 10, 30: none left out
    assert "the checkpoints of steps 10 are missing (deleted?) from a finished run: training again" in caplog.text


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["run.json", "train_log.jsonl"])
def test_a_damaged_run_file_fails_its_run_naming_the_file(tmp_path, caplog, damage):
    """A truncated run.json, a log line that is no record (not the last one, which a kill may cut short)."""
    g = grid(tmp_path)
    assert run(g, **SIZES).done == ["N2"]
    (g.exports / "N2.npz").unlink()
    path = g.run_dir(g.runs[0]) / damage
    text = path.read_text()
    if damage == "run.json":
        path.write_text(text[:40])
        named = f"{path} is not readable JSON"
    else:
        path.write_text(text + '{"step": 2, "lo\n{"step": 3, "loss": 0.5}\n')
        named = f"{path}, line {len(text.splitlines()) + 1}: not a training-log record"
    with caplog.at_level(logging.ERROR, logger="grid"):
        summary = run(g, **SIZES)
    assert summary.failed == ["N2"]
    (error,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert named in error and not error.startswith("N2 failed: JSONDecodeError")


# ---------------------------------------------------------------------------------------------
# The same states, read without training (default suite): what decides that a run is done
# ---------------------------------------------------------------------------------------------

@pytest.fixture
def started(tmp_path):
    """(grid, run, run directory) of a run directory as `init_run_dir` leaves it: run.json, dataset.npz, no checkpoint."""
    g = grid(tmp_path)
    r = g.runs[0]
    init_run_dir(r.cfg, g.run_dir(r))
    return g, r, g.run_dir(r)


def test_run_json_without_checkpoints_is_not_finished(started):
    """Before the fix finished() raised CheckpointError "has no checkpoints yet": every rerun failed."""
    _, r, run_dir = started
    assert finished(run_dir, r.cfg) is False


def test_a_missing_planned_checkpoint_is_not_finished(started, caplog):
    """finished() reads the planned steps of run.json (0, 10, 30): the last written, one missing -> not finished,
    logged; every one written -> finished (files that only exist are enough for it: the trainer checks them)."""
    _, r, run_dir = started
    for step in (0, 30):
        ckpt_path(run_dir, step).write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="grid"):
        assert finished(run_dir, r.cfg) is False
    assert "the checkpoints of steps 10 are missing (deleted?) from a finished run" in caplog.text
    ckpt_path(run_dir, 10).write_bytes(b"")
    assert finished(run_dir, r.cfg) is True
    (run_dir / "resume.pt").write_bytes(b"")          # killed after the last checkpoint, before the state moved
    assert finished(run_dir, r.cfg) is False


def test_a_truncated_run_json_is_named(started):
    _, r, run_dir = started
    (run_dir / "run.json").write_text((run_dir / "run.json").read_text()[:40])
    with pytest.raises(CheckpointError, match=rf"{run_dir / 'run.json'} is not readable JSON"):
        finished(run_dir, r.cfg)


def test_a_bad_log_line_is_named_and_a_cut_last_line_is_left_out(tmp_path):
    log = tmp_path / "train_log.jsonl"
    good = "".join(json.dumps({"step": s, "loss": 1.0 / s}) + "\n" for s in (1, 2, 3))
    log.write_text(good + '{"step": 4, "lo')                       # a kill cut the last line short
    assert [s for s, _ in _losses(tmp_path)] == [1, 2, 3]
    log.write_text(good + '{"step": 4, "lo\n' + good)
    with pytest.raises(DataError, match=rf"{log}, line 4: not a training-log record"):
        _losses(tmp_path)
    log.write_text(good + '{"step": 4, "loss": "x"}\n')
    with pytest.raises(DataError, match="line 4"):
        _losses(tmp_path)
