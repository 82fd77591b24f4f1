"""Grid rules, their cells one-hot as C = n channels:

    LatinSquare(n)   n x n Latin squares
    Sudoku(n)        n x n Sudoku (n in {4, 9})

Bit c*n*n + row*n + col is 1 when cell (row, col) holds symbol c. Import them from
scoreprobe.data.rules (which registers them in RULES) or from scoreprobe.
"""
import functools
import itertools
import math

import numpy as np

from scoreprobe.data.rulebase import ENUMERATE_LIMIT, Rule, _int, check_bits
from scoreprobe.errors import ConfigError

# Number of n x n Latin squares, n = 1..11 (OEIS A002860; = n! (n-1)! times the reduced counts A000315).
LATIN_COUNTS = (1, 2, 12, 576, 161280, 812851200, 61479419904000, 108776032459082956800,
                5524751496156892842531225600, 9982437658213039871725064756920320000,
                776966836171770144107444346734230682311065600000)
# Number of 9 x 9 Sudoku grids (Felgenhauer & Jarvis 2006; OEIS A107739). The 4 x 4 count (288) is enumerated.
SUDOKU9_COUNT = 6670903752021072936960


class LatinSquare(Rule):
    """n x n Latin squares: every symbol once per row and per column.

    Image shape (n, n, n): channel c is symbol c, bit c*n*n + row*n + col is 1 when cell (row, col)
    holds c. Groups: the n rows, then the n columns (a cell that is not one-hot makes its row and
    column invalid). n_valid is exact (OEIS A002860, enumerated for n <= 5). sample() is exactly
    uniform for n <= 5 (uniform pick from the enumerated set); for n >= 6 it applies random row,
    column and symbol permutations and a random transpose to the cyclic square, which is NOT
    uniform over Latin squares (it only reaches the isotopy class of the cyclic group table).
    """

    name = "latin"
    max_n = len(LATIN_COUNTS)
    family_names = ("rows", "columns", "cells")

    def __init__(self, n):
        self.n = _int(n, "n", 1, self.max_n)
        self.image_shape = (self.n, self.n, self.n)
        self.n_groups = 2 * self.n

    @property
    def n_valid(self):
        return LATIN_COUNTS[self.n - 1]

    def _box(self):
        return None

    def group_valid(self, bits):
        """bits: (N, n^3) -> bool (N, n_groups): rows, columns (then boxes for Sudoku)."""
        n = self.n
        b = check_bits(bits, self.n_bits).reshape(-1, n, n, n)  # (N, symbol, row, col)
        cell_ok = b.sum(axis=1) == 1  # (N, row, col)
        rows = cell_ok.all(axis=2) & (b.sum(axis=3) == 1).all(axis=1)  # (N, row)
        cols = cell_ok.all(axis=1) & (b.sum(axis=2) == 1).all(axis=1)  # (N, col)
        out = [rows, cols]
        if (s := self._box()) is not None:
            boxes = b.reshape(-1, n, n // s, s, n // s, s).sum(axis=(3, 5)) == 1  # (N, symbol, box_r, box_c)
            cells = cell_ok.reshape(-1, n // s, s, n // s, s).all(axis=(2, 4))  # (N, box_r, box_c)
            out.append((boxes.all(axis=1) & cells).reshape(-1, n))
        return np.concatenate(out, axis=1)

    def family_valid(self, bits):
        """bits: (N, n^3) -> bool (N, len(family_names)), b[symbol, row, col] the one-hot bits:

        rows: in every row every symbol exactly once (Σ_col b = 1 for every symbol, row);
        columns: likewise per column (Σ_row b = 1); boxes (Sudoku): likewise per box;
        cells: every cell holds exactly one symbol (Σ_symbol b = 1 for every row, col).

        valid ⇔ all families. Proof: group_valid's row group r is "every cell of row r holds one
        symbol, and every symbol is once in row r" (the column and box groups likewise). Every cell
        lies in some row, so all row groups hold ⇔ cells ∧ rows; all column groups ⇔ cells ∧ columns;
        all box groups ⇔ cells ∧ boxes; is_valid, their conjunction, is rows ∧ columns [∧ boxes] ∧ cells.
        No family follows from the others (n = 2: symbols 0 and 1 both on the diagonal satisfy rows and
        columns but not cells), so each is a separate clock.
        """
        n = self.n
        b = check_bits(bits, self.n_bits).reshape(-1, n, n, n).astype(np.int64)   # (N, symbol, row, col)
        fam = {"rows": (b.sum(axis=3) == 1).all(axis=(1, 2)), "columns": (b.sum(axis=2) == 1).all(axis=(1, 2)),
               "cells": (b.sum(axis=1) == 1).all(axis=(1, 2))}
        if (s := self._box()) is not None:
            fam["boxes"] = (b.reshape(-1, n, n // s, s, n // s, s).sum(axis=(3, 5)) == 1).all(axis=(1, 2, 3))
        return np.stack([fam[f] for f in self.family_names], axis=1)                # (N, F)

    def transposed(self, bits):
        """bits: (N, n^3) -> (N, n^3) uint8, every grid transposed: cell (row, col) takes the symbol of
        cell (col, row). The valid set is closed under it (a Latin square's transpose is one; a Sudoku's
        too, its square boxes map to boxes) and it is its own inverse. Families map rows <-> columns
        (boxes and cells to themselves): family_valid(transposed(b)) is family_valid(b) with the rows
        and columns entries swapped."""
        n = self.n
        b = check_bits(bits, self.n_bits).reshape(-1, n, n, n)                   # (N, symbol, row, col)
        return np.ascontiguousarray(b.transpose(0, 1, 3, 2)).reshape(-1, n ** 3)

    def _grids(self):
        """(n_valid, n, n) int8 symbol grids of the whole valid set (small n only)."""
        return _latin_grids(self.n)

    def enumerate(self):
        """(n_valid, n^3) uint8 one-hot grids, every valid grid once."""
        self._check_enumerable()
        return grids_to_bits(self._grids(), self.n)

    def sample(self, n, seed):
        """(n, n^3) uint8; uniform for small n (see the class docstring)."""
        n = _int(n, "n", 0)
        rng = np.random.default_rng(seed)
        if self.n_valid <= ENUMERATE_LIMIT:
            grids = self._grids()
            return grids_to_bits(grids[rng.integers(0, len(grids), size=n)], self.n)
        return grids_to_bits(self._shuffle(rng, n), self.n)

    def _shuffle(self, rng, m):
        """(m, n, n): random row, column, symbol permutations and transpose of the cyclic square."""
        k = self.n
        base = (np.arange(k)[:, None] + np.arange(k)[None, :]) % k
        rows, cols = rng.random((m, k)).argsort(axis=1), rng.random((m, k)).argsort(axis=1)
        return _relabel_transpose(rng, base[rows[:, :, None], cols[:, None, :]], k)

    def spec(self):
        return {"name": self.name, "n": self.n}


class Sudoku(LatinSquare):
    """n x n Sudoku grids, n in {4, 9}: a Latin square whose sqrt(n) x sqrt(n) boxes hold every symbol.

    Same one-hot layout as LatinSquare; groups: n rows, n columns, n boxes (box b = box_row *
    sqrt(n) + box_col). n = 4: 288 grids, enumerated, sample() exactly uniform. n = 9:
    n_valid = 6670903752021072936960 (Felgenhauer & Jarvis 2006); sample() is NOT uniform: it
    takes the pattern grid (3*(r%3) + r//3 + c) % 9 and applies a random symbol relabelling, band
    permutation, row permutation within each band, stack permutation, column permutation within
    each stack and a random transpose (the validity-preserving symmetries of Sudoku); it only
    reaches grids equivalent to the pattern grid.
    """

    name = "sudoku"
    family_names = ("rows", "columns", "boxes", "cells")

    def __init__(self, n):
        if n not in (4, 9) or isinstance(n, bool):
            raise ConfigError(f"Sudoku supports n = 4 or n = 9, got {n!r}")
        super().__init__(n)
        self.n_groups = 3 * self.n

    @property
    def n_valid(self):
        return 288 if self.n == 4 else SUDOKU9_COUNT

    def _box(self):
        return math.isqrt(self.n)

    def _grids(self):
        grids = _latin_grids(self.n)
        return grids[self.is_valid(grids_to_bits(grids, self.n))]

    def _shuffle(self, rng, m):
        s, k = self._box(), self.n
        r, c = np.arange(k)[:, None], np.arange(k)[None, :]
        base = (s * (r % s) + r // s + c) % k

        def order():  # (m, n): a band (stack) permutation composed with permutations within bands
            outer = rng.random((m, s)).argsort(axis=1)  # (m, s)
            inner = rng.random((m, s, s)).argsort(axis=2)  # (m, s, s)
            return (s * outer[:, :, None] + inner).reshape(m, k)

        rows, cols = order(), order()
        return _relabel_transpose(rng, base[rows[:, :, None], cols[:, None, :]], k)


def grids_to_bits(grids, n):
    """grids: (M, n, n) ints in [0, n) -> (M, n^3) uint8 one-hot bits in (symbol, row, col) order."""
    grids = np.asarray(grids)
    onehot = grids[:, None, :, :] == np.arange(n)[None, :, None, None]  # (M, n, n, n)
    return onehot.reshape(len(grids), n**3).astype(np.uint8)


def _relabel_transpose(rng, grids, k):
    """Random symbol relabelling and random transpose of (m, k, k) grids."""
    m = len(grids)
    symbols = rng.random((m, k)).argsort(axis=1)  # (m, k)
    grids = np.take_along_axis(symbols, grids.reshape(m, k * k), axis=1).reshape(m, k, k)
    flip = rng.random(m) < 0.5
    grids[flip] = grids[flip].transpose(0, 2, 1)
    return grids


@functools.lru_cache(maxsize=8)
def _latin_grids(n):
    """(L_n, n, n) int8: all Latin squares of order n, built row by row from compatible permutations."""
    if LATIN_COUNTS[n - 1] > ENUMERATE_LIMIT:
        raise ConfigError(f"cannot enumerate the {LATIN_COUNTS[n - 1]} Latin squares of order {n}")
    perms = np.array(list(itertools.permutations(range(n))), dtype=np.int8)  # (P, n)
    compat = (perms[:, None, :] != perms[None, :, :]).all(axis=2)  # (P, P) no clash in any column
    partial = np.arange(len(perms))[:, None]  # (M, rows so far) permutation indices
    allowed = compat.copy()  # (M, P) permutations compatible with every row so far
    for _ in range(n - 1):
        m, p = np.nonzero(allowed)
        partial = np.concatenate([partial[m], p[:, None]], axis=1)
        allowed = allowed[m] & compat[p]
    grids = perms[partial]  # (L_n, n, n)
    grids.flags.writeable = False
    return grids
