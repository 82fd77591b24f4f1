import itertools

import numpy as np
import pytest
import torch

from scoreprobe.data.datasets import STATE_CODES, Dataset, make_dataset
from scoreprobe.errors import ConfigError
from scoreprobe.data.rules import Parity
from scoreprobe.slices import Plane, auto_plane, classify, plane_from_spec


def _vertex(rng, d):
    return rng.choice([-1.0, 1.0], size=d)


def test_plane_basis_is_orthonormal_and_holds_the_anchors():
    rng = np.random.default_rng(0)
    a, b, c = (_vertex(rng, 20) for _ in range(3))
    p = Plane.through(a, b, c)
    np.testing.assert_allclose(p.basis @ p.basis.T, np.eye(2), atol=1e-12)
    # the anchors lie in the plane: lifting their coordinates gives them back
    np.testing.assert_allclose(p.lift(p.anchor_uv[:, 0], p.anchor_uv[:, 1]), p.anchors, atol=1e-12)
    # plane coordinates keep distances between anchors
    for i, j in itertools.combinations(range(3), 2):
        dist = np.linalg.norm(p.anchors[i] - p.anchors[j])
        assert np.linalg.norm(p.anchor_uv[i] - p.anchor_uv[j]) == pytest.approx(dist)
    # e_u points from a to b, so a and b share v and u_b > u_a
    assert p.anchor_uv[0, 1] == pytest.approx(p.anchor_uv[1, 1]) and p.anchor_uv[1, 0] > p.anchor_uv[0, 0]
    # the basis spans the same plane as (b - a, c - a): a least-squares fit has zero residual
    span = np.stack([b - a, c - a]).T
    for e in p.basis:
        coef, *_ = np.linalg.lstsq(span, e, rcond=None)
        np.testing.assert_allclose(span @ coef, e, atol=1e-12)


def test_plane_accepts_torch_and_rejects_collinear_points():
    a = torch.ones(6)
    b = -torch.ones(6)
    with pytest.raises(ConfigError, match="collinear"):
        Plane.through(a, b, torch.zeros(6))
    with pytest.raises(ConfigError, match="coincide"):
        Plane.through(a, a, b)


def test_grid_layout_and_symmetry():
    rng = np.random.default_rng(1)
    p = Plane.through(*(_vertex(rng, 12) for _ in range(3)))
    pts, u, v = p.grid(7, margin=0.25)
    assert pts.shape == (49, 12) and u.shape == (7,) and v.shape == (7,)
    uv = p.coords(pts)
    np.testing.assert_allclose(uv[:, 0], np.tile(u, 7), atol=1e-12)   # point k: u[k % res], v[k // res]
    np.testing.assert_allclose(uv[:, 1], np.repeat(v, 7), atol=1e-12)
    # grid covers the anchors with the margin on each side
    lo, hi = p.anchor_uv.min(0), p.anchor_uv.max(0)
    pad = 0.25 * (hi - lo).max()
    assert u[0] == pytest.approx(lo[0] - pad) and u[-1] == pytest.approx(hi[0] + pad)
    assert v[0] == pytest.approx(lo[1] - pad) and v[-1] == pytest.approx(hi[1] + pad)
    # mirror-symmetric coordinates around the midpoint
    np.testing.assert_array_equal(u - (u[0] + u[-1]) / 2, -(u[::-1] - (u[0] + u[-1]) / 2))
    with pytest.raises(ConfigError):
        p.grid(1)


@pytest.fixture(scope="module")
def small():
    rule = Parity(G=3, shape=(3, 4), layout="random", seed=1)
    return rule, make_dataset(rule, n_train=20, n_heldout=20, seed=3)


def test_auto_plane_picks_a_close_heldout_item_and_a_violating_flip(small):
    rule, ds = small
    p = auto_plane(ds, rule, seed=0)
    i, j, k = (int(lbl.split(":")[1]) for lbl in p.labels)
    bits = (p.anchors > 0).astype(np.uint8)
    np.testing.assert_array_equal(bits[0], ds.train[i])
    np.testing.assert_array_equal(bits[1], ds.heldout[j])
    # brute force: smallest train/held-out Hamming distance (2 if any pair is two flips apart)
    dist = (ds.train[:, None, :] != ds.heldout[None, :, :]).sum(-1)
    best = 2 if (dist == 2).any() else dist.min()
    assert (bits[0] != bits[1]).sum() == best
    assert (bits[0] != bits[2]).sum() == 1 and bits[2, k] != bits[0, k]
    assert not rule.is_valid(bits[2:3])[0]
    assert auto_plane(ds, rule, seed=0).labels == p.labels           # deterministic


def test_plane_from_spec(small):
    rule, ds = small
    flips = ds.train[2] ^ np.eye(rule.n_bits, dtype=np.uint8)          # (D, D): item 2 with bit k flipped
    k = int(np.flatnonzero(~rule.is_valid(flips))[0])
    p = plane_from_spec(f"train:2,heldout:5,violating:{k}", ds, rule)
    assert p.labels == ("train:2", "heldout:5", f"violating:{k}")
    np.testing.assert_array_equal((p.anchors[1] > 0), ds.heldout[5].astype(bool))
    assert plane_from_spec("auto", ds, rule, seed=0).labels == auto_plane(ds, rule, seed=0).labels
    for bad in ("train:2,heldout:5", "train:x,heldout:5,violating:1", "train:99,heldout:5,violating:1", "foo"):
        with pytest.raises(ConfigError):
            plane_from_spec(bad, ds, rule)


def test_classify_states_items_and_anchors():
    rule = Parity(G=2, shape=(2, 2))                   # groups (0,1), (2,3): valid iff b0 = b1 and b2 = b3
    train = np.array([[1, 1, 0, 0]], dtype=np.uint8)
    heldout = np.array([[0, 0, 1, 1]], dtype=np.uint8)
    ds = Dataset(train=train, heldout=heldout, rule=rule)
    s = lambda b: 2.0 * np.asarray(b, dtype=float) - 1   # noqa: E731
    x = np.stack([s([1, 1, 0, 0]) * 0.9,                # memorized, anchor 0
                  s([0, 0, 1, 1]),                      # held-out, anchor 1
                  s([1, 1, 1, 1]),                      # novel valid
                  s([1, 0, 0, 0]),                      # violating, anchor 2
                  np.array([0.1, 1, 1, 1]),             # off-vertex, bits 1111: novel valid, no anchor
                  np.array([np.nan, 1, 1, 1])])         # invalid (non-finite)
    anchors = np.stack([s([1, 1, 0, 0]), s([0, 0, 1, 1]), s([1, 0, 0, 0])])
    c = classify(x, ds, rule, anchors=anchors)
    names = {v: k for k, v in STATE_CODES.items()}
    assert [names[v] for v in c["state"]] == ["valid_memorized", "valid_heldout", "valid_novel",
                                              "rule_violating", "valid_novel", "invalid"]
    assert c["off_vertex"].tolist() == [False, False, False, False, True, False]
    assert c["index"].tolist() == [0, 0, -1, -1, -1, -1]
    assert c["anchor"].tolist() == [0, 1, -1, 2, -1, -1]
    assert c["nearest_train_hamming"][5] == -1  # a sentinel, not the distance of NaN's all-zero bits
    assert c["nearest_anchor_hamming"][:4].tolist() == [0, 0, 2, 0]
    assert c["nearest_train_hamming"][:4].tolist() == [0, 4, 2, 1]


def test_plane_spec_takes_any_three_items_by_kind_and_index_and_bit_strings(small):
    """Issue 34, item 7: 'train:5,train:17,heldout:300' named train twice and was refused; any three points work,
    in the order given (Plane.through's a, b, c), and explicit bit strings too."""
    rule, ds = small
    p = plane_from_spec("train:1,train:3,heldout:4", ds, rule)
    assert p.labels == ("train:1", "train:3", "heldout:4")
    want = Plane.through(*(2.0 * x - 1 for x in (ds.train[1], ds.train[3], ds.heldout[4])))
    np.testing.assert_allclose(p.anchors, want.anchors)
    np.testing.assert_allclose(p.basis, want.basis)
    bits = "".join(map(str, ds.heldout[0]))
    q = plane_from_spec(f"heldout:2,bits:{bits},{bits[::-1]}", ds, rule)
    np.testing.assert_array_equal(q.anchors[1] > 0, ds.heldout[0].astype(bool))
    np.testing.assert_array_equal(q.anchors[2] > 0, np.array(list(bits[::-1])) == "1")
    classic = plane_from_spec("violating:0,heldout:5,train:2", ds, rule)       # the old spec keeps its order
    assert classic.labels[:2] == ("train:2", "heldout:5")
    for bad, match in (("train:1,train:1,heldout:4", "coincide"), ("train:1,heldout:2", "three"),
                       (f"train:1,heldout:2,bits:{bits[:-1]}", "needs 12 characters"),
                       ("heldout:1,heldout:2,violating:3", "first train item"),
                       ("train:1,train:2,heldout:3,train:4", "names 4 points")):
        with pytest.raises(ConfigError, match=match):
            plane_from_spec(bad, ds, rule)
