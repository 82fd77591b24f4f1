"""Datasets of valid images, signed <-> bit conversion, and BitIndex (bit-packed exact and Hamming lookup).

    ds = make_dataset(rule, n_train=256, n_heldout=1024, seed=0)   # unique, disjoint, valid
    idx = BitIndex(ds.train); idx.lookup(bits); idx.nearest(bits)

Bits are uint8 (N, D) in {0, 1}; signed values are float32 2*bit - 1 in {-1, +1}.
"""
import json
import logging
import math
import os
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm

from scoreprobe.errors import DataError
from scoreprobe.limits import MAX_SEED, check_dataset_size
from scoreprobe.rules import ENUMERATE_LIMIT, Rule, _int, check_bits

log = logging.getLogger(__name__)

STATES = ("invalid", "rule_violating", "valid_novel", "valid_heldout", "valid_memorized")
STATE_CODES = {name: code for code, name in enumerate(STATES)}

_CHUNK_BYTES = 4 << 20  # size of one (queries x items x words) temporary in BitIndex.nearest
_LOOKUP_ROWS, _NEAREST_ROWS = 1 << 18, 1024  # queries per thread-pool task in lookup / nearest
_POP16 = np.array([bin(i).count("1") for i in range(1 << 16)], dtype=np.uint8)  # numpy < 2 fallback


def to_signed(bits):
    """bits: (..., D) 0/1 (numpy or torch) -> float32 in {-1, +1}, same library as the input."""
    if isinstance(bits, torch.Tensor):
        return torch.where(bits > 0, 1.0, -1.0).to(torch.float32)
    return np.where(np.asarray(bits) > 0, 1.0, -1.0).astype(np.float32)


def to_bits(x):
    """x: (..., D) signed values (numpy or torch) -> uint8 (x > 0), same library as the input."""
    if isinstance(x, torch.Tensor):
        return (x > 0).to(torch.uint8)
    return (np.asarray(x) > 0).astype(np.uint8)


def state_flag_attrs():
    """CF-style attrs of the endpoint-state variable: flag_values, flag_meanings, long_name."""
    return {"flag_values": list(range(len(STATES))), "flag_meanings": " ".join(STATES),
            "long_name": "endpoint state"}


# ----------------------------------------------------------------------------------------------
# BitIndex
# ----------------------------------------------------------------------------------------------

def pack_bits(bits):
    """bits: (N, D) uint8 0/1 -> (N, ceil(D/64)) uint64 words; bit i sits in word i // 64 at position i % 64.

    Packs the whole array as one contiguous bit stream (fast), then reads each row's words back
    at their bit offsets: rows p, p + P, p + 2P, ... (P = 8 / gcd(D, 8)) share one byte stride and shift.
    """
    n, d = bits.shape
    n_words = max(1, -(-d // 64))
    stream = np.zeros(-(-n * d // 8) + 16, np.uint8)  # 16 bytes of padding for the last reads
    stream[: len(stream) - 16] = np.packbits(np.ascontiguousarray(bits).reshape(-1), bitorder="little")
    out = np.zeros((n, n_words), np.uint64)
    period = 8 // math.gcd(d, 8)
    stride = d * period // 8  # bytes between rows p and p + period
    for p in range(min(period, n)):
        count, shift = len(range(p, n, period)), (p * d) % 8
        for w in range(n_words):
            start = (p * d + 64 * w) // 8  # byte holding the word's first bit in row p
            word = _read_u64(stream, start, count, stride) >> np.uint64(shift)
            if shift + min(64, d - 64 * w) > 64:  # the word spills into a ninth byte
                word |= _read_u64(stream, start + 8, count, stride) << np.uint64(64 - shift)
            out[p::period, w] = word
    tail = d - 64 * (n_words - 1)
    if tail < 64:
        out[:, -1] &= np.uint64((1 << tail) - 1)  # clear bits of the next row
    return out


def _read_u64(buf, offset, count, stride):
    """(count,) little-endian uint64 read from byte buffer buf at offset, offset + stride, ... (unaligned view)."""
    return np.ndarray((count,), "<u8", buf, offset, (stride,))


def _run_chunks(fn, n, step, desc=None):
    """Call fn(rows) for the slices rows = [s, s + step) of range(n), on a thread pool when there are several.

    numpy releases the GIL in the vectorized work, so chunks run in parallel; each chunk writes
    its own rows, so results do not depend on the number of threads. desc: tqdm label (None = no bar).
    """
    chunks = [slice(s, min(s + step, n)) for s in range(0, n, step)]
    workers = min(len(chunks), os.cpu_count() or 1)
    bar = tqdm(total=len(chunks), desc=desc, unit="chunk", disable=True if desc is None else None, leave=False)
    with bar:
        if workers <= 1:
            for rows in chunks:
                fn(rows)
                bar.update()
            return
        with ThreadPoolExecutor(workers) as pool:
            for _ in pool.map(fn, chunks):
                bar.update()


def _popcount_table(words):
    """Number of set bits of each uint64 -> uint8, same shape (table lookup on 16-bit pieces)."""
    words = np.ascontiguousarray(words, dtype=np.uint64)
    return _POP16[words.view(np.uint16)].reshape(*words.shape, 4).sum(axis=-1, dtype=np.uint8)


_popcount = getattr(np, "bitwise_count", _popcount_table)  # numpy >= 2 has a native popcount


def _row_keys(packed):
    """(N, W) uint64 -> (N,) uint64: the word itself when W = 1, else a 64-bit mix of the words."""
    if packed.shape[1] == 1:
        return packed[:, 0]
    h = np.full(len(packed), 0x9E3779B97F4A7C15, np.uint64)
    for w in range(packed.shape[1]):
        h ^= packed[:, w]
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(31)
    return h


class _KeyTable:
    """Open-addressing hash table (linear probing, load <= 1/4) from uint64 keys to int64 values, numpy-vectorized."""

    _MUL = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing

    def __init__(self, keys, values):
        bits = max(4, int(4 * len(keys) - 1).bit_length())  # load factor <= 1/4: short probe runs
        self._shift, self._mask = np.uint64(64 - bits), (1 << bits) - 1
        self.keys = np.zeros(1 << bits, np.uint64)
        self.values = np.full(1 << bits, -1, np.int32 if len(keys) < 2**31 else np.int64)  # small = fast gathers
        pending, slot = np.arange(len(keys)), self._slot(keys)
        while pending.size:  # each round places at most one pending key per free slot
            free = self.values[slot] < 0
            _, first = np.unique(slot[free], return_index=True)
            win = np.flatnonzero(free)[first]
            self.keys[slot[win]], self.values[slot[win]] = keys[pending[win]], values[pending[win]]
            keep = np.ones(pending.size, bool)
            keep[win] = False
            pending, slot = pending[keep], (slot[keep] + 1) & self._mask

    def _slot(self, keys):
        return ((keys * self._MUL) >> self._shift).view(np.int64)  # < 2**bits: safe to view

    def get(self, keys):
        """keys: (M,) uint64 -> int64 (M,) stored values, -1 for absent keys."""
        slot = self._slot(keys)
        out = self.values[slot].astype(np.int64)  # (M,) first probe, done without index bookkeeping
        go_on = np.flatnonzero((out >= 0) & (self.keys[slot] != keys))
        out[go_on] = -1
        active, slot, keys = go_on, (slot[go_on] + 1) & self._mask, keys[go_on]
        while active.size:
            value = self.values[slot]
            hit = (value >= 0) & (self.keys[slot] == keys)
            out[active[hit]] = value[hit]
            go_on = (value >= 0) & ~hit
            active, slot, keys = active[go_on], (slot[go_on] + 1) & self._mask, keys[go_on]
        return out


class BitIndex:
    """Exact and Hamming-nearest lookup of bit vectors against a fixed set of items.

    Items are packed into uint64 words. Exact lookup: a vectorized hash table on one uint64 key
    per row (the word itself when D <= 64, else a 64-bit mix of the words checked against the full
    row; rows whose keys collide are resolved by a scan). Nearest: XOR and popcount of packed
    words, chunked over queries and items so temporaries stay about 4 MB. Duplicated items
    resolve to the smallest index; so do distance ties.

    Parameters
    ----------
    bits : (N, D) uint8 0/1, the items
    """

    def __init__(self, bits):
        self.items = check_bits(bits, None, "BitIndex items")  # (N, D)
        self.n_bits = self.items.shape[1]
        self._packed = pack_bits(self.items)  # (N, W)
        keys = _row_keys(self._packed)
        uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        self._table = _KeyTable(uniq, first)  # key -> smallest item index with that key
        self._collisions = {}  # key -> item indices, for keys shared by different rows (W > 1 only)
        if self._packed.shape[1] > 1:
            clash = np.flatnonzero((self._packed != self._packed[first[inverse]]).any(axis=1))
            for k in np.unique(keys[clash]):
                self._collisions[int(k)] = np.flatnonzero(keys == k)

    def __len__(self):
        return len(self.items)

    def lookup(self, bits):
        """bits: (M, D) 0/1 -> int64 (M,): index of the equal item (smallest if duplicated), -1 if absent."""
        bits = check_bits(bits, self.n_bits, "query bits")
        out = np.full(len(bits), -1, np.int64)
        if len(self) == 0:
            return out

        def run(rows):
            out[rows] = self._lookup_packed(pack_bits(bits[rows]))

        _run_chunks(run, len(bits), _LOOKUP_ROWS)
        return out

    def _lookup_packed(self, q):
        keys = _row_keys(q)  # (m,)
        out = self._table.get(keys)  # (m,) candidate with the same key
        if q.shape[1] == 1:  # the key is the row itself
            return out
        wrong = np.flatnonzero(out >= 0)
        wrong = wrong[(self._packed[out[wrong]] != q[wrong]).any(axis=1)]
        out[wrong] = -1
        for i in wrong:  # another row with the same key may still match
            match = [j for j in self._collisions.get(int(keys[i]), ()) if (self._packed[j] == q[i]).all()]
            out[i] = min(match) if match else -1
        return out

    def contains(self, bits):
        """bits: (M, D) 0/1 -> bool (M,)."""
        return self.lookup(bits) >= 0

    def nearest(self, bits):
        """Hamming-nearest item of each query.

        Parameters
        ----------
        bits : (M, D) 0/1 queries

        Returns
        -------
        idx : int64 (M,), index of the nearest item (smallest on ties); -1 when the index is empty
        dist : int64 (M,), its Hamming distance; -1 when the index is empty
        """
        bits = check_bits(bits, self.n_bits, "query bits")
        idx, dist = np.full(len(bits), -1, np.int64), np.full(len(bits), -1, np.int64)
        if len(self) == 0:
            return idx, dist
        n_words, q_step = self._packed.shape[1], 32
        i_step = max(256, _CHUNK_BYTES // (8 * q_step * n_words))

        def run(rows):
            q = pack_bits(bits[rows])  # (m, W)
            for s in range(0, len(q), q_step):
                out = slice(rows.start + s, rows.start + s + len(q[s:s + q_step]))
                idx[out], dist[out] = self._nearest_chunk(q[s:s + q_step], i_step)

        long = len(bits) * len(self) * n_words >= 10**9  # progress bar only for long searches
        _run_chunks(run, len(bits), _NEAREST_ROWS, desc="nearest" if long else None)
        return idx, dist

    def _nearest_chunk(self, q, i_step):
        """q: (m, W) packed queries -> (idx, dist) over all items, scanning i_step items at a time."""
        m, n_words = q.shape
        best_d = np.full(m, np.iinfo(np.int64).max, np.int64)
        best_i = np.zeros(m, np.int64)
        rows = np.arange(m)
        xor = np.empty((m, min(i_step, len(self))), np.uint64)  # reused temporaries
        for s in range(0, len(self), i_step):
            items = self._packed[s:s + i_step]  # (n, W)
            buf = xor[:, :len(items)]
            d = _popcount(np.bitwise_xor(q[:, None, 0], items[None, :, 0], out=buf))  # (m, n) uint8
            if n_words > 1:
                d = d.astype(np.uint16)
                for w in range(1, n_words):
                    d += _popcount(np.bitwise_xor(q[:, None, w], items[None, :, w], out=buf))
            a = d.argmin(axis=1)  # (m,)
            m_d = d[rows, a].astype(np.int64)
            better = m_d < best_d
            best_d[better], best_i[better] = m_d[better], a[better] + s
        return best_i, best_d


# ----------------------------------------------------------------------------------------------
# Datasets
# ----------------------------------------------------------------------------------------------

@dataclass(eq=False)
class Dataset:
    """A train / held-out split of valid images: unique, disjoint, valid under `rule`.

    train: (n_train, D) uint8; heldout: (n_heldout, D) uint8. `train_index` / `heldout_index`
    are BitIndex objects, built on first use and cached.
    """

    train: np.ndarray
    heldout: np.ndarray
    rule: Rule
    seed: int | None = None
    _indexes: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self):
        self.train = check_bits(self.train, self.rule.n_bits, "train")
        self.heldout = check_bits(self.heldout, self.rule.n_bits, "heldout")

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
        """Write an .npz at exactly `path` with keys train, heldout, rule (JSON spec), seed (-1 = none)."""
        with open(path, "wb") as f:
            np.savez(f, train=self.train, heldout=self.heldout, rule=np.array(json.dumps(self.rule.spec())),
                     seed=np.array(-1 if self.seed is None else self.seed, np.int64))


def load_dataset(path, rule=None):
    """Read a Dataset written by Dataset.save (or any npz with uint8 keys train, heldout).

    rule: the Rule the items must satisfy; None = the rule stored in the file. DataError when the
    file is missing or not an npz, keys are absent, a header declares object arrays or more items
    than limits.MAX_ITEMS / MAX_DATASET_BYTES (checked before loading), widths differ, items are
    invalid or duplicated, train and held-out overlap, or the stored rule differs.
    """
    if not os.path.isfile(path):
        raise DataError(f"no dataset file at {path}" + (" (it is a directory)" if os.path.isdir(path) else ""))
    from scoreprobe.datafile import check_bit_headers, check_distinct, npz_headers, stored_rule
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
    check_dataset_size(n_train, n_heldout, rule.n_bits)
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
