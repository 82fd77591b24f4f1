"""scoreprobe/stats/curves.py: per-run τ over thresholds agree with tau_summary, verdicts are called robust only
where they hold at every readable threshold, censored thresholds are never read; the GPT exports name their
sampler."""
import json
import math

import numpy as np
import pytest

from scoreprobe.stats import curves as C
from scoreprobe.studies.export import clocks_config_text, read_export
from scoreprobe.studies.format import curve_cell
from scoreprobe.stats.taus import tau_summary
from tests.test_taus import STEPS24, sampled


def test_run_curves_agree_with_tau_summary_at_every_threshold():
    ds = sampled(np.random.default_rng(0), STEPS24)
    c = C.run_curves(ds)
    for key, th in (("tau_rule", "rule_threshold"), ("tau_mem", "mem_threshold")):
        for t, v in zip(C.thresholds_of(key), c[key]):
            ref = tau_summary(ds, n_boot=0, warn=False, **{th: t})[key]
            assert (v == ref) or (math.isinf(v) and math.isnan(ref))
    j = C.RULE_THRESHOLDS.index(0.9)
    assert bool(c["window_open"][j]) == tau_summary(ds, n_boot=0, warn=False)["window_open"]


def _curve(values):
    """A ratio curve: (value, lo, hi) per threshold, None = censored."""
    return [{"threshold": t, **({"value": math.nan, "ci": [math.nan] * 2, "censored": True} if v is None else
                                {"value": v[0], "ci": [v[1], v[2]], "censored": False})}
            for t, v in zip((0.3, 0.5, 0.7, 0.9), values)]


WORDS = {"above": "later", "below": "earlier", "includes": "same"}


def test_a_verdict_is_robust_only_where_it_holds_at_every_readable_threshold():
    same = _curve([(1.0, 0.8, 1.2), (1.1, 0.9, 1.3), (0.9, 0.7, 1.1), None])
    assert C.robust(same, 1.0, WORDS) == "same at every readable threshold (0.3–0.7 (3 thresholds); robust); " \
                                         "censored at 0.9"
    mixed = _curve([(0.5, 0.3, 0.8), (1.0, 0.8, 1.2), (2.0, 1.5, 2.5), (2.2, 1.6, 2.9)])
    text = C.robust(mixed, 1.0, WORDS)
    assert "not robust" in text and "later at 0.7–0.9" in text and "earlier at 0.3" in text
    assert C.robust(_curve([None] * 4), 1.0, WORDS).startswith("not readable")
    assert C.range_text(same) == "0.90–1.10 (95% CI ends from 0.70 to 1.30)"


def test_interleaved_thresholds_are_never_written_as_one_range():
    """0.3 and 0.7 below, 0.5 and 0.9 inside: neither side may read '0.3–0.7', which would claim 0.5."""
    zigzag = _curve([(0.5, 0.3, 0.8), (1.0, 0.8, 1.2), (0.6, 0.4, 0.9), (1.0, 0.9, 1.1)])
    text = C.robust(zigzag, 1.0, WORDS)
    assert "earlier at 0.3, 0.7 (2 thresholds)" in text and "same at 0.5, 0.9 (2 thresholds)" in text
    assert C.span([0.5, 0.7, 0.9], grid=[0.3, 0.5, 0.7, 0.9]) == "0.5–0.9 (3 thresholds)"
    assert C.span([0.3, 0.9], grid=[0.3, 0.5, 0.7, 0.9]) == "0.3, 0.9 (2 thresholds)"
    assert C.span([]) == "none" and C.span([0.7]) == "0.7"


def test_censored_thresholds_are_never_read():
    rows = [{"run": f"r{i}", "steps": 1000} for i in range(3)]
    curves = {"r0": {"tau_rule": np.array([10.0, 20, 40, 80, 100, 120, 150, 200, 300, np.inf])},
              "r1": {"tau_rule": np.array([12.0, 22, 44, 90, 110, 130, 160, 220, np.inf, np.inf])},
              "r2": {"tau_rule": np.array([11.0, 21, 42, 85, 105, 125, 155, 210, 330, np.inf])}}
    pooled = C.pooled_curve(rows, curves, "tau_rule")
    assert not pooled[7]["lower_bound"] and pooled[8]["lower_bound"] and pooled[8]["budget"] == 1000
    assert all(math.isnan(v) for v in C.value_of(pooled[8]))
    ratio = C.ratio_curve(rows, rows[:1] + rows[2:], curves, "tau_rule")
    assert ratio[8]["censored"] and not ratio[7]["censored"]


def test_a_crossing_before_the_first_checkpoint_after_zero_is_never_read():
    """Run r0 crosses 0.3 and 0.5 before its first checkpoint after 0 (50): only τ ≤ 50 is known there, so the
    pooled τ, the ratio and the fit at those thresholds are 'not resolved' (never a value, a CI or a bound), the
    verdict names them, and the thresholds every run resolves are read as before."""
    T = len(C.thresholds_of("tau_rule"))
    base = np.geomspace(100, 3000, T)
    curves = {f"r{i}": {"tau_rule": base * (1 + 0.1 * i), "resolved_from": np.array([50.0])} for i in range(4)}
    curves["r0"]["tau_rule"] = np.concatenate([[20.0, 45.0], base[2:]])
    rows = [{"run": f"r{i}", "steps": 5000} for i in range(4)]
    pooled = C.pooled_curve(rows[:2], curves, "tau_rule")
    assert [r.get("under_resolved") for r in pooled[:3]] == [50.0, 50.0, None] and pooled[0]["n_under"] == 1
    assert all(math.isnan(v) for v in C.value_of(pooled[0])) and math.isfinite(C.value_of(pooled[2])[0])
    assert curve_cell(pooled[0]).startswith("under-resolved (crossed before step 50 in 1 run(s))")
    ratio = C.ratio_curve(rows[:2], rows[2:], curves, "tau_rule")
    assert C.relation(ratio, 1.0)["under_resolved"] == list(C.thresholds_of("tau_rule")[:2])
    assert "under-resolved (crossed before the first checkpoint after step 0) at 0.3–0.4 (2 thresholds)" in \
        C.robust(ratio, 1.0, WORDS)
    fit = C.fit_curve([rows[:2], rows[2:]], [1, 2], curves, "tau_rule", "power")
    assert fit[0]["under_resolved"] and not fit[2].get("under_resolved")
    clean = C.pooled_curve(rows[1:], curves, "tau_rule")
    assert not any(r.get("under_resolved") for r in clean)


def test_run_curves_record_the_first_checkpoint_after_zero():
    for steps in (STEPS24, np.concatenate([[0, 7], STEPS24])):
        ds = sampled(np.random.default_rng(0), steps)
        assert C.run_curves(ds)["resolved_from"].tolist() == [float(min(s for s in steps if s > 0))]


def test_gpt_exports_name_their_sampler():
    z = read_export("analyses/results/scaling_cpu/gpt-raster-g2-n120-s0.npz")
    assert z["clocks_config"]["sampler"] == {"name": "ancestral", "temperature": 1.0}
    assert z["clocks_config"]["n_steps"] is None
    dit = read_export("analyses/results/scaling_cpu/g2-n120.npz")["clocks_config"]
    assert dit["sampler"] == {"name": "heun"} and dit["n_steps"] == 32
    ds = z["ds"]
    ds.attrs["scoreprobe_config"] = json.dumps({"source": {"kind": "gpt"}, "sampler": {"name": "heun"}, "n_steps": 32})
    assert json.loads(clocks_config_text(ds))["sampler"]["name"] == "ancestral"


@pytest.mark.parametrize("key", ["tau_rule", "tau_mem"])
def test_shipped_exports_curves_rise_with_the_threshold(key):
    c = C.run_curves(read_export("analyses/results/scaling_cpu/g2-n240.npz")["ds"])[key]
    finite = c[np.isfinite(c)]
    assert finite.size >= 3 and np.all(np.diff(finite) > 0)


def _rule_curve(cells):
    """A ratio curve over the rule thresholds 0.3…0.95: cells (value, lo, hi), None for censored."""
    return [{"threshold": t, "value": c[0] if c else math.nan, "ci": [c[1], c[2]] if c else [math.nan, math.nan],
             "censored": c is None} for t, c in zip(C.thresholds_of("tau_rule"), cells)]


def test_the_paper_threshold_is_read_first_and_robust_needs_it():
    below = (0.5, 0.3, 0.8)
    censored_at_paper = _rule_curve([below] * 8 + [None, None])            # 0.9 and 0.95 censored
    text = C.robust(censored_at_paper, 1.0, WORDS)
    assert text.startswith("at the paper's threshold 0.9: not read (censored: a run does not reach it); over the "
                           "range: earlier at every readable threshold (0.3–0.85 (8 thresholds); not the paper's")
    assert "; robust)" not in text
    read = _rule_curve([below] * 8 + [(1.0, 0.9, 1.1), None])
    text = C.robust(read, 1.0, WORDS)
    assert text.startswith("at the paper's threshold 0.9: same (1 [0.9, 1.1]); over the range: ")
    assert "not robust across thresholds" in text
    assert C.robust(_rule_curve([below] * 10), 1.0, WORDS).endswith("(0.3–0.95 (10 thresholds); robust)")
    assert C.paper_threshold_of(_curve([below] * 4)) is None              # a curve over other thresholds
