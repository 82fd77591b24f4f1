"""BitIndex: bit-packed exact and Hamming-nearest lookup of binary images, and the packing itself.

    idx = BitIndex(ds.train); idx.lookup(bits) -> int64 (N,) (-1 = absent); idx.nearest(bits)

Bits are uint8 (N, D) in {0, 1}; `pack_bits` packs them into (N, ceil(D/64)) uint64 words.
"""
import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from tqdm.auto import tqdm

from scoreprobe.data.rules import check_bits

_CHUNK_BYTES = 4 << 20  # size of one (queries x items x words) temporary in BitIndex.nearest
_LOOKUP_ROWS, _NEAREST_ROWS = 1 << 18, 1024  # queries per thread-pool task in lookup / nearest
_POP16 = np.array([bin(i).count("1") for i in range(1 << 16)], dtype=np.uint8)  # numpy < 2 fallback


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
