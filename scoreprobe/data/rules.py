"""Rules on binary images: which bit vectors are valid.

A rule fixes the image shape (C, H, W), the bit width D = C*H*W and the valid set. Bits are
uint8 in {0, 1}, shape (N, D), flattened in (C, H, W) order. Every rule answers is_valid /
group_valid, counts its valid set exactly (n_valid), samples it (uniformly, except where a
docstring says otherwise), enumerates it when small, and round-trips through a JSON spec.

    Parity(G, shape, layout, seed)  pixels split into D/G groups of G, each with even parity
    ExactK(k, shape)                exactly k ones in the image
    RowK(k, shape)                  exactly k ones in every row
    LatinSquare(n)                  n x n Latin squares, one-hot cells as C = n channels
    Sudoku(n)                       n x n Sudoku (n in {4, 9}), one-hot cells as C = n channels
"""
import functools
import itertools
import json
import math
import numbers

import numpy as np

from scoreprobe.errors import ConfigError, DataError
from scoreprobe.limits import MAX_BITS

ENUMERATE_LIMIT = 2**20  # enumerate() refuses valid sets larger than this (memory: n_valid * D bytes)

# Number of n x n Latin squares, n = 1..11 (OEIS A002860; = n! (n-1)! times the reduced counts A000315).
LATIN_COUNTS = (1, 2, 12, 576, 161280, 812851200, 61479419904000, 108776032459082956800,
                5524751496156892842531225600, 9982437658213039871725064756920320000,
                776966836171770144107444346734230682311065600000)
# Number of 9 x 9 Sudoku grids (Felgenhauer & Jarvis 2006; OEIS A107739). The 4 x 4 count (288) is enumerated.
SUDOKU9_COUNT = 6670903752021072936960


def check_bits(bits, n_bits, name="bits"):
    """Validate a bit array and return it as a contiguous uint8 numpy array.

    Parameters
    ----------
    bits : (N, D) array-like or torch tensor of bool/integers in {0, 1}
    n_bits : int, the expected width D (None: any width)

    Returns
    -------
    (N, D) uint8 numpy array. Raises DataError when the shape, dtype or values are wrong.
    """
    if hasattr(bits, "detach"):  # torch tensor
        bits = bits.detach().cpu().numpy()
    arr = np.asarray(bits)
    if arr.dtype.kind not in "biu":
        hint = " (signed or float values: convert with scoreprobe.to_bits first)" if arr.dtype.kind == "f" else ""
        raise DataError(f"{name} must be a bool or integer array of 0/1, got dtype {arr.dtype}{hint}")
    if arr.ndim != 2 or arr.shape[1] != (arr.shape[1] if n_bits is None else n_bits):
        raise DataError(f"{name} must have shape (N, {'D' if n_bits is None else n_bits}), got {arr.shape}"
                        + ("; use bits[None] for a single vector" if arr.ndim == 1 else ""))
    if arr.dtype != np.uint8 or (arr.size and arr.max() > 1):
        if arr.size and (arr.min() < 0 or arr.max() > 1):
            raise DataError(f"{name} must contain only 0 and 1, found values in [{arr.min()}, {arr.max()}]"
                            " (signed +-1 values: convert with scoreprobe.to_bits first)")
        arr = arr.astype(np.uint8)
    return np.ascontiguousarray(arr)


def _int(value, name, lo, hi=None):
    """A python int in [lo, hi]; ConfigError otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"{name} must be an integer, got {str(value)[:60]}")
    value = int(value)
    if value < lo or (hi is not None and value > hi):
        raise ConfigError(f"{name}={value} is out of range [{lo}, {'inf' if hi is None else hi}]")
    return value


def _shape(shape):
    """(H, W) of positive ints with H*W <= limits.MAX_BITS; ConfigError otherwise."""
    try:
        h, w = shape
    except (TypeError, ValueError):
        raise ConfigError(f"shape must be (rows, cols), got {str(shape)[:60]}") from None
    h, w = _int(h, "shape[0]", 1, MAX_BITS), _int(w, "shape[1]", 1, MAX_BITS)
    if h * w > MAX_BITS:
        raise ConfigError(f"shape {h}x{w} has {h * w} pixels, more than the limit {MAX_BITS} "
                          "(scoreprobe.limits.MAX_BITS)")
    return h, w


class Rule:
    """Base class. Subclasses set name, image_shape, n_groups and implement group_valid, sample, ..."""

    name = "rule"
    image_shape = (1, 1, 1)
    n_groups = 1
    family_names = ()   # constraint families (LatinSquare, Sudoku); () for rules without them

    def family_valid(self, bits):
        """bits: (N, D) 0/1 -> bool (N, len(family_names)): each constraint family satisfied."""
        return np.zeros((len(check_bits(bits, self.n_bits)), 0), dtype=bool)

    @property
    def n_bits(self):
        return math.prod(self.image_shape)

    def is_valid(self, bits):
        """bits: (N, D) 0/1 -> bool (N,): every group of the image is valid."""
        return self.group_valid(bits).all(axis=1)

    def _check_enumerable(self):
        if self.n_valid > ENUMERATE_LIMIT:
            raise ConfigError(f"{self!r} has {self.n_valid} valid images, more than enumerate() holds "
                              f"(limit {ENUMERATE_LIMIT}, i.e. n_valid * {self.n_bits} bytes); use sample(n, seed)")

    def spec(self):
        """JSON-able dict with "name" and the constructor arguments; rule_from_spec inverts it."""
        raise NotImplementedError

    def effective_spec(self):
        """The spec without arguments this rule ignores: two rules with equal ones accept the same images."""
        return self.spec()

    def __eq__(self, other):
        return isinstance(other, Rule) and self.spec() == other.spec()

    def __hash__(self):
        return hash(json.dumps(self.spec(), sort_keys=True))

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.spec().items() if k != "name")
        return f"{type(self).__name__}({args})"


LAYOUTS = ("contiguous", "offset", "random")


class Parity(Rule):
    """The H*W raster pixels are split into D/G groups of G pixels; each group has even parity.

    layout="contiguous": group g holds pixels g*G .. (g+1)*G-1. layout="offset": the same one pixel
    later, g*G+1 .. (g+1)*G, the last group wrapping round to pixel 0 (with patch size 2 and G = 2 every
    pair then straddles two tokens). layout="random": the groups are consecutive slices of the fixed
    permutation np.random.default_rng(seed).permutation(D).
    n_valid = 2**(D - D/G); sample() is exactly uniform.
    """

    name = "parity"

    def __init__(self, G, shape=(6, 6), layout="contiguous", seed=0):
        self.shape = _shape(shape)
        d = self.shape[0] * self.shape[1]
        self.G = _int(G, "G", 1, d)
        if d % self.G:
            divisors = [g for g in range(1, d + 1) if d % g == 0]
            raise ConfigError(f"G={self.G} does not divide D={d} pixels of a {self.shape[0]}x{self.shape[1]} "
                              f"image; choose one of {divisors}")
        if layout not in LAYOUTS:
            raise ConfigError(f"layout must be one of {', '.join(LAYOUTS)}; got {layout!r}")
        self.layout, self.seed = layout, _int(seed, "seed", 0, 2**63 - 1)
        self.image_shape = (1, *self.shape)
        self.n_groups = d // self.G
        order = {"contiguous": lambda: np.arange(d), "offset": lambda: np.roll(np.arange(d), -1),
                 "random": lambda: np.random.default_rng(self.seed).permutation(d)}[layout]()
        self.groups = order.astype(np.int64).reshape(self.n_groups, self.G)  # (n_groups, G) bit indices

    @property
    def n_valid(self):
        return 2 ** (self.n_bits - self.n_groups)

    def group_valid(self, bits):
        """bits: (N, D) -> bool (N, n_groups): group g has an even number of ones."""
        bits = check_bits(bits, self.n_bits)
        return bits[:, self.groups].sum(axis=2) % 2 == 0  # (N, n_groups)

    def _fix_parity(self, bits):
        """Set the last bit of every group so that the group has even parity (in place)."""
        rest = bits[:, self.groups[:, :-1]].sum(axis=2) % 2  # (N, n_groups)
        bits[:, self.groups[:, -1]] = rest
        return bits

    def sample(self, n, seed):
        """(n, D) uint8, uniform over valid images: free bits are fair coins, the last bit of each group fixes parity."""
        n = _int(n, "n", 0)
        bits = (np.random.default_rng(seed).random((n, self.n_bits)) < 0.5).astype(np.uint8)
        return self._fix_parity(bits)

    def enumerate(self):
        """(n_valid, D) uint8, every valid image once (ConfigError when n_valid > ENUMERATE_LIMIT)."""
        self._check_enumerable()
        free = self.groups[:, :-1].ravel()  # (D - n_groups,)
        codes = np.arange(self.n_valid, dtype=np.int64)
        bits = np.zeros((self.n_valid, self.n_bits), np.uint8)
        bits[:, free] = (codes[:, None] >> np.arange(free.size)) & 1
        return self._fix_parity(bits)

    def spec(self):
        return {"name": self.name, "G": self.G, "shape": list(self.shape), "layout": self.layout, "seed": self.seed}

    def effective_spec(self):
        """The spec without the seed when the layout does not use it (contiguous, offset)."""
        return {k: v for k, v in self.spec().items() if k != "seed" or self.layout == "random"}


class ExactK(Rule):
    """Exactly k ones among the H*W pixels. One group (the whole image); n_valid = C(D, k)."""

    name = "exactk"

    def __init__(self, k, shape=(6, 6)):
        self.shape = _shape(shape)
        self.k = _int(k, "k", 0, self.shape[0] * self.shape[1])
        self.image_shape = (1, *self.shape)
        self.n_groups = 1

    @property
    def n_valid(self):
        return math.comb(self.n_bits, self.k)

    def group_valid(self, bits):
        """bits: (N, D) -> bool (N, 1)."""
        bits = check_bits(bits, self.n_bits)
        return (bits.sum(axis=1, dtype=np.int64) == self.k)[:, None]

    def sample(self, n, seed):
        """(n, D) uint8, uniform: the ones sit on a uniformly random k-subset of the pixels."""
        n = _int(n, "n", 0)
        return _random_k_subsets(np.random.default_rng(seed), (n,), self.n_bits, self.k)

    def enumerate(self):
        """(n_valid, D) uint8, every valid image once (lexicographic order of the positions of the ones)."""
        self._check_enumerable()
        return _all_k_subsets(self.n_bits, self.k)

    def spec(self):
        return {"name": self.name, "k": self.k, "shape": list(self.shape)}


class RowK(Rule):
    """Exactly k ones in every row; one group per row (row r = bits r*cols .. (r+1)*cols - 1)."""

    name = "rowk"

    def __init__(self, k, shape=(6, 6)):
        self.shape = _shape(shape)
        self.k = _int(k, "k", 0, self.shape[1])
        self.image_shape = (1, *self.shape)
        self.n_groups = self.shape[0]

    @property
    def n_valid(self):
        return math.comb(self.shape[1], self.k) ** self.shape[0]

    def group_valid(self, bits):
        """bits: (N, D) -> bool (N, rows)."""
        bits = check_bits(bits, self.n_bits)
        return bits.reshape(-1, *self.shape).sum(axis=2, dtype=np.int64) == self.k

    def sample(self, n, seed):
        """(n, D) uint8, uniform: each row independently holds a uniformly random k-subset."""
        n = _int(n, "n", 0)
        rows = _random_k_subsets(np.random.default_rng(seed), (n, self.shape[0]), self.shape[1], self.k)
        return rows.reshape(n, self.n_bits)

    def enumerate(self):
        """(n_valid, D) uint8: every combination of valid rows (first row varies slowest)."""
        self._check_enumerable()
        rows = _all_k_subsets(self.shape[1], self.k)  # (p, cols)
        choice = np.indices((len(rows),) * self.shape[0]).reshape(self.shape[0], -1).T  # (n_valid, rows)
        return rows[choice].reshape(-1, self.n_bits)

    def spec(self):
        return {"name": self.name, "k": self.k, "shape": list(self.shape)}


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


RULES = {cls.name: cls for cls in (Parity, ExactK, RowK, LatinSquare, Sudoku)}


def rule_from_spec(spec):
    """Build a rule from rule.spec() (a dict, or its JSON string). ConfigError on unknown names or keys."""
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except (json.JSONDecodeError, RecursionError) as e:
            raise ConfigError(f"rule spec is not valid JSON: {str(e)[:100]}") from None
    if not isinstance(spec, dict) or spec.get("name") not in RULES:
        raise ConfigError(f"rule spec needs a 'name' among {sorted(RULES)}, got {str(spec)[:100]}")
    kwargs = {k: v for k, v in spec.items() if k != "name"}
    try:
        return RULES[spec["name"]](**kwargs)
    except TypeError as e:
        raise ConfigError(f"bad arguments in rule spec {str(spec)[:100]}: {e}") from None


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


def _random_k_subsets(rng, lead, d, k):
    """(*lead, d) uint8 with ones on a uniformly random k-subset of the last axis."""
    pos = rng.random((*lead, d)).argsort(axis=-1)[..., :k]
    out = np.zeros((*lead, d), np.uint8)
    np.put_along_axis(out, pos, 1, axis=-1)
    return out


def _all_k_subsets(d, k):
    """(C(d, k), d) uint8, one row per k-subset, lexicographic order."""
    pos = np.array(list(itertools.combinations(range(d), k)), dtype=np.int64).reshape(math.comb(d, k), k)
    out = np.zeros((len(pos), d), np.uint8)
    np.put_along_axis(out, pos, 1, axis=1)
    return out


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
