"""Constraint families of LatinSquare / Sudoku (data/grids.py) against a loop-by-loop reference:
every 2^8 pattern of n = 2, random and perturbed valid patterns of 4 x 4; valid ⇔ all families."""
import itertools

import numpy as np
import pytest

from scoreprobe.data.rules import ExactK, LatinSquare, Parity, RowK, Sudoku


def reference(bits, n, boxes):
    """Family validity of one pattern from the definitions, with plain loops (b[symbol][row][col])."""
    b = np.asarray(bits).reshape(n, n, n)
    once = lambda cells: all(sum(b[c][r][k] for r, k in cells) == 1 for c in range(n))  # noqa: E731
    out = {"rows": all(once([(r, k) for k in range(n)]) for r in range(n)),
           "columns": all(once([(r, k) for r in range(n)]) for k in range(n)),
           "cells": all(sum(b[c][r][k] for c in range(n)) == 1 for r in range(n) for k in range(n))}
    if boxes:
        s = int(n ** 0.5)
        out["boxes"] = all(once([(br * s + i, bc * s + j) for i in range(s) for j in range(s)])
                           for br in range(s) for bc in range(s))
    return out


def check(rule, bits):
    got = rule.family_valid(bits)                                          # (N, F)
    ref = np.array([[reference(x, rule.n, rule.name == "sudoku")[f] for f in rule.family_names] for x in bits])
    assert got.shape == (len(bits), len(rule.family_names)) and np.array_equal(got, ref)
    assert np.array_equal(got.all(axis=1), rule.is_valid(bits))
    return got


def test_latin2_all_patterns():
    rule = LatinSquare(2)
    bits = np.array(list(itertools.product([0, 1], repeat=8)), np.uint8)   # all 256
    got = check(rule, bits)
    assert got.all(axis=1).sum() == 2 == rule.n_valid
    # each family alone is not implied by the others: every combination that is not all-true occurs
    assert len({tuple(r) for r in got}) == 8


def perturbed(rule, rng, m):
    """Valid grids, then random bit flips (1-3), cell swaps and symbol duplications."""
    valid = rule.enumerate()
    out = [valid, (rng.random((m, rule.n_bits)) < 0.25).astype(np.uint8)]
    for k in (1, 2, 3):
        x = valid[rng.integers(0, len(valid), m)].copy()
        for _ in range(k):
            j = rng.integers(0, rule.n_bits, m)
            x[np.arange(m), j] ^= 1
        out.append(x)
    g = rule._grids()[rng.integers(0, len(valid), m)].copy()               # (m, n, n) symbol grids
    r, c = rng.integers(0, rule.n, (2, m))
    g[np.arange(m), r, c] = g[np.arange(m), r, (c + 1) % rule.n]           # a symbol twice in a row
    from scoreprobe.data.rules import grids_to_bits
    out.append(grids_to_bits(g, rule.n))
    return np.concatenate(out)


@pytest.mark.parametrize("rule", [Sudoku(4), LatinSquare(4)], ids=["sudoku4", "latin4"])
def test_4x4_random_and_perturbed(rule):
    bits = perturbed(rule, np.random.default_rng(0), 400)
    got = check(rule, bits)
    assert got[: rule.n_valid].all()                                       # every valid grid satisfies all
    assert got.all(axis=1).sum() >= rule.n_valid
    for f in range(len(rule.family_names)):                                # each family both ways
        assert got[:, f].any() and not got[:, f].all()


def test_other_rules_have_no_families():
    for rule in (Parity(2), ExactK(18), RowK(3)):
        assert rule.family_names == ()
        assert rule.family_valid(rule.sample(3, 0)).shape == (3, 0)
