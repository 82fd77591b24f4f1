"""Issue 54, part B (the mechanism): the claim "the model copies before any rule" is reworded to what is measured
(a DSM-loss gap) and stands beside its control (the open-window series shows the gap before its τ_rule too) and
beside the copies in samples at that step; the one-model study names the 3-model study as the evidence and puts
its verdicts beside its own point readings; the re-report keeps the DSM interval its stores gave once."""
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from scoreprobe.stats import claim_tests
from scoreprobe.studies.battery_series import DSM_GAP
from tests.test_analyses import _analysis

RESULTS = Path(__file__).resolve().parents[1] / "analyses" / "results"


def _series(means, se=0.002, df=30.0, steps=(0, 50, 200, 500, 900), first=200, n=3):
    """A planted series report: the DSM gap's crossed mean per step (se, df) and n models around it."""
    m = np.asarray(means, float)
    curve = {"mean": m.tolist(), "se": [se] * len(m), "df": [df] * len(m), "lo": (m - 2 * se).tolist(),
             "hi": (m + 2 * se).tolist(), "per_model": [(m + d).tolist() for d in (-1e-4, 0, 1e-4)]}
    return {"n_models": n, "steps": list(steps), "first_grid_step": first, "curves": {DSM_GAP: curve}, "half_change": {},
            "models": [{"mem_ratio_by_step": {str(s): 0.0 for s in steps}} for _ in range(n)]}


def test_the_control_is_the_same_test_on_the_other_series_outside_holm():
    claims = _analysis("mechanism_seeds.claims")
    reports = {"closed": _series([0, 0.001, 0.02, 0.03, 0.04]), "open": _series([0, 0.0, 0.003, 0.006, 0.008], first=500)}
    rows = claims.evaluate(reports)
    nine = next(r for r in rows if r["claim"] == claims.CLAIMS[8][1])
    assert "not copies in samples" in nine["claim"] and "copies before" not in nine["claim"]
    ctrl = claims.evaluate_controls(reports, rows)
    assert [c["step"] for c in ctrl] == [500, 200]                 # its own first grid step, then the claim's step
    for c, mean in zip(ctrl, (0.006, 0.003)):
        assert c["p"] == pytest.approx(scipy.stats.t.sf(mean / 0.002, 30.0)) and "p_holm" not in c
    assert claim_tests.copies_at(reports["closed"], "first grid") == {"step": 200, "per_model": [0.0, 0.0, 0.0]}


def test_the_shipped_md_says_what_is_measured_beside_its_control():
    rep = json.loads((RESULTS / "mechanism_seeds.json").read_text())
    md = (RESULTS / "mechanism_seeds.md").read_text()
    assert "the model copies before any rule" not in md and len(rep["claims"]) == 13
    ctrl = {c["step"]: c for c in rep["controls"]}
    c = rep["series"]["open"]["curves"][DSM_GAP]
    i = rep["series"]["open"]["steps"].index(rep["series"]["open"]["first_grid_step"])
    p = scipy.stats.t.sf(c["mean"][i] / c["se"][i], c["df"][i])       # recomputed from the curve itself
    assert ctrl[rep["series"]["open"]["first_grid_step"]]["p"] == pytest.approx(p)
    line = next(l for l in md.splitlines() if l.startswith("- Control for claim 9") and f"step {rep['series']['open']['first_grid_step']} " in l)
    assert f"one-sided p {p:.2g}" in line and "outside the Holm family" in line
    copies = rep["copies_at_claim_steps"]["closed@200"]["per_model"]
    models = rep["series"]["closed"]["models"]
    assert copies == [m["mem_ratio_by_step"]["200"] for m in models]
    assert "memorized share of each closed model's samples there (its clocks) is " + " / ".join(
        f"{v:.3f}" for v in copies) in md
    assert "0.966 [0.909, 1.023]" in md                              # the share with its CI, never alone


def test_the_one_model_study_names_the_three_model_study_as_the_evidence():
    seeds = json.loads((RESULTS / "mechanism_seeds.json").read_text())
    md = (RESULTS / "mechanism.md").read_text()
    section = md.split("## The evidence for the claims: the 3-model study")[1].split("\n## ")[0]
    for i, c in enumerate(seeds["claims"], 1):
        row = next(l for l in section.splitlines() if l.startswith(f"| {i} | {c['series']} |"))
        assert f"| **{c['verdict']}** |" in row
    stands = section.split("the 3-model word stands: claims ")[1]
    for n in (2, 4, 7):                                              # one model's point "yes", 3 models not decided
        assert seeds["claims"][n - 1]["verdict"] == "not decided" and f"{n} (*" in stands
    assert "not the evidence" in md


def test_one_model_reading_is_a_point_against_its_clock():
    E = _analysis("mechanism.evidence")
    report = {"re_report": {"series": {"open": {"half_change": {E.ONE_MODEL["held-out basin"]: {"step": 900.0}}}}},
              "series": {"open": {"taus": {"tau_mem": 1000.0, "tau_rule": None}}}}
    near = {"series": "open", "quantity": "held-out basin", "test": ["near", "tau_mem"]}
    assert E.one_model_reading(report, near) == ("within a factor 2 of τ_mem: 900 / 1000 = 0.90", True)
    after = {**near, "test": ["after", "tau_mem"]}
    assert E.one_model_reading(report, after)[1] is False
    before = {**near, "test": ["before", "tau_rule"]}
    assert E.one_model_reading(report, before)[1] is None            # τ_rule not reached: no point, no word


def test_the_rereport_keeps_the_store_interval_when_the_stores_are_gone(tmp_path):
    shutil.copy(RESULTS / "mechanism.json", tmp_path / "mechanism.json")
    shipped = json.loads((RESULTS / "mechanism.json").read_text())["re_report"]["series"]
    args = _analysis("mechanism.measure").parse_args(["--rereport", str(tmp_path / "mechanism.json"),
                                                      "--out", str(tmp_path / "no-stores")])
    new = _analysis("mechanism.rereport").rereport(args, tmp_path / "mechanism.json")["re_report"]["series"]
    for name, r in shipped.items():
        assert new[name]["dsm_half_change_from_stores"] == r["dsm_half_change_from_stores"]
        assert math.isfinite(new[name]["dsm_half_change_from_stores"]["ci"][0])
