"""The verdict words: what a claim's threshold curve, read with its intervals, allows a report to say.

A claim says that an effect lies in a region: "τ_rule grows ≈ 10× per unit G" is the per-G factor in
[lo, hi]; "τ_mem ∝ N^b with b ≈ 1" is b in [lo, hi]; "A is later than B" is the ratio in (1, ∞). The
evidence is one interval per threshold (rule accuracy 0.3–0.95, memorized share 0.01–0.2): a two-sided
confidence interval, or, where runs did not reach the threshold within their budget, a censored one —
a bound whose open end is ±inf (`lower` = the bound, `upper` = inf for "> bound").

At one threshold (`word_at`):

    supported      the interval lies inside the region
    contradicted   the interval and the region do not overlap
    undecided      the interval straddles an end of the region
    budget-bound   censored and straddling, the runs that did not reach it still rising (or flat) at their
                   budget: a longer budget could decide it, these runs cannot
    not reached and falling
                   censored and straddling, every run that did not reach it peaked and fell below it within
                   its budget (`falling`, from `scoreprobe.stats.budget_trend`): not learned at this setting;
                   a longer budget would not decide it
    undefined      no interval (NaN at either end, or both ends infinite): never read as a word

Over the curve (`verdict`) the paper's own threshold is read first, and its word is the verdict, with one
exception: where it decides (supported or contradicted) and another threshold of the range decides the
opposite, the verdict is "threshold-dependent". A verdict that holds at the paper's threshold only, or at
part of the range only, says so in `Verdict.sentence()`, which lists the words over the whole range.
"""
import math
from dataclasses import dataclass

import numpy as np

from scoreprobe.errors import ConfigError
from scoreprobe.limits import check_flags

FALLING = "not reached and falling"
WORDS = ("supported", "contradicted", "undecided", "budget-bound", FALLING, "undefined", "threshold-dependent")
_OPPOSITE = {"supported": "contradicted", "contradicted": "supported"}


@dataclass(frozen=True)
class Reading:
    """The evidence and its word at one threshold."""
    threshold: float
    estimate: float
    lower: float
    upper: float
    censored: bool
    word: str
    falling: bool = False


@dataclass(frozen=True)
class Verdict:
    """The verdict word, the paper's threshold's reading, and every reading of the range (threshold order)."""
    word: str
    paper: Reading
    readings: tuple
    region: tuple

    def sentence(self, fmt="{:.3g}"):
        """e.g. 'contradicted at the paper's threshold 0.9 (3.1 [2.5, 3.8]); contradicted at 0.3–0.85, ...'."""
        p = self.paper
        head = f"{self.word}: {p.word} at the paper's threshold {fmt.format(p.threshold)} ({_evidence(p, fmt)})"
        groups = _runs(self.readings)
        tail = "; ".join(f"{w} at {_span(ts, fmt)}" for w, ts in groups)
        return f"{head}; over {_span([r.threshold for r in self.readings], fmt)}: {tail}"


def word_at(lower, upper, region, censored=False, falling=False):
    """The word of one interval [lower, upper] against the claimed region (lo, hi); ends may be ±inf.
    falling: (censored only) every run that did not reach the threshold peaked and fell below it."""
    lo, hi = region
    if (math.isnan(lower) or math.isnan(upper) or lower == math.inf or upper == -math.inf
            or (math.isinf(lower) and math.isinf(upper))):
        return "undefined"     # no interval, or one holding no finite value ([inf, inf], [-inf, inf]: no estimate)
    if lower >= lo and upper <= hi:
        return "supported"
    if upper < lo or lower > hi:
        return "contradicted"
    if not censored:
        return "undecided"
    return FALLING if falling else "budget-bound"


def verdict(thresholds, estimate, lower, upper, *, region, paper_threshold, censored=None, falling=None):
    """The verdict of a claim "the effect lies in `region`" over a threshold curve.

    thresholds, estimate, lower, upper: (T,) sequences (the curve and its interval; NaN where undefined);
    censored: (T,) bools, True where the interval is a bound from runs that did not reach the threshold
    (its open end ±inf); falling: (T,) bools, True where every run that did not reach the threshold peaked and
    fell below it within its budget (read only where censored; `scoreprobe.stats.budget_trend.falling_at`);
    region: (lo, hi), lo < hi, either end may be ±inf (a one-sided claim);
    paper_threshold: the paper's own threshold, one of `thresholds`.
    Returns a `Verdict` (word, the paper's Reading, every Reading in threshold order).
    """
    t, est, lo_, hi_, cens = _checked(thresholds, estimate, lower, upper, censored, region)
    fall = np.zeros(t.size, bool) if falling is None else check_flags(falling, "verdict: falling")
    if fall.size != t.size:
        raise ConfigError(f"verdict: falling must have one flag per threshold ({t.size}), got {fall.size}")
    fall = fall & cens
    order = np.argsort(t)
    readings = tuple(Reading(float(t[i]), float(est[i]), float(lo_[i]), float(hi_[i]), bool(cens[i]),
                             word_at(float(lo_[i]), float(hi_[i]), region, bool(cens[i]), bool(fall[i])),
                             bool(fall[i])) for i in order)
    paper = _paper_reading(readings, paper_threshold)
    word = paper.word
    if word in _OPPOSITE and any(r.word == _OPPOSITE[word] for r in readings):
        word = "threshold-dependent"
    return Verdict(word, paper, readings, (float(region[0]), float(region[1])))


# ---------------------------------------------------------------------------------------------
# Checks and wording
# ---------------------------------------------------------------------------------------------

def _checked(thresholds, estimate, lower, upper, censored, region):
    arrays = [np.asarray(a, dtype=float).reshape(-1) for a in (thresholds, estimate, lower, upper)]
    n = arrays[0].size
    cens = np.zeros(n, bool) if censored is None else check_flags(censored, "verdict: censored")
    if n == 0 or any(a.size != n for a in arrays[1:]) or cens.size != n:
        raise ConfigError(f"verdict: thresholds, estimate, lower, upper and censored must be non-empty and of one "
                          f"length (got {[a.size for a in arrays]} and {cens.size})")
    t, est, lo_, hi_ = arrays
    if not np.all(np.isfinite(t)) or np.unique(t).size != n:
        raise ConfigError("verdict: thresholds must be finite and distinct")
    if np.any(lo_ > hi_):
        raise ConfigError("verdict: an interval has lower > upper")
    if len(region) != 2 or any(math.isnan(float(r)) for r in region) or not float(region[0]) < float(region[1]):
        raise ConfigError(f"verdict: region must be (lo, hi) with lo < hi, got {region!r}")
    return t, est, lo_, hi_, cens


def _paper_reading(readings, paper_threshold):
    for r in readings:
        if math.isclose(r.threshold, float(paper_threshold), rel_tol=1e-9, abs_tol=1e-12):
            return r
    raise ConfigError(f"verdict: the paper's threshold {paper_threshold} is not among the thresholds "
                      f"{[r.threshold for r in readings]}: read the paper's threshold first")


def _evidence(r, fmt):
    if r.word == "undefined":
        return "no estimate"
    if r.censored:
        side = f"> {fmt.format(r.lower)}" if math.isinf(r.upper) else f"< {fmt.format(r.upper)}"
        if r.falling:
            return f"{side}; not reached: the runs that miss it peaked and fell below it within their budget"
        return f"{side}, censored at the budget"
    return f"{fmt.format(r.estimate)} [{fmt.format(r.lower)}, {fmt.format(r.upper)}]"


def _runs(readings):
    """[(word, [thresholds])] over consecutive readings with the same word."""
    out = []
    for r in readings:
        if out and out[-1][0] == r.word:
            out[-1][1].append(r.threshold)
        else:
            out.append((r.word, [r.threshold]))
    return out


def _span(ts, fmt):
    return fmt.format(ts[0]) if len(ts) == 1 else f"{fmt.format(ts[0])}–{fmt.format(ts[-1])}"
