"""A study's run_all on CUDA trains its runs as stacked ensembles first (scoreprobe.studies.queue.train_stacked,
one per architecture and step count), then measures and exports each: here forced on the CPU with the
capacity_exponent smoke preset, whose 4 runs make 4 groups (2 sizes × 2 step counts)."""
import pytest
import logging

import torch

from analyses.capacity_exponent import grid as grid_mod
from scoreprobe.cli import study as study_cli
from scoreprobe.studies import runner
from scoreprobe.studies.presets import run_all
from scoreprobe.studies.queue import ensemble_groups
from scoreprobe.training.train import train_run


@pytest.mark.slow   # trains the capacity smoke preset as 4 stacked ensembles and one run again alone
def test_run_all_trains_stacked_then_exports(tmp_path, caplog):
    args = study_cli.parse(study_cli.parser("x", grid_mod.PRESETS), ["--smoke", "--out", str(tmp_path / "runs"),
                                                                      "--device", "cpu"], grid_mod.PRESETS)
    assert args.ensemble is False   # on the CPU a study trains one run per worker unless asked
    args.ensemble = True
    runs = grid_mod.plan("smoke")
    assert len(ensemble_groups([r.cfg for r in runs])) == 4
    done = []
    with caplog.at_level(logging.INFO):
        assert run_all(args, runs, study_cli.folder(grid_mod, args), done.append) is True
    assert sorted(done) == sorted(r.name for r in runs)
    assert "training 4 runs as 4 stacked ensembles" in caplog.text
    for r in runs:
        assert (grid_mod.export_folder(args.results, "smoke", r) / f"{r.name}.npz").is_file()
    run = runs[-1]   # the member trained in its ensemble equals train_run's run to float32 rounding (as in tests/test_ensemble.py)
    alone = train_run(run.cfg, tmp_path / "alone", progress=False)
    a = torch.load(alone / "ckpt" / f"step_{run.cfg.total_steps:07d}.pt", weights_only=False)
    b = torch.load(runner.run_dir(args, run) / "ckpt" / f"step_{run.cfg.total_steps:07d}.pt", weights_only=False)
    for k, v in a["ema"].items():
        torch.testing.assert_close(b["ema"][k], v, rtol=1e-3, atol=1e-4)


def test_an_export_names_a_device_other_than_the_cpu():
    assert runner.with_device({"N": 8}, "cpu") == {"N": 8}
