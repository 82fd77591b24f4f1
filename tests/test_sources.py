"""scoreprobe.loading.sources and the SOURCES of every analysis command (issue #13): run directories, checkpoint
files, globs, folders, steps files, data for files, --set / --trust — end to end on a bare
state_dict and on a facebookresearch/DiT-style dict."""
import argparse
import json
import warnings

import numpy as np
import pytest
import torch

from scoreprobe import store
from scoreprobe.loading.series import load_series
from scoreprobe.cli import main
from scoreprobe.data.datasets import make_dataset
from scoreprobe.errors import ConfigError, DataError
from scoreprobe.data.rules import Parity
from scoreprobe.loading.sources import StepGuessWarning, expand_paths, open_source, read_steps_file, steps_from_names
from test_dit import facebook_dit_state_dict

SHIPPED = load_series()
UPSTREAM_ARGS = argparse.Namespace(model="DiT-S/2", image_size=256, num_classes=1, global_seed=0, vae="ema")
TINY = ["--device", "cpu"]


def _cli(argv, capsys):
    """(exit code, stdout, stderr + the warnings as the CLI shows them) of the CLI run in-process."""
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            main([*map(str, argv)])
            code = 0
        except SystemExit as e:
            code = e.code
    out = capsys.readouterr()
    shown = "".join(f"warning: {w.category.__name__}: {w.message}\n" for w in caught)
    return code, out.out, out.err + shown


def _sd(seed):
    return facebook_dit_state_dict(1, 2, 24, 2, 3, learn_sigma=True, label_rows=2, seed=seed)


# ---------------------------------------------------------------------------------------------
# Steps and files
# ---------------------------------------------------------------------------------------------

def test_steps_from_names(tmp_path):
    files = [tmp_path / n for n in ("0050000.pt", "epoch=3-step=1200.ckpt", "network-snapshot-000200.pkl")]
    with pytest.warns(StepGuessWarning, match=r"0050000.pt -> 50000"):
        assert steps_from_names(files) == [50000, 1200, 200]
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # a stated pattern is not a guess
        assert steps_from_names(files, r"(\d+)") == [50000, 3, 200]
        assert steps_from_names(files[1:2], r"step=(\d+)") == [1200]
    with pytest.warns(StepGuessWarning):
        assert steps_from_names([tmp_path / "model.safetensors"]) == [0]   # one file without a number
    with pytest.raises(ConfigError, match="no number in its name"):
        steps_from_names([tmp_path / "a.pt", tmp_path / "final.pt"])
    with pytest.raises(ConfigError, match="finds no step number in final.pt"):
        steps_from_names([tmp_path / "final.pt"], r"step=(\d+)")
    with pytest.raises(ConfigError, match="not a regular expression"):
        steps_from_names(files, "(")
    with pytest.raises(ConfigError, match="beyond the limit"):
        steps_from_names([tmp_path / f"{10**20}.pt"], r"(\d+)")


def test_expand_paths_and_steps_file(tmp_path):
    for name in ("b_200.pt", "a_100.pt", "notes.txt"):
        (tmp_path / name).write_bytes(b"x")
    assert [p.name for p in expand_paths([tmp_path / "*.pt"])] == ["a_100.pt", "b_200.pt"]
    assert [p.name for p in expand_paths([tmp_path])] == ["a_100.pt", "b_200.pt"]   # a folder of files
    for bad, message in (([tmp_path / "*.ckpt"], "no file matches"), ([tmp_path / "nope.pt"], "no checkpoint file"),
                         ([tmp_path / "a_100.pt", tmp_path / "*.pt"], "named twice")):
        with pytest.raises(ConfigError, match=message):
            expand_paths(bad)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="without checkpoint files"):
        expand_paths([tmp_path / "empty"])
    (tmp_path / "steps.txt").write_text("# step file\n100 a_100.pt\n\n200 b_200.pt\n")
    files, steps = read_steps_file(tmp_path / "steps.txt")
    assert [f.name for f in files] == ["a_100.pt", "b_200.pt"] and steps == [100, 200] and files[0].parent == tmp_path
    (tmp_path / "bad.txt").write_text("a_100.pt 100\n")
    with pytest.raises(ConfigError, match=r"bad.txt:1: expected 'STEP PATH'"):
        read_steps_file(tmp_path / "bad.txt")


# ---------------------------------------------------------------------------------------------
# open_source
# ---------------------------------------------------------------------------------------------

def test_run_directory_and_its_own_files():
    assert open_source().steps == SHIPPED.steps and open_source([SHIPPED.path]).steps == SHIPPED.steps
    with pytest.raises(ConfigError, match="--dataset apply to checkpoint files, not to a run directory"):
        open_source([SHIPPED.path], dataset="x.npz")
    files = [SHIPPED.checkpoint_path(s) for s in SHIPPED.steps[:2]]
    with warnings.catch_warnings():
        warnings.simplefilter("error", StepGuessWarning)   # step_0000500.pt states its step
        s = open_source(files)
    assert s.steps == SHIPPED.steps[:2]
    np.testing.assert_array_equal(s.dataset.train, SHIPPED.dataset.train)   # the data of the run they belong to
    x, sig = torch.randn(3, 36), torch.full((3,), 0.7)
    torch.testing.assert_close(s.denoiser(s.steps[1])(x, sig), SHIPPED.denoiser(s.steps[1])(x, sig), rtol=0, atol=0)


def test_data_for_files(tmp_path):
    torch.save(_sd(0), tmp_path / "sd.pt")
    kw = dict(num_heads=6, num_classes=1, parameterization="ddpm_eps")
    with pytest.raises(ConfigError, match="carry no training data"):
        open_source([tmp_path / "sd.pt"], **kw)
    rule = Parity(2, shape=(6, 6))
    spec = json.dumps(rule.spec())
    with pytest.warns(StepGuessWarning):
        s = open_source([tmp_path / "sd.pt"], dataset=spec, data_size=(20, 10), data_seed=3, **kw)
    ref = make_dataset(rule, 20, 10, seed=3)
    np.testing.assert_array_equal(s.dataset.train, ref.train)
    with pytest.raises(ConfigError, match="needs --data-size"):
        open_source([tmp_path / "sd.pt"], dataset=spec, **kw)
    ref.save(tmp_path / "data.npz")
    with pytest.warns(StepGuessWarning):
        assert open_source([tmp_path / "sd.pt"], dataset=tmp_path / "data.npz", **kw).steps == [0]
    with pytest.raises(DataError, match="not"):   # the stored rule must agree with a stated one
        open_source([tmp_path / "sd.pt"], dataset=tmp_path / "data.npz", rule=Parity(3, shape=(6, 6)).spec(), **kw)


# ---------------------------------------------------------------------------------------------
# Every analysis command, end to end on other people's checkpoints
# ---------------------------------------------------------------------------------------------

COMMANDS = {
    "basins": ["--res", "4", "--n-steps", "2", "--no-animate", "--out", "{d}/b.zarr"],
    "field": ["--res", "4", "--sigma", "0.5", "--no-oracles", "--out", "{d}/f.zarr", "--plot", ""],
    "clocks": ["--n-samples", "6", "--n-steps", "2", "--out", "{d}/c.zarr"],
    "dsm": ["--sigmas", "3", "--n-noise", "1", "--n-train", "4", "--n-heldout", "4", "--out", "{d}/d.zarr"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_reads_a_bare_state_dict(command, tmp_path, capsys):
    torch.save(_sd(0), tmp_path / "sd.pt")
    args = [a.format(d=tmp_path) for a in COMMANDS[command]]
    settings = ["--set", "num_heads=6", "--set", "num_classes=1", "--set", "parameterization=ddpm_eps"]
    code, out, err = _cli([command, tmp_path / "sd.pt", *settings, *args, *TINY], capsys)
    assert code == 2 and err.count("\n") == 1 and "carry no training data" in err, err   # no data: one line, no guess
    code, out, err = _cli([command, tmp_path / "sd.pt", "--dataset", SHIPPED.path, *settings, *args, *TINY], capsys)
    assert code == 0, err
    assert "StepGuessWarning" in err and "sd.pt -> 0" in err   # the guessed step is named
    out_path = args[args.index("--out") + 1]
    ds = store.open_store(out_path)
    assert list(ds.step.values) == [0]
    assert json.loads(ds.attrs["scoreprobe_config"])["source"]["overrides"]["parameterization"] == "ddpm_eps"


def test_upstream_dicts_by_glob_steps_file_and_regex(tmp_path, capsys):
    ck = tmp_path / "checkpoints"
    ck.mkdir()
    for i, step in enumerate((50000, 100000)):   # facebookresearch/DiT train.py names and contents
        torch.save({"model": _sd(i), "ema": _sd(i + 10), "opt": {}, "args": UPSTREAM_ARGS}, ck / f"{step:07d}.pt")
    common = ["--dataset", SHIPPED.path, "--set", "num_heads=6", *COMMANDS["clocks"], *TINY]
    common = [str(a).format(d=tmp_path) for a in common]
    code, out, err = _cli(["clocks", str(ck / "*.pt"), *common], capsys)
    assert code == 0, err
    assert list(store.open_store(tmp_path / "c.zarr").step.values) == [50000, 100000]
    (tmp_path / "steps.txt").write_text("7 checkpoints/0050000.pt\n9 checkpoints/0100000.pt\n")
    code, out, err = _cli(["clocks", "--steps-file", tmp_path / "steps.txt", *common, "--overwrite"], capsys)
    assert code == 0 and "StepGuessWarning" not in err, err
    assert list(store.open_store(tmp_path / "c.zarr").step.values) == [7, 9]
    code, out, err = _cli(["clocks", ck, "--step-from-name", r"^0*(\d)", *common, "--overwrite"], capsys)
    assert code == 0, err
    assert list(store.open_store(tmp_path / "c.zarr").step.values) == [1, 5]
    code, out, err = _cli(["clocks", ck, "--steps-file", tmp_path / "steps.txt", *common], capsys)
    assert code == 2 and err.count("\n") == 1 and "give no SOURCES" in err, err


def test_file_options_are_refused_for_a_run_directory(capsys):
    code, out, err = _cli(["clocks", SHIPPED.path, "--set", "num_heads=4", "--trust", *TINY], capsys)
    assert code == 2 and err.count("\n") == 1 and "--set, --trust apply to checkpoint files" in err, err


def test_a_rerun_says_what_it_reused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["field", "--res", "3", "--no-oracles", "--plot", "", *TINY]
    code, out, err = _cli([*args, "--steps", "0,500"], capsys)
    assert code == 0 and "wrote field.zarr (2 steps)" in out, out + err
    code, out, err = _cli([*args, "--steps", "0,500"], capsys)
    assert "field.zarr: all 2 steps were already written; reused them, computed nothing" in out
    code, out, err = _cli([*args, "--steps", "0,500,607"], capsys)
    assert "wrote field.zarr: computed 1 steps, reused 2 written by an earlier run" in out
