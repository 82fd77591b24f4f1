"""--denoiser MODULE:FUNCTION / FILE.py:FUNCTION (issue 20, item 2): any denoiser from the CLI, behind
--trust; the error for an unknown checkpoint layout points to it."""
import json

import pytest
import torch

from scoreprobe import store
from scoreprobe.data.datasets import make_dataset
from scoreprobe.data.rules import Parity
from test_sources import _cli

RULE = Parity(2, shape=(6, 6))
USER_CODE = '''
import scoreprobe as sp
from scoreprobe.data.datasets import load_dataset
DATA = load_dataset("data.npz")
N = {n}

def make(step):
    return sp.EmpiricalDenoiser(DATA.train[:N]) if step > 0 else sp.RuleDenoiser(DATA.rule)

def mapping():
    return {{0: sp.RuleDenoiser(DATA.rule), 100: sp.EmpiricalDenoiser(DATA.train[:N])}}

def two(a, b):
    pass

NOT_CALLABLE = 3
'''
TINY = ["--n-samples", "8", "--n-steps", "2", "--device", "cpu"]


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_dataset(RULE, 20, 10, seed=0).save(tmp_path / "data.npz")
    (tmp_path / "mine.py").write_text(USER_CODE.format(n=20))
    return tmp_path


def _errors(err):
    return [line for line in err.splitlines() if not line.startswith("warning:")]


def test_without_trust_it_is_one_line_and_nothing_runs(here, capsys):
    (here / "boom.py").write_text("raise SystemExit('user code ran')\n")
    code, out, err = _cli(["clocks", "--denoiser", "boom.py:make", "--dataset", "data.npz", *TINY], capsys)
    assert code == 2 and _errors(err) == ["error: --denoiser runs your Python code: add --trust to allow it "
                                          "(trust=True in the API)"], err


def test_a_function_of_the_step_and_a_mapping_are_measured_and_resumed_by_fingerprint(here, capsys):
    args = ["clocks", "--denoiser", "mine.py:make", "--trust", "--dataset", "data.npz", "--steps", "0,100", *TINY]
    code, out, err = _cli(args, capsys)
    assert code == 0 and "clocks of mine.py:make (your denoiser, 2 of 2 checkpoints)" in out and "wrote mine-make.clocks.zarr (2 steps)" in out, err
    ds = store.open_store(here / "mine-make.clocks.zarr")   # named after the source (issue 34, item 6)
    assert list(ds.step.values) == [0, 100] and float(ds.mem_ratio.sel(step=100)) == 1.0
    assert json.loads(ds.attrs["scoreprobe_config"])["source"]["denoiser"] == "mine.py:make"
    code, out, err = _cli(args, capsys)
    assert code == 0 and "reused them, computed nothing" in out, out + err
    (here / "mine.py").write_text(USER_CODE.format(n=5))   # the user's model changed: not reused
    code, out, err = _cli(args, capsys)
    assert code == 2 and "step 100 was measured on another model (stored: outputs fingerprint" in err, err
    code, out, err = _cli(["clocks", "--denoiser", "mine:mapping", "--trust", "--dataset", "data.npz", "--steps", "all",
                           "--out", "m.zarr", *TINY], capsys)   # an importable module, a mapping
    assert code == 0 and list(store.open_store(here / "m.zarr").step.values) == [0, 100], err


@pytest.mark.parametrize("spec, extra, message", [
    ("mine.py:make", [], "is a function of the step: name the steps with --steps S1,S2"),
    ("mine.py:two", ["--steps", "1"], "must take no argument or one (the step), takes 2"),
    ("mine.py:NOT_CALLABLE", [], "mine.py has no callable 'NOT_CALLABLE'"),
    ("mine.py:absent", [], "mine.py has no callable 'absent'"),
    ("missing.py:make", [], "no Python file at missing.py"),
    ("no_such_module:make", [], "importing no_such_module failed (ModuleNotFoundError"),
    ("mine.py", [], "expects MODULE:FUNCTION or PATH.py:FUNCTION"),
    ("mine.py:make", ["data.npz"], "--denoiser names the model: give no SOURCES"),
])
def test_bad_specs_are_one_line(here, capsys, spec, extra, message):
    code, out, err = _cli(["clocks", "--denoiser", spec, "--trust", "--dataset", "data.npz", *extra, *TINY], capsys)
    assert code == 2 and len(_errors(err)) == 1 and message in err, err


def test_an_unknown_layout_points_to_denoiser_and_the_api(here, capsys):
    torch.save({"encoder.weight": torch.zeros(3, 3)}, here / "other.pt")
    code, out, err = _cli(["clocks", "other.pt", "--dataset", "data.npz", *TINY], capsys)
    assert code == 2 and "a layout scoreprobe does not know" in err and "--denoiser MODULE:FUNCTION --trust" in err, err
    assert "to the API" in err
