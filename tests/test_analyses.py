"""analyses/two_clocks.py --smoke: the whole pipeline (train in parallel-ready runs, clocks with CIs,
tables, figures) end to end at toy size."""
import json
import sys
from pathlib import Path

ANALYSES = Path(__file__).resolve().parents[1] / "analyses"


def test_two_clocks_smoke(tmp_path, capsys):
    sys.path.insert(0, str(ANALYSES))
    try:
        import two_clocks
    finally:
        sys.path.remove(str(ANALYSES))
    two_clocks.main(["--smoke", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "two_clocks_smoke.json").read_text())
    runs = {r["run"] for r in report["runs"]}
    assert runs == {"g2-n8", "g3-n8", "g2-n16"}
    for r in report["runs"]:
        assert {"tau_rule", "tau_rule_ci", "tau_mem_ci", "window_intervals", "under_resolved"} <= set(r)
        assert (tmp_path / f"two_clocks_smoke_{r['run']}.png").stat().st_size > 0
    assert (tmp_path / "two_clocks_smoke.png").stat().st_size > 0
    assert "| g3-n8 | 3 | 8 |" in capsys.readouterr().out
    two_clocks.main(["--smoke", "--out", str(tmp_path)])  # rerun: training and clocks are reused
    rerun = json.loads((tmp_path / "two_clocks_smoke.json").read_text())["runs"]
    timing = ("train_s", "clocks_s")
    assert [{k: v for k, v in r.items() if k not in timing} for r in rerun] == \
        [{k: v for k, v in r.items() if k not in timing} for r in report["runs"]]


def test_remedies_smoke(tmp_path, capsys):
    sys.path.insert(0, str(ANALYSES))
    try:
        import remedies
    finally:
        sys.path.remove(str(ANALYSES))
    remedies.main(["--smoke", "--out", str(tmp_path), "--jobs", "1", "--variants", "baseline,curriculum,all"])
    report = json.loads((tmp_path / "remedies_smoke.json").read_text())
    assert [r["run"] for r in report["runs"]] == ["baseline-s0", "curriculum-s0", "all-s0"]
    params = {r["variant"]: r["params"] for r in report["runs"]}
    assert params["curriculum"] == params["baseline"] < params["all"]   # the register adds parameters
    assert json.loads((tmp_path / "curriculum-s0" / "run.json").read_text())["config"]["curriculum"] == "2:4:7"
    assert (tmp_path / "remedies_smoke.png").stat().st_size > 0 and "| curriculum | 0 |" in capsys.readouterr().out
    remedies.main(["--smoke", "--G", "3", "--out", str(tmp_path / "g3"), "--jobs", "1", "--variants", "curriculum"])
    assert "groups of 2 cannot tile groups of 3" in (tmp_path / "g3" / "remedies_smoke.md").read_text()
