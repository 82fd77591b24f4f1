"""scoreprobe.stats against independent references (issue 57): every single implementation of a Welch test, the
two-level interval, Holm, the ratio curve, the censored estimator and TOST, checked once against scipy, a formula
written out here, or a simulation with a fixed seed. The numbers are compared, so a changed formula fails."""
import math

import numpy as np
import pytest
import scipy.optimize
import scipy.stats

from scoreprobe.stats.censored import censored_mean
from scoreprobe.stats.crossed import crossed_mean
from scoreprobe.stats.intervals import t_interval, tost, two_level, welch_interval, welch_p
from scoreprobe.stats.pvalues import adjust_pvalues
from scoreprobe.stats.seeds import ratio_curve

RNG = np.random.default_rng(57)
A, B = RNG.normal(1.0, 0.4, 5), RNG.normal(1.6, 0.9, 4)   # unequal sizes and variances


def test_welch_interval_and_p_are_scipys():
    ref = scipy.stats.ttest_ind(B, A, equal_var=False)
    lo_ref, hi_ref = ref.confidence_interval(0.95)
    diff, lo, hi, df = welch_interval(A, B)
    assert diff == pytest.approx(B.mean() - A.mean(), rel=1e-12)
    assert (lo, hi, df) == pytest.approx((lo_ref, hi_ref, ref.df), rel=1e-10)
    assert welch_p(np.exp(A), np.exp(B)) == pytest.approx(ref.pvalue, rel=1e-10)    # log=True: on ln of the values
    # the p from the interval's own df and standard error: the two functions read the same test
    se = (hi - lo) / (2 * scipy.stats.t.ppf(0.975, df))
    assert welch_p(A, B, log=False) == pytest.approx(2 * scipy.stats.t.sf(abs(diff) / se, df), rel=1e-8)


def test_t_interval_is_scipys():
    lo_ref, hi_ref = scipy.stats.t.interval(0.9, A.size - 1, loc=A.mean(), scale=scipy.stats.sem(A))
    assert t_interval(A, 0.9) == pytest.approx((A.mean(), lo_ref, hi_ref), rel=1e-12)


def _holm_by_hand(p):
    """Holm's step-down: sort, multiply the i-th smallest (0-based) by m − i, running maximum, cap at 1."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    out, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        out[i] = running
    return out


def test_holm_is_the_step_down_formula_and_bh_is_scipys():
    p = np.array([0.012, 0.3, 0.001, 0.04, 0.049, 0.2, 0.0125])
    assert adjust_pvalues(p, "holm") == pytest.approx(_holm_by_hand(list(p)), rel=1e-14)
    assert adjust_pvalues(p, "bh") == pytest.approx(scipy.stats.false_discovery_control(p, method="bh"), rel=1e-12)
    with_nan = np.r_[p[:3], np.nan]                             # a NaN leaves the family: m = 3, not 4
    assert adjust_pvalues(with_nan, "holm")[:3] == pytest.approx(_holm_by_hand(list(p[:3])), rel=1e-14)
    assert np.isnan(adjust_pvalues(with_nan, "holm")[3])


def test_ratio_curve_is_welch_on_ln_at_each_threshold_and_censored_where_unreached():
    a, b = np.exp(RNG.normal(5, 0.3, (4, 3))), np.exp(RNG.normal(5.5, 0.5, (3, 3)))
    b[1, 2] = np.inf                                            # one seed of b never reaches the last threshold
    curve = ratio_curve(a, b, [0.3, 0.6, 0.9])
    assert [r["threshold"] for r in curve] == [0.3, 0.6, 0.9]
    for j in range(2):
        ref = scipy.stats.ttest_ind(np.log(b[:, j]), np.log(a[:, j]), equal_var=False)
        lo, hi = ref.confidence_interval(0.95)
        g = math.exp(np.log(b[:, j]).mean() - np.log(a[:, j]).mean())
        assert curve[j]["value"] == pytest.approx(g, rel=1e-12) and not curve[j]["censored"]
        assert curve[j]["ci"] == pytest.approx([math.exp(lo), math.exp(hi)], rel=1e-10)
        assert curve[j]["df"] == pytest.approx(ref.df, rel=1e-10)
    assert curve[2]["censored"] and math.isnan(curve[2]["value"])


def _two_way_by_loops(v):
    """MS_data, MS_init, MS_residual of a (D, I) table, one sum at a time."""
    D, I = v.shape
    g = sum(v[d, i] for d in range(D) for i in range(I)) / (D * I)
    rows = [sum(v[d]) / I for d in range(D)]
    cols = [sum(v[:, i]) / D for i in range(I)]
    ms_d = I * sum((r - g) ** 2 for r in rows) / (D - 1)
    ms_i = D * sum((c - g) ** 2 for c in cols) / (I - 1)
    ms_e = sum((v[d, i] - rows[d] - cols[i] + g) ** 2 for d in range(D) for i in range(I)) / ((D - 1) * (I - 1))
    return g, ms_d, ms_i, ms_e


def test_two_level_interval_is_the_crossed_anova_with_satterthwaite_df():
    v = RNG.normal(0, 1, (4, 3)) + RNG.normal(0, 1, (4, 1)) + RNG.normal(0, 0.5, (1, 3))
    g, ms_d, ms_i, ms_e = _two_way_by_loops(v)
    D, I = v.shape
    df = (ms_d + ms_i) ** 2 / (ms_d ** 2 / (D - 1) + ms_i ** 2 / (I - 1))
    half = scipy.stats.t.ppf(0.975, df) * math.sqrt((ms_d + ms_i) / (D * I))
    r = two_level(v)
    assert (r["mean"], r["lo"], r["hi"], r["df"]) == pytest.approx((g, g - half, g + half, df), rel=1e-10)
    assert r["p_data"] == pytest.approx(scipy.stats.f.sf(ms_d / ms_e, D - 1, (D - 1) * (I - 1)), rel=1e-10)
    assert r["p_init"] == pytest.approx(scipy.stats.f.sf(ms_i / ms_e, I - 1, (D - 1) * (I - 1)), rel=1e-10)
    c = crossed_mean(v)                                         # the same interval under its models × units name
    assert (c["lo"], c["hi"]) == pytest.approx((r["lo"], r["hi"]), rel=1e-14)


def test_two_level_interval_keeps_its_coverage_by_simulation():
    """3 data seeds × 3 init seeds, both components and the residual at 1: the conservative interval covers
    the true mean 0 in at least 95% of 4000 simulated blocks (and is not trivially wide: below 99.9%)."""
    rng = np.random.default_rng(2057)
    n, D, I = 4000, 3, 3
    v = rng.normal(0, 1, (n, D, 1)) + rng.normal(0, 1, (n, 1, I)) + rng.normal(0, 1, (n, D, I))
    r = two_level(v)
    cover = float(np.mean((r["lo"] <= 0) & (0 <= r["hi"])))
    assert 0.95 <= cover < 0.999


def _tobit_mle(y, cens):
    """The censored normal's maximum-likelihood mean, from scipy's optimizer on the log-likelihood written out."""
    def nll(theta):
        mu, s = theta[0], math.exp(theta[1])
        return -(scipy.stats.norm.logpdf(y[~cens], mu, s).sum() + scipy.stats.norm.logsf(y[cens], mu, s).sum())
    fit = scipy.optimize.minimize(nll, [y.mean(), math.log(y.std())], method="Nelder-Mead",
                                  options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000})
    return fit.x[0], fit.fun


def test_censored_mean_is_the_tobit_mle_and_the_t_interval_without_censoring():
    y = np.array([6.1, 6.5, 7.0, 7.2, 7.9, 8.0, 8.0])            # the last two: budgets, never crossed
    cens = np.array([False] * 5 + [True] * 2)
    r = censored_mean(y, cens)
    mu, nll = _tobit_mle(y, cens)
    assert r["mean"] == pytest.approx(mu, abs=1e-5)
    n = y.size                                                  # each end lies where the profile drop equals q
    q = n * math.log1p(scipy.stats.t.ppf(0.975, n - 1) ** 2 / (n - 1))
    for end in (r["lower"], r["upper"]):
        prof = scipy.optimize.minimize_scalar(lambda ls: -(scipy.stats.norm.logpdf(y[~cens], end, math.exp(ls)).sum()
                                                           + scipy.stats.norm.logsf(y[cens], end, math.exp(ls)).sum()),
                                              bounds=(-5, 5), method="bounded", options={"xatol": 1e-10})
        assert 2 * (prof.fun - nll) == pytest.approx(q, abs=1e-3)
    plain = censored_mean(y[:5], np.zeros(5, bool))
    lo, hi = scipy.stats.t.interval(0.95, 4, loc=y[:5].mean(), scale=scipy.stats.sem(y[:5]))
    assert (plain["mean"], plain["lower"], plain["upper"]) == pytest.approx((y[:5].mean(), lo, hi), rel=1e-12)


def test_tost_is_two_one_sided_scipy_t_tests():
    x = RNG.normal(0.2, 0.5, 8)
    margin = math.log(2.0)
    ref = max(scipy.stats.ttest_1samp(x, -margin, alternative="greater").pvalue,
              scipy.stats.ttest_1samp(x, margin, alternative="less").pvalue)
    assert tost(x.mean(), scipy.stats.sem(x), x.size - 1, margin) == pytest.approx(ref, rel=1e-10)
    assert tost(1.0, 0.0, 3, margin) == 1.0 and tost(0.1, 0.0, 3, margin) == 0.0
