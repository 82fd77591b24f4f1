"""Rules against brute force: counts, membership, per-group validity, uniform sampling, specs, errors."""
import itertools
import json

import numpy as np
import pytest
import torch
from scipy import stats

from scoreprobe.errors import ConfigError, DataError
from scoreprobe.data.rules import ExactK, LatinSquare, Parity, RowK, Sudoku, rule_from_spec


def all_vectors(d):
    """(2^d, d) uint8: every bit vector of width d."""
    return ((np.arange(2**d)[:, None] >> np.arange(d)) & 1).astype(np.uint8)


# ---- independent checkers: plain python loops over the definitions ---------------------------

def parity_groups(G, shape, layout, seed):
    d = shape[0] * shape[1]
    order = {"contiguous": list(range(d)), "offset": list(range(1, d)) + [0],
             "random": list(np.random.default_rng(seed).permutation(d))}[layout]
    return [order[i:i + G] for i in range(0, d, G)]


def parity_groups_ok(v, groups):
    return [sum(int(v[i]) for i in g) % 2 == 0 for g in groups]


def rowk_groups_ok(v, k, shape):
    h, w = shape
    return [sum(int(x) for x in v[r * w:(r + 1) * w]) == k for r in range(h)]


def puzzle_groups_ok(v, n, box):
    """Rows, columns (then boxes): every cell in the unit one-hot and the unit holds each symbol once."""
    cell = {}
    for r, c in itertools.product(range(n), range(n)):
        on = [s for s in range(n) if v[s * n * n + r * n + c]]
        cell[r, c] = on[0] if len(on) == 1 else None
    units = [[(r, c) for c in range(n)] for r in range(n)] + [[(r, c) for r in range(n)] for c in range(n)]
    if box:
        b = int(round(n**0.5))
        units += [[(br * b + i, bc * b + j) for i in range(b) for j in range(b)] for br in range(b) for bc in range(b)]
    return [all(cell[p] is not None for p in u) and sorted(cell[p] for p in u) == list(range(n)) for u in units]


def check_against(rule, vectors, direct):
    """n_valid, enumerate(), is_valid and group_valid of rule against a direct per-vector checker."""
    expect = np.array([direct(v) for v in vectors])  # (M, n_groups)
    np.testing.assert_array_equal(rule.group_valid(vectors), expect)
    np.testing.assert_array_equal(rule.is_valid(vectors), expect.all(axis=1))
    valid = {tuple(v) for v, ok in zip(vectors.tolist(), expect.all(axis=1)) if ok}
    assert rule.n_valid == len(valid)
    enum = rule.enumerate()
    assert enum.dtype == np.uint8 and enum.shape == (rule.n_valid, rule.n_bits)
    assert {tuple(v) for v in enum.tolist()} == valid


PARITY_CASES = [(G, shape, layout, seed) for shape, Gs in (((2, 4), (1, 2, 4, 8)), ((3, 3), (1, 3, 9)))
                for G in Gs for layout, seed in (("contiguous", 0), ("offset", 0), ("random", 0), ("random", 3))]


@pytest.mark.parametrize("G,shape,layout,seed", PARITY_CASES)
def test_parity_brute_force(G, shape, layout, seed):
    rule = Parity(G, shape=shape, layout=layout, seed=seed)
    groups = parity_groups(G, shape, layout, seed)
    check_against(rule, all_vectors(shape[0] * shape[1]), lambda v: parity_groups_ok(v, groups))
    assert [sorted(g) for g in rule.groups.tolist()] == [sorted(int(i) for i in g) for g in groups]


@pytest.mark.parametrize("shape", [(2, 4), (3, 3)])
def test_exactk_brute_force(shape):
    d = shape[0] * shape[1]
    for k in range(d + 1):
        check_against(ExactK(k, shape), all_vectors(d), lambda v: [sum(int(x) for x in v) == k])


@pytest.mark.parametrize("shape", [(2, 4), (3, 3)])
def test_rowk_brute_force(shape):
    for k in range(shape[1] + 1):
        check_against(RowK(k, shape), all_vectors(shape[0] * shape[1]), lambda v: rowk_groups_ok(v, k, shape))


def brute_latin_grids(n, box=False):
    """Set of symbol grids (tuples) of all n x n Latin squares (or Sudoku), from all row-permutation tuples."""
    perms = list(itertools.permutations(range(n)))
    found = set()
    for rows in itertools.product(perms, repeat=n):
        if all(len(set(col)) == n for col in zip(*rows)):
            if not box or all(puzzle_groups_ok(grid_bits(rows, n), n, True)[2 * n:]):
                found.add(rows)
    return found


def grid_bits(rows, n):
    v = [0] * n**3
    for r, row in enumerate(rows):
        for c, s in enumerate(row):
            v[s * n * n + r * n + c] = 1
    return v


def bits_to_grids(bits, n):
    assert (bits.reshape(-1, n, n, n).sum(axis=1) == 1).all()
    return {tuple(map(tuple, g)) for g in bits.reshape(-1, n, n, n).argmax(axis=1).tolist()}


@pytest.mark.parametrize("rule,box", [(LatinSquare(3), False), (LatinSquare(4), False), (Sudoku(4), True)])
def test_puzzle_enumeration_brute_force(rule, box):
    n = rule.n
    expect = brute_latin_grids(n, box)
    enum = rule.enumerate()
    assert len(enum) == rule.n_valid == len(expect)
    assert bits_to_grids(enum, n) == expect


def perturbed_puzzles(rule, rng, m=300):
    """Valid grids, grids with flipped bits, with swapped cells, and random symbol grids."""
    n = rule.n
    valid = rule.sample(m, seed=1)
    flipped = valid.copy()
    flipped[np.arange(m), rng.integers(0, rule.n_bits, m)] ^= 1
    grids = valid.reshape(m, n, n * n).argmax(axis=1)  # (m, n*n) symbol per cell
    swapped = grids.copy()
    a, b = rng.integers(0, n * n, m), rng.integers(0, n * n, m)
    swapped[np.arange(m), a], swapped[np.arange(m), b] = grids[np.arange(m), b], grids[np.arange(m), a]
    rand = rng.integers(0, n, (m, n * n))
    onehot = lambda g: (g[:, None, :] == np.arange(n)[None, :, None]).reshape(m, -1).astype(np.uint8)
    return np.concatenate([valid, flipped, onehot(swapped), onehot(rand), rng.integers(0, 2, (m, rule.n_bits))])


@pytest.mark.parametrize("rule", [LatinSquare(3), LatinSquare(4), LatinSquare(6), Sudoku(4), Sudoku(9)])
def test_puzzle_group_valid_direct(rule):
    bits = perturbed_puzzles(rule, np.random.default_rng(0), m=100 if rule.n == 9 else 300)
    expect = np.array([puzzle_groups_ok(v, rule.n, isinstance(rule, Sudoku)) for v in bits.tolist()])
    got = rule.group_valid(bits)
    assert got.shape == (len(bits), rule.n_groups)
    np.testing.assert_array_equal(got, expect)
    assert 0 < expect.all(axis=1).mean() < 1 and 0 < expect.mean() < 1  # both outcomes exercised


def test_latin5_enumeration_matches_known_count():
    enum = LatinSquare(5).enumerate()  # built by backtracking; n_valid comes from OEIS A002860
    assert len(enum) == LatinSquare(5).n_valid == 161280
    assert len(np.unique(enum, axis=0)) == len(enum)
    assert LatinSquare(5).is_valid(enum[::97]).all()


UNIFORM_CASES = [Parity(2, (2, 4)), Parity(4, (2, 4)), Parity(2, (2, 4), "random", 5), Parity(4, (2, 4), "random", 1),
                 ExactK(3, (3, 3)), RowK(2, (2, 4)), LatinSquare(3), LatinSquare(4), Sudoku(4)]


@pytest.mark.parametrize("rule", UNIFORM_CASES, ids=repr)
def test_sample_valid_and_uniform(rule):
    index = {v: i for i, v in enumerate(map(tuple, rule.enumerate().tolist()))}
    n = 60 * rule.n_valid
    s = rule.sample(n, seed=123)
    assert s.dtype == np.uint8 and s.shape == (n, rule.n_bits)
    codes = [index.get(v, -1) for v in map(tuple, s.tolist())]
    assert min(codes) >= 0  # every sample is in the brute-force valid set
    counts = np.bincount(codes, minlength=rule.n_valid)
    assert stats.chisquare(counts).pvalue > 1e-4
    np.testing.assert_array_equal(rule.sample(50, seed=7), rule.sample(50, seed=7))
    assert not np.array_equal(rule.sample(50, seed=7), rule.sample(50, seed=8))


@pytest.mark.parametrize("rule", [Parity(3), Parity(9, layout="random", seed=2), ExactK(18), RowK(3),
                                  LatinSquare(7), Sudoku(9)], ids=repr)
def test_sample_valid_large(rule):
    s = rule.sample(200, seed=0)
    assert s.shape == (200, rule.n_bits) and rule.is_valid(s).all()
    if isinstance(rule, LatinSquare):
        direct = [all(puzzle_groups_ok(v, rule.n, isinstance(rule, Sudoku))) for v in s[:20].tolist()]
        assert all(direct)
    assert len(np.unique(s, axis=0)) > 150  # not stuck on a few images


def test_sudoku9_count_and_no_enumeration():
    assert Sudoku(9).n_valid == 6670903752021072936960
    with pytest.raises(ConfigError, match="sample"):
        Sudoku(9).enumerate()


@pytest.mark.parametrize("rule", [Parity(3), Parity(4, (2, 8), "random", 9), ExactK(5, (3, 4)), RowK(1, (4, 2)),
                                  LatinSquare(4), Sudoku(9)], ids=repr)
def test_spec_round_trip(rule):
    text = json.dumps(rule.spec())
    again = rule_from_spec(json.loads(text))
    assert again.spec() == rule.spec() and again == rule and type(again) is type(rule)
    assert rule_from_spec(text) == rule
    assert again.image_shape == rule.image_shape and again.n_groups == rule.n_groups
    np.testing.assert_array_equal(again.sample(20, seed=4), rule.sample(20, seed=4))
    if isinstance(rule, Parity):
        np.testing.assert_array_equal(again.groups, rule.groups)


def test_offset_layout_pairs_straddle_patch_2_tokens():
    rule = Parity(2, shape=(6, 6), layout="offset")
    rows, cols = np.divmod(rule.groups, 6)
    token = (rows // 2) * 3 + cols // 2
    assert (token[:, 0] != token[:, 1]).all()
    assert sorted(rule.groups.ravel().tolist()) == list(range(36))


def test_shapes_and_layout():
    r = Parity(3)
    assert (r.n_bits, r.image_shape, r.n_groups, r.n_valid) == (36, (1, 6, 6), 12, 2**24)
    assert r.groups.dtype == np.int64 and r.groups.shape == (12, 3)
    assert LatinSquare(4).image_shape == (4, 4, 4) and Sudoku(4).n_groups == 12
    assert RowK(2, (3, 5)).shape == (3, 5) and RowK(2, (3, 5)).n_groups == 3
    r = Parity(4, layout="random", seed=1)
    assert sorted(r.groups.ravel().tolist()) == list(range(36))
    assert not np.array_equal(r.groups, Parity(4).groups)


@pytest.mark.parametrize("make", [
    lambda: Parity(5), lambda: Parity(0), lambda: Parity(2.5), lambda: Parity(True), lambda: Parity(3, shape=(6,)),
    lambda: Parity(3, layout="diagonal"), lambda: Parity(3, seed=-1), lambda: ExactK(10, (3, 3)),
    lambda: ExactK(-1), lambda: RowK(5, (2, 4)), lambda: LatinSquare(0), lambda: LatinSquare(12),
    lambda: Sudoku(5), lambda: Sudoku(16), lambda: rule_from_spec({"name": "nope"}), lambda: rule_from_spec({"G": 3}),
    lambda: rule_from_spec({"name": "parity", "G": 3, "colour": 1}), lambda: rule_from_spec("{not json"),
    lambda: Parity(3).enumerate(), lambda: ExactK(18).enumerate(), lambda: Parity(3).sample(-1, 0)])
def test_config_errors(make):
    with pytest.raises(ConfigError):
        make()


def test_divisor_message():
    with pytest.raises(ConfigError, match=r"G=5 does not divide D=36.*\[1, 2, 3, 4, 6, 9, 12, 18, 36\]"):
        Parity(5)


@pytest.mark.parametrize("bits,match", [
    (np.zeros((2, 36), np.float32), "dtype float32"), (np.full((2, 36), 2, np.uint8), "only 0 and 1"),
    (-np.ones((2, 36), np.int64), "only 0 and 1"), (np.zeros((2, 35), np.uint8), r"shape \(N, 36\)"),
    (np.zeros(36, np.uint8), r"bits\[None\]"), (np.zeros((2, 1, 6, 6), np.uint8), r"shape \(N, 36\)")])
def test_bit_errors(bits, match):
    with pytest.raises(DataError, match=match):
        Parity(3).is_valid(bits)


def test_accepts_bool_int_and_torch():
    rule = Parity(2, (2, 4))
    v = rule.enumerate()
    for bits in (v.astype(bool), v.astype(np.int64), torch.from_numpy(v)):
        assert rule.is_valid(bits).all()
    assert rule.is_valid(np.zeros((0, 8), np.uint8)).shape == (0,)
