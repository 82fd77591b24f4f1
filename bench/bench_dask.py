"""Benchmark: one sweep here vs on a dask LocalCluster of 1 and 2 worker processes (same store).

`scoreprobe.probes.basins.basins` over checkpoints of the shipped series, written to a store: here
(one torch thread, as dask's workers run), then on a LocalCluster of N workers (1 thread each,
loopback). Each runs the sweep twice: a cold pass (first imports, first checkpoint loads) into a
scratch store, then the timed warm pass into its own store; every warm store must equal the local
one (`xr.testing.assert_identical`, history aside). Prints the cluster's start
time, both passes, the overhead per task, (t_cluster - t_local) / tasks (for 1 worker: what
shipping a step out costs), the speed-up t_local / t_cluster, the time a task computes on its
worker (dask's task stream: the rest of the overhead is transfer, scheduling and waiting), and
the load average.

    python bench/bench_dask.py                       # 24 checkpoints, 16x16 grid (about a minute)
    python bench/bench_dask.py --steps 8 --res 8     # quicker
"""
import argparse
import os
import shutil
import tempfile
import time
import warnings

import torch
import xarray as xr
from distributed import get_task_stream

import scoreprobe as sp
from scoreprobe.probes.basins import basins
from scoreprobe.sweep.dask import client_for, using


def _stored(path):
    ds = xr.open_zarr(path, chunks=None).load()
    ds.attrs.pop("history", None)
    return ds


def _timed(run, out):
    t0 = time.perf_counter()
    run(out)
    return time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=24, help="checkpoints (tasks), spread over the series")
    ap.add_argument("--res", type=int, default=16)
    ap.add_argument("--workers", default="1,2")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)   # what dask's worker processes run with (OMP_NUM_THREADS=1)
    series = sp.load_series()
    idx = sorted({round(i * (len(series.steps) - 1) / max(args.steps - 1, 1)) for i in range(args.steps)})
    steps = [series.steps[i] for i in idx]
    plane = sp.auto_plane(series.dataset, series.rule, seed=0)

    def run(out):
        basins(series, plane, sigma_start=1.0, res=args.res, steps=steps, out=out, progress=False)
    work = tempfile.mkdtemp(prefix="bench-dask-")
    load0 = os.getloadavg()
    try:
        t_local_cold = _timed(run, os.path.join(work, "local-cold.zarr"))
        t_local = _timed(run, os.path.join(work, "local.zarr"))
        print(f"basins, {len(steps)} checkpoints (tasks), {args.res}x{args.res} grid, sigma_start 1; "
              f"local: cold pass {t_local_cold:.2f} s, warm pass {t_local:.2f} s ({1000 * t_local / len(steps):.0f} ms "
              "per step)")
        ref = _stored(os.path.join(work, "local.zarr"))
        for n in [int(w) for w in args.workers.split(",")]:
            t0 = time.perf_counter()
            with warnings.catch_warnings(), client_for(("local", n)) as client:
                t_start = time.perf_counter() - t0
                with using(client):
                    t_cold = _timed(run, os.path.join(work, f"cold{n}.zarr"))
                    with get_task_stream(client) as ts:
                        t_warm = _timed(run, os.path.join(work, f"dask{n}.zarr"))
                busy = sum(s["stop"] - s["start"] for t in ts.data for s in t["startstops"] if s["action"] == "compute")
            xr.testing.assert_identical(_stored(os.path.join(work, f"dask{n}.zarr")), ref)
            per_task = 1000 * (t_warm - t_local) / len(steps)
            print(f"LocalCluster of {n}: start {t_start:.1f} s, cold pass {t_cold:.2f} s, warm pass {t_warm:.2f} s "
                  f"(store identical to the local one); local / dask = {t_local / t_warm:.2f}x; "
                  f"overhead {per_task:+.0f} ms per task" + (" (against the local run)" if n == 1 else
                                                              " (with the workers' parallelism)")
                  + f"; the task itself on its worker: {1000 * busy / len(steps):.0f} ms")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load1 = os.getloadavg()
    print(f"load average (1, 5, 15 min) before: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
          f"after: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
