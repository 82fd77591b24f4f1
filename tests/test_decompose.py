"""decompose: planted ground truth — an oracle substituted for the network, known mixtures."""
import numpy as np
import pytest
import torch

from scoreprobe.data.datasets import make_dataset
from scoreprobe.data.rules import Parity
from scoreprobe.errors import ConfigError
from scoreprobe.oracles import EmpiricalDenoiser, LocalDenoiser, RuleDenoiser
from scoreprobe.probes.decompose import decompose, regress
from scoreprobe.stats.decompose_calls import best_oracle
from scoreprobe.probes.decompose_fit import simplex_fit

ORACLES = ("memorizer", "rule", "local", "local_equivariant")

SIGMAS = (0.3, 0.7, 1.5)


@pytest.fixture(scope="module")
def setup():
    rule = Parity(G=2, shape=(6, 6), layout="contiguous")
    ds = make_dataset(rule, n_train=24, n_heldout=40, seed=0)
    named = {"memorizer": EmpiricalDenoiser(ds.train), "rule": RuleDenoiser(rule),
             "local": LocalDenoiser(ds.train, 3), "local_equivariant": LocalDenoiser(ds.train, 3, equivariant=True)}
    return rule, ds, named


def run(D, rule, ds, **kw):
    kw = {"sigmas": SIGMAS, "n_points": 12, "n_noise": 2, "dtype": torch.float64, "oracles": ORACLES, **kw}
    return decompose(D, dataset=ds, rule=rule, **kw)


@pytest.mark.parametrize("name", ORACLES)
def test_substituted_oracle_has_weight_one(setup, name):
    rule, ds, named = setup
    out = run(named[name], rule, ds)
    assert set(out.dims) == {"sigma", "split", "oracle", "oracle_b", "point", "pixel"} and list(out.split.values) == ["train", "heldout",
                                                                                        "random_valid"]
    want = (out.oracle.values == name).astype(float)
    assert float(out.residual.max()) < 1e-6
    assert np.allclose(out.r2.sel(oracle=name), 1.0) and np.allclose(out.r2_joint, 1.0)
    assert np.allclose(out.r2_simplex, 1.0)
    # weights are identified where the oracles differ: noised training items at small σ make the
    # memorizer and the per-position local oracle nearly equal (condition ~1e10 at σ = 0.3)
    ok = (out.condition < 1e4).values                                           # (sigma, split)
    assert ok.sum() >= 7
    for var in ("weight", "weight_simplex"):
        w = out[var].transpose("sigma", "split", "oracle").values
        assert np.abs(w - want)[ok].max() < 1e-6
    calls = best_oracle(out).transpose("sigma", "split").values
    if name == "memorizer":     # 12 points: too few to fit the linear baseline, so copying is never claimed
        assert np.isnan(out.r2_affine).all() and set(calls.ravel()) <= {"indistinguishable", "undecided"}
        return
    assert set(calls.ravel()) <= {name, "indistinguishable", "undecided"} and (calls == name).sum() >= 5


def test_known_mixture_recovered(setup):
    rule, ds, named = setup
    a, b = 0.3, 0.7
    mix = lambda x, s: a * named["memorizer"](x, s) + b * named["rule"](x, s)
    out = run(mix, rule, ds).transpose("sigma", "split", "oracle", ...)
    ok = (out.condition < 1e4).values     # identified cells (at σ = 0.3 on training items all oracles ≈ the item)
    assert ok.sum() >= 7 and float(out.residual.max()) < 1e-6
    for var in ("weight", "weight_simplex"):
        w = out[var].values[ok]                                                  # (cells, oracle)
        assert np.abs(w - [a, b, 0, 0]).max() < 1e-6
    # outside the simplex: the least-squares weights follow, the mixture weights cannot
    out2 = run(lambda x, s: 1.5 * named["rule"](x, s) - 0.5 * named["memorizer"](x, s), rule, ds, oracles=("memorizer",
                                                                                                           "rule"))
    ok2 = out2.condition < 1e4
    assert int(ok2.sum()) >= 7
    assert np.abs(out2.weight.sel(oracle="rule") - 1.5).where(ok2).max() < 1e-6
    assert (out2.r2_simplex < out2.r2_joint - 1e-6).where(ok2, True).all()


def test_over_steps_and_noise_in_network(setup):
    """A mapping {step: denoiser} gives a step dimension; a noisy copy of the rule oracle keeps
    weight ≈ 1 with the residual at the noise's size."""
    rule, ds, named = setup
    g = torch.Generator().manual_seed(0)

    def noisy(x, s):
        return named["rule"](x, s) + 0.01 * torch.randn(x.shape, generator=g, dtype=x.dtype)
    out = run({0: named["memorizer"], 100: noisy}, rule, ds, oracles=("memorizer", "rule"))
    assert list(out.step.values) == [0, 100]
    assert set(best_oracle(out.sel(step=0)).values.ravel()) <= {"indistinguishable", "undecided"}   # no baseline
    assert (best_oracle(out.sel(step=100, split="heldout")) == "rule").all()
    ok = out.condition.sel(step=100) < 1e4
    assert int(ok.sum()) >= 7
    assert np.abs(out.weight.sel(step=100, oracle="rule") - 1).where(ok).max() < 0.02
    assert np.allclose(out.residual.sel(step=100), 0.01, rtol=0.1)


def test_best_oracle_ties(setup):
    rule, ds, named = setup
    out = run(named["rule"], rule, ds, sigmas=(0.01, 1.0))
    best = best_oracle(out)
    assert (best.sel(sigma=1.0) == "rule").all()
    # every oracle returns the item, and so does D ≈ x: no call
    assert best.sel(sigma=0.01, split="train").item() in ("indistinguishable", "shrinkage")


def test_collinear_oracles_share_the_weight():
    """Two identical oracle outputs: the minimum-norm joint fit splits the weight evenly."""
    rng = np.random.default_rng(1)
    o = rng.normal(size=(20, 6))
    out = regress(o.copy(), np.stack([o, o, rng.normal(size=(20, 6))]))
    assert np.allclose(out["weight"], [0.5, 0.5, 0], atol=1e-9) and out["residual"] < 1e-7   # from sums: ~1e-8
    assert out["condition"] > 1e7          # (from X'X: at most ~1e8 is resolved)


def test_simplex_fit_matches_brute_grid():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 3)), rng.normal(size=50)
    w = simplex_fit(X.T @ X, X.T @ y)
    assert w.min() >= 0 and abs(w.sum() - 1) < 1e-12
    grid = [(p, q, 1 - p - q) for p in np.linspace(0, 1, 201) for q in np.linspace(0, 1, 201) if p + q <= 1 + 1e-12]
    best = min(((y - X @ np.array(g)) ** 2).sum() for g in grid)
    assert ((y - X @ w) ** 2).sum() <= best + 1e-12


def test_regress_nonfinite_network_gives_nan():
    out = regress(np.full((3, 4), np.nan), np.zeros((2, 3, 4)))
    assert np.isnan(out["r2"]).all() and np.isnan(out["residual"])


def test_bad_arguments(setup):
    rule, ds, named = setup
    with pytest.raises(ConfigError, match="oracles"):
        run(named["rule"], rule, ds, oracles=("memorizer", "nope"))
    with pytest.raises(ConfigError, match="dataset"):
        decompose(named["rule"])
    with pytest.raises(ConfigError, match="sigmas"):
        run(named["rule"], rule, ds, sigmas=[-1.0])
    with pytest.raises(ConfigError, match="n_points"):
        run(named["rule"], rule, ds, n_points=0)


def test_public_name():
    import scoreprobe as sp
    assert sp.decompose is decompose
