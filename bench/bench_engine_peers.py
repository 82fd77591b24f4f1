"""Issue 59 item 1: the basins engine against the fastest general ODE library at equal agreement, at every
checkpoint of the shipped series (the early ones included), in one run.

For each checkpoint: every point of `scoreprobe basins`' automatic plane (res × res, 16² by default, σ_start 1) integrated to
σ = 0 by
  reference   scoreprobe Heun, --ref-steps fixed steps (128: the issue's reference);
  engine      `integrate(solver="adaptive")` at its defaults;
  peers       torchdiffeq dopri5 (one step for the batch) and torchode dopri5 / tsit5 (per-row steps), each at
              the loosest of rtol = atol = 1e-2, 1e-3, 1e-4, 1e-5 whose agreement with the reference reaches
              the engine's (tighter ones are tried only when a looser one falls short).
Agreement = share of points whose thresholded endpoint bits equal the reference's. Each method's search run
doubles as its warm-up; the engine and each peer at its chosen tolerance are then timed best of --repeat.
ratio = peer time / engine time; the fastest peer's ratio per checkpoint is the issue's figure (target ≥ 10).
A peer that reaches the engine's agreement at no tolerance is marked "none" and timed at 1e-5 (the ratio is
then a lower bound on what equal agreement would cost it).

    python bench/bench_engine_peers.py                       # 24 checkpoints, ≈ 15-25 min on one core
    python bench/bench_engine_peers.py --steps 0,738,36000   # a few
"""
import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scoreprobe as sp   # noqa: E402
from bench_engine_table import _bits, ours, tde, tode   # noqa: E402
from scoreprobe.ode import integrate   # noqa: E402

TOLS = (1e-2, 1e-3, 1e-4, 1e-5)
PEERS = {"torchdiffeq dopri5": lambda t: tde(t), "torchode dopri5": lambda t: tode("dopri5", t),
         "torchode tsit5": lambda t: tode("tsit5", t)}


def _best(run, D, x0, s0, repeat):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        run(D, x0, s0)
        best = min(best, time.perf_counter() - t)
    return best


def one_checkpoint(D, x0, s0, args):
    """{"agreement", "nfe", "engine_s", peer: (tol or None, agreement, nfe, seconds)} for one denoiser."""
    with torch.no_grad():
        ref = _bits(integrate(D, x0, s0, n_steps=args.ref_steps, solver="heun"))
        agree = lambda x: float((_bits(x) == ref).all(1).float().mean())
        engine = ours("adaptive")
        x, nfe, _ = engine(D, x0, s0)                                       # warm-up and agreement
        out = {"agreement": agree(x), "nfe": nfe, "engine_s": _best(engine, D, x0, s0, args.repeat)}
        for name, make in PEERS.items():
            for tol in TOLS:
                x, peer_nfe, _ = make(tol)(D, x0, s0)                       # search run = warm-up
                if agree(x) >= out["agreement"] or tol == TOLS[-1]:
                    ok = agree(x) >= out["agreement"]
                    out[name] = (tol if ok else None, agree(x), peer_nfe, _best(make(tol), D, x0, s0, args.repeat))
                    break
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", default=None, help="checkpoints (default: every one of the shipped series)")
    p.add_argument("--res", type=int, default=16, help="grid points per axis (16: the issue's plane)")
    p.add_argument("--ref-steps", type=int, default=128)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    series = sp.load_series()
    plane = sp.auto_plane(series.dataset, series.rule, seed=0)
    pts, _, _ = plane.grid(args.res, 0.5)
    x0 = torch.as_tensor(pts, dtype=torch.float32)                          # (P, D)
    steps = [int(s) for s in args.steps.split(",")] if args.steps else list(series.steps)
    print(f"engine vs the peers at equal agreement: {len(x0)} points, σ_start 1, reference Heun {args.ref_steps}; "
          f"best of {args.repeat}; {torch.get_num_threads()} torch thread(s); load average {os.getloadavg()[0]:.1f}")
    print("| step | engine agreement | engine NFE | engine s | " + " | ".join(f"{n}: tol, NFE, s" for n in PEERS)
          + " | fastest peer | ratio |\n|---:|---:|---:|---:|" + "---|" * len(PEERS) + "---|---:|")
    ratios, t0 = [], time.perf_counter()
    for step in steps:
        r = one_checkpoint(series.denoiser(step), x0, 1.0, args)
        cells = [f"{'none' if r[n][0] is None else f'{r[n][0]:g}'} ({r[n][1]:.4f}), {r[n][2]:.1f}, {r[n][3]:.3f}"
                 for n in PEERS]
        qualified = [n for n in PEERS if r[n][0] is not None] or list(PEERS)   # at equal agreement, else all
        fastest = min(qualified, key=lambda n: r[n][3])
        ratios.append(r[fastest][3] / r["engine_s"])
        bound = "≥ " if r[fastest][0] is None else ""
        print(f"| {step} | {r['agreement']:.4f} | {r['nfe']:.1f} | {r['engine_s']:.3f} | " + " | ".join(cells)
              + f" | {fastest} | {bound}{ratios[-1]:.1f}× |", flush=True)
    print(f"ratio to the fastest peer: min {min(ratios):.1f}×, median {sorted(ratios)[len(ratios) // 2]:.1f}×, max "
          f"{max(ratios):.1f}× over {len(ratios)} checkpoints; {sum(x >= 10 for x in ratios)} reach 10×; "
          f"{time.perf_counter() - t0:.0f} s; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
