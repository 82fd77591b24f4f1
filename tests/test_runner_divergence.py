"""A run whose training blew up is refused before its clocks (scoreprobe.studies.divergence): the 2.83M DiT at
N = 120, seed 2, went from loss 0.105 to 1.1, 14 and 214 within 300 steps and settled at 1.0 (a network that predicts
nothing), which an export would have read as a run that never memorizes. A spike training recovers from (the 1.27M DiT
at N = 240, seed 1: 0.124 → 6.1 → 0.17, 0.15, …) is not a blow-up: the run is kept and its spike recorded."""
import json
import types

import pytest

from scoreprobe.errors import CheckpointError
from scoreprobe.studies import divergence as dv
from scoreprobe.studies import runner


def _log(path, losses):
    path.mkdir(parents=True, exist_ok=True)
    (path / "train_log.jsonl").write_text("".join(json.dumps({"step": 100 * i, "loss": v}) + "\n"
                                                  for i, v in enumerate(losses)))


def test_a_blow_up_is_found_at_its_first_line(tmp_path):
    _log(tmp_path, [1.0, 0.5, 0.3] + [0.11] * 12 + [1.12, 14.2, 213.7] + [1.0] * 8)
    assert dv.divergence(tmp_path) == {"step": 1500, "loss": 1.12, "median": 0.11, "after": 1.0, "back_at": None,
                                       "recovered": False}
    assert [s["step"] for s in dv.loss_spikes(tmp_path)] == [1500, 1600, 1700]
    assert dv.recovered_spikes(tmp_path) == []
    _log(tmp_path, [0.2] * 12 + [float("nan"), float("nan")])
    assert dv.divergence(tmp_path)["step"] == 1200     # a non-finite line after it counts as no recovery
    _log(tmp_path, [0.2] * 12 + [float("nan")])
    assert dv.divergence(tmp_path) == {"step": 1200, "loss": dv.divergence(tmp_path)["loss"], "median": 0.2,
                                       "after": None, "back_at": None, "recovered": None}   # the log ends at it


def test_a_spike_training_recovers_from_is_kept_and_recorded(tmp_path):
    """The shape of the 1.27M DiT's log at N = 240, seed 1 (steps 15 000-17 000, rounded)."""
    before = [0.13, 0.133, 0.131, 0.133, 0.127, 0.132, 0.133, 0.122, 0.125, 0.135, 0.124, 0.126, 0.124]
    after = [0.173, 0.151, 0.254, 0.148, 0.136, 0.157, 0.169, 0.139, 0.128, 0.133, 0.129]
    _log(tmp_path, before + [0.335, 6.12] + after)
    assert dv.divergence(tmp_path) is None
    (spike,) = dv.recovered_spikes(tmp_path)
    assert spike["step"] == 1400 and spike["loss"] == 6.12 and spike["after"] < dv.RECOVER * spike["median"]
    assert spike["back_at"] == 2400                          # the 10 lines after it: 1.2x the median before
    _log(tmp_path, before + [0.335, 6.12] + [0.7] * 10)     # the same spike, staying 5x up: not recovered
    assert dv.divergence(tmp_path)["step"] == 1400


def test_a_slow_recovery_is_a_recovery():
    """The 2.83M DiT's log at N = 240, seed 0 (steps 18 000-21 000, rounded): loss 0.14, then 259, and 3-4x its
    earlier level for 700 steps before it settles back: the first 10 lines after the spike are 2.2x up, later ones
    are not. Judged once training is done, it recovered; cut off inside the slow part, it has not yet."""
    import tempfile
    from pathlib import Path
    path = Path(tempfile.mkdtemp())
    before = [0.14, 0.143, 0.147, 0.147, 0.14, 0.14, 0.143, 0.142, 0.145, 0.14, 0.139, 0.136, 0.146, 0.142, 0.139]
    slow = [0.484, 258.6, 4.25, 0.537, 0.368, 0.433, 0.227, 0.408, 0.31, 0.25]
    _log(path, before + slow)
    assert dv.divergence(path)["step"] == 1600 and dv.divergence(path)["recovered"] is False
    _log(path, before + slow + [0.2, 0.17, 0.16, 0.155, 0.15, 0.15, 0.148, 0.15, 0.147, 0.146, 0.15, 0.145])
    assert dv.divergence(path) is None and dv.recovered_spikes(path)[0]["back_at"] == 2700


def test_ordinary_training_is_not_flagged(tmp_path):
    falling = [1.0 / (1 + i) for i in range(40)]
    _log(tmp_path, falling[:20] + [falling[19] * 5] + falling[20:])      # a 5× bump: noisy, not a blow-up
    assert dv.divergence(tmp_path) is None and dv.loss_spikes(tmp_path) == []
    assert dv.divergence(tmp_path / "absent") is None


def _diverged(tmp_path, monkeypatch, finished, tail=(5.0, 1.0, 1.0)):
    """(args, run) of a run whose log spiked at step 1200 (then `tail`); `finished`: whether its training is done."""
    _log(tmp_path / "f" / "r", [0.11] * 12 + list(tail))
    monkeypatch.setattr(runner, "finished", lambda path, cfg: finished)
    args = types.SimpleNamespace(out=tmp_path, train_only=False, n_steps=None, device="cpu")
    return args, types.SimpleNamespace(name="r", folder="f", cfg=None)


def test_run_one_refuses_a_diverged_run_before_its_clocks(tmp_path, monkeypatch):
    args, run = _diverged(tmp_path, monkeypatch, finished=True)
    monkeypatch.setattr(runner, "measured_clocks", lambda *a, **k: pytest.fail("clocks of a diverged run"))
    with pytest.raises(CheckpointError, match="diverged at step 1200"):
        runner.run_one(args, run)


def test_an_unfinished_run_is_resumed_and_judged_once_its_training_is_done(tmp_path, monkeypatch):
    """A spike in an unfinished log may still recover: the run resumes; its finished log decides."""
    for tail, match in (((5.0,), "nothing logged after it"), ((5.0, 1.0, 1.0), r"lowest 1\b")):
        args, run = _diverged(tmp_path, monkeypatch, finished=False, tail=tail)
        resumed = []
        monkeypatch.setattr(runner, "train_run", lambda *a, **k: resumed.append(1))
        with pytest.raises(CheckpointError, match=f"diverged at step 1200.*{match}.*not measured"):
            runner.run_one(args, run)
        assert resumed == [1]


def test_training_starts_at_the_first_loss_below_half(tmp_path):
    """The 2.83M DiT sits at ≈ 1 (an untrained network's loss) for up to 1,300 steps before it learns."""
    _log(tmp_path, [1.0, 0.99, 0.98, 0.7, 0.45, 0.2])
    assert dv.training_start(tmp_path) == 400 and dv.log_meta(tmp_path) == {"train_start": 400}
    _log(tmp_path, [1.0, 0.9, 0.98])          # never below 0.5: how close it came, and where it ended
    assert dv.training_start(tmp_path) is None and dv.log_meta(tmp_path) == {
        "train_start": None, "lowest_loss": {"step": 100, "loss": 0.9}, "last_loss": {"step": 200, "loss": 0.98}}
    assert dv.log_meta(tmp_path / "absent") == {}


def _export_and_run_dir(tmp_path):
    """A shipped export copied to tmp_path, and a run directory of the same run with a training log."""
    import shutil
    from pathlib import Path
    from scoreprobe.studies.export import read_export
    from tests.test_analyses import _analysis
    run = next(r for r in _analysis("capacity_exponent.grid").plan("cpu") if r.name == "w192d4-g2-n30-s0")
    export = tmp_path / "e.npz"
    shutil.copy(Path(__file__).resolve().parents[1] / "analyses/results/capacity_exponent_cpu" / f"{run.name}.npz", export)
    path = tmp_path / "out" / run.folder / run.name
    _log(path, [1.0] * 3 + [0.3] * 12 + [6.0] + [0.31] * 10)
    (path / "run.json").write_text(json.dumps({"config": read_export(export)["config"]}))
    return types.SimpleNamespace(out=tmp_path / "out"), run, export, path


def test_recording_the_log_in_an_export_keeps_every_other_field(tmp_path):
    import numpy as np
    from scoreprobe.studies.export import read_export
    args, run, export, path = _export_and_run_dir(tmp_path)
    before = dict(np.load(export))
    fields = runner.record_log_meta(args, run, export)
    assert fields["train_start"] == 300 and [s["step"] for s in fields["loss_spikes"]] == [1500]
    after = np.load(export)
    assert sorted(after.files) == sorted(before)
    assert all(np.array_equal(after[k], before[k], equal_nan=after[k].dtype.kind == "f") for k in before if k != "meta")
    assert read_export(export)["meta"]["train_start"] == 300 and read_export(export)["meta"]["size"] == "192x4"
    assert runner.record_log_meta(args, run, export) is None                 # recorded already: nothing to do


def test_another_runs_log_is_never_recorded(tmp_path):
    args, run, export, path = _export_and_run_dir(tmp_path)
    cfg = json.loads((path / "run.json").read_text())
    cfg["config"]["lr"] = 1e-3
    (path / "run.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="another TrainConfig"):
        runner.record_log_meta(args, run, export)
