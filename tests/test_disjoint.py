"""Disjoint-data agreement: two generalizer oracles agree everywhere; two memorizers of disjoint
training sets never produce the same sample."""
import numpy as np
import pytest

from scoreprobe.data.datasets import make_dataset
from scoreprobe.data.rules import Parity
from scoreprobe.errors import ConfigError
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.probes.disjoint import disjoint_agreement, disjoint_check

KW = dict(n_points=16, n_samples=40, n_planes=1, res=8, n_steps=12)


@pytest.fixture(scope="module")
def setup():
    rule = Parity(G=2, shape=(4, 4), layout="contiguous")
    ds = make_dataset(rule, n_train=40, n_heldout=0, seed=0)
    return rule, ds.train[:20], ds.train[20:]


def test_two_generalizers_agree_fully(setup):
    rule, _, _ = setup
    out = disjoint_agreement(RuleDenoiser(rule), RuleDenoiser(rule), rule, **KW)
    assert float(out.sample_same) == 1 and (out.basin_same == 1).all()
    assert np.allclose(out.cosine, 1) and np.allclose(out.rms_diff, 0)


def test_disjoint_memorizers_share_no_sample(setup):
    rule, ta, tb = setup
    assert disjoint_check(ta, tb) == 0 and disjoint_check(ta, ta) == len(ta)
    out = disjoint_agreement(EmpiricalDenoiser(ta), EmpiricalDenoiser(tb), rule, **KW)
    assert float(out.sample_same) == 0 and float(out.sample_hamming) > 0
    assert (out.cosine < 0.99).all()
    # a memorizer against the generalizer: its samples are training items, valid, sometimes the same
    mixed = disjoint_agreement(EmpiricalDenoiser(ta), RuleDenoiser(rule), rule, **KW)
    assert float(mixed.sample_same) < 1


def test_over_steps(setup):
    rule, ta, tb = setup
    gen = RuleDenoiser(rule)
    a = {0: gen, 10: EmpiricalDenoiser(ta), 20: gen}
    b = {0: gen, 10: EmpiricalDenoiser(tb)}
    out = disjoint_agreement(a, b, rule, **KW)
    assert list(out.step.values) == [0, 10]
    assert float(out.sample_same.sel(step=0)) == 1 and float(out.sample_same.sel(step=10)) == 0
    with pytest.raises(ConfigError, match="not common"):
        disjoint_agreement(a, b, rule, steps=[20], **KW)
    with pytest.raises(ConfigError, match="one of each"):
        disjoint_agreement(a, gen, rule, **KW)
    with pytest.raises(ConfigError, match="rule"):
        disjoint_agreement(EmpiricalDenoiser(ta), EmpiricalDenoiser(tb), **KW)
