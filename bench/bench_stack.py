"""Benchmark: K checkpoints in one stacked pass (`models.stack.StackedDenoiser`) vs a loop over them.

Basin maps of K checkpoints of the shipped architecture (the shipped series' last K steps, repeated
when K exceeds them) on one res×res grid at σ_start 1: `basin_map` once per checkpoint vs once
for the stack of all K. Prints both times, the ratio (target on a GPU: ≥ 3× for K = 32) and
whether the maps are identical.

    python bench/bench_stack.py --k 8 --res 16           # CPU (a stack is slower here)
    python bench/bench_stack.py --k 32 --res 64 --device cuda
"""
import argparse
import time

import numpy as np
import torch

import scoreprobe as sp
from scoreprobe.models.stack import StackedDenoiser
from scoreprobe.probes.basins import basin_map


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=8, help="checkpoints per pass")
    ap.add_argument("--res", type=int, default=16)
    ap.add_argument("--n-steps", type=int, default=sp.ode.DEFAULT_N_STEPS)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    series = sp.load_series()
    steps = [series.steps[-1 - i % len(series.steps)] for i in range(args.k)]
    models = [series.denoiser(s, device=args.device) for s in steps]
    plane = sp.auto_plane(series.dataset, series.rule, seed=0)
    kw = dict(plane=plane, sigma_starts=[1.0], res=args.res, n_steps=args.n_steps, dataset=series.dataset,
              rule=series.rule, device=args.device)
    basin_map(models[0], **kw)   # warm-up
    t = time.perf_counter()
    loop = [basin_map(D, **kw) for D in models]
    _sync()
    t_loop = time.perf_counter() - t
    stack = StackedDenoiser(models)
    t = time.perf_counter()
    many = basin_map(stack, **kw) if args.k > 1 else [basin_map(stack, **kw)]
    _sync()
    t_stack = time.perf_counter() - t
    same = all(np.array_equal(a[key], b[key]) for a, b in zip(loop, many) for key in a)
    print(f"device {args.device}, K = {args.k} checkpoints, {args.res}x{args.res} grid, {args.n_steps} Heun steps")
    print(f"loop {t_loop:.2f} s, stacked {t_stack:.2f} s, maps identical: {same}")
    print(f"ratios: loop/stacked {t_loop / t_stack:.2f}x")


if __name__ == "__main__":
    main()
