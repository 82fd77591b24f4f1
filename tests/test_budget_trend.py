"""Where a run that missed a threshold is heading at its budget (scoreprobe/stats/budget_trend.py) and the verdict
word it gives (issue 73 item 7): planted curves that peak and fall read "not reached and falling", curves still
rising at the budget read "budget-bound"."""
import math

import numpy as np
import pytest

import scoreprobe as sp
from scoreprobe.errors import ConfigError
from scoreprobe.stats.budget_trend import MARGIN, end_trend, falling_at
from scoreprobe.stats.verdict import FALLING, WORDS, word_at

STEP = np.linspace(0, 30000, 31)
PEAKED = 0.1 + 0.8 * np.exp(-((STEP - 12000) / 6000) ** 2 / 2)        # peaks at 0.9 at step 12000, ends ≈ 0.1
RISING = 0.1 + 0.8 / (1 + np.exp(-(STEP - 25000) / 3000))               # still rising at step 30000
PLATEAU = np.minimum(0.1 + STEP / 10000, 0.85)                           # flat at 0.85 from step 7500


def test_end_trend_of_planted_curves():
    p = end_trend(STEP, PEAKED)
    assert p["falling"] and p["peak"] == pytest.approx(0.9) and p["peak_step"] == 12000
    assert p["end"] == pytest.approx(PEAKED[-3:].mean())
    assert not end_trend(STEP, RISING)["falling"] and not end_trend(STEP, PLATEAU)["falling"]
    # a fall just under the margin is not a fall; just over it is
    for drop, want in ((MARGIN * 0.9, False), (MARGIN * 1.1, True)):
        y = np.concatenate([np.linspace(0.2, 0.8, 20), np.full(11, 0.8 - drop)])
        assert end_trend(STEP, y)["falling"] is want
    # one low point at the very end is not a fall (the end is the mean of the last 3 checkpoints)
    noisy = PLATEAU.copy()
    noisy[-1] -= 2 * MARGIN
    assert not end_trend(STEP, noisy)["falling"]


def test_falling_at_needs_every_missing_run_falling_and_below():
    t = [0.5, 0.95]
    curves = [(STEP, PEAKED), (STEP, PEAKED)]
    reached = [[True, False], [True, False]]
    assert falling_at(curves, reached, t).tolist() == [False, True]     # nothing missing at 0.5: not falling
    # one run still rising at its budget: a longer run could cross
    assert falling_at([(STEP, PEAKED), (STEP, RISING)], reached, t).tolist() == [False, False]
    # a run falling but ending above the threshold it misses (not reliably over it) is not "fell below it"
    assert falling_at([(STEP, PEAKED)], [[False, True]], [0.05, 0.95]).tolist() == [False, False]


@pytest.mark.parametrize("kw, match", [
    (dict(step=[0, 1, 1, 2], value=[0, 1, 2, 3]), "increasing"),
    (dict(step=[0, 1, 2], value=[0, 1, 2]), "at least 4"),
    (dict(step=[0, 1, 2, 3], value=[0, 1, 2]), "one length"),
])
def test_end_trend_refuses_bad_curves(kw, match):
    with pytest.raises(ConfigError, match=match):
        end_trend(**kw)


def test_verdict_words_from_planted_curves():
    """The G factor at 0.9, planted: censored (> 10, inside the region's straddle) — the runs' curves decide."""
    t, region = [0.3, 0.9], (8.0, 12.5)
    est, lo, hi, cens = [5.0, math.nan], [4.0, 10.0], [6.0, math.inf], [False, True]
    for curve, word in ((PEAKED, FALLING), (RISING, "budget-bound")):
        fall = falling_at([(STEP, curve)] * 3, [[True, False]] * 3, t)
        v = sp.verdict(t, est, lo, hi, region=region, paper_threshold=0.9, censored=cens, falling=fall)
        assert v.word == word and v.paper.word == word and word in WORDS
    v = sp.verdict(t, est, lo, hi, region=region, paper_threshold=0.9, censored=cens, falling=[False, True])
    assert "peaked and fell below it within their budget" in v.sentence()
    # falling never overrides a decided bound, nor applies where the reading is not censored
    assert word_at(14.0, math.inf, region, censored=True, falling=True) == "contradicted"
    assert word_at(6.0, 9.0, region, censored=False, falling=True) == "undecided"
    v = sp.verdict(t, est, lo, hi, region=region, paper_threshold=0.3, censored=[False, True], falling=[True, False])
    assert v.readings[0].falling is False


def test_doubly_infinite_intervals_are_undefined_and_falling_flags_are_checked():
    assert word_at(-math.inf, math.inf, (8, 12)) == "undefined"
    assert word_at(-math.inf, math.inf, (8, 12), censored=True) == "undefined"
    with pytest.raises(ConfigError, match="falling"):
        sp.verdict([0.9], [1.0], [0.5], [2.0], region=(1, 2), paper_threshold=0.9, falling=["no"])
    with pytest.raises(ConfigError, match="one flag per threshold"):
        sp.verdict([0.9], [1.0], [0.5], [2.0], region=(1, 2), paper_threshold=0.9, falling=[True, False])


def _row(name, acc):
    steps = [100 * (k + 1) for k in range(len(acc))]
    return {"run": name, "steps": steps[-1], "curve": {"step": steps, "rule_acc": list(acc),
                                                        "mem_ratio": [0.0] * len(acc)}}


def test_a_censored_pooled_tau_says_whether_its_unreached_seeds_fall_or_still_rise():
    """stats.runs.pooled on planted seeds: a seed that never reaches 0.9 and whose rule accuracy peaked and fell
    makes the bound 'not reached and falling'; one still rising makes it 'budget-bound'; all reached: no word."""
    from scoreprobe.stats.runs import pooled
    from scoreprobe.studies.format import pooled_cell
    up = [0.1, 0.3, 0.6, 0.92, 0.95, 0.95, 0.96, 0.96]
    peaked = [0.1, 0.5, 0.85, 0.88, 0.8, 0.7, 0.6, 0.55]
    rising = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    draws = {"a": {"tau_rule": (350.0, np.full(20, 350.0))}, "b": {"tau_rule": (math.inf, np.full(20, math.inf))},
             "c": {"tau_rule": (math.inf, np.full(20, math.inf))}}
    fall = pooled([_row("a", up), _row("b", peaked)], draws, "tau_rule")
    assert fall["lower_bound"] and fall["unreached_trend"] == "falling"
    assert ", not reached and falling" in pooled_cell(fall)
    rise = pooled([_row("b", peaked), _row("c", rising)], draws, "tau_rule")
    assert rise["unreached_trend"] == "rising" and ", budget-bound" in pooled_cell(rise)
    short = pooled([_row("b", peaked[:3])], draws, "tau_rule")             # too short to read a trend: no word
    assert short["unreached_trend"] is None and "falling" not in pooled_cell(short)
    draws["d"] = {"tau_rule": (400.0, np.full(20, 400.0))}
    both = pooled([_row("a", up), _row("d", up)], draws, "tau_rule")
    assert "unreached_trend" not in both and "budget" not in pooled_cell(both)
