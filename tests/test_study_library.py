"""The library pieces the studies' reports are built from (issue 57 item 5): the regenerate command and the report
files, single runs' ratios and power law from their bootstrap CIs, the clock tables, paired final states,
exports read from the first of several folders, throttled table rewrites, clocks rows, paired sampler ratios,
the component tests of a transposition split, and the curves figure of models side by side."""
import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import xarray as xr

from scoreprobe.data.datasets import STATE_CODES
from scoreprobe.reports import clock_tables as T
from scoreprobe.reports.study_report import regenerate_command, runs_json, write_study
from analyses.sudoku_transpose import transpose_split
from scoreprobe.stats import run_ci_fits
from scoreprobe.stats.paired_states import paired
from analyses.sampler_scaling.two_samplers import by_N, ratio_curves


def test_regenerate_command_runs_json_and_write_study(tmp_path):
    assert regenerate_command("exactk_ladder", "cpu") == "python analyses/exactk_ladder --from-results"
    assert regenerate_command("x", "gpu") == "python analyses/x --preset gpu --from-results"
    assert runs_json([{"run": "a", "curve": [1], "curves": {}, "tau": 3}]) == [{"run": "a", "tau": 3}]
    assert runs_json([{"run": "a", "curve": [1], "curves": {}}], drop=("curves",)) == [{"run": "a", "curve": [1]}]
    drawn = []
    md = write_study(tmp_path / "r", "s_cpu", ["# t", "", "x"], {1: float("nan")}, drawn.append)
    assert md == tmp_path / "r" / "s_cpu.md" and md.read_text() == "# t\n\nx\n"
    assert json.loads(md.with_suffix(".json").read_text()) == {"1": None} and drawn == [md.with_suffix(".png")]


def _run(G, N, seed, tau_rule, ci=None, tau_mem=math.nan, mem_ci=None, steps=30000, ext=None):
    return {"G": G, "N": N, "seed": seed, "steps": steps, "tau_rule": tau_rule, "tau_rule_ci": ci,
            "tau_mem": tau_mem, "tau_mem_ci": mem_ci, "tau_rule_extrapolated": ext}


def test_g_ratio_from_two_runs_cis_and_the_bound_where_the_larger_g_is_not_reached():
    rows = [_run(2, 240, 0, 1000.0, [900.0, 1100.0]), _run(3, 240, 0, 5000.0, [4000.0, 6000.0]),
            _run(4, 240, 0, math.nan, None, ext={"tau": 50000.0, "ci": [40000.0, 70000.0]})]
    out = run_ci_fits.g_ratio(rows, 240, [0])
    se = math.hypot(*(math.log(hi / lo) / (2 * 1.96) for lo, hi in ((900, 1100), (4000, 6000))))
    assert out["G3/G2"]["ratio"] == 5.0 and out["G3/G2"]["ci"] == pytest.approx([5 * math.exp(-1.96 * se),
                                                                                  5 * math.exp(1.96 * se)])
    assert out["G4/G3"] == {"ratio_above": 6.0, "extrapolated": 10.0, "extrapolated_ci": [8.0, 14.0]}
    rows[1]["tau_rule_ci"] = [4000.0, math.inf]                            # open: the conservative bound only
    assert run_ci_fits.g_ratio(rows, 240, [0, 1])["G3/G2 (seed 0)"]["ci"] == [4000 / 1100, math.inf]
    assert "unbounded" in T.ratio_lines(run_ci_fits.g_ratio(rows, 240, [0]), 240)[2]


def test_mem_fit_recovers_a_planted_power_law_and_its_measurement_spread():
    Ns = [30, 60, 120, 240]
    rows = [_run(2, N, 0, 100.0, tau_mem=35 * N ** 1.14, mem_ci=[33 * N ** 1.14, 37 * N ** 1.14]) for N in Ns]
    fit = run_ci_fits.mem_fit(rows, 2)
    assert fit["b"] == pytest.approx(1.14) and fit["a"] == pytest.approx(35) and fit["n"] == 4
    assert fit["b_ci_measurement"][0] < 1.14 < fit["b_ci_measurement"][1]
    assert "error" in run_ci_fits.mem_fit(rows[:1], 2) and T.fit_lines({"error": "x"}, 2)[-1] == "- no fit: x"


def test_clock_cells_and_tables():
    assert T.tau_text(2426.3, [2136.2, math.inf]) == "2426 [2136, not reached]" and T.tau_text(None, None) == \
        "not reached"
    row = {"run": "g2-n8", "G": 2, "N": 8, "steps": 30, "tau_rule": 10.0, "tau_rule_ci": [8.0, math.inf],
           "tau_novel": math.nan, "tau_novel_ci": None, "tau_mem": 20.0, "tau_mem_ci": [18.0, 22.0],
           "window_open": True, "window_intervals": [[10.0, 20.0]], "window_hi_censored": True,
           "window_log10_width": 0.301, "window_log10_width_ci": [0.2, 0.4], "peak_rule_acc": 0.9,
           "final_rule_acc": 0.8, "final_mem_ratio": 0.5, "under_resolved": ["tau_mem"]}
    assert T.tau_cell(row, "tau_rule") == "10 [8, not reached]" and T.tau_cell(row, "tau_novel") == "—"
    assert T.window_cell(row) == "10–20+: 0.30 [0.20, 0.40]" and T.window_cell({"window_open": False}) == "closed"
    lines = T.sweep_table([row])
    assert lines[2].startswith("| g2-n8 | 2 | 8 | 30 | 10 [8, not reached] | — | 20 [18, 22] |")
    assert lines[-2].endswith("g2-n8 tau_mem.")


def test_paired_final_states_and_the_sampler_table(tmp_path):
    mem, novel = STATE_CODES["valid_memorized"], STATE_CODES["valid_novel"]
    base = {"final_state": [mem, mem, novel, novel]}
    row = {"final_state": [mem, novel, novel, mem]}
    changed, delta, se = paired(row, base)
    assert (changed, delta) == (0.5, 0.0) and se == pytest.approx(np.std([0, -1, 0, 1], ddof=1) / 2)
    rows = [{"label": k, "sampler_fields": {"name": k}, "tau_rule": 5.0, "tau_rule_ci": [4.0, 6.0], "tau_mem": None,
             "tau_mem_ci": None, "window_open": False, "peak_rule_acc": 1.0, "final_rule_acc": 1.0,
             "final_mem_ratio": 0.5, **r} for k, r in (("heun", base), ("ddim", row))]
    table = T.sampler_table(rows, lambda f: f["name"].upper())
    assert table.splitlines()[-1] == ("| DDIM | 5 [4, 6] | not reached | closed | 1.000 | 1.000 | 0.500 | +0.000 "
                                      f"({se:.3f}) | 0.500 |")
    assert T.write_rows(tmp_path / "s.json", {"seed": 0}, rows, table) == table
    assert set(T.read_rows(tmp_path / "s.json")) == {"heun", "ddim"} and T.read_rows(tmp_path / "none.json") == {}
    assert (tmp_path / "s.md").read_text() == table + "\n"


def test_collect_first_reads_the_first_folder_that_holds_the_export(tmp_path, monkeypatch):
    from analyses.exactk_ladder import fallback_exports as fe
    held = {"a": tmp_path / "second"}
    monkeypatch.setattr(fe, "load_exports", lambda runs, folder: (
        ({runs[0].name: {"from": folder.name}}, {}) if held.get(runs[0].name) == folder else
        ({}, {runs[0].name: "other TrainConfig" if folder.name == "first" else fe.NO_EXPORT})))
    runs = [SimpleNamespace(name="a"), SimpleNamespace(name="b")]
    rows, missing = fe.collect_first(runs, lambda r: [tmp_path / "first", tmp_path / "second"],
                                     lambda run, info, folder: (run.name, info["from"], folder.name))
    assert rows == [("a", "second", "second")] and missing == {"b": "other TrainConfig"}


def test_throttled_calls_on_done_at_most_every_so_often(monkeypatch):
    from scoreprobe.studies import queue
    now = [0.0]
    monkeypatch.setattr(queue.time, "time", lambda: now[0])
    calls = []
    call = queue.throttled(calls.append, 300)
    for t, name in ((10, "a"), (301, "b"), (400, "c"), (700, "d")):
        now[0] = t
        call(name)
    assert calls == ["b", "d"]


def test_clocks_row_of_attrs_and_curves():
    from scoreprobe.studies.shipped_clocks import TAUS, clocks_row
    ds = xr.Dataset({"state": (("step", "sample"), np.array([[0, 1], [2, 4]], np.int8))})
    a = {**{k: 1.0 for k in TAUS}, "tau_rule_ci": [0.5, 2.0], "window_open": True, "window_log10_width": 0.5}
    curve = {"rule_acc": [0.1, 0.9, 0.8], "mem_ratio": [0.0, 0.1, 0.2], "novel_valid": [0.1, 0.8, 0.6]}
    row = clocks_row(a, [0, 5, 10], curve, ds)
    assert row["tau_rule_ci"] == [0.5, 2.0] and row["tau_mem_ci"] is None and row["peak_rule_acc"] == 0.9
    assert (row["final_rule_acc"], row["final_mem_ratio"], row["final_novel_valid"]) == (0.8, 0.2, 0.6)
    assert row["curves"]["step"] == [0, 5, 10] and row["final_state"] == [2, 4]


def test_paired_sampler_ratios_by_run():
    rows_h = [{"run": f"r{N}-{s}", "seed": s, "meta": {"N": N}, "curves": {"tau_mem": [100.0 * N, np.inf],
                                                                          "tau_rule": [10.0, 20.0]}}
              for N in (60, 30) for s in (1, 0)]
    rows_s = [{**r, "curves": {"tau_mem": [200.0 * r["meta"]["N"], 5.0], "tau_rule": [10.0, 10.0]}} for r in rows_h]
    assert list(by_N(rows_h)) == [30, 60] and [r["seed"] for r in by_N(rows_h)[30]] == [0, 1]
    rc = ratio_curves(rows_h, rows_s)
    assert rc["r30-0"]["tau_mem"].tolist() == [2.0, np.inf] and rc["r30-0"]["tau_rule"].tolist() == [1.0, 0.5]


def test_component_tests_and_their_two_holm_families():
    part = [{"threshold": 0.3, "p_init": 0.01, "p_data": 0.5, "per_pair": [1.0, 4.0, 2.0, 8.0],
             "pair_seeds": [[0, 0], [0, 1], [1, 0], [1, 1]]}, {"threshold": 0.4, "p_init": 0.02, "p_data": math.nan}]
    reps = {"dit": {"architecture_part": part}, "gpt": {}}
    tests = transpose_split.component_tests(reps)
    key = ("dit", "architecture_part")
    assert tests == [(*key, "p_init", 0.3, 0.01), (*key, "p_data", 0.3, 0.5), (*key, "p_init", 0.4, 0.02)]
    own, study = transpose_split.holm_tables(tests)
    assert own[("dit", "architecture_part", "p_init")].tolist() == pytest.approx([0.02, 0.02])
    assert study[tests[0]] == pytest.approx(0.03) and study[tests[1]] == pytest.approx(0.5)
    assert transpose_split.means_by_seed(part[0], "p_init") == pytest.approx({0: math.sqrt(2), 1: math.sqrt(32)})
    assert transpose_split.means_by_seed(part[0], "p_data") == pytest.approx({0: 2.0, 1: 4.0})


def test_curves_figure_of_two_models(tmp_path):
    from scoreprobe.viz.clock_runs import curves_figure
    series = SimpleNamespace(config={"batch_size": 96, "n_train": 120})
    curves = {"step": [0, 100, 1000], "rule_acc": [0.1, 0.5, 0.9], "mem_ratio": [0.0, 0.0, 0.2]}
    curves_figure([("GPT", series, (curves, {})), ("DiT", series, (curves, {}))], tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 0
