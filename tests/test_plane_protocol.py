"""The plane kinds of the mechanism study (slices.symmetric_planes, train_heldout_planes,
random_valid_planes, noise_reach_margin) and the retention outcomes (probes.capture)."""
import warnings

import numpy as np
import pytest

from scoreprobe.data.datasets import Dataset, make_dataset, to_signed
from scoreprobe.data.rules import ExactK, LatinSquare, Parity, RowK
from scoreprobe.errors import SettingWarning
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.probes.retention import RETENTION_VARS, retention
from scoreprobe.probes.capture import closer_to_nontrain, nearest_valid_vertex
from scoreprobe.slices import (hamming_matrix, noise_reach_margin, random_valid_planes, symmetric_planes,
                               train_heldout_planes)


def _bits(plane):
    return (plane.anchors > 0).astype(np.uint8)


def _index(label):
    return int(label.split(":")[1])


@pytest.fixture(scope="module")
def data():
    rule = Parity(G=2, shape=(4, 4), layout="offset")        # 256 valid images
    return rule, make_dataset(rule, n_train=20, n_heldout=60, seed=0)


def test_symmetric_planes_follow_the_protocol(data):
    rule, ds = data
    planes = symmetric_planes(ds, rule, n=10, seed=1, max_hamming=4)
    assert len(planes) == 10
    ham = hamming_matrix(ds.train, ds.heldout)
    n2 = int((ham == 2).sum())
    dists = [int(hamming_matrix(_bits(p)[:1], _bits(p)[1:2])[0, 0]) for p in planes]
    assert dists == sorted(dists) and dists.count(2) == min(n2, 10) and set(dists) <= {2, 4}  # distance 2 first
    for p, dist in zip(planes, dists):
        t, h, w = _bits(p)
        assert (t == ds.train[_index(p.labels[0])]).all() and (h == ds.heldout[_index(p.labels[1])]).all()
        assert not rule.is_valid(w[None])[0]                                  # w violates the rule
        assert p.labels[2] == "violating:t^" + ",".join(map(str, np.flatnonzero(w != t)))
        assert (w != t).sum() == (w != h).sum() == dist // 2                  # equidistant, k flips from each
        # the signed permutation of the differing bits that swaps t and h fixes w: u -> -u on the plane
        uv = p.anchor_uv
        assert uv[0, 0] == pytest.approx(-uv[1, 0]) and uv[2, 0] == pytest.approx(0.0, abs=1e-12)
        for g in rule.groups:                                                 # half the flips of each group
            assert 2 * (w[g] != t[g]).sum() == (h[g] != t[g]).sum()
    again = symmetric_planes(ds, rule, n=10, seed=1, max_hamming=4)
    assert [p.labels for p in again] == [p.labels for p in planes]            # seeded


def test_symmetric_planes_when_too_few_pairs_exist(data):
    rule, ds = data
    n2 = int((hamming_matrix(ds.train, ds.heldout) == 2).sum())
    with pytest.warns(SettingWarning, match=f"only {n2} symmetric planes"):
        planes = symmetric_planes(ds, rule, n=n2 + 5, seed=0)
    assert len(planes) == n2
    far = Dataset(train=ds.train[:1], heldout=ds.train[:1] ^ 1, rule=rule)   # all 16 bits differ
    with pytest.warns(SettingWarning, match="only 0"):
        assert symmetric_planes(far, rule, n=3) == []


def test_train_heldout_and_random_valid_planes(data):
    rule, ds = data
    ham = hamming_matrix(ds.train, ds.heldout)
    planes = train_heldout_planes(ds, n=25, seed=3)               # more than the 20 items: some repeat
    assert len(planes) == 25 and len({p.labels[0] for p in planes}) == 20
    for p in planes:
        i, j1, j2 = (_index(lab) for lab in p.labels)
        assert j1 != j2 and max(ham[i, j1], ham[i, j2]) <= np.sort(ham[i])[1]   # the two nearest
    rv = random_valid_planes(ds, rule, n=8, seed=4)
    assert len(rv) == 8
    for p in rv:
        assert rule.is_valid(_bits(p)).all()
        for bits, lab in zip(_bits(p), p.labels):
            kind, _, v = lab.partition(":")
            assert kind in ("train", "heldout", "valid")
            if kind == "valid":
                assert v == "".join(map(str, bits)) and ds.train_index.lookup(bits[None])[0] < 0


def test_noise_reach_margin_pads_by_sigma_sqrt_d(data):
    rule, ds = data
    p = symmetric_planes(ds, rule, n=1, seed=0)[0]
    _, u, v = p.grid(5, margin=noise_reach_margin(p, 1.5))
    lo, hi = p.anchor_uv.min(0), p.anchor_uv.max(0)
    assert u[0] == pytest.approx(lo[0] - 1.5 * 4.0) and v[-1] == pytest.approx(hi[1] + 1.5 * 4.0)


@pytest.mark.parametrize("rule", [Parity(G=3, shape=(2, 3), layout="random", seed=5), Parity(G=2, shape=(2, 4)),
                                  ExactK(3, shape=(2, 4)), RowK(2, shape=(2, 4)), LatinSquare(2)])
def test_nearest_valid_vertex_equals_brute_force(rule):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, rule.n_bits)) * rng.choice([0.3, 1.0, 3.0], size=(400, 1))
    valid = rule.enumerate()                                                # (V, D)
    d2 = ((x[:, None, :] - (2.0 * valid[None] - 1)) ** 2).sum(-1)           # (N, V)
    got = nearest_valid_vertex(x, rule)
    got_d2 = ((x - (2.0 * got - 1)) ** 2).sum(-1)
    assert rule.is_valid(got).all()
    np.testing.assert_allclose(got_d2, d2.min(axis=1), rtol=1e-12)


def test_closer_to_nontrain_by_brute_force(data):
    rule, ds = data
    rng = np.random.default_rng(1)
    x = to_signed(ds.heldout[rng.integers(0, 60, 300)]) + rng.normal(size=(300, 16)) * 0.8
    valid = rule.enumerate()
    d_valid = ((x[:, None] - (2.0 * valid[None] - 1)) ** 2).sum(-1)         # (N, V)
    is_train = ds.train_index.lookup(valid) >= 0
    want = d_valid[:, ~is_train].min(1) < d_valid[:, is_train].min(1)
    got = closer_to_nontrain(x, ds, rule)
    np.testing.assert_array_equal(got, want)
    assert 0 < got.mean() < 1
    assert closer_to_nontrain(np.zeros((1, 125)), ds, LatinSquare(5)) is None   # 161 280 valid: no search


def test_retention_outcomes_partition_and_oracles(data):
    rule, ds = data
    kw = dict(points=None, sigmas=(0.2, 1.0, 3.0), n_noise=8, n_train=6, n_heldout=6, dataset=ds, rule=rule)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mem = retention(EmpiricalDenoiser(ds.train), **kw)
    assert set(RETENTION_VARS) <= set(mem.data_vars)
    parts = mem.retained + mem.captured + mem.other_valid + mem.violating
    np.testing.assert_allclose(parts, 1.0)                                  # the memorizer never diverges
    ho = mem.sel(sample=mem.split == "heldout")
    assert (ho.captured >= 0.99).all()                                      # every held-out start is swallowed
    # captured although closer: every restart whose start is nearer a non-training valid vertex
    np.testing.assert_allclose(ho.captured_closer, ho.closer_nontrain)
    assert float(ho.closer_nontrain.sel(sigma=0.2).mean()) > 0.9          # near its own (non-training) vertex
    gen = retention(RuleDenoiser(rule), **kw)
    assert float(gen.sel(sample=gen.split == "heldout").captured_closer.sel(sigma=0.2).mean()) == 0.0
    assert (gen.violating == 0).all()


def test_retention_closer_by_enumeration_and_nan_without_a_search(monkeypatch):
    import scoreprobe.probes.capture as capture
    rule = LatinSquare(3)                                                   # 12 valid: by enumeration
    ds = make_dataset(rule, n_train=3, n_heldout=3, seed=0)
    kw = dict(points=None, sigmas=(0.5,), n_noise=4, n_train=2, n_heldout=2, dataset=ds, rule=rule, n_steps=4)
    r = retention(EmpiricalDenoiser(ds.train), **kw)
    assert np.isfinite(r.closer_nontrain).all() and float(r.closer_nontrain.mean()) > 0
    monkeypatch.setattr(capture, "MAX_BRUTE_FORCE", 4)                      # now too many to enumerate
    r = retention(EmpiricalDenoiser(ds.train), **kw)
    assert np.isnan(r.closer_nontrain).all() and np.isnan(r.captured_closer).all()
    assert np.isfinite(r.retained).all()
