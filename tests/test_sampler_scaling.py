"""analyses/sampler_scaling: a scaling run regenerated from its TrainConfig is checked against the shipped
states before it is re-measured with the stochastic sampler; a run whose states differ is measured with both
samplers (a paired comparison on its own checkpoints) and marked."""
import pytest
import importlib
import json

import numpy as np

from tests.test_analyses import _analysis


def _export_states(path):
    return importlib.import_module("scoreprobe.studies.export").read_export(path)["ds"].state.values


@pytest.mark.slow   # trains the smoke runs and samples them with every sampler: the study's own unit tests stay in the default suite
def test_smoke_checks_identity_then_measures_the_stochastic_sampler(tmp_path):
    scaling, sampler = _analysis("scaling.run"), _analysis("sampler_scaling.run")
    scaling.main(["--smoke", "--only", "N", "--out", str(tmp_path)])
    runs = _analysis("sampler_scaling.grid").plan("smoke")
    assert [r.meta["N"] for r in runs] == [8, 16]
    shipped = tmp_path / "scaling_smoke" / f"{runs[1].name}.npz"
    tampered = importlib.import_module("scoreprobe.studies.export").read_export(shipped)
    states = tampered["ds"].state.values.copy()
    states[-1, :5] = (states[-1, :5] + 1) % 4             # five samples of the last checkpoint: not this model's
    importlib.import_module("scoreprobe.studies.export").export_run(tampered["ds"].assign(state=(("step", "sample"), states)), runs[1].cfg,
                                           tampered["params"], shipped, meta=runs[1].meta)
    sampler.main(["--smoke", "--out", str(tmp_path)])
    rep = json.loads((tmp_path / "sampler_scaling_smoke.json").read_text())
    ident = {i["run"]: i for i in rep["identity"]}
    assert ident[runs[0].name]["identical"] and ident[runs[0].name]["identity_share"] == 1.0
    assert not ident[runs[1].name]["identical"] and ident[runs[1].name]["identity_share"] == 1 - 5 / 32
    assert ident[runs[1].name]["heun_from"] == "own" and (tmp_path / "sampler_scaling_smoke" / "heun").is_dir()
    stoch = _export_states(tmp_path / "sampler_scaling_smoke" / f"{runs[0].name}.npz")
    assert stoch.shape == _export_states(tmp_path / "scaling_smoke" / f"{runs[0].name}.npz").shape
    run_dir = tmp_path / "two_clocks" / runs[0].name
    assert (run_dir / "clocks_check.zarr").is_dir() and (run_dir / "clocks_edm-stochastic.zarr").is_dir()
    config = json.loads(str(np.load(tmp_path / "sampler_scaling_smoke" / f"{runs[0].name}.npz")["clocks_config"]))
    assert config["sampler"]["name"] == "edm-stochastic" and config["sampler"]["s_churn"] == 40.0
    md = (tmp_path / "sampler_scaling_smoke.md").read_text()
    sampler.main(["--smoke", "--out", str(tmp_path), "--from-results"])
    assert (tmp_path / "sampler_scaling_smoke.md").read_text() == md
