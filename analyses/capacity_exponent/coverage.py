"""Coverage of the capacity study's 95% intervals at its own design (issue 54 item 2): each size's b and the
difference of two sizes' b, simulated at the runs the study has (their N, their count per N) with each N's share
of runs censored at the paper's threshold as measured (`scoreprobe.stats.censored.coverage_fit`).

A design's coverage is measured once and kept in <results>/capacity_exponent_<preset>_coverage.json under a key
that spells the design (every run's ln N, group and censoring share): a coverage is quoted only for the design it
was simulated at, and a design the runs no longer have is dropped from the file when the tables are rewritten.
"""
import json
import math
from collections import Counter

import numpy as np

from scoreprobe.atomic import atomic_write_text
from scoreprobe.stats.censored import coverage_fit
from scoreprobe.stats import misfit

RATIOS = (0, 1, 2, 3, 4, 5, 6)   # misfit ratios σ²_δ/σ² simulated for b's per-N-means interval (issue 73 item 8)
N_REP_MISFIT = {"smoke": 20}     # replicates per ratio (200 for the real presets: Monte Carlo s.e. ≈ 0.015)

N_REP = {"smoke": 40}     # simulated designs per coverage (500 for the real presets: Monte Carlo s.e. ≈ 0.01 at 0.95)
CAP = 0.95                # a share of 1 (every run at an N censored) is simulated at this share: 1 has no likelihood


def shares(rows, j, x_of):
    """(R,) each run's censoring share: the fraction of runs at its x (`x_of(row)`) whose curve "tau_mem"[j] is
    None or infinite (did not reach the threshold), capped at CAP."""
    runs, cens = Counter(), Counter()
    for r in rows:
        runs[x_of(r)] += 1
        t = r["curves"]["tau_mem"][j]
        cens[x_of(r)] += t is None or not math.isfinite(t)
    return [min(cens[x_of(r)] / runs[x_of(r)], CAP) for r in rows]


def size_design(rows, j, x_of):
    """(x (R,) ln N, share (R,), None, 1): the design of one size's b (censored_fit)."""
    return [math.log(x_of(r)) for r in rows], shares(rows, j, x_of), None, 1


def difference_design(rows_a, rows_b, j, x_of):
    """(x, share, design (R, 4), 3): the design of b_b − b_a, the interaction of ln N with the size (censored_coef)."""
    x = [math.log(x_of(r)) for r in rows_a + rows_b]
    g = [0.0] * len(rows_a) + [1.0] * len(rows_b)
    share = shares(rows_a, j, x_of) + shares(rows_b, j, x_of)
    return x, share, [[1.0, xi, gi, gi * xi] for xi, gi in zip(x, g)], 3


def describe(x, share):
    """'N = 30 ×3, 60 ×3, 120 ×3, 240 ×3 (0.67 censored)': the runs per N and each N's censored share."""
    cells = sorted(Counter(zip(np.round(np.exp(x)).astype(int).tolist(), share)).items())
    return ", ".join(f"{n} ×{k}" + (f" ({s:.2f} censored)" if s else "") for (n, s), k in cells)


class Cache:
    """Measured coverages by design, read from and written back to `path` (only the designs asked for: `store`)."""

    def __init__(self, path, preset):
        self.path, self.n_rep, self.preset = path, N_REP.get(preset, 500), preset
        self.old = json.loads(path.read_text()) if path.is_file() else {}
        self.used = {}

    def get(self, x, share, design=None, j=1):
        """{coverage, coverage_defined, defined, n_rep, seed}: the coverage at this design (measured if new)."""
        key = json.dumps({"x": np.round(x, 6).tolist(), "share": np.round(share, 6).tolist(),
                          "design": design and np.round(design, 6).tolist(), "j": j, "n_rep": self.n_rep})
        if key in self.old:
            self.used[key] = self.old[key]
        elif not any(share):   # nothing censored: the t interval, exact under the model
            self.used[key] = {"coverage": 0.95, "coverage_defined": 0.95, "defined": 1.0, "n_rep": 0, "seed": None}
        else:
            self.used[key] = self.old[key] = {**coverage_fit(x, share, n_rep=self.n_rep, seed=0, j=j, design=None
                                                             if design is None else np.asarray(design)),
                                              "n_rep": self.n_rep, "seed": 0}
            self.store({**self.old, key: self.used[key]})   # kept at once: an interrupted report resumes here
        return self.used[key]

    def get_misfit(self, x, share):
        """{ratio: misfit.coverage dict} of b's per-N-means interval (and, with nothing censored, the runs' interval)
        at this design over RATIOS (measured if new)."""
        n_rep = N_REP_MISFIT.get(self.preset, 200)
        key = json.dumps({"misfit": list(RATIOS), "x": np.round(x, 6).tolist(), "share": np.round(share, 6).tolist(),
                          "n_rep": n_rep})
        if key not in self.old:
            self.old[key] = {str(k): v for k, v in misfit.coverage(np.asarray(x), RATIOS, np.asarray(share),
                                                                   n_rep=n_rep, seed=0, runs=not any(share)).items()}
            self.store({**self.old, key: self.old[key]})
        self.used[key] = self.old[key]
        return self.used[key]

    def get_misfit_difference(self, x_a, x_b, share_a, share_b):
        """{ratio: misfit.difference_coverage dict} of the per-N-means difference of two sizes' b at this design
        over RATIOS (measured if new)."""
        n_rep = N_REP_MISFIT.get(self.preset, 200)
        key = json.dumps({"misfit_difference": list(RATIOS), "x": [np.round(x_a, 6).tolist(), np.round(x_b, 6).tolist()],
                          "share": [np.round(share_a, 6).tolist(), np.round(share_b, 6).tolist()], "n_rep": n_rep})
        if key not in self.old:
            self.old[key] = {str(k): v for k, v in misfit.difference_coverage(
                x_a, x_b, np.asarray(share_a), np.asarray(share_b), RATIOS, n_rep=n_rep, seed=0).items()}
            self.store({**self.old, key: self.old[key]})
        self.used[key] = self.old[key]
        return self.used[key]

    def store(self, entries=None):
        """Write `entries` (default: the designs asked for, dropping the rest) atomically."""
        atomic_write_text(self.path, json.dumps(self.used if entries is None else entries, indent=1, sort_keys=True)
                          + "\n")


def text(c):
    """'0.951 (500 simulated designs)', '0.95 exactly (...)' where nothing is censored, or, where some designs give no interval, the share that do beside it."""
    if c["n_rep"] == 0:
        return "0.95 exactly (no run censored: least squares and its t interval)"
    if c["defined"] == 0:
        return f"undefined: none of {c['n_rep']} simulated designs gives an interval (too few runs cross)"
    s = f"{c['coverage']:.3f} ({c['n_rep']} simulated designs"
    return s + (f"; {c['defined']:.3f} of them give an interval)" if c["defined"] < 1 else ")")


def difference_misfit_text(c):
    """'0.94–0.96 over misfit ratios 0–6 (200 simulated designs each)', with the share of designs that give an
    interval where some do not."""
    rng = lambda k: f"{min(v[k] for v in c.values()):.3f}–{max(v[k] for v in c.values()):.3f}"   # noqa: E731
    ks = [float(k) for k in c]
    n = next(iter(c.values()))["n_rep"]
    extra = (f" (among the designs with an interval {rng('means_defined')}; defined in {rng('defined')} of them)"
             if min(v["defined"] for v in c.values()) < 1 else "")
    return f"{rng('means')}{extra} over misfit ratios {min(ks):g}–{max(ks):g} ({n} simulated designs each)"


def misfit_text(c):
    """'per-N means 0.93–0.96 (among designs with an interval: …; defined in 0.68–1.00 of them), runs as units
    0.65–0.95, over misfit ratios 0–6 (200 designs each)'."""
    rng = lambda k: f"{min(v[k] for v in c.values()):.3f}–{max(v[k] for v in c.values()):.3f}"   # noqa: E731
    n = next(iter(c.values()))["n_rep"]
    head = f"per-N means {rng('means')}"
    if min(v["defined"] for v in c.values()) < 1:
        head += f" (among the designs with an interval {rng('means_defined')}; defined in {rng('defined')} of them)"
    runs = "" if math.isnan(next(iter(c.values()))["runs"]) else f", runs as units {rng('runs')}"
    ks = [float(k) for k in c]
    return (f"{head}{runs}, over misfit ratios {min(ks):g}–{max(ks):g} ({n} simulated designs each; the lack-of-fit "
            f"test flags {rng('flagged')} of them)")
