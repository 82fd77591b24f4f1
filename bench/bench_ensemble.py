"""Benchmark: one `train_ensemble` of M DiTs vs M sequential `train_run`s of the same configs.

The architecture and training settings are the shipped series' (checkpoints/parity-default/run.json:
width 80, depth 4, patch 2, batch 96, parity G=2 on 6x6, N=120); member m has seed m and data
seed m, and trains --steps steps (checkpoints at step 0 and the last step only, float32 files with
the raw weights, no resume.pt on the way). Both sides write their run directories in full. A short
warm-up run of each side comes first (not timed). The table gives the wall time of each side and
member-steps per second; the last line the ratio (sequential time / ensemble time) and the largest
|weight difference| between ensemble and sequential members at the last step (EMA and raw weights).

Run: `python bench/bench_ensemble.py --members 4 --steps 200` (CPU, one thread: about 3 min on a laptop
core); on a GPU: `--device cuda --members 4,16,64 --steps 500`.
"""
import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import torch

from scoreprobe.training.ensemble import train_ensemble
from scoreprobe.training.train import TrainConfig, ckpt_path, train_run

SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints" / "parity-default" / "run.json"


def member_configs(m, steps, **overrides):
    """M TrainConfigs: the shipped run's settings (and `overrides`), `steps` steps, seed and data seed 0..M-1."""
    base = json.loads(SHIPPED.read_text())["config"]
    base.update(total_steps=steps, n_checkpoints=2, resume_every=10 ** 9, log_every=max(1, steps // 4),
                save_dtype="float32", save_model=True, **{k: v for k, v in overrides.items() if v is not None})
    return [TrainConfig.from_dict({**base, "seed": i, "data_seed": i}) for i in range(m)]


def timed(fn):
    """Seconds fn() takes (CUDA work finished before the clock stops)."""
    t = time.perf_counter()
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - t


def max_weight_diff(seq, ens, step):
    """Largest |a − b| over the EMA and raw weights of two lists of run directories at `step`."""
    worst = 0.0
    for a, b in zip(seq, ens):
        x, y = (torch.load(ckpt_path(d, step), weights_only=True) for d in (a, b))
        for part in ("ema", "model"):
            worst = max(worst, max((x[part][k] - y[part][k]).abs().max().item() for k in x[part]))
    return worst


def compare(cfgs, device, root, repeat=1):
    """(sequential seconds, ensemble seconds, max weight difference) for the members `cfgs`; each time
    the best of `repeat` runs, the two sides alternating (other load on the machine hits both)."""
    t_seq = t_ens = float("inf")
    for r in range(repeat):
        seq, ens = ([root / f"M{len(cfgs)}-{side}{r}-{i}" for i in range(len(cfgs))] for side in ("seq", "ens"))
        t_seq = min(t_seq, timed(lambda: [train_run(c, d, device=device, progress=False) for c, d in zip(cfgs, seq)]))
        t_ens = min(t_ens, timed(lambda: train_ensemble(cfgs, ens, device=device, progress=False)))
    return t_seq, t_ens, max_weight_diff(seq, ens, cfgs[0].total_steps)


def thread_reference(cfg, threads, root):
    """Largest weight difference between member 0 trained alone on the CPU at `threads` and at
    threads + 1 torch threads: how far float32 reassociation alone moves these weights."""
    dirs = [root / f"ref-threads{t}" for t in (threads, threads + 1)]
    for t, d in zip((threads, threads + 1), dirs):
        torch.set_num_threads(t)
        train_run(cfg, d, progress=False)
    torch.set_num_threads(threads)
    return max_weight_diff(dirs[:1], dirs[1:], cfg.total_steps)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1")
    p.add_argument("--members", default="4", help="M, or several as 4,16,64 (one row each)")
    p.add_argument("--steps", type=int, default=200, help="optimizer steps of every run")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--repeat", type=int, default=1, help="each time is the best of this many runs")
    p.add_argument("--hidden-size", type=int, help="override the shipped width (also --depth, --batch-size)")
    p.add_argument("--depth", type=int)
    p.add_argument("--batch-size", type=int)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    sizes = [int(s) for s in a.members.split(",")]
    sizes_kw = dict(hidden_size=a.hidden_size, depth=a.depth, batch_size=a.batch_size)
    root = Path(tempfile.mkdtemp(prefix="bench_ensemble_"))
    try:
        compare(member_configs(2, 3, **sizes_kw), a.device, root / "warmup")   # first-call costs, not timed
        cfg = member_configs(1, a.steps, **sizes_kw)[0]
        print(f"shipped settings, width {cfg.hidden_size}, depth {cfg.depth or 4}, batch {cfg.batch_size}; "
              f"{a.steps} steps per run, device {a.device}, {a.threads} CPU thread(s), torch {torch.__version__}")
        print(f"{'M':>4s} {'sequential s':>13s} {'ensemble s':>11s} {'seq steps/s':>12s} {'ens steps/s':>12s}"
              f" {'ratio':>6s} {'max |dw|':>9s}")
        for m in sizes:
            t_seq, t_ens, diff = compare(member_configs(m, a.steps, **sizes_kw), a.device, root, a.repeat)
            n = m * a.steps
            print(f"{m:4d} {t_seq:13.1f} {t_ens:11.1f} {n / t_seq:12.1f} {n / t_ens:12.1f} "
                  f"{t_seq / t_ens:6.2f} {diff:9.1e}")
        ref = thread_reference(cfg, a.threads, root) if a.device == "cpu" else None
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if ref is not None:
        print(f"reference: one sequential run at {a.threads} vs {a.threads + 1} CPU threads differs by {ref:.1e}")
    print(f"M={sizes[-1]}: sequential / ensemble time = {t_seq / t_ens:.2f}x; "
          f"max |weight difference| ensemble vs sequential = {diff:.1e}")


if __name__ == "__main__":
    main()
