"""The library pieces the measuring studies (decompose, circuits, atp_agreement, oracle_samples) are built from:
nearest checkpoints, strict JSON, the stage cache, the runs' clocks, the crossover summary, intervals over units,
the table cells, the q/k sites and the oracle-samples JSON. (The attribution sums and the circuits reports are the
studies' own: tests/test_atp_agreement.py, tests/test_circuit_shares.py.)"""
import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "analyses" / "results"
SHIPPED = ROOT / "checkpoints" / "parity-default"


def test_nearest_steps_are_nearest_in_log_step():
    from scoreprobe.stats.nearest_steps import nearest_step, nearest_steps
    steps = [0, 100, 300, 900, 1500]
    assert nearest_step(steps, 250) == 300 and nearest_step(steps, 0) == 0 and nearest_step(steps, 10 ** 6) == 1500
    assert nearest_step(steps, 9) == 0                      # ln 10 is nearer ln 1 than ln 101
    assert nearest_steps(steps, [250, 280, 1400]) == [300, 1500]


def test_json_ready_makes_strict_json_and_keeps_order():
    from scoreprobe.store.json_ready import json_ready, number_or_none
    v = json_ready({"b": (np.float32(1.5), np.nan), "a": [np.int64(3), np.str_("x"), {"c": np.inf}]})
    assert list(v) == ["b", "a"] and v == {"b": [1.5, None], "a": [3, "x", {"c": None}]}
    assert json.loads(json.dumps(v, allow_nan=False)) == v
    assert number_or_none(None) is None and number_or_none(float("-inf")) is None and number_or_none(2) == 2.0


def test_stage_cache_reuses_only_the_same_parameters(tmp_path):
    from scoreprobe.studies.stage_cache import cached_json
    calls = []

    def fn():
        calls.append(1)
        return {"n": len(calls)}
    f = tmp_path / "stage_x.json"
    assert cached_json(f, {"a": (1, 2)}, fn)[0] == {"n": 1}
    assert cached_json(f, {"a": [1, 2]}, fn)[0] == {"n": 1} and len(calls) == 1       # tuples read back as lists
    assert cached_json(f, {"a": [1, 3]}, fn)[0] == {"n": 2}
    assert json.loads(f.read_text())["params"] == {"a": [1, 3]}
    g = tmp_path / "other.json"
    cached_json(g, {"s": 1}, fn, key="key")
    assert set(json.loads(g.read_text())) == {"key", "result", "seconds"}


def test_clocks_of_a_run_directory(tmp_path):
    from scoreprobe.errors import ConfigError
    from scoreprobe.studies.trained_models import clock_summary, clock_taus
    raw = json.loads((SHIPPED / "clocks.json").read_text())
    t = clock_taus(SHIPPED)
    assert list(t) == ["tau_rule", "tau_rule_ci", "tau_mem", "tau_mem_ci"] and t["tau_mem"] == raw["taus"]["tau_mem"]
    s = clock_summary(SHIPPED)
    assert s["rule_acc_max"] == max(r["rule_acc"] for r in raw["table"]) and s["tau_rule"] < s["tau_mem"]
    assert clock_taus(tmp_path) is None
    with pytest.raises(ConfigError, match="clocks.json is missing"):
        clock_summary(tmp_path)


def test_crossover_summary():
    from analyses.decompose.crossover_summary import excess_slopes, gap_closed, loglog_slope, over_models
    cross = {"oracle": ["memorizer", "rule"], "oracle_loss_avg": [0.0, 1.0], "loss_avg": [1.0, 0.5, 0.0],
             "steps": [0, 99, 9999]}
    g = gap_closed(cross, {"tau_rule": 99, "tau_mem": 999})
    assert g["per_step"] == {"0": 0.0, "99": 0.5, "9999": 1.0}
    assert g["at"]["tau_rule"] == 0.5 and np.isclose(g["at"]["tau_mem"], 0.75)       # halfway in ln(step + 1)
    assert np.isclose(loglog_slope([1, 2, 4], [3, 12, 48]), 2.0) and loglog_slope([1, 2], [0, 1]) is None
    ex = {"N": [10, 20, 40], "excess": [1, 2, 4], "excess_by_seed": [[1, 2, 4], [1, 4, 16]], "excess_seeds": [0, 1]}
    s = excess_slopes(ex)
    assert np.allclose(s["per_seed"], [1, 2]) and np.isclose(s["interval"][0], 1.5) and s["interval"][1] < 1.5
    assert over_models(np.array([1000.0])) == {"mean": 1000.0, "mean_lo": None, "mean_hi": None}
    assert over_models(np.array([1000.0, np.nan]))["mean"] is None


def test_intervals_over_units():
    from scoreprobe.stats.unit_intervals import clipped_summary, mean_interval, why_undefined
    m, lo, hi = clipped_summary([[0.0, 0.5], [0.02, 0.6], [0.0, np.nan]])
    assert lo[0] == 0.0 and hi[0] > m[0] > 0 and np.isnan([m[1], lo[1], hi[1]]).all()
    mean, a, b = mean_interval(0.5, 0.2, 10)
    assert np.isclose(b - mean, stats.t.ppf(0.975, 9) * 0.2 / np.sqrt(10)) and np.isclose(mean - a, b - mean)
    assert mean_interval(0.5, 0.2, 1) == [0.5, None, None] and mean_interval(np.nan, 0.2, 9) == [None, None, None]
    assert list(why_undefined([["", "mixed sign"], ["below floor", ""]], ["s0", "s1"])) == ["s1: below floor",
                                                                                           "s0: mixed sign"]


def test_table_cells():
    from scoreprobe.reports.interval_text import ci_pair, never, num, per_model, triple
    assert num(None) == "–" and num(0.5) == "+0.50" and ci_pair([0.1, None]) == "CI open"
    assert ci_pair([-0.1, 0.2]) == "[-0.10, +0.20]" and per_model([0.1, None], ["a", "b"]) == "a +0.10, b NaN"
    assert never(None) == "never" and never(float("nan")) == "never" and never(1234.4) == "1234"
    assert triple([None, None, None]) == "—" and triple([0.5, None, None]) == "0.50"
    assert triple([0.5, 0.25, 0.75]) == "0.50 [0.25, 0.75]"


def test_qk_sites_are_every_heads_query_and_key():
    import scoreprobe as sp
    from scoreprobe.inside.sites import qk_sites, resolve_sites
    net = sp.load_series().denoiser(0).net
    sites = qk_sites(net)
    assert len(sites) == len(net.blocks) * 2 * net.blocks[0].attn.num_heads and len(set(sites)) == len(sites)
    assert sites[0] == "blocks.0.attn.hook_q[head=0]" and len(resolve_sites(net, sites)) == len(sites)


def test_oracle_samples_json_rounds_and_picks_the_pixel_classes():
    from scoreprobe.probes.oracle_samples import oracle_samples_json
    rng = np.random.default_rng(0)
    so = dict(step=[0, 10], oracle=["memorizer", "rule"])
    v = {k: (("step", "oracle"), rng.uniform(size=(2, 2))) for k in ("agree", "agree_low", "agree_high", "hamming")}
    ds = xr.Dataset({**v, "class_agree": (("oracle", "pixel_class", "step"), rng.uniform(size=(2, 2, 2))),
                     "net_train_item": ("step", [0.123456, 0.5]), "net_valid": ("step", [1.0, 0.25])},
                    coords={**so, "pixel_class": ["interior", "border"]})
    out = oracle_samples_json(ds)
    assert out["net_train_item"] == [0.1235, 0.5] and np.allclose(out["hamming"], ds.hamming.values.round(4))
    assert out["border"] == ds.class_agree.sel(pixel_class="border").transpose("step", "oracle").values.round(4).tolist()
