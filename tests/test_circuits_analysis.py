"""python analyses/circuits --smoke (issue #37): the study end to end at toy size, and --from-results."""
import json

from tests.test_analyses import _analysis

def _study():
    return _analysis("circuits")


def test_circuits_smoke_and_from_results(tmp_path, capsys):
    circuits = _study()
    assert circuits.main(["--plan"]) == 0 and "sp.circuits on the shipped series" in capsys.readouterr().out
    circuits.main(["--smoke", "--out", str(tmp_path)])
    res = json.loads((tmp_path / "circuits_smoke.json").read_text())
    assert res["steps"] == [500, 2876, 36000]
    assert res["taus"]["tau_rule"] < res["taus"]["tau_mem"]
    for kind in ("rule", "copy"):
        kinds = {r["site_kind"] for r in res["top"][kind]}
        assert {"block", "sub", "head"} <= kinds
    assert {r["site"] for r in res["ode"]} >= {"*"}
    assert (tmp_path / "circuits_smoke.png").stat().st_size > 0
    md = (tmp_path / "circuits_smoke.md").read_text()
    (tmp_path / "circuits_smoke.md").unlink()
    circuits.main(["--smoke", "--out", str(tmp_path), "--from-results"])
    assert (tmp_path / "circuits_smoke.md").read_text() == md


def test_crossing_interpolates_in_log_step():
    circuits = _study()
    import numpy as np
    steps = np.array([99.0, 999.0, 9999.0])
    np.testing.assert_allclose(circuits.crossing(steps, np.array([0.0, 0.5, 1.0]), 1.0), 999.0)
    assert circuits.crossing(steps, np.array([np.nan, 0.6, 1.0]), 1.0) == 999.0     # NaN skipped: a bound
    np.testing.assert_allclose(circuits.decay(steps, np.array([1.0, 0.5, 0.0])), 999.0)
    mid = circuits.crossing(steps, np.array([0.0, 0.25, 1.0]), 1.0)
    np.testing.assert_allclose(np.log(mid + 1), (np.log(1000) + np.log(10000)) / 2 - (np.log(10000) - np.log(1000)) / 6)
    assert np.isnan(circuits.crossing(steps, np.array([0.0, 0.1, 0.2]), -1.0))
