"""A claim's reading over thresholds, from a study's result JSON: the threshold curve of an effect with its
intervals, as `scoreprobe.stats.verdict.verdict` reads it (e.g. a page of claims with their verdicts).

A `CurveReading` holds, per threshold, the estimate and its 95% interval (NaN where undefined: a censored arm
without a bound, a crossing before the first checkpoint), the censored flags, and the paper's threshold. Where
the paper's threshold is censored but a bound is known (e.g. τ_rule(G = 3) > budget, divided by the upper CI end
of G = 2), the bound enters as a censored interval [bound, inf] (or [0 / −inf, bound])."""
import math
from dataclasses import dataclass, field

import numpy as np

from scoreprobe.stats import curves as C


@dataclass
class CurveReading:
    thresholds: list
    estimate: list
    lower: list
    upper: list
    censored: list
    paper_threshold: float
    notes: list = field(default_factory=list)   # sentences the page prints under the claim
    falling: list = None     # (T,) bools: every run missing a censored threshold peaked and fell (None: unknown)

    def at_paper(self):
        """(estimate, lower, upper, censored) at the threshold nearest the paper's."""
        j = int(np.argmin(np.abs(np.asarray(self.thresholds) - self.paper_threshold)))
        return self.estimate[j], self.lower[j], self.upper[j], self.censored[j]


def from_curve(curve, paper_threshold=None):
    """A CurveReading of a scaling-style curve (rows with threshold and a value/CI pair: pooled, ratio, factor, b)."""
    curve = [_nan(r) for r in curve]
    t = [float(r["threshold"]) for r in curve]
    vals = [C.value_of(r) for r in curve]
    cens = [bool(r.get("censored") or r.get("lower_bound")) for r in curve]
    paper = C.paper_threshold_of(curve) if paper_threshold is None else paper_threshold
    return CurveReading(t, [v[0] for v in vals], [v[1] for v in vals], [v[2] for v in vals], cens, paper)


def from_readings(rows, paper_threshold):
    """A CurveReading of rows {threshold, kind, value, ci, falling?} where kind "bound" marks a censored lower
    bound: its estimate NaN, its interval [ci[0], inf] (a JSON null end reads NaN); `falling` (the runs missing it
    peaked and fell, e.g. a G factor's bound) False where a row does not say."""
    bound = [r["kind"] == "bound" for r in rows]
    lo = [r["ci"][0] if r["ci"][0] is not None else math.nan for r in rows]
    hi = [math.inf if b else (r["ci"][1] if r["ci"][1] is not None else math.nan) for r, b in zip(rows, bound)]
    est = [math.nan if b else x["value"] for x, b in zip(rows, bound)]
    return CurveReading([float(x["threshold"]) for x in rows], est, lo, hi, bound, paper_threshold,
                        falling=[bool(x.get("falling", False)) for x in rows])


def _nan(row):
    """A curve row from JSON with null (how the reports store NaN) read back as NaN in its values and intervals."""
    out = dict(row)
    for v, c in C.VALUE_KEYS:
        if v in out:
            out[v] = math.nan if out[v] is None else out[v]
            out[c] = [math.nan if x is None else x for x in out.get(c) or [None, None]]
    return out


def with_bound(reading, lower=-math.inf, upper=math.inf):
    """`reading` with its paper threshold's interval replaced by the censored bound [lower, upper]."""
    j = reading.thresholds.index(min(reading.thresholds, key=lambda t: abs(t - reading.paper_threshold)))
    reading.estimate[j], reading.lower[j], reading.upper[j], reading.censored[j] = math.nan, lower, upper, True
    return reading


def once(value, lo, hi, paper_threshold=0.1):
    """A reading that is not read over thresholds (one number with its interval), placed at `paper_threshold`."""
    return CurveReading([paper_threshold], [value], [lo], [hi], [False], paper_threshold)


def readable_range(reading, digits=2):
    """'a–b (95% CI ends from c to d) at k thresholds' over the readable thresholds (finite estimate and CI)."""
    rows = [(e, lo, hi) for e, lo, hi, c in zip(reading.estimate, reading.lower, reading.upper, reading.censored)
            if not c and all(math.isfinite(x) for x in (e, lo, hi))]
    if not rows:
        return "no threshold readable"
    f = lambda x: f"{x:.{digits}f}"   # noqa: E731
    return (f"{f(min(r[0] for r in rows))}–{f(max(r[0] for r in rows))} (95% CI ends {f(min(r[1] for r in rows))}"
            f" to {f(max(r[2] for r in rows))}) at {len(rows)} of {len(reading.thresholds)} thresholds")


def load_result(name, results):
    """The JSON report `name` (e.g. "scaling_cpu") of a results folder; None when it is not there."""
    import json
    from pathlib import Path
    path = Path(results) / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def curve_at(name, *keys):
    """A reader: results folder -> the CurveReading of the curve at result[keys[0]][keys[1]]… of the JSON report
    `name` (from_curve), or None when that report is not there."""
    def read(results):
        curve = load_result(name, results)
        if curve is None:
            return None
        for k in keys:
            curve = curve[k]
        return from_curve(curve)
    return read
