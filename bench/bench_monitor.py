"""Benchmark: what `sp.Monitor` costs a training loop, on the shipped model size.

On the shipped series' last checkpoint (DiT, 6×6 parity, its own data), in one process:

  train step   one optimizer step of the loop people write: EDM DSM loss on a batch of the run's
               batch size, backward, Adam (the model in training mode);
  not due      monitor(step, model) at a step that is not a multiple of `every` (the common case);
  due          monitor(step, model) at a measured step: sample n_samples (the clocks' PF-ODE), classify,
               commit the step to the zarr store, re-read τ (with --n-boot resamples) and log;
  clock_step   the sampling and classification alone (`probes.clocks.clock_step`);
  bookkeeping  a due call with the sampling replaced by its stored result: the monitor's own work
               (weights digest, store commit, τ over all steps so far, log line), measured directly
               (a difference of two noisy ODE timings on a shared machine is not).

Overhead of the monitor on the loop at period `every` = due / (every × train step) (+ not due / train
step, negligible). Best of --repeat for each timing, in CPU time of this process (one torch thread by
default, so CPU time is the compute; wall time on a shared machine adds the waiting).

    python bench/bench_monitor.py                      # ≈ 4 min on 2 busy cores
    python bench/bench_monitor.py --n-samples 256 --every 1000
    python bench/bench_monitor.py --sampler adaptive   # the engine from σ_max (defaults.SAMPLE_ENGINE)
    python bench/bench_monitor.py --defaults           # Monitor() as shipped, over the shipped recipe (issue 59)
"""
import argparse
import logging
import os
import tempfile
import time
from pathlib import Path

import torch

import scoreprobe as sp
from scoreprobe.models.edm import dsm_loss, sample_sigmas
from scoreprobe.probes.clocks import clock_step
from scoreprobe.training import monitor as monitor_mod


def _best(fn, repeat):
    """Best of `repeat` CPU times of fn() (process time: with one torch thread, the compute itself, not
    the waiting of a machine shared with other jobs)."""
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best

def background(args, series, model, train_step, t_train):
    """Monitor(background=True): wall time of `every` training steps with one measurement at their start
    (sampled on the worker thread; `wait()` at the end, so a measurement longer than the stretch counts in
    full) against the same steps without, alternated --repeat times; and the training thread's own CPU time
    of the due call (copying the model, its digest, the hand-over)."""
    plain, monitored, main_cpu = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        monitor = sp.Monitor(series.dataset, series.rule, every=args.every, out=Path(tmp) / "m.zarr",
                             n_samples=args.n_samples, n_boot=args.n_boot, sampler=args.sampler, background=True)
        due = iter(range(0, args.every * 1000, args.every))
        for _ in range(args.repeat):
            t = time.perf_counter()
            for _ in range(args.every):
                train_step()
            plain.append(time.perf_counter() - t)
            t, c = time.perf_counter(), time.thread_time()
            monitor(next(due), model)
            main_cpu.append(time.thread_time() - c)
            for _ in range(args.every):
                train_step()
            monitor.wait()
            monitored.append(time.perf_counter() - t)
    ratio = [m / p - 1 for m, p in zip(monitored, plain)]
    print(f"shipped DiT, step {series.steps[-1]}; {args.n_samples} samples per measurement, sampler {args.sampler}, "
          f"background=True; {torch.get_num_threads()} torch thread(s); load average {os.getloadavg()[0]:.1f}")
    print(f"train step (CPU)            {1e3 * t_train:9.2f} ms")
    print(f"due call, training thread   {1e3 * min(main_cpu):9.2f} ms CPU  (copy, digest, hand-over)")
    print(f"{args.every} steps without / with   " + ", ".join(f"{p:.1f} s / {m:.1f} s" for p, m in zip(plain, monitored))
          + " (wall)")
    print(f"overhead at every={args.every}: " + ", ".join(f"{r:.1%}" for r in ratio) + f" of the loop's wall time "
          f"({os.cpu_count()} CPUs; other jobs share them)")


def at_defaults(args, series, t_train):
    """`sp.Monitor` at its defaults (schedule `log_steps()`, sampler defaults.MONITOR_SAMPLER, 1000 samples) over the
    shipped recipe's `total_steps`: every due step measured once, on the shipped checkpoint nearest to it on a log
    axis (step 0 for step 0), in CPU time; overhead = their sum / (total_steps × train step)."""
    import math
    total = int(series.config.get("total_steps", series.steps[-1]))
    ckpts = [s for s in series.steps if s > 0]

    def nearest(step):
        return 0 if step == 0 else min(ckpts, key=lambda c: abs(math.log(c) - math.log(step)))

    costs = []
    with tempfile.TemporaryDirectory() as tmp:
        monitor = sp.Monitor(series.dataset, series.rule, out=Path(tmp) / "m.zarr")
        for step in (s for s in range(total + 1) if monitor.due(s)):
            model = series.denoiser(nearest(step))
            t = time.process_time()
            monitor(step, model)
            costs.append((step, nearest(step), time.process_time() - t))
    print(f"sp.Monitor at its defaults ({monitor!r}, sampler {monitor.spec.name}) over the shipped recipe's {total} "
          f"steps; {torch.get_num_threads()} torch thread(s); CPU time; load average {os.getloadavg()[0]:.1f}")
    print(f"train step            {1e3 * t_train:9.2f} ms  ({total} steps: {total * t_train:.0f} s)")
    print("due step (checkpoint measured): CPU s  " + ", ".join(f"{s} ({c}): {t:.2f}" for s, c, t in costs))
    spent = sum(t for _, _, t in costs)
    print(f"{len(costs)} measurements, {spent:.1f} s: overhead {spent / (total * t_train):.1%} of the loop's time")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-samples", type=int, default=1000)
    p.add_argument("--every", type=int, default=500)
    p.add_argument("--n-boot", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--background", action="store_true", help="Monitor(background=True): wall time of `every` "
                   "training steps with one measurement on the worker thread against the same steps without")
    p.add_argument("--defaults", action="store_true", help="the monitor at its defaults over the shipped recipe: "
                   "every step its log-spaced schedule measures, on the nearest shipped checkpoint")
    p.add_argument("--sampler", default="heun", help="the monitor's sampler: heun (its default) or adaptive "
                   "(the engine at defaults.SAMPLE_ENGINE)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    logging.getLogger("scoreprobe").setLevel(logging.WARNING)
    series = sp.load_series()
    step = series.steps[-1]
    model = series.denoiser(step)
    for q in model.parameters():
        q.requires_grad_(True)
    model.train()
    n_params = sum(q.numel() for q in model.parameters())
    batch = int(series.config.get("batch_size", 96))
    train = torch.as_tensor(series.dataset.train, dtype=torch.float32) * 2 - 1
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(0)

    def train_step():
        y = train[torch.randint(len(train), (batch,), generator=gen)]
        loss = dsm_loss(model, y, sample_sigmas(batch, generator=gen), torch.randn(y.shape, generator=gen)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    t_train = _best(lambda: [train_step() for _ in range(20)], args.repeat) / 20
    if args.defaults:
        return at_defaults(args, series, t_train)
    if args.background:
        return background(args, series, model, train_step, t_train)
    with tempfile.TemporaryDirectory() as tmp:
        monitor = sp.Monitor(series.dataset, series.rule, every=args.every, out=Path(tmp) / "m.zarr",
                             n_samples=args.n_samples, n_boot=args.n_boot, sampler=args.sampler)
        t_skip = _best(lambda: [monitor(args.every * 7 + 1, model) for _ in range(1000)], args.repeat) / 1000
        due = iter(range(0, args.every * 1000, args.every))
        t_due = _best(lambda: monitor(next(due), model), args.repeat)
        model.eval()
        kw = {"n_samples": args.n_samples, "sampler": args.sampler}
        kept = clock_step(model, series.dataset, series.rule, **kw)
        t_clock = _best(lambda: clock_step(model, series.dataset, series.rule, **kw), args.repeat)
        model.train()
        monitor_mod.clock_step = lambda *a, **k: kept.copy()   # the sampling replaced: bookkeeping alone
        t_book = _best(lambda: monitor(next(due), model), 5)
        monitor_mod.clock_step = clock_step
        n_measured = len(monitor.steps)
    print(f"shipped DiT ({n_params:,} parameters), step {step}; batch {batch}; {args.n_samples} samples per "
          f"measurement, sampler {args.sampler}; {torch.get_num_threads()} torch thread(s); CPU time, best of "
          f"{args.repeat}; load average {os.getloadavg()[0]:.1f}")
    print(f"train step            {1e3 * t_train:9.2f} ms")
    print(f"monitor, not due      {1e6 * t_skip:9.2f} µs")
    print(f"monitor, due          {t_due:9.2f} s")
    print(f"clock_step alone      {t_clock:9.2f} s")
    print(f"bookkeeping alone     {1e3 * t_book:9.2f} ms  (digest, store commit, τ over {n_measured} steps, log)")
    print(f"overhead at every={args.every}: {t_due / (args.every * t_train):.1%} of the loop's time "
          f"(not-due calls: {t_skip / t_train:.3%})")


if __name__ == "__main__":
    main()
