"""python analyses/decompose --smoke, --plan and --from-results end to end at toy size."""
import pytest
import json

from tests.test_analyses import _analysis

def _study():
    return _analysis("decompose")


@pytest.mark.slow   # trains the study's smoke runs and decomposes every step: the study's own unit tests stay in the default suite
def test_decompose_study_smoke_plan_and_from_results(tmp_path, capsys):
    study = _study()
    assert study.main(["--smoke", "--plan"]) == 0
    assert "disjoint pairs: N = [4]" in capsys.readouterr().out
    args = ["--smoke", "--results", str(tmp_path / "res"), "--runs", str(tmp_path / "runs")]
    assert study.main(args) == 0
    res = json.loads((tmp_path / "res" / "smoke_decompose.json").read_text())
    s = res["summary"]
    assert set(s["models"]["regions"]) == {"train", "heldout", "random_valid"}
    assert "seed0" in res["models"]["models"] and res["models"]["steps"] == [500, 36000]
    assert "decompose" not in res                                     # the one-model r² table is gone
    assert s["pairs"]["by_n"]["4"]["shared_train_max"] == 0           # the pairs' training sets are disjoint
    assert res["pairs"]["by_n"]["4"]["replicates"]["0"]["disjoint"]["steps"] == [40]
    assert set(res["pairs_mem"]["by_n"]) == {"6"}                      # the small-N pairs past τ_mem (section 3b)
    assert res["pairs_mem"]["by_n"]["6"]["replicates"]["0"]["disjoint"]["steps"] == [60]
    assert set(res["pairs_long"]["by_n"]) == {"5"}                     # pairs at larger N past τ_mem (section 3c)
    assert list(res["pairs_long"]["by_n"]["5"]["replicates"]) == ["0"]
    for fig in ("heatmap", "crossover", "disjoint", "disjoint_mem", "disjoint_long"):
        assert (tmp_path / "res" / f"smoke_decompose_{fig}.png").stat().st_size > 1000
    md = (tmp_path / "res" / "smoke_decompose.md").read_text()
    assert "## 3b. Disjoint training sets across the memorization boundary" in md
    assert "## 3c. Disjoint training sets across the memorization boundary (N where" in md
    (tmp_path / "res" / "smoke_decompose.md").unlink()
    assert study.main(args + ["--from-results"]) == 0
    assert (tmp_path / "res" / "smoke_decompose.md").read_text() == md
    # a rerun reuses the cached stages and the finished training
    assert study.main(args) == 0
    again = json.loads((tmp_path / "res" / "smoke_decompose.json").read_text())
    assert again["models"] == res["models"] and again["timings_s"]["models"] == res["timings_s"]["models"]
    # the closed-window series' section (models_closed), written from the json as the open one is
    from analyses.decompose.write import write_all
    closed = dict(res["models"], series="closed", taus={n: {"tau_rule": None, "tau_mem": 1547.0}
                                                        for n in res["models"]["models"]})
    again.pop("summary")
    write_all(dict(again, models_closed=closed), tmp_path / "res", "smoke_")
    md = (tmp_path / "res" / "smoke_decompose.md").read_text()
    assert "## 1b. The same over the closed-window series" in md and "τ_rule not reached, τ_mem 1547" in md
    assert "- The closed-window series (parity G = 2, N = 30" in md and "trained here" in md
    assert (tmp_path / "res" / "smoke_decompose_heatmap_closed.png").stat().st_size > 1000
