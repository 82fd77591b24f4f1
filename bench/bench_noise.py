"""Benchmark per-sample noise: counter-based `randn_per_sample` vs one seeded generator per row.

The method it replaces (and what people write to make a sample independent of the batch) seeds a
`torch.Generator` per row from a hash of (seed, index) and draws the row; `torch.randn` on one
generator is the floor (fast, but a row then depends on the batch it was drawn in).

    python bench/bench_noise.py                  # 1M rows of 36 values
    python bench/bench_noise.py --rows 100000    # quick run
"""
import argparse
import timeit

import numpy as np
import torch

from scoreprobe.noise import _per_sample_keys, randn_per_sample


def per_row_generators(seed, index, d):
    """One torch.Generator per row, seeded by the same 64-bit key: (M, d) float64."""
    out, gen = torch.empty(len(index), d, dtype=torch.float64), torch.Generator()
    for row, key in enumerate(_per_sample_keys(seed, index).tolist()):
        gen.manual_seed(key)
        out[row] = torch.randn(d, generator=gen, dtype=torch.float64)
    return out


def best_of(fn, repeat):
    """Best wall time in seconds of `repeat` calls of fn (the machine may be shared)."""
    return min(timeit.repeat(fn, number=1, repeat=repeat))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--d", type=int, default=36)
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args()
    index = np.arange(args.rows)
    new = randn_per_sample(0, index, args.d, dtype=torch.float64)                         # (rows, d)
    t_new = best_of(lambda: randn_per_sample(0, index, args.d, dtype=torch.float64), args.repeat)
    t_old = best_of(lambda: per_row_generators(0, index, args.d), 1)
    t_floor = best_of(lambda: torch.randn(args.rows, args.d, dtype=torch.float64), args.repeat)
    cuts = np.unique(np.r_[0, np.random.default_rng(1).integers(0, args.rows, 20), args.rows])
    parts = torch.cat([randn_per_sample(0, index[a:b], args.d, dtype=torch.float64) for a, b in zip(cuts, cuts[1:])])
    print(f"{args.rows} rows x {args.d} values, float64, torch threads {torch.get_num_threads()}")
    print(f"{'method':44s} {'s':>8s} {'s per 1M rows':>14s}")
    for name, t in (("one torch.Generator per row (before)", t_old), ("randn_per_sample, counter-based", t_new),
                    ("torch.randn, one generator (batch-dependent)", t_floor)):
        print(f"{name:44s} {t:8.3f} {t * 1e6 / args.rows:14.3f}")
    print(f"identical over 20 random chunkings: {torch.equal(parts, new)}; "
          f"mean {new.mean():+.4f}, std {new.std():.4f}")
    print(f"ratios: per-row generators/randn_per_sample {t_old / t_new:.1f}x, "
          f"randn_per_sample/torch.randn {t_new / t_floor:.2f}x")


if __name__ == "__main__":
    main()
