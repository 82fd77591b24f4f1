"""The base of every rule: Rule, and the checks of bits and arguments the rules share.

Bits are uint8 in {0, 1}, shape (N, D), flattened in (C, H, W) order (see scoreprobe.data.rules).
"""
import json
import math
import numbers

import numpy as np

from scoreprobe.errors import ConfigError, DataError
from scoreprobe.limits import MAX_BITS

ENUMERATE_LIMIT = 2**20  # enumerate() refuses valid sets larger than this (memory: n_valid * D bytes)


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
