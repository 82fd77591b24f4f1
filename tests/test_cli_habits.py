"""CLI habits (issue 20, item 5): -q/-v after the subcommand, CLI options in messages, a bad path
reported before the heavy imports, a warning before a figure or an animation is replaced."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from scoreprobe.cli import cli_phrasing, global_flags_first
from scoreprobe.data.datasets import make_dataset
from scoreprobe.data.rules import Parity
from test_sources import _cli, _sd

ROOT = Path(__file__).resolve().parents[1]


def test_quiet_and_verbose_are_accepted_after_the_subcommand(capsys):
    assert global_flags_first(["clocks", "RUN", "-q"]) == ["-q", "clocks", "RUN"]
    assert global_flags_first(["info", "-vv", "x"]) == ["-vv", "info", "x"]
    assert global_flags_first(["clocks", "--", "-q"]) == ["clocks", "--", "-q"]   # after --: an argument
    before, after = (_cli(argv, capsys) for argv in (["-q", "info"], ["info", "-q"]))
    assert before[0] == after[0] == 0 and before[1] == after[1] and "rule:" in after[1]


@pytest.mark.parametrize("api, cli", [
    ("data.npz stores no rule; pass rule=", "data.npz stores no rule; pass --rule"),
    ("Pass schedule=... (and num_timesteps=...) to state it",
     "Pass --set schedule=... (and --set num_timesteps=...) to state it"),
    ("pass ema='auto' or ema=False to use them", "pass --set ema=auto or --set ema=false to use them"),
    ("pass image_shape=(C, H, W)", "pass --set image_shape=C,H,W"),
    ("drop sigma_data, or pass parameterization=... if you know better",
     "drop sigma_data, or pass --set parameterization=... if you know better"),
    ("trust=True / --trust; image_shape=(1, 6, 6)", "trust=True / --trust; image_shape=(1, 6, 6)"),   # no hint: unchanged
])
def test_api_hints_name_cli_options(api, cli):
    assert cli_phrasing(api) == cli


def test_a_dataset_without_its_rule_asks_for_the_rule_option(tmp_path, capsys):
    torch.save(_sd(0), tmp_path / "sd.pt")
    ds = make_dataset(Parity(2, shape=(6, 6)), 20, 10, seed=0)
    np.savez(tmp_path / "bits.npz", train=ds.train, heldout=ds.heldout)   # no rule stored
    code, out, err = _cli(["clocks", tmp_path / "sd.pt", "--dataset", tmp_path / "bits.npz", "--out", tmp_path / "c.zarr",
                           "--set", "num_heads=6"], capsys)
    assert code == 2 and "stores no rule; pass --rule" in err and "rule=" not in err, err


@pytest.mark.parametrize("argv", [["clocks", "/no/such/run"], ["basins", "/no/such/*.pt"],
                                  ["dsm", "checkpoints/parity-default/ckpt/step_0000000.pt", "--dataset", "/no/data.npz"],
                                  ["info", "/no/such/file.pt"]])
def test_a_bad_path_is_reported_before_torch_is_imported(argv):
    code = ("import sys\nfrom scoreprobe.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    print('exit', e.code, 'torch' in sys.modules, 'matplotlib' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.stdout.strip() == "exit 2 False False", r.stdout + r.stderr
    assert r.stderr.startswith("error: no ") and r.stderr.count("\n") == 1, r.stderr


def test_replacing_a_figure_or_an_animation_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["basins", "--steps", "0,500", "--res", "3", "--n-steps", "2", "--device", "cpu"]
    code, out, err = _cli(args, capsys)
    assert code == 0 and (tmp_path / "basins.gif").is_file() and "will be replaced" not in err, err
    code, out, err = _cli(args, capsys)
    assert code == 0 and "warning: --animate basins.gif exists and will be replaced" in err, err
    code, out, err = _cli(["animate", "basins.zarr", "--out", "basins.gif"], capsys)
    assert code == 0 and "warning: --out basins.gif exists and will be replaced" in err, err
