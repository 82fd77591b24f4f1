"""The verdict words (scoreprobe/stats/verdict.py, issue 54): planted threshold curves, one per word, and
the paper's threshold read first."""
import math

import pytest

import scoreprobe as sp
from scoreprobe.errors import ConfigError
from scoreprobe.stats.verdict import WORDS, word_at

T = [0.3, 0.5, 0.7, 0.9]
REGION = (8.0, 12.0)          # "≈ 10× per unit G", planted as the factor lying in [8, 12]
INF = math.inf


def _curve(intervals, censored=None, paper=0.9, region=REGION):
    lower = [a for a, _ in intervals]
    upper = [b for _, b in intervals]
    est = [a if math.isinf(b) else b if math.isinf(a) else (a + b) / 2 for a, b in intervals]
    return sp.verdict(T, est, lower, upper, region=region, paper_threshold=paper, censored=censored)


def test_each_word_at_one_threshold():
    assert word_at(9, 11, REGION) == "supported"
    assert word_at(3, 6, REGION) == "contradicted"
    assert word_at(13, 20, REGION) == "contradicted"
    assert word_at(6, 9, REGION) == "undecided"
    assert word_at(5, 20, REGION) == "undecided"          # wider than the region: straddles both ends
    assert word_at(10, INF, REGION, censored=True) == "budget-bound"
    assert word_at(14.1, INF, REGION, censored=True) == "contradicted"   # a bound beyond the region decides
    assert word_at(math.nan, 3, REGION) == "undefined"
    assert word_at(8, 12, REGION) == "supported"          # the region's ends belong to it


@pytest.mark.parametrize("intervals, censored, word", [
    ([(9, 11)] * 4, None, "supported"),
    ([(3, 6)] * 4, None, "contradicted"),
    ([(3, 6), (3, 6), (3, 6), (6, 9)], None, "undecided"),                  # the range decides, the paper's does not
    ([(3, 6), (3, 6), (3, 6), (10, INF)], [0, 0, 0, 1], "budget-bound"),     # the G factor at 0.9, planted
    ([(3, 6), (3, 6), (9, 11), (9, 11)], None, "threshold-dependent"),     # supported at 0.9, contradicted at 0.3
    ([(9, 11), (9, 11), (9, 11), (math.nan, math.nan)], None, "undefined"),
])
def test_each_verdict_word_from_a_planted_curve(intervals, censored, word):
    v = _curve(intervals, censored)
    assert v.word == word and word in WORDS
    assert v.paper.threshold == 0.9


def test_the_paper_threshold_is_read_first():
    # contradicted everywhere but at the paper's threshold, where it is supported: not "contradicted"
    v = _curve([(3, 6), (3, 6), (3, 6), (9, 11)])
    assert v.word == "threshold-dependent" and v.paper.word == "supported"
    # the same curve read at 0.3 as if that were the paper's threshold
    assert _curve([(3, 6), (3, 6), (3, 6), (9, 11)], paper=0.3).word == "threshold-dependent"
    # undecided in the range does not overturn a decided paper threshold
    assert _curve([(6, 9), (6, 9), (9, 11), (9, 11)]).word == "supported"


def test_the_sentence_names_the_paper_threshold_and_every_part_of_the_range():
    s = _curve([(3, 6), (3, 6), (3, 6), (14.1, INF)], censored=[0, 0, 0, 1]).sentence()
    # below the region at 0.3–0.7, above it at 0.9: both contradict "≈ 10×"; the sentence shows the evidence
    assert s.startswith("contradicted: contradicted at the paper's threshold 0.9 (> 14.1, censored at the budget)")
    assert s.endswith("over 0.3–0.9: contradicted at 0.3–0.9")
    s = _curve([(3, 6), (3, 6), (9, 11), (9, 11)]).sentence()
    assert "contradicted at 0.3–0.5; supported at 0.7–0.9" in s


def test_one_sided_claims():
    later = (1.0, INF)                        # "A is later than B": the ratio above 1
    assert _curve([(1.2, 2.0)] * 4, region=later).word == "supported"
    assert _curve([(0.5, 0.9)] * 4, region=later).word == "contradicted"
    assert _curve([(0.9, 1.4)] * 4, region=later).word == "undecided"


@pytest.mark.parametrize("kw, match", [
    (dict(paper_threshold=0.8), "paper's threshold 0.8 is not among"),
    (dict(region=(12, 8)), "lo < hi"),
    (dict(region=(math.nan, 1)), "lo < hi"),
    (dict(lower=[1, 1, 1, 5]), "lower > upper"),
    (dict(estimate=[1, 2]), "one length"),
    (dict(thresholds=[0.3, 0.3, 0.7, 0.9]), "distinct"),
])
def test_bad_input_is_refused(kw, match):
    args = dict(thresholds=T, estimate=[1, 1, 1, 1], lower=[0, 0, 0, 0], upper=[2, 2, 2, 2], region=REGION,
                paper_threshold=0.9)
    args.update(kw)
    with pytest.raises(ConfigError, match=match):
        sp.verdict(args.pop("thresholds"), args.pop("estimate"), args.pop("lower"), args.pop("upper"), **args)
