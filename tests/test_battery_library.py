"""The library pieces the mechanism studies and the findings page are built from (issue 57 item 5): table cells,
the preset overrides and the command that gives them back, a point read against a claim's test, the τ ratios of a
half-change, the DSM gap's half-change from stores, and a claim's curve read from a results folder."""
import argparse
import json
import math

import numpy as np
import pytest
import xarray as xr


def test_cells_read_json_numbers_and_say_what_is_missing():
    from scoreprobe.reports.report_cells import curve_cell, interval, num, p_text, step_text, tau_cell, window_text
    assert num(0.12345) == "0.123" and num(None) == "—" and num(math.inf) == "—"
    assert step_text(1234.6) == "1235" and step_text(None) == "not reached" and step_text(None, "—") == "—"
    assert interval(0.1, None) == "[0.10, —]" and p_text(3e-5) == "< 1e-4" and p_text(0.0123) == "0.012"
    c = {"mean": [0.5, None], "lo": [0.4, None], "hi": [0.6, None]}
    assert curve_cell(c, 0) == "0.500 [0.400, 0.600]" and curve_cell(c, 1) == "—" and curve_cell(None, 0) == "—"
    t = {"tau_rule": 1977.2, "tau_rule_ci": [1900, 2050.4], "tau_mem": None, "window_open": True,
         "window_intervals": [[2000, 9000]]}
    assert tau_cell(t, "tau_rule") == "1977 [1900, 2050]" and tau_cell(t, "tau_mem") == "not reached"
    assert window_text(t) == "2000–9000" and window_text({"window_open": False}) == "closed"


def test_preset_overrides_parse_back_the_command_that_gives_them():
    from scoreprobe.cli.study import command_line, names
    from scoreprobe.studies.queue import add_overrides, apply_preset
    presets = {"smoke": dict(seeds=[0, 1], sigmas=[1.0], n=2, n_steps=4, closed=dict(N=8), jobs=1),
               "cpu": dict(seeds=[0, 1, 2], sigmas=[0.5, 1.0], n=11, n_steps=None, closed=dict(N=30), jobs=2)}
    p = argparse.ArgumentParser()
    for flag in ("--preset", "--device"):
        p.add_argument(flag, default=None if flag == "--preset" else "cpu")
    p.add_argument("--smoke", action="store_true")
    add_overrides(p, presets)
    args = p.parse_args(command_line("", {"seeds": [0, 2], "sigmas": [0.5], "n": 3}).split())
    assert apply_preset(args, presets) == "cpu" and args.closed == {"N": 30} and args.n_steps is None
    assert (args.seeds, args.sigmas, args.n) == ([0, 2], [0.5], 3) and set(args.overrides) == {"seeds", "sigmas", "n"}
    assert names(p, "--kinds", " a, b,", ["a", "b"]) == ["a", "b"]
    with pytest.raises(SystemExit):
        names(p, "--kinds", "a,c", ["a", "b"])


def test_a_point_is_read_as_the_claims_test_reads_its_interval():
    from analyses.mechanism.battery_tables import tau_ratios
    from scoreprobe.stats.claim_tests import point_reading
    assert point_reading(("near", "tau_mem"), 1500.0, 1000.0) == ("within a factor 2 of τ_mem: 1500 / 1000 = 1.50",
                                                                  True)
    assert point_reading(("before", "tau_rule"), 3000.0, 1000.0)[1] is False
    assert point_reading(("after", "tau_mem"), None, 1000.0)[1] is None
    assert tau_ratios(500.0, {"tau_rule": 1000.0, "tau_mem": None}) == ["0.50", "—"]
    assert tau_ratios(None, {"tau_rule": 1000.0}) == ["—", "—"]


def test_the_dsm_gap_half_change_from_stores_finds_the_planted_midpoint():
    """Two noise banks of 6 pairs whose held-out − training gap rises as a logistic in ln step with midpoint 1000:
    the fitted half-change is near 1000 and the stores reproduce their own paired gap exactly."""
    from scoreprobe.stats.dsm_stats import paired_gap_stats
    from scoreprobe.studies.battery_summary import dsm_half_change
    steps = [100, 200, 400, 700, 1000, 1500, 2500, 5000, 10000]
    rise = 1 / (1 + np.exp(-3 * (np.log(steps) - np.log(1000))))                           # (S,)
    rng = np.random.default_rng(0)

    def store():
        loss = np.ones((len(steps), 2, 12)) + rng.normal(0, 0.01, (len(steps), 2, 12))
        loss[..., 6:] += rise[:, None, None]
        return xr.Dataset({"loss": (("step", "sigma", "sample"), loss)},
                          coords={"step": steps, "sigma": [0.5, 1.0], "split": ("sample", ["train"] * 6 + ["heldout"] * 6),
                                  "item_index": ("sample", list(range(6)) * 2)})
    stores = {0: store(), 1: store()}
    mean = (stores[0].loss.values + stores[1].loss.values) / 2
    own = paired_gap_stats(mean, np.array(["train"] * 6 + ["heldout"] * 6, dtype=object), np.arange(12) % 6,
                           np.array([0.5, 1.0]))["paired_gap"]
    h = dsm_half_change(stores, steps, n_boot=200, reference_gap=own)
    assert h["n_pairs"] == 6 and h["reproduces_shipped_paired_gap_max_abs"] == 0.0
    assert h["step"] == pytest.approx(1000, rel=0.1) and h["ci"][0] <= h["step"] <= h["ci"][1]


def test_a_claims_curve_is_read_from_a_results_folder(tmp_path):
    from scoreprobe.stats.claim_readings import curve_at, from_readings, load_result
    rows = [{"threshold": 0.5, "value": 2.0, "ci": [1.5, 2.5]}, {"threshold": 0.9, "value": 3.0, "ci": [2.0, 4.0]}]
    (tmp_path / "study.json").write_text(json.dumps({"a": {"b": rows}}))
    assert load_result("absent", tmp_path) is None and curve_at("absent", "a")(tmp_path) is None
    r = curve_at("study", "a", "b")(tmp_path)
    assert r.thresholds == [0.5, 0.9] and r.estimate == [2.0, 3.0] and r.upper == [2.5, 4.0]
    assert r.paper_threshold is None                  # not a rule or memorization grid: no paper's threshold
    b = from_readings([{"threshold": 0.9, "kind": "bound", "value": None, "ci": [8.0, None]}], 0.9)
    assert b.censored == [True] and b.lower == [8.0] and b.upper == [math.inf] and math.isnan(b.estimate[0])
