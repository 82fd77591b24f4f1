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

The base class Rule and the shared checks live in rulebase.py, the grid rules (LatinSquare, Sudoku)
in grids.py; this module re-exports them and holds the registry (RULES, rule_from_spec).
"""
import itertools
import json
import math

import numpy as np

from scoreprobe.data.grids import (LATIN_COUNTS, SUDOKU9_COUNT, LatinSquare, Sudoku,  # noqa: F401 (re-exported)
                                   _latin_grids, _relabel_transpose, grids_to_bits)
from scoreprobe.data.rulebase import ENUMERATE_LIMIT, Rule, _int, _shape, check_bits  # noqa: F401 (re-exported)
from scoreprobe.errors import ConfigError


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
