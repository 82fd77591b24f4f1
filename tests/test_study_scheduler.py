"""--scheduler on the studies (issue 57 item 3): the same study on a dask cluster writes the same exports as the
local run, and a malformed address is one line and exit 2 before any work."""
import json

import numpy as np
import pytest

from tests.test_analyses import _analysis


def _states(folder):
    read = __import__("scoreprobe.studies.export", fromlist=["read_export"]).read_export
    return {p.name: read(p)["ds"].state.values for p in sorted(folder.glob("*.npz"))}


def _untimed(md):
    """The page without the runs table's last column, the training seconds: a wall-clock time (printed where a
    stage took over 5 s, so a loaded machine or a worker's start-up changes it), not a measurement of the model."""
    head, _, runs = md.partition("## Runs")
    assert runs and "| train s |" in runs
    return head + "\n".join(line.rsplit("|", 2)[0] if line.startswith("|") else line for line in runs.split("\n"))


@pytest.mark.slow   # starts a dask LocalCluster (worker processes import torch) and trains the study twice
def test_a_study_on_a_local_dask_cluster_exports_what_the_local_run_does(tmp_path):
    run = _analysis("capacity_exponent.run")
    run.main(["--smoke", "--out", str(tmp_path / "here")])
    run.main(["--smoke", "--out", str(tmp_path / "dask"), "--scheduler", "local:2"])
    here, there = (_states(tmp_path / p / "capacity_exponent_smoke") for p in ("here", "dask"))
    assert here and here.keys() == there.keys()
    assert all(np.array_equal(here[k], there[k]) for k in here)      # the same samples of the same models
    md = (tmp_path / "dask" / "capacity_exponent_smoke.md").read_text()
    assert _untimed(md) == _untimed((tmp_path / "here" / "capacity_exponent_smoke.md").read_text().replace(
        str(tmp_path / "here"), str(tmp_path / "dask")))
    assert json.loads((tmp_path / "dask" / "capacity_exponent_smoke.json").read_text())["sizes"]


@pytest.mark.parametrize("address", ["local:x", "local:0", "not an address"])
def test_a_malformed_scheduler_is_one_line_and_exit_2_before_any_work(tmp_path, capsys, address):
    run = _analysis("capacity_exponent.run")
    with pytest.raises(SystemExit) as e:
        run.main(["--smoke", "--out", str(tmp_path), "--scheduler", address])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("capacity_exponent") or "--scheduler" in err[-1]
    assert "--scheduler" in err[-1] and not any(tmp_path.iterdir())
