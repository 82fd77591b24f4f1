"""Datasets of valid images and signed <-> bit conversion (BitIndex lives in `scoreprobe.data.bitindex`).

    ds = make_dataset(rule, n_train=256, n_heldout=1024, seed=0)   # unique, disjoint, valid
    idx = BitIndex(ds.train); idx.lookup(bits); idx.nearest(bits)

Bits are uint8 (N, D) in {0, 1}; signed values are float32 2*bit - 1 in {-1, +1}.
"""
import json
import logging
import os
import zipfile
import zlib
import warnings
from dataclasses import InitVar, dataclass, field

import numpy as np
import torch

from scoreprobe.atomic import atomic_write, check_out_path
from scoreprobe.errors import DataError
from scoreprobe.limits import MAX_SEED, check_dataset_size
from scoreprobe.data.bitindex import BitIndex, pack_bits
from scoreprobe.data.rules import ENUMERATE_LIMIT, Rule, _int, check_bits

log = logging.getLogger(__name__)

STATES = ("invalid", "rule_violating", "valid_novel", "valid_heldout", "valid_memorized")
STATE_CODES = {name: code for code, name in enumerate(STATES)}


def to_signed(bits):
    """bits: (..., D) 0/1 (numpy or torch) -> float32 in {-1, +1}, same library as the input."""
    if isinstance(bits, torch.Tensor):
        return torch.where(bits > 0, 1.0, -1.0).to(torch.float32)
    return np.where(np.asarray(bits) > 0, 1.0, -1.0).astype(np.float32)


def to_bits(x):
    """x: (..., D) signed values (numpy or torch) -> uint8 (x > 0), same library as the input."""
    if isinstance(x, torch.Tensor):
        if x.is_complex():
            raise DataError(f"to_bits takes real signed values, got a {x.dtype} tensor")
        return (x > 0).to(torch.uint8)
    x = np.asarray(x)
    if x.dtype.kind not in "biuf":
        raise DataError(f"to_bits takes real signed values, got an array of {x.dtype}")
    return (x > 0).astype(np.uint8)


def state_flag_attrs():
    """CF-style attrs of the endpoint-state variable: flag_values, flag_meanings, long_name."""
    return {"flag_values": list(range(len(STATES))), "flag_meanings": " ".join(STATES),
            "long_name": "endpoint state"}


# ----------------------------------------------------------------------------------------------
# Datasets
# ----------------------------------------------------------------------------------------------

@dataclass(eq=False)
class Dataset:
    """A train / held-out split of valid images: unique, disjoint, valid under `rule`.

    train: (n_train, D) uint8; heldout: (n_heldout, D) uint8. `train_index` / `heldout_index`
    are BitIndex objects, built on first use and cached.

    The items are checked against `rule` (`check_validity`): a DataError when most of them break it
    (the rule is not the one the data were made with: a file written by scoreprobe stores its rule,
    `load_dataset(path)` reads it), a ScoreprobeWarning naming the share when some do.
    `check=False` skips this (data that break the rule on purpose).
    """

    train: np.ndarray
    heldout: np.ndarray
    rule: Rule
    seed: int | None = None
    check: InitVar[bool] = True
    _indexes: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self, check):
        self.train = check_bits(self.train, self.rule.n_bits, "train")
        self.heldout = check_bits(self.heldout, self.rule.n_bits, "heldout")
        if check:
            check_validity(self.train, self.heldout, self.rule)

    @property
    def train_index(self):
        if "train" not in self._indexes:
            self._indexes["train"] = BitIndex(self.train)
        return self._indexes["train"]

    @property
    def heldout_index(self):
        if "heldout" not in self._indexes:
            self._indexes["heldout"] = BitIndex(self.heldout)
        return self._indexes["heldout"]

    def save(self, path):
        """Write an .npz at exactly `path` with keys train, heldout, rule (JSON spec), seed (-1 = none), atomically
        (scoreprobe.atomic: a kill, an error or a full disk leaves an existing file as it was); returns the Path.
        ConfigError, before any byte, for a path no file can have (a folder, below a file, a NUL byte)."""
        path = check_out_path(path, "dataset path")
        arrays = dict(train=self.train, heldout=self.heldout, rule=np.array(json.dumps(self.rule.spec())),
                      seed=np.array(-1 if self.seed is None else self.seed, np.int64))
        return atomic_write(path, lambda f: np.savez(f, **arrays))


def check_validity(train, heldout, rule):
    """DataError when fewer than half of the items (train and held-out together) are valid under
    `rule`; a ScoreprobeWarning naming the valid share when some are not. Returns that share."""
    from scoreprobe.errors import ScoreprobeWarning, user_stacklevel
    n = len(train) + len(heldout)
    if n == 0:
        return 1.0
    bad = {name: int((~rule.is_valid(bits)).sum()) if len(bits) else 0
           for name, bits in (("training", train), ("held-out", heldout))}
    share = 1.0 - sum(bad.values()) / n
    if share == 1.0:
        return share
    where = " and ".join(f"{k} of the {name} items" for name, k in
                         (("training", bad["training"]), ("held-out", bad["held-out"])) if k)
    text = (f"only {share:.1%} of the {n} items are valid under {rule!r} ({where} break it)")
    if share < 0.5:
        raise DataError(f"{text}: is this the rule the data were made with (its shape, layout, G)? A dataset "
                        "file written by scoreprobe stores its rule: sp.load_dataset(path) reads it; "
                        "Dataset(..., check=False) takes data that break the rule on purpose")
    warnings.warn(f"{text}: the rule-violating items count as such in every analysis", ScoreprobeWarning,
                  stacklevel=user_stacklevel())
    return share


def load_dataset(path, rule=None):
    """Read a Dataset written by Dataset.save (or any npz with uint8 keys train, heldout).

    rule: the Rule the items must satisfy; None = the rule stored in the file. DataError when the
    file is missing or not an npz, keys are absent, a header declares object arrays or more items
    than limits.MAX_ITEMS / MAX_DATASET_BYTES (checked before loading), widths differ, items are
    invalid or duplicated, train and held-out overlap, or the stored rule differs.
    """
    from scoreprobe.atomic import check_path_text
    path = check_path_text(path, "load_dataset: path")
    if not os.path.isfile(path):
        raise DataError(f"no dataset file at {path}" + (" (it is a directory)" if os.path.isdir(path) else ""))
    from scoreprobe.data.datafile import check_bit_headers, check_distinct, npz_headers, stored_rule
    headers = npz_headers(path, DataError)
    stored = stored_rule(path, headers)
    if rule is None:
        if stored is None:
            raise DataError(f"{path} stores no rule; pass rule=")
        rule = stored
    elif stored is not None and stored != rule:
        raise DataError(f"{path} was made for {stored!r}, not {rule!r}")
    check_bit_headers(path, headers, rule.n_bits)
    try:
        with np.load(path, allow_pickle=False) as z:
            seed = int(z["seed"]) if "seed" in z.files else -1
            train, heldout = z["train"], z["heldout"]
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise DataError(f"{path} is not a readable dataset (corrupt?): {type(e).__name__}: {' '.join(str(e).split())[:120]}") from None
    train = check_bits(train, rule.n_bits, "train")
    heldout = check_bits(heldout, rule.n_bits, "heldout")
    for name, bits in (("train", train), ("heldout", heldout)):
        bad = np.flatnonzero(~rule.is_valid(bits))
        if bad.size:
            raise DataError(f"{path}: {bad.size} {name} items are not valid under {rule!r} (first: {bad[0]})")
    check_distinct(path, train, heldout)
    return Dataset(train, heldout, rule, None if seed < 0 else seed)


def make_dataset(rule, n_train, n_heldout, seed=0):
    """Draw n_train + n_heldout distinct valid images of `rule` and split them.

    Small rules (n_valid <= ENUMERATE_LIMIT) draw without replacement from rule.enumerate(),
    so the split is uniform; larger ones draw rule.sample batches and drop duplicates.
    DataError when n_train + n_heldout > rule.n_valid.

    Returns
    -------
    Dataset with train (n_train, D) uint8 and heldout (n_heldout, D) uint8.
    """
    n_train, n_heldout = _int(n_train, "n_train", 0), _int(n_heldout, "n_heldout", 0)
    seed = _int(seed, "seed", 0, MAX_SEED)
    total = n_train + n_heldout
    check_dataset_size(n_train, n_heldout, rule.n_bits)   # limits.MAX_ITEMS / MAX_DATASET_BYTES, before drawing
    if total > rule.n_valid:
        raise DataError(f"asked for {n_train} train + {n_heldout} held-out = {total} distinct images, "
                        f"but {rule!r} has only {rule.n_valid} valid images")
    rng = np.random.default_rng(seed)
    if rule.n_valid <= ENUMERATE_LIMIT:
        pool = rule.enumerate()
        bits = pool[rng.choice(len(pool), size=total, replace=False)]
    else:
        bits = _draw_distinct(rule, total, rng)
    log.info("dataset of %r: %d train + %d held-out images (seed %d)", rule, n_train, n_heldout, seed)
    return Dataset(bits[:n_train].copy(), bits[n_train:].copy(), rule, seed)


def transposed_dataset(ds):
    """The Dataset with every training and held-out grid transposed (`rule.transposed`; Latin squares and
    Sudoku, whose valid sets it maps onto themselves), same rule and seed. The family named "rows" then
    reads the rows of the new images: the columns of the grids as drawn."""
    if not hasattr(ds.rule, "transposed"):
        raise DataError(f"{ds.rule!r} has no transpose (Latin squares and Sudoku have)")
    return Dataset(ds.rule.transposed(ds.train), ds.rule.transposed(ds.heldout), ds.rule, ds.seed)


def _draw_distinct(rule, total, rng, max_rounds=50):
    """(total, D) distinct samples of rule, in order of first appearance."""
    drawn = np.zeros((0, rule.n_bits), np.uint8)
    for _ in range(max_rounds):
        if len(drawn) >= total:
            return drawn[:total]
        batch = rule.sample(max(1024, 2 * (total - len(drawn))), seed=int(rng.integers(2**63)))
        drawn = np.concatenate([drawn, batch])
        packed = np.ascontiguousarray(pack_bits(drawn))
        rows = packed.view(np.dtype((np.void, packed.dtype.itemsize * packed.shape[1])))[:, 0]
        _, first = np.unique(rows, return_index=True)
        drawn = drawn[np.sort(first)]
    if len(drawn) >= total:
        return drawn[:total]
    raise DataError(f"found only {len(drawn)} distinct samples of {rule!r} after {max_rounds} rounds; "
                    f"ask for fewer than {total} images")
