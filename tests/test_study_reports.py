"""The markdown and JSON pieces every study on the grid machinery shares (issue 57 item 5): the report's head, a
claim read over thresholds, groups pooled at a few thresholds (scoreprobe.reports.study_md), the cells of runs not
done, of the first crossing and of a censored slope (scoreprobe.studies.format), and the JSON report and its files
(scoreprobe.studies.presets)."""
import argparse
import json
import math

import numpy as np

from scoreprobe.reports import study_md
from scoreprobe.stats import curves as C
from scoreprobe.studies import format as F
from scoreprobe.studies import presets


def test_the_head_names_the_preset_only_where_it_is_not_the_default():
    args = argparse.Namespace(preset="cpu")
    head = study_md.header("T", "s", args, 3, 5, "Text.")
    assert head == ["# T (preset cpu)", "", "Regenerate: `python analyses/s --from-results` (from the .npz exports "
                    "only). 3 of 5 planned runs done. Text.", ""]
    g3 = study_md.header("T", "s", argparse.Namespace(preset="g3"), 1, 2, "", default=None, source="x/*.npz")[2]
    assert g3.startswith("Regenerate: `python analyses/s --preset g3 --from-results` (from x/*.npz only). 1 of 2")


def _ratio_curve(values, lo, hi):
    return [{"threshold": t, "value": v, "ci": [lo, hi], "censored": False} for t, v in zip(C.RULE_THRESHOLDS, values)]


def test_a_claim_over_thresholds_is_the_curve_table_then_one_verdict_line_per_column():
    above = _ratio_curve([3.0] * len(C.RULE_THRESHOLDS), 2.0, 4.0)
    words = {"above": "later", "below": "earlier", "includes": "same"}
    lines = study_md.curve_claims("rule threshold", [("a / b", above)], 0.9, 1.0, words, lambda n: "the ratio " + n)
    assert lines[:-2] == F.curve_table("rule threshold", [("a / b", above)], 0.9) and lines[-2] == ""
    assert lines[-1].startswith("- the ratio a / b: 3.00–3.00") and "later at every readable threshold" in lines[-1]
    assert "robust" in lines[-1]


def test_groups_pooled_at_a_few_thresholds():
    rows = [{"run": f"r{s}", "seed": s, "steps": 1000} for s in range(3)]
    curves = {f"r{s}": {"tau_rule": np.full(len(C.RULE_THRESHOLDS), 100.0 * (s + 1)),
                        "tau_mem": np.full(len(C.MEM_THRESHOLDS), np.inf)} for s in range(3)}
    lines, out = study_md.pooled_points({"a": rows}, curves, {"a": "group a"}, (("tau_rule", 0.9), ("tau_mem", 0.1)))
    assert lines[0] == "| variant | seeds | τ_rule at 0.9 | τ_mem at 0.1 |" and lines[2].startswith("| group a | 3 | ")
    assert math.isclose(out["a"]["tau_rule@0.9"]["pooled"], (100 * 200 * 300) ** (1 / 3))
    assert out["a"]["tau_mem@0.1"]["lower_bound"] and "> 1000" in lines[2]


def test_cells_of_runs_not_done_first_crossings_and_slopes():
    runs = [argparse.Namespace(meta={"size": s, "N": n}) for s, n in (("a", 1), ("a", 1), ("b", 2))]
    assert F.todo_text(runs, lambda r: (r.meta["size"], r.meta["N"]), lambda k: f"{k[0]}@{k[1]}") == \
        "a@1 (2 seeds), b@2 (1 seed)"
    assert F.todo_text([], len, str) == "none"
    assert F.first_crossing_text({"tau_rule": 5.0, "tau_rule_first_crossing": 4.0}, "tau_rule") == " (first crossing 4)"
    assert F.first_crossing_text({"tau_mem": math.nan, "tau_mem_first_crossing": math.nan}, "tau_mem") == ""
    row = {"b": 1.234, "b_ci": [1.0, math.inf], "n": 9, "n_censored": 2, "method": "censored"}
    assert F.slope_cell(row) == "1.23 [1.00, unbounded] (n = 9, 2 censored)"
    assert F.slope_cell({**row, "b": math.nan}) == "undefined (censored; 9 runs, 2 censored)"


def test_the_json_report_and_its_files(tmp_path):
    args = argparse.Namespace(preset="cpu")
    rows = [{"run": "r0", "curve": [1], "curves": {}, "tau": 1.0}]
    rep = presets.report_json(args, ["r0", "r1"], {"r1": "not exported"}, rows, extra={1: 2})
    assert rep == {"preset": "cpu", "n_planned": 2, "missing": {"r1": "not exported"}, "extra": {1: 2},
                   "runs": [{"run": "r0", "tau": 1.0}]}
    drawn = []
    md = presets.write_tables(tmp_path, "study_cpu", "# t\n", rep, drawn.append)
    assert md == tmp_path / "study_cpu.md" and md.read_text() == "# t\n" and drawn == [tmp_path / "study_cpu.png"]
    assert json.loads((tmp_path / "study_cpu.json").read_text())["extra"] == {"1": 2}
