"""Benchmark BitIndex against what people use today.

lookup : BitIndex.lookup vs a python set of tuples (membership of M queries among N items)
nearest: BitIndex.nearest vs torch.cdist + argmin (Hamming-nearest item of each query)

    python bench/bench_bitindex.py                       # defaults: D=36, 1M vs 100k lookup, 10k vs 100k nearest
    python bench/bench_bitindex.py --lookup-queries 100000 --nearest-queries 1000   # quick run
"""
import argparse
import os
import time

import numpy as np
import torch

from scoreprobe.data.bitindex import BitIndex
REPEAT = 3  # every timing is the best of REPEAT runs (set by --repeat); the machine may be shared


def timed(fn):
    """(result, best wall time in seconds over REPEAT runs)."""
    best = float("inf")
    for _ in range(REPEAT):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return out, best


def random_bits(rng, n, d):
    return rng.integers(0, 2, (n, d), dtype=np.uint8)


def bench_lookup(rng, d, n_items, n_queries):
    items = random_bits(rng, n_items, d)
    queries = random_bits(rng, n_queries, d)
    queries[: n_queries // 2] = items[rng.integers(0, n_items, n_queries // 2)]  # half are present
    table, t_set_build = timed(lambda: set(map(tuple, items.tolist())))
    in_set, t_set = timed(lambda: np.array([v in table for v in map(tuple, queries.tolist())]))
    index, t_idx_build = timed(lambda: BitIndex(items))
    found, t_idx = timed(lambda: index.contains(queries))
    assert np.array_equal(found, in_set), "BitIndex and the python set disagree"
    print(f"lookup  D={d} items={n_items} queries={n_queries} (half present; BitIndex threads: {os.cpu_count()})")
    print(f"  python set of tuples : build {t_set_build:7.3f} s  query {t_set:7.3f} s")
    print(f"  BitIndex             : build {t_idx_build:7.3f} s  query {t_idx:7.3f} s")
    print(f"  speed-up (query)     : {t_set / t_idx:7.1f}x   (build + query: "
          f"{(t_set_build + t_set) / (t_idx_build + t_idx):.1f}x; target >= 100x)")


def cdist_nearest(queries, items, chunk_bytes=256 << 20):
    """Nearest item by torch.cdist + argmin, chunked over queries so the distance block fits chunk_bytes."""
    x, y = torch.from_numpy(queries).float(), torch.from_numpy(items).float()
    step = max(1, chunk_bytes // (4 * len(items)))
    idx, dist = [], []
    for s in range(0, len(x), step):
        d = torch.cdist(x[s:s + step], y)  # (step, N) euclidean
        m, a = d.min(dim=1)
        idx.append(a)
        dist.append(torch.round(m**2).long())  # squared euclidean of 0/1 vectors = Hamming
    return torch.cat(idx).numpy(), torch.cat(dist).numpy()


def bench_nearest(rng, d, n_items, n_queries):
    items = random_bits(rng, n_items, d)
    queries = random_bits(rng, n_queries, d)
    (c_idx, c_dist), t_cdist = timed(lambda: cdist_nearest(queries, items))
    index, t_build = timed(lambda: BitIndex(items))
    (b_idx, b_dist), t_idx = timed(lambda: index.nearest(queries))
    assert np.array_equal(b_dist, c_dist), "BitIndex and cdist disagree on distances"
    ties = np.mean(b_idx != c_idx)
    print(f"nearest D={d} items={n_items} queries={n_queries} (torch threads: {torch.get_num_threads()}, "
          f"BitIndex threads: {os.cpu_count()})")
    print(f"  torch.cdist + argmin : {t_cdist:7.3f} s")
    print(f"  BitIndex.nearest     : {t_idx:7.3f} s  (+ build {t_build:.3f} s)")
    print(f"  speed-up             : {t_cdist / t_idx:7.1f}x   (target > 1x; distances identical, "
          f"{100 * ties:.1f}% of indices differ only by tie-breaking)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--d", type=int, default=36, help="bits per vector")
    p.add_argument("--lookup-items", type=int, default=100_000)
    p.add_argument("--lookup-queries", type=int, default=1_000_000)
    p.add_argument("--nearest-items", type=int, default=100_000)
    p.add_argument("--nearest-queries", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=3, help="report the best of this many runs of each timing")
    args = p.parse_args()
    global REPEAT
    REPEAT = max(1, args.repeat)
    rng = np.random.default_rng(args.seed)
    bench_lookup(rng, args.d, args.lookup_items, args.lookup_queries)
    bench_nearest(rng, args.d, args.nearest_items, args.nearest_queries)


if __name__ == "__main__":
    main()
