"""The censored estimator of pooled ln τ (scoreprobe/stats/censored.py, issue 54 item 3): the t interval where
nothing is censored, the truth recovered where a naive mean of the crossed runs is biased, and its coverage
measured by simulation at 3 and 9 runs with 10 and 25% censoring."""
import math

import numpy as np
import pytest
from scipy import stats

from scoreprobe.errors import ConfigError
from scoreprobe.stats.censored import censored_mean, coverage


def test_without_censoring_it_is_the_t_interval():
    y = np.array([7.1, 8.4, 7.9, 8.8, 7.5])
    r = censored_mean(y, np.zeros(5, bool))
    half = stats.t.ppf(0.975, 4) * y.std(ddof=1) / math.sqrt(5)
    assert r["mean"] == pytest.approx(y.mean()) and r["n_censored"] == 0
    assert (r["lower"], r["upper"]) == pytest.approx((y.mean() - half, y.mean() + half), rel=1e-12)


def test_an_uninformative_censored_run_leaves_the_maximum_likelihood_fit_of_the_others():
    # "ln τ > −40" is true of every run: the fit is the crossed runs' mean and ML standard deviation
    y = np.array([7.1, 8.4, 7.9, 8.8, 7.5])
    r = censored_mean(np.append(y, -40.0), np.array([0, 0, 0, 0, 0, 1], bool))
    assert r["mean"] == pytest.approx(y.mean(), abs=1e-5)
    assert r["sd"] == pytest.approx(y.std(ddof=0), rel=1e-4)


def test_a_large_censored_sample_recovers_the_truth_where_the_crossed_mean_is_biased():
    rng = np.random.default_rng(3)
    true = rng.normal(9.0, 0.5, 2000)
    budget = 9.3                                     # ≈ 27% of runs never cross
    cens = true > budget
    r = censored_mean(np.where(cens, budget, true), cens)
    assert 0.2 < cens.mean() < 0.35
    assert r["lower"] <= 9.0 <= r["upper"] and abs(r["mean"] - 9.0) < 0.04 and abs(r["sd"] - 0.5) < 0.04
    assert true[~cens].mean() < 8.9                  # the crossed runs alone: biased low by more than 0.1


def test_too_many_censored_runs_give_no_estimate():
    r = censored_mean([8.0, 9.0, 9.0], np.array([False, True, True]))
    assert math.isnan(r["mean"]) and r["method"] == "fewer than 2 runs crossed"
    r = censored_mean([9.0, 9.0], np.array([True, True]))
    assert math.isnan(r["mean"]) and r["method"] == "every run censored"
    # two crossings and four runs censored just above them: estimated, above the crossed runs' mean
    r = censored_mean([7, 9, 7.5, 7.5, 7.5, 7.5], np.array([0, 0, 1, 1, 1, 1], bool))
    assert 8.0 < r["mean"] < r["upper"] < math.inf and r["lower"] < 8.0


@pytest.mark.parametrize("y, cens, match", [
    ([1.0, math.nan, 2.0], [False] * 3, "finite"),
    ([1.0, 2.0], [0, 1], "bool"),
    ([1.0, 2.0], [False], "one length"),
    ([], [], "non-empty"),
])
def test_bad_input_is_refused(y, cens, match):
    with pytest.raises(ConfigError, match=match):
        censored_mean(y, np.asarray(cens) if cens else np.array([], bool))


@pytest.mark.parametrize("n, share", [(3, 0.10), (9, 0.25)])
def test_coverage_at_the_studies_designs(n, share):
    # 300 replicates: a coverage of 0.95 reads ≥ 0.92 with probability ≈ 0.99; docs/definitions.md quotes
    # 1000 replicates per cell (3 and 9 runs, 0 / 10 / 25% censored)
    c = coverage(n, share, n_rep=300, seed=1)
    assert c["coverage_defined"] >= 0.92
    if n == 9:
        assert c["defined"] == 1.0 and c["coverage"] >= 0.92
