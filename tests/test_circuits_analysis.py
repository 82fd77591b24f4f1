"""python analyses/circuits --smoke (issue #37): the study end to end at toy size, and --from-results."""
import json

from tests.test_analyses import _analysis

def _study():
    return _analysis("circuits")


def test_circuits_smoke_and_from_results(tmp_path, capsys):
    circuits = _study()
    assert circuits.main(["--plan"]) == 0 and "sp.circuits on models" in capsys.readouterr().out
    circuits.main(["--smoke", "--out", str(tmp_path)])
    res = json.loads((tmp_path / "circuits_smoke.json").read_text())
    assert res["steps"] == [500, 2876, 36000] and list(res["models"]) == ["s0"]
    assert res["taus"]["s0"]["tau_rule"] < res["taus"]["s0"]["tau_mem"]
    for kind in ("rule", "copy"):                                   # every effect per σ, none averaged over σ
        cells = res["cells"][kind]
        assert len(cells) == len(res["sigmas"]) * len(res["sites"])
        assert {c["sigma"] for c in cells} == set(res["sigmas"])
        assert all((c["mean"] is None) == bool(c["undefined"]) for c in cells)
    for r in res["ode_across"]:                                      # outcome shares over the apart pairs sum to 1
        total = sum(r[k]["per_model"][0] or 0 for k in ("to_clean", "to_corrupt", "to_third"))
        assert r["n_apart"][0] == 0 or abs(total - 1) < 1e-9
    assert {r["site"] for r in res["ode_across"]} >= {"*"}
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


def test_models_as_units_t_interval_and_holm():
    """The across-model summary against scipy's one-sample t test, NaN kept NaN, and Holm over the defined cells."""
    import numpy as np
    from scipy import stats

    from analyses.circuits.across import effects_across, t_summary
    v = np.array([[0.5, 0.1, np.nan], [0.7, -0.2, 0.3], [0.6, 0.2, 0.2]])          # (models, cells)
    mean, lo, hi, p = t_summary(v)
    t = stats.ttest_1samp(v[:, :2], 0.0)
    np.testing.assert_allclose(p[:2], t.pvalue)
    half = stats.t.ppf(0.975, 2) * v[:, 0].std(ddof=1) / np.sqrt(3)
    np.testing.assert_allclose([lo[0], hi[0]], [0.6 - half, 0.6 + half])
    assert np.isnan([mean[2], lo[2], p[2]]).all()
    per_model = {n: {"effects": {"rule": {"effect": [v[i, :2].tolist()], "reason": [["", ""]],
                                          "half_step_over_tau": [[1.0, 1.0]], "half_step": [[500.0, 900.0]],
                                          "half_step_is_bound": [[False, True]]}}}
                 for i, n in enumerate("abc")}
    per_model["b"]["effects"]["rule"]["reason"] = [["", "mixed sign"]]
    per_model["b"]["effects"]["rule"]["effect"] = [[0.7, np.nan]]
    cells, family = effects_across(per_model, "rule", list("abc"), ["x", "y"], [0.7])
    assert family["size"] == 1 and cells[1]["undefined"] == "b: mixed sign" and np.isnan(cells[1]["mean"])
    np.testing.assert_allclose(cells[0]["p_holm"], t.pvalue[0])                     # a family of one: p unchanged
