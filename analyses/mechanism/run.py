"""The mechanism, measured: basins, retention and the DSM split over training, on many planes, items
and seeds, for a series whose innovation window is open and one whose window is closed.

Series: `open` = the shipped checkpoints/parity-default (G = 2, N = 120; τ from its clocks.json);
`closed` = G = 2, N = 30 trained here with the two_clocks CPU settings (its window never opens).
At `n_ckpt` log-spaced checkpoints of each series, for each seed of `seeds`, the battery of
scoreprobe.studies.battery (basins on planes of three kinds, retention, the DSM split, the animation; its
docstring names each probe and its store), resumed step by step: a rerun reuses every step
already measured with the same settings and model. Outputs: <results>/mechanism<suffix>.md, .json
and figures (basins, retention, DSM heat map, the animation), from the stores alone
(analyses/mechanism/report.py).

Usage:
  python analyses/mechanism                 # CPU preset: ≈ 48 min on 2 idle cores (PRESETS["cpu"])
  python analyses/mechanism --device cuda   # GPU preset: more planes, items, noise draws and checkpoints
  python analyses/mechanism --smoke         # < 1 min: the pipeline end to end at toy size
  python analyses/mechanism --rereport analyses/results/mechanism.json   # re-report the shipped json (issue 35)
  python analyses/mechanism --series open --seeds 0 --n-planes 4   # any preset value can be overridden

Trained seeds: `python analyses/mechanism_seeds` measures this study's probes on 3 training seeds of each
series with early checkpoints (issue 36 item 3), trained models and units crossed.
"""
import argparse
import functools
import logging
import time
from pathlib import Path

from scoreprobe.studies.queue import in_parallel
from analyses.mechanism.measure import measure_series, parse_args

logger = logging.getLogger("mechanism")


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.rereport:
        from analyses.mechanism.rereport import write_rereport
        print(write_rereport(args, args.rereport))
        return
    if not args.device.startswith("cuda"):
        import torch
        torch.set_num_threads(1)   # tiny models: one thread per process (the workers too, grid.worker_init)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    if not args.report_only:
        # one series per one-thread worker process (both cores on the CPU preset); --jobs 1: here
        timings = in_parallel(functools.partial(_measure_in_worker, vars(args)), [(n,) for n in args.series],
                              args.jobs)
        logger.info("measured %s in %.0f s", args.series, time.time() - t0)
    else:
        timings = None
    if args.measure_only:
        return
    from analyses.mechanism.report import write_report
    write_report(args, timings, measure_s=time.time() - t0)


def _measure_in_worker(arg_dict, name):
    return measure_series(argparse.Namespace(**arg_dict), name)


if __name__ == "__main__":
    main()
