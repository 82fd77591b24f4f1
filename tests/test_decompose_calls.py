"""decompose calls with intervals (issue 55, part B): planted networks against the calls, the mixture with its
interval, the model as the unit over trained models, and the statistics against brute force."""
import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe.data.datasets import make_dataset
from scoreprobe.data.rules import Parity
from scoreprobe.errors import ConfigError
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.probes import decompose_fit as fit
from scoreprobe.probes.decompose import decompose, point_stats, regress
from scoreprobe.stats.decompose_calls import LABELS, SHRINKAGE, best_oracle, best_patch, decompose_summary, mixture_weights

NAMES = ("memorizer", "rule", "local", "local_equivariant")
SIGMAS = (0.5, 1.0, 2.0)


@pytest.fixture(scope="module")
def setup():
    rule = Parity(G=2, shape=(6, 6), layout="contiguous")
    ds = make_dataset(rule, n_train=24, n_heldout=40, seed=0)
    return rule, ds, EmpiricalDenoiser(ds.train), RuleDenoiser(rule)


def run(D, rule, ds, **kw):
    kw = {"sigmas": SIGMAS, "n_points": 16, "n_noise": 2, "dtype": torch.float64, "oracles": NAMES, **kw}
    return decompose(D, dataset=ds, rule=rule, **kw)


def noisy(D, scale, seed):
    g = torch.Generator().manual_seed(seed)
    return lambda x, s: D(x, s) + scale * torch.randn(x.shape, generator=g, dtype=x.dtype)


def test_a_network_equal_to_the_rule_oracle_is_called_rule_with_the_tie_excluded(setup):
    rule, ds, _, R = setup
    s = decompose_summary(run(R, rule, ds))
    fresh = s.sel(split=["heldout", "random_valid"])
    assert (fresh.best_oracle == "rule").all(), fresh.best_oracle.values
    assert (fresh.p_adjusted <= 0.05).all() and (fresh.lead > 0).all() and (fresh.over_shrink > 0).all()
    assert np.allclose(fresh.best_value, 1.0)
    # on training points the memorizer and the rule differ less: whatever the label, never "memorizer"
    assert not (s.best_oracle.sel(split="train") == "memorizer").any()


def test_a_random_linear_network_is_never_called_an_oracle(setup):
    rule, ds, _, _ = setup
    A = torch.as_tensor(np.random.default_rng(3).normal(size=(36, 36)) / 6, dtype=torch.float64)
    labels = best_oracle(run(lambda x, s: x @ A.T, rule, ds)).values.ravel()
    assert set(labels) <= set(LABELS), labels


def test_the_untrained_adaln_zero_network_is_shrinkage_at_every_sigma():
    series = sp.load_series()
    D0 = series.denoiser(0)
    out = decompose(D0, dataset=series.dataset, rule=series.rule, sigmas=(0.1, 0.5, 1.0, 2.0, 5.0), n_points=8,
                    n_noise=1, oracles=("memorizer", "rule", "local"), progress=False)
    assert (out.r2_shrink > 0.999999).all()
    assert np.allclose(out.shrink_coef.transpose("sigma", "split"), (1 / (1 + out.sigma ** 2)).values[:, None],
                       rtol=1e-5)
    s = decompose_summary(out)
    assert (s.best_oracle == SHRINKAGE).all(), s.best_oracle.values
    assert mixture_weights(out, n_boot=50).shrinkage.all()


def test_a_planted_mixture_is_recovered_with_an_interval_that_covers_it_and_shrinks(setup):
    """0.6·memorizer + 0.4·rule + noise (0.3 per coordinate): the weight's 99% interval covers 0.6 at every σ
    (the percentile interval under-covers a little at 8 points: 95% missed 0.6 by 0.002 at σ = 2)."""
    rule, ds, M, R = setup
    net = noisy(lambda x, s: 0.6 * M(x, s) + 0.4 * R(x, s), 0.3, 0)
    widths = []
    for n in (8, 32):
        mw = mixture_weights(run(net, rule, ds, n_points=n, oracles=("memorizer", "rule")).sel(split="heldout"),
                             n_boot=300, level=0.99)
        w = mw.sel(oracle="memorizer")
        assert np.abs(w.weight - 0.6).max() < 0.05
        assert (w.lower <= 0.6).all() and (w.upper >= 0.6).all(), (w.lower.values, w.upper.values)
        assert np.allclose(mw.weight.sum("oracle"), 1) and (mw.lower <= mw.weight).all() and (mw.weight <= mw.upper).all()
        widths.append(float((w.upper - w.lower).mean()))
    assert widths[1] < 0.75 * widths[0], widths          # 4× the points: about half the width


def test_over_models_the_model_is_the_unit(setup):
    """Three planted models whose memorizer weight is 0.5, 0.6, 0.7: the t interval over models (2 df) covers
    their mean and is wider than one model's (which sees only its own points)."""
    rule, ds, M, R = setup
    models = [run(noisy(lambda x, s, a=a: a * M(x, s) + (1 - a) * R(x, s), 0.05, i), rule, ds,
                  oracles=("memorizer", "rule")).sel(split="heldout", sigma=1.0)
              for i, a in enumerate((0.5, 0.6, 0.7))]
    both = mixture_weights(models, n_boot=400).sel(oracle="memorizer")
    one = mixture_weights(models[1], n_boot=400).sel(oracle="memorizer")
    assert abs(float(both.weight) - 0.6) < 0.02 and float(both.lower) < 0.6 < float(both.upper)
    assert float(both.upper - both.lower) > 3 * float(one.upper - one.lower)
    assert float(one.lower) < 0.6 < float(one.upper)
    s = decompose_summary(models)
    # one oracle alone explains less than 0.8 of a 0.5–0.7 mixture at σ = 1: "none", never a name
    assert s.attrs["n_models"] == 3 and s.best_oracle.item() in ("none", "undecided"), s.best_oracle.item()
    with pytest.raises(ConfigError, match="differ"):
        mixture_weights([models[0], models[1].assign_coords(sigma=2.0)], n_boot=50)


def test_statistics_give_the_brute_force_fits():
    rng = np.random.default_rng(0)
    p, n, d, k = 7, 3, 5, 3
    X, y, x = rng.normal(size=(k, p * n, d)), rng.normal(size=(p * n, d)), rng.normal(size=(p * n, d))
    y = y + 2 * X[0]
    c = regress(y, X, x)
    ss = ((y - y.mean(0)) ** 2).sum()
    for j in range(k):
        assert c["r2"][j] == pytest.approx(1 - ((y - X[j]) ** 2).sum() / ss, abs=1e-12)
    A = X.reshape(k, -1).T
    w = np.linalg.lstsq(A, y.ravel(), rcond=None)[0]
    assert np.allclose(c["weight"], w) and c["r2_joint"] == pytest.approx(1 - ((y.ravel() - A @ w) ** 2).sum() / ss)
    cc = (x * y).sum() / (x * x).sum()
    assert c["r2_shrink"] == pytest.approx(1 - ((y - cc * x) ** 2).sum() / ss, abs=1e-12)
    # per-point statistics pooled over a resample = the statistics of the resampled rows
    st = point_stats(y, X, x, n)
    m = np.array([2, 0, 1, 1, 0, 3, 0], float)
    pooled = {key: np.einsum("p,p...->...", m, v) for key, v in st.items()}
    rows = np.concatenate([np.arange(i * n, i * n + n) for i in np.repeat(np.arange(p), m.astype(int))])
    ys, Xs = y[rows], X[:, rows]
    ss_r = ((ys - ys.mean(0)) ** 2).sum()
    assert fit.ss_total(pooled) == pytest.approx(ss_r)
    assert np.allclose(fit.r2_alone(pooled, fit.ss_total(pooled)),
                       [1 - ((ys - Xs[j]) ** 2).sum() / ss_r for j in range(k)])
    dist = fit.distance(pooled, fit.ss_total(pooled))
    assert dist[0, 1] == pytest.approx(((Xs[0] - Xs[1]) ** 2).sum() / ss_r)


def test_the_active_set_simplex_fit_equals_enumeration_and_the_batch_equals_the_loop():
    rng = np.random.default_rng(1)
    for t in range(300):
        k = 1 + t % 6
        X, y = rng.normal(size=(12, k)), rng.normal(size=12)
        if k > 2 and t % 3 == 0:
            X[:, 1] = X[:, 0]                                                   # collinear oracles
        G, b = X.T @ X, X.T @ y
        w, ref = fit.simplex_fit(G, b), fit.simplex_enumerated(G, b)
        assert w.min() >= 0 and w.sum() == pytest.approx(1)
        assert ((y - X @ w) ** 2).sum() <= ((y - X @ ref) ** 2).sum() + 1e-9
    X = rng.normal(size=(40, 4))
    y = X @ [0.5, 0.5, 0, 0] + rng.normal(size=40)
    m = rng.multinomial(40, np.full(40, 1 / 40), size=200).astype(float)
    G, b = np.einsum("np,pk,pl->nkl", m, X, X), np.einsum("np,pk,p->nk", m, X, y)
    W = fit.simplex_batch(G, b, fit.simplex_fit(X.T @ X, X.T @ y))
    assert np.allclose(W, [fit.simplex_fit(G[i], b[i]) for i in range(len(G))], atol=1e-9)


def test_undefined_cells_stay_undefined(setup):
    rule, ds, _, R = setup
    out = run({0: R, 5: lambda x, s: torch.full_like(x, float("nan"))}, rule, ds, oracles=("memorizer", "rule"))
    s = decompose_summary(out)
    assert (s.best_oracle.sel(step=5) == "undefined").all() and np.isnan(s.lead.sel(step=5)).all()
    assert (s.leader.sel(step=5) == "").all()
    assert np.isnan(mixture_weights(out, n_boot=50).weight.sel(step=5)).all()


def test_best_patch_per_sigma(setup):
    rule, ds, M, _ = setup
    out = run(M, rule, ds, oracles=("memorizer", "local"), patch=(3, 5), sigmas=(1.0,))
    assert list(out.oracle.values) == ["memorizer", "local_p3", "local_p5"]
    bp = best_patch(out)
    want = np.where(out.r2.sel(oracle="local_p5") > out.r2.sel(oracle="local_p3"), 5, 3)
    assert (bp.best_patch.sel(family="local").values == want).all()


def test_readings_refuse_what_they_cannot_read(setup):
    rule, ds, _, R = setup
    out = run(R, rule, ds, oracles=("memorizer", "rule"), sigmas=(1.0,), n_points=4)
    with pytest.raises(ConfigError, match="per-point statistics"):
        best_oracle(out[["r2"]])
    for bad in ({"var": "weight"}, {"level": 1.5}, {"min_r2": 2}, {"adjust": "bonferroni"}, {"margin": -1}):
        with pytest.raises(ConfigError):
            decompose_summary(out, **bad)
    with pytest.raises(ConfigError, match="oracles"):
        mixture_weights(out, oracles=("nope",), n_boot=50)
    with pytest.raises(ConfigError, match="patch"):
        run(R, rule, ds, patch=(3, 4))
    assert sp.best_oracle is best_oracle and sp.mixture_weights is mixture_weights
