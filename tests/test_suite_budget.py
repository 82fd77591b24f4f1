"""tests/suite_budget.py: a run over its budget fails and names its slowest tests; within it, or with no
budget, nothing changes. Run as a real pytest in a subprocess on a two-test folder (once under xdist, as CI
runs the suite)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

SUITE = '''
import time

def test_sleeps():
    time.sleep(0.6)

def test_quick():
    pass
'''


def _pytest(folder, *args, env=None):
    (folder / "pytest.ini").write_text("[pytest]\n")   # keeps the project's addopts (-n auto, markers) out
    (folder / "test_two.py").write_text(SUITE)
    environ = {k: v for k, v in os.environ.items() if k != "SCOREPROBE_SUITE_BUDGET_S"}   # CI's own budget out
    # no installed plugin but the ones named (torchtyping and zarr's would import torch: seconds per run)
    environ.update(PYTHONPATH=str(TESTS), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", **(env or {}))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "suite_budget", "-p", "no:cacheprovider", *args,
                           str(folder)], capture_output=True, text=True,
                          env=environ, cwd=folder, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


def test_over_budget_fails_naming_the_slowest_test(tmp_path):
    code, out = _pytest(tmp_path, "--suite-budget", "0.3")
    assert code == 1, out
    assert "2 passed" in out and "more than its budget of 0.3 s" in out
    named = [ln for ln in out.splitlines() if "test_two.py::" in ln and " s  " in ln]
    assert named and named[0].strip().endswith("test_two.py::test_sleeps"), out   # the slowest first


def test_within_budget_and_without_one_pass(tmp_path):
    code, out = _pytest(tmp_path, "--suite-budget", "600")
    assert code == 0 and "within its budget of 600 s" in out, out
    code, out = _pytest(tmp_path)
    assert code == 0 and "suite time" not in out, out


def test_the_budget_from_the_environment(tmp_path):
    code, out = _pytest(tmp_path, env={"SCOREPROBE_SUITE_BUDGET_S": "0.3"})
    assert code == 1 and "test_sleeps" in out, out


@pytest.mark.parametrize("option, env, match", [(None, "eight minutes", "is not a number of seconds"),
                                                (-1.0, None, "positive number of seconds"),
                                                (0.0, None, "positive number of seconds")])
def test_a_bad_budget_is_a_usage_error(monkeypatch, option, env, match):
    """Read in this process (a usage error ends pytest before any test: exit 4)."""
    import suite_budget
    monkeypatch.delenv("SCOREPROBE_SUITE_BUDGET_S", raising=False)
    if env is not None:
        monkeypatch.setenv("SCOREPROBE_SUITE_BUDGET_S", env)
    config = type("Config", (), {"getoption": lambda self, name: option})()
    with pytest.raises(pytest.UsageError, match=match):
        suite_budget._budget(config)


@pytest.mark.slow   # a pytest run in a subprocess with 2 xdist workers (~16 s); CI's default run exercises the same path
def test_under_xdist_the_controller_counts_every_worker(tmp_path):
    pytest.importorskip("xdist")
    code, out = _pytest(tmp_path, "-p", "xdist", "-n", "2", "--suite-budget", "0.3")
    assert code == 1 and "test_two.py::test_sleeps" in out, out
