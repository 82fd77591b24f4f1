"""Datasets, signed/bit conversion, BitIndex vs a python dict and brute-force Hamming, endpoint states."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import scoreprobe.data.bitindex as bitindex
from scoreprobe.data.datasets import (STATE_CODES, STATES, Dataset, load_dataset, make_dataset, state_flag_attrs, to_bits, to_signed)
from scoreprobe.data.bitindex import BitIndex
from scoreprobe.errors import ConfigError, DataError
from scoreprobe.data.rules import ExactK, Parity, RowK, Sudoku
from scoreprobe.slices import classify_endpoints


def test_signed_bits_round_trip():
    bits = np.array([[0, 1, 1, 0]], np.uint8)
    s = to_signed(bits)
    assert s.dtype == np.float32 and s.tolist() == [[-1, 1, 1, -1]]
    np.testing.assert_array_equal(to_bits(s), bits)
    t = to_signed(torch.from_numpy(bits))
    assert isinstance(t, torch.Tensor) and t.dtype == torch.float32 and t.tolist() == [[-1, 1, 1, -1]]
    b = to_bits(torch.tensor([[0.3, -0.1, 0.0, 2.0]], dtype=torch.float64))
    assert b.dtype == torch.uint8 and b.tolist() == [[1, 0, 0, 1]]
    assert to_bits(np.array([[0.3, -0.1, 0.0, np.nan]])).tolist() == [[1, 0, 0, 0]]


# ---- BitIndex ---------------------------------------------------------------------------------

def brute_lookup(items, queries):
    first = {}
    for i, v in enumerate(map(tuple, items.tolist())):
        first.setdefault(v, i)
    return np.array([first.get(v, -1) for v in map(tuple, queries.tolist())], np.int64)


def brute_nearest(items, queries):
    dist = (queries[:, None, :] != items[None, :, :]).sum(axis=2)  # (M, N)
    return dist.argmin(axis=1), dist.min(axis=1)  # argmin = smallest index among ties


def random_case(d, n, m, active, seed):
    """Items with duplicates (only `active` columns vary) and queries: half items, half random."""
    rng = np.random.default_rng(seed)
    items = np.zeros((n, d), np.uint8)
    cols = rng.choice(d, size=min(active, d), replace=False)
    items[:, cols] = rng.integers(0, 2, (n, len(cols)))
    queries = rng.integers(0, 2, (m, d)).astype(np.uint8)
    if n:
        pick = rng.integers(0, n, m // 2)
        queries[: m // 2] = items[pick]
    return items, queries


def check_index(items, queries):
    index = BitIndex(items)
    assert len(index) == len(items)
    lookup = index.lookup(queries)
    assert lookup.dtype == np.int64
    np.testing.assert_array_equal(lookup, brute_lookup(items, queries))
    np.testing.assert_array_equal(index.contains(queries), lookup >= 0)
    idx, dist = index.nearest(queries)
    assert idx.dtype == np.int64 and dist.dtype == np.int64
    if len(items):
        b_idx, b_dist = brute_nearest(items, queries)
        np.testing.assert_array_equal(dist, b_dist)
        np.testing.assert_array_equal(idx, b_idx)


@settings(max_examples=40, deadline=None)
@given(d=st.sampled_from([1, 7, 36, 63, 64, 65, 70, 130]), n=st.integers(0, 300), m=st.integers(0, 80),
       active=st.integers(1, 140), seed=st.integers(0, 2**32 - 1))
def test_bitindex_matches_brute_force(d, n, m, active, seed):
    check_index(*random_case(d, n, m, active, seed))


def test_bitindex_many_chunks(monkeypatch):
    monkeypatch.setattr(bitindex, "_CHUNK_BYTES", 1)  # 256 items per chunk
    for d in (36, 130):
        check_index(*random_case(d, 1000, 100, 12, seed=d))


def test_bitindex_thread_pool_chunks(monkeypatch):
    monkeypatch.setattr(bitindex, "_LOOKUP_ROWS", 7)  # many tasks: results must not depend on the split
    monkeypatch.setattr(bitindex, "_NEAREST_ROWS", 5)
    monkeypatch.setattr(bitindex.os, "cpu_count", lambda: 3)
    for d in (36, 70):
        check_index(*random_case(d, 300, 101, 10, seed=d))


def test_bitindex_hash_collisions(monkeypatch):
    # every multi-word row gets the same key: lookups must still be exact through the collision path
    monkeypatch.setattr(bitindex, "_row_keys", lambda packed: np.zeros(len(packed), np.uint64) + packed[:, 0] % 3)
    check_index(*random_case(70, 200, 60, 70, seed=1))


@pytest.mark.parametrize("d", [1, 3, 7, 8, 9, 36, 57, 58, 63, 64, 65, 70, 129, 130, 729])
def test_pack_bits_layout(d):
    bits = np.random.default_rng(d).integers(0, 2, (21, d)).astype(np.uint8)
    packed = bitindex.pack_bits(bits)
    assert packed.dtype == np.uint64 and packed.shape == (21, -(-d // 64))
    expect = [[sum(int(b) << (i - 64 * w) for i, b in enumerate(row) if i // 64 == w) for w in range(packed.shape[1])]
              for row in bits]
    assert packed.tolist() == expect


def test_popcount_table_fallback():
    words = np.random.default_rng(0).integers(0, 2**63, (5, 7), dtype=np.uint64) * np.uint64(3)
    expect = np.array([[bin(int(w)).count("1") for w in row] for row in words])
    np.testing.assert_array_equal(bitindex._popcount_table(words), expect)


def test_bitindex_empty_and_errors():
    empty = BitIndex(np.zeros((0, 36), np.uint8))
    q = np.ones((3, 36), np.uint8)
    assert empty.lookup(q).tolist() == [-1] * 3
    assert [a.tolist() for a in empty.nearest(q)] == [[-1] * 3, [-1] * 3]
    index = BitIndex(np.eye(36, dtype=np.uint8))
    with pytest.raises(DataError, match=r"\(N, 36\)"):
        index.lookup(np.ones((3, 35), np.uint8))
    with pytest.raises(DataError, match="to_bits"):
        index.nearest(np.ones((3, 36), np.float32))
    with pytest.raises(DataError):
        BitIndex(np.full((2, 4), 3, np.uint8))


# ---- make_dataset, save / load ----------------------------------------------------------------

def check_split(ds, rule, n_train, n_heldout):
    assert ds.train.shape == (n_train, rule.n_bits) and ds.heldout.shape == (n_heldout, rule.n_bits)
    assert ds.train.dtype == np.uint8 and ds.heldout.dtype == np.uint8
    both = np.concatenate([ds.train, ds.heldout])
    assert len({tuple(v) for v in both.tolist()}) == len(both)  # unique and disjoint
    assert rule.is_valid(both).all()


@pytest.mark.parametrize("rule,n_train,n_heldout", [
    (Parity(2, (2, 4)), 10, 6), (RowK(2, (2, 4)), 5, 20), (Sudoku(4), 100, 188), (Parity(3), 256, 1024),
    (Parity(9, layout="random", seed=4), 64, 300), (ExactK(18), 100, 100), (Sudoku(9), 50, 50)], ids=repr)
def test_make_dataset(rule, n_train, n_heldout):
    ds = make_dataset(rule, n_train, n_heldout, seed=3)
    check_split(ds, rule, n_train, n_heldout)
    assert ds.rule == rule and ds.seed == 3
    again = make_dataset(rule, n_train, n_heldout, seed=3)
    np.testing.assert_array_equal(again.train, ds.train)
    assert not np.array_equal(make_dataset(rule, n_train, n_heldout, seed=4).train, ds.train)


def test_make_dataset_uniform_small():
    rule = ExactK(2, (2, 2))  # 6 valid images
    index = {v: i for i, v in enumerate(map(tuple, rule.enumerate().tolist()))}
    picks = [index[tuple(make_dataset(rule, 1, 1, seed=s).train[0])] for s in range(600)]
    assert stats.chisquare(np.bincount(picks, minlength=6)).pvalue > 1e-4


def test_make_dataset_errors():
    with pytest.raises(DataError, match="only 16 valid"):
        make_dataset(Parity(2, (2, 4)), 10, 7, seed=0)
    with pytest.raises(ConfigError):
        make_dataset(Parity(3), -1, 5, seed=0)


def test_save_load(tmp_path):
    rule = Parity(4, layout="random", seed=2)
    ds = make_dataset(rule, 30, 40, seed=1)
    path = tmp_path / "dataset.npz"
    ds.save(path)
    assert path.exists()
    with np.load(path) as z:
        assert {"train", "heldout"} <= set(z.files)
        np.testing.assert_array_equal(z["train"], ds.train)
    for again in (load_dataset(path, rule), load_dataset(path)):
        np.testing.assert_array_equal(again.train, ds.train)
        np.testing.assert_array_equal(again.heldout, ds.heldout)
        assert again.rule == rule and again.seed == 1
    with pytest.raises(DataError, match="made for"):
        load_dataset(path, Parity(4))
    with pytest.raises(DataError, match="no dataset"):
        load_dataset(tmp_path / "missing.npz", rule)
    odd = np.zeros((2, 36), np.uint8)
    odd[:, 0] = 1  # the first group holds a single one: odd parity
    np.savez(tmp_path / "bad.npz", train=odd, heldout=np.zeros((0, 36), np.uint8))
    with pytest.raises(DataError, match="not valid"):
        load_dataset(tmp_path / "bad.npz", Parity(2))
    with pytest.raises(DataError, match="stores no rule"):
        load_dataset(tmp_path / "bad.npz")
    np.savez(tmp_path / "narrow.npz", train=np.zeros((2, 35), np.uint8), heldout=np.zeros((0, 35), np.uint8))
    with pytest.raises(DataError, match=r"\(N, 36\)"):
        load_dataset(tmp_path / "narrow.npz", Parity(2))


def test_dataset_index_cached():
    ds = make_dataset(Parity(3), 20, 10, seed=0)
    assert ds.train_index is ds.train_index and len(ds.heldout_index) == 10
    assert ds.train_index.lookup(ds.train).tolist() == list(range(20))


# ---- endpoint states --------------------------------------------------------------------------

def test_state_codes_and_attrs():
    attrs = state_flag_attrs()
    assert attrs["flag_meanings"].split() == list(STATES)
    assert attrs["flag_values"] == [STATE_CODES[s] for s in STATES] == [0, 1, 2, 3, 4]
    assert isinstance(attrs["long_name"], str)


def test_classify_endpoints_hand_built():
    # Parity G=2 on 2x2: groups {0,1}, {2,3}; valid images 0000, 1100, 0011, 1111
    rule = Parity(2, (2, 2))
    ds = Dataset(np.array([[1, 1, 0, 0]], np.uint8), np.array([[0, 0, 1, 1]], np.uint8), rule, 0)
    nan, inf = float("nan"), float("inf")
    x = np.array([[1, 1, -1, -1],           # exactly the training item
                  [0.6, 1.4, -0.9, -1.2],   # near it, within tol
                  [-1, -1, 1, 1],           # the held-out item
                  [1, 1, 1, 1],             # valid, in neither set
                  [1, -1, -1, -1],          # odd parity in the first group
                  [nan, 1, -1, -1],         # not finite
                  [0.4, 1, -1, -1],         # |x_0| is 0.6 away from 1: off-vertex, bits 1100
                  [-inf, 1, 1, 1]])
    expect = ["valid_memorized", "valid_memorized", "valid_heldout", "valid_novel", "rule_violating",
              "invalid", "valid_memorized", "invalid"]   # thresholded bits decide; only non-finite is invalid
    for xin in (x, torch.tensor(x, dtype=torch.float32)):
        out = classify_endpoints(xin, ds, rule)
        assert out["state"].dtype == np.int8
        assert [STATES[s] for s in out["state"]] == expect
        assert out["off_vertex"].tolist() == [False] * 6 + [True, False]
        assert out["train_index"].tolist() == [0, 0, -1, -1, -1, -1, 0, -1]
        assert out["heldout_index"].tolist() == [-1, -1, 0, -1, -1, -1, -1, -1]
        assert out["nearest_train_hamming"].tolist() == [0, 0, 4, 2, 1, -1, 0, -1]
        assert out["nearest_train_index"].tolist() == [0] * 5 + [-1, 0, -1]
        assert out["bits"].dtype == np.uint8 and out["bits"][3].tolist() == [1, 1, 1, 1]
    wide = classify_endpoints(x, ds, rule, tol=0.7)
    assert not wide["off_vertex"][6] and STATES[wide["state"][6]] == "valid_memorized"
    with pytest.raises(DataError):
        classify_endpoints(np.zeros((2, 5)), ds, rule)


# ---- the items against their rule (issue 34, item 2) ------------------------------------------

def test_dataset_of_another_rule_is_refused_and_a_few_bad_items_warned_with_their_share():
    """The README's trap: data of the offset layout read with the contiguous rule (0% valid) is a DataError
    pointing to load_dataset; 2 bad items of 20 warn with the share; check=False takes them on purpose."""
    import warnings
    from scoreprobe.errors import ScoreprobeWarning
    offset = make_dataset(Parity(2, (6, 6), layout="offset"), 12, 8, seed=0)
    contiguous = Parity(2, (6, 6), layout="contiguous")
    share = contiguous.is_valid(np.concatenate([offset.train, offset.heldout])).mean()
    assert share < 0.5                                   # ground truth: most items break the other layout
    with pytest.raises(DataError, match=rf"only {share:.1%} of the 20 items are valid.*sp.load_dataset\(path\)"):
        Dataset(offset.train, offset.heldout, contiguous)
    rule = offset.rule
    train = offset.train.copy()
    train[:2, 0] ^= 1                                    # one flipped bit breaks one pair's parity
    assert (~rule.is_valid(train)).sum() == 2
    with pytest.warns(ScoreprobeWarning, match=r"only 90.0% of the 20 items are valid .*2 of the training items"):
        Dataset(train, offset.heldout, rule)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(Dataset(train, offset.heldout, rule, check=False).train) == 12
        assert len(Dataset(offset.train, offset.heldout, rule).train) == 12   # all valid: silent


def test_load_dataset_reads_the_stored_rule(tmp_path):
    ds = make_dataset(Parity(2, (6, 6), layout="offset"), 6, 4, seed=1)
    ds.save(tmp_path / "d.npz")
    back = load_dataset(tmp_path / "d.npz")
    assert back.rule == ds.rule and back.rule.layout == "offset"
    np.testing.assert_array_equal(back.train, ds.train)
