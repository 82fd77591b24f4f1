"""The loss crossover on cases whose answer is known in closed form."""
import numpy as np
import pytest
import torch

from scoreprobe.data.datasets import Dataset, make_dataset
from scoreprobe.data.rules import ExactK, Parity
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.probes.crossover import crossing_step, crossover, sigma_weights
from scoreprobe.probes.dsm import edm_weight


def two_vertex_case():
    """2 bits, exactly one 1: valid {10, 01}; trained on 10 alone."""
    rule = ExactK(1, shape=(1, 2))
    return rule, Dataset(np.array([[1, 0]], np.uint8), np.array([[0, 1]], np.uint8), rule, 0)


def rule_loss_closed_form(sigma):
    """Per-bit DSM loss of the rule oracle at the item v1 = (1, -1), valid set {v1, v2 = -v1}:
    D - v1 = (1 - p)(v2 - v1), p = sigmoid((4 + σ√8 z)/σ²), z ~ N(0, 1) -> 4 E[(1 - p)²], and its
    variance over z (Gauss-Hermite quadrature)."""
    z, w = np.polynomial.hermite_e.hermegauss(200)
    w = w / w.sum()
    q = 1 - 1 / (1 + np.exp(-(4 + sigma * np.sqrt(8) * z) / sigma**2))
    per = 4 * q**2
    return float(w @ per), float(w @ per**2 - (w @ per) ** 2)


def test_two_vertex_closed_form():
    rule, ds = two_vertex_case()
    sig, n_noise = np.array([0.5, 1.0, 2.0, 4.0]), 4096
    out = crossover(RuleDenoiser(rule), dataset=ds, rule=rule, sigmas=sig, n_noise=n_noise,
                    oracles=("memorizer", "rule"), dtype=torch.float64)
    lam = edm_weight(sig, 1.0)
    assert np.all(out.oracle_loss.sel(oracle="memorizer").values == 0)          # one item: D ≡ the item
    for j, s in enumerate(sig):
        mean, var = rule_loss_closed_form(s)
        got = float(out.oracle_loss.sel(oracle="rule")[j]) / lam[j]
        assert abs(got - mean) < 5 * np.sqrt(var / n_noise) + 1e-12
        assert float(out.loss[j]) == pytest.approx(float(out.oracle_loss.sel(oracle="rule")[j]), rel=1e-12)
    assert np.allclose(out.excess, out.oracle_loss.sel(oracle="rule"))


def test_memorizer_loss_vanishes_as_sigma_goes_to_zero_rule_does_not():
    rule = Parity(G=2, shape=(4, 4), layout="contiguous")
    ds = make_dataset(rule, n_train=12, n_heldout=4, seed=0)
    out = crossover(EmpiricalDenoiser(ds.train), dataset=ds, rule=rule, sigmas=[0.05, 0.3, 1.0], n_noise=16,
                    oracles=("memorizer", "rule", "local"), dtype=torch.float64)
    raw = out.oracle_loss / xrlam(out)
    assert float(raw.sel(oracle="memorizer", sigma=0.05)) < 1e-12
    assert float(raw.sel(oracle="rule", sigma=1.0)) > 0.05
    assert (out.excess >= -1e-12).all() and float(out.excess.sel(sigma=1.0)) > 0
    # the memorizer is the minimizer of the training loss: no oracle does better (same noise)
    assert (out.oracle_loss >= out.oracle_loss.sel(oracle="memorizer") - 1e-12).all()


def xrlam(out):
    return edm_weight(out.sigma.values, 1.0)[:, None]


def test_crossing_over_steps():
    """step 1: a shrunk rule oracle (worse than it); step 100: the memorizer (better): τ_cross in
    between, equal to the interpolation of the returned averages."""
    rule = Parity(G=2, shape=(4, 4), layout="contiguous")
    ds = make_dataset(rule, n_train=12, n_heldout=4, seed=0)
    gen, mem = RuleDenoiser(rule), EmpiricalDenoiser(ds.train)
    series = {1: lambda x, s: 0.8 * gen(x, s), 100: mem}
    out = crossover(series, dataset=ds, rule=rule, sigmas=[0.2, 0.5, 1.0, 2.0], n_noise=8, dtype=torch.float64,
                    oracles=("memorizer", "rule"))
    d = out.loss_avg.values - float(out.oracle_loss_avg.sel(oracle="rule"))
    assert d[0] > 0 > d[1]
    t = d[0] / (d[0] - d[1])
    assert out.attrs["tau_cross"] == pytest.approx(np.exp(t * np.log(101) + (1 - t) * np.log(2)) - 1)
    assert out.gap_closed.sel(step=100) == pytest.approx(1.0) and float(out.gap_closed.sel(step=1)) < 0
    assert 1 < out.attrs["tau_cross"] < 100 and np.isfinite(out.tau_cross_sigma.sel(sigma=[0.5, 1.0, 2.0])).all()


def test_crossing_step_edge_cases():
    assert np.isnan(crossing_step([1, 10], [-1.0, 0.5]))           # above at the end: not reached
    assert crossing_step([5, 10], [-1.0, -2.0]) == 5                # below throughout: the first step, a bound
    assert crossing_step([0, 9], [1.0, -1.0]) == pytest.approx(np.sqrt(10) - 1)
    assert crossing_step([1, 2, 3], [-1.0, 1.0, -1.0]) == pytest.approx(np.exp(np.log(3) + 0.5 * np.log(4 / 3)) - 1)


def test_sigma_weights():
    s = np.geomspace(0.002, 80, 400)
    w = sigma_weights(s)
    assert w.sum() == pytest.approx(1) and np.log(s) @ w == pytest.approx(-1.2, abs=1e-3)
    assert np.allclose(sigma_weights(s[::-1]), w[::-1])
