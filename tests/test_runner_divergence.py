"""A run whose training blew up is refused before its clocks (scoreprobe.studies.runner.divergence): the 2.83M DiT
at N = 120, seed 2, went from loss 0.105 to 1.1, 14 and 214 within 300 steps and settled at 1.0 (a network that
predicts nothing), which an export would have read as a run that never memorizes."""
import json
import types

import pytest

from scoreprobe.errors import CheckpointError
from scoreprobe.studies import runner


def _log(path, losses):
    path.mkdir(parents=True, exist_ok=True)
    (path / "train_log.jsonl").write_text("".join(json.dumps({"step": 100 * i, "loss": v}) + "\n"
                                                  for i, v in enumerate(losses)))


def test_a_blow_up_is_found_at_its_first_line(tmp_path):
    _log(tmp_path, [1.0, 0.5, 0.3] + [0.11] * 12 + [1.12, 14.2, 213.7, 1.0, 1.0])
    assert runner.divergence(tmp_path) == {"step": 1500, "loss": 1.12, "median": 0.11}
    _log(tmp_path, [0.2] * 12 + [float("nan")])
    assert runner.divergence(tmp_path)["step"] == 1200


def test_ordinary_training_is_not_flagged(tmp_path):
    falling = [1.0 / (1 + i) for i in range(40)]
    _log(tmp_path, falling[:20] + [falling[19] * 5] + falling[20:])      # a 5× bump: noisy, not a blow-up
    assert runner.divergence(tmp_path) is None
    assert runner.divergence(tmp_path / "absent") is None


def _diverged(tmp_path, monkeypatch, finished):
    """(args, run) of a run whose log blew up at step 1200; `finished`: whether its training is complete."""
    _log(tmp_path / "f" / "r", [0.11] * 12 + [5.0])
    monkeypatch.setattr(runner, "finished", lambda path, cfg: finished)
    args = types.SimpleNamespace(out=tmp_path, train_only=False, n_steps=None, device="cpu")
    return args, types.SimpleNamespace(name="r", folder="f", cfg=None)


def test_run_one_refuses_a_diverged_run_before_its_clocks(tmp_path, monkeypatch):
    args, run = _diverged(tmp_path, monkeypatch, finished=True)
    monkeypatch.setattr(runner, "measured_clocks", lambda *a, **k: pytest.fail("clocks of a diverged run"))
    with pytest.raises(CheckpointError, match="diverged at step 1200"):
        runner.run_one(args, run)


def test_an_unfinished_run_that_already_diverged_is_not_trained_further(tmp_path, monkeypatch):
    args, run = _diverged(tmp_path, monkeypatch, finished=False)
    monkeypatch.setattr(runner, "train_run", lambda *a, **k: pytest.fail("resumed a diverged run"))
    with pytest.raises(CheckpointError, match="diverged at step 1200.*not trained further"):
        runner.run_one(args, run)
