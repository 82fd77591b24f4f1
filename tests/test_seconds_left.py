"""Plans and --hours count only what is left: runner.seconds_left reads the step of a resuming run directory's
resume.pt (recipes.run_seconds with `trained`), the plan line names the step it resumes at, and the scaling study's
plan counts its exported runs as done."""
import pytest

from analyses.capacity_exponent import grid as grid_mod
from scoreprobe.cli import study as study_cli
from scoreprobe.studies import presets, recipes, runner
from scoreprobe.training import train as train_mod
from tests.kill import killed_at


def _killed_run(tmp_path, monkeypatch, at):
    """The smoke preset's first run (30 steps, checkpoints 0, 5, 9, 17, 30) killed at training step `at`."""
    args = study_cli.parse(study_cli.parser("x", grid_mod.PRESETS), ["--smoke", "--out", str(tmp_path / "runs"),
                                                                      "--device", "cpu"], grid_mod.PRESETS)
    run = grid_mod.plan("smoke")[0]
    killed_at(monkeypatch, train_mod, "_train_step", at,
              lambda: train_mod.train_run(run.cfg, runner.run_dir(args, run), progress=False))
    return args, run


def test_seconds_left_counts_the_steps_after_resume_pt(tmp_path, monkeypatch):
    args, run = _killed_run(tmp_path, monkeypatch, at=13)       # last resume point: checkpoint step 9
    assert runner.trained_steps(args, run) == 9
    full, left = recipes.run_seconds(run, args.n_samples), runner.seconds_left(args, run)
    no_clocks = recipes.run_seconds(run, 0)                   # training only: steps / rate
    assert left == pytest.approx(full - no_clocks * 9 / run.steps, rel=1e-12)
    assert recipes.run_seconds(run, args.n_samples, run.steps + 5) == pytest.approx(full - no_clocks)   # never < clocks
    line = [ln for ln in presets.plan_lines([run], args, lambda r: tmp_path / "exports", str) if run.name in ln][0]
    assert "resumes at step 9" in line and f"~{left / 60:5.1f} min" in line


def test_a_run_without_a_readable_resume_pt_counts_whole(tmp_path, monkeypatch):
    args, run = _killed_run(tmp_path, monkeypatch, at=13)
    (runner.run_dir(args, run) / "resume.pt").write_bytes(b"not a training state")
    assert runner.trained_steps(args, run) == 0
    assert runner.seconds_left(args, run) == recipes.run_seconds(run, args.n_samples)
    (runner.run_dir(args, run) / "resume.pt").unlink()
    assert runner.trained_steps(args, run) == 0
    line = [ln for ln in presets.plan_lines([run], args, lambda r: tmp_path / "exports", str) if run.name in ln][0]
    assert "resumes" not in line


def test_the_scaling_plan_counts_its_shipped_exports_as_done():
    """analyses/scaling --plan printed the whole grid's hours (5.75 h at 2 jobs) with every run exported; now the
    first line is what is left, and the whole grid's cost is a line of its own."""
    from tests.test_analyses import _analysis
    run = _analysis("scaling.run")
    args = run.parse_args(["--device", "cpu", "--jobs", "2"])
    runs = _analysis("scaling.grid").plan("cpu", args.only)
    lines = run.plan_lines(runs, args)
    done = presets.exported(runs, lambda r: args.exports)
    assert lines[0].startswith(f"{len(runs)} runs, preset cpu ({len(done)} exported already), 2 at a time")
    assert len(done) == len(runs) and "estimated 0.00 h for the rest" in lines[0]   # all 51 ship: nothing left
    total = sum(recipes.run_seconds(r, args.n_samples) for r in runs) / 3600
    assert lines[1].startswith(f"  the whole grid: {sum(r.steps for r in runs)} training steps, {total:.1f} thread-hours")
    assert sum("exported" in ln for ln in lines[2:]) == len(done)


def test_an_export_of_a_resumed_run_says_where_its_training_time_starts(tmp_path, monkeypatch):
    """train_s of a run that resumed times only the steps after its resume.pt: the export's meta says from which
    step, and the runs tables print it beside the time."""
    from scoreprobe.studies.export import read_export
    from scoreprobe.studies.format import TRAIN_S
    args, run = _killed_run(tmp_path, monkeypatch, at=13)
    args.exports = tmp_path / "exports"
    args.exports.mkdir()
    runner.run_one(args, run)
    meta = read_export(args.exports / f"{run.name}.npz")["meta"]
    assert meta["train_s_from_step"] == 9
    row = {"train_s": 12.0, "steps": 30, "train_s_from_step": 9}
    assert TRAIN_S[1](row) == "12 (steps 9–30)" and TRAIN_S[1]({"train_s": 12.0, "steps": 30}) == "12"
