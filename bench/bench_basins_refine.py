"""Issue 75: basin maps with boundary refinement vs dense integration and the fastest general ODE library.

Per checkpoint of the shipped series and per grid size (`scoreprobe basins`' automatic plane, σ_start 1):
  dense     `basins(refine=False)`: the adaptive engine at every point (today's map);
  refined   `basins()` at its defaults (refinement from res 32 on; at 16² it is the dense map);
  peers     torchode dopri5 / tsit5 (per-row steps) and torchdiffeq dopri5 (one step for the batch) at the
            loosest of rtol = atol = 1e-2 … 1e-5 whose endpoints agree with the dense map at least as well as
            the refined map does (floored at 0.999), on the --peer-res grid.
Agreement = share of points ending on the same vertex (thresholded endpoint bits) as the dense map.
integrated = share of points integrated; NFE/px = denoiser evaluations per grid point (filled points: 0).
Peers are timed on a seeded random sample of --peer-points grid points (0: all) and their time scaled to the
whole grid (per-point cost; stated in the output); each peer's tolerance search doubles as its warm-up.
ratio = fastest peer's time for the grid / refined time; all in one run, with the load average printed.

    python bench/bench_basins_refine.py --steps 500,1950,9233,36000 --res 16,64 --peer-points 512
"""
import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scoreprobe as sp   # noqa: E402
from bench_engine_table import _bits, tde, tode   # noqa: E402
from scoreprobe.probes.basins import basins   # noqa: E402

TOLS = (1e-2, 1e-3, 1e-4, 1e-5)
PEERS = {"torchode dopri5": lambda t: tode("dopri5", t), "torchode tsit5": lambda t: tode("tsit5", t),
         "torchdiffeq dopri5": lambda t: tde(t)}


def timed(f):
    t = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t


def maps(D, series, plane, res):
    """(dense Dataset, seconds), (refined Dataset, seconds)."""
    kw = dict(sigma_start=1.0, res=res, dataset=series.dataset, rule=series.rule, keep_bits=True)
    return timed(lambda: basins(D, plane, refine=False, **kw)), timed(lambda: basins(D, plane, **kw))


def vertices(ds):
    return ds.endpoint_bits.values[0].reshape(-1, ds.sizes["bit"])            # (P, D)


def peers(D, plane, res, dense_bits, bar, n_points, seed=0):
    """{peer: (tol or None, agreement, seconds for the whole grid)} at the loosest tolerance reaching `bar`."""
    pts, _, _ = plane.grid(res, 0.5)
    idx = np.arange(len(pts)) if not n_points else np.sort(np.random.default_rng(seed).choice(len(pts), n_points,
                                                                                              replace=False))
    x0, ref, scale = torch.as_tensor(pts[idx], dtype=torch.float32), dense_bits[idx], len(pts) / len(idx)
    out = {}
    with torch.no_grad():
        for name, make in PEERS.items():
            for tol in TOLS:
                (x, _, _), secs = timed(lambda: make(tol)(D, x0, 1.0))
                agree = float((_bits(x).numpy() == ref).all(1).mean())
                if agree >= bar or tol == TOLS[-1]:
                    _, secs = timed(lambda: make(tol)(D, x0, 1.0))          # the search run was the warm-up
                    out[name] = (tol if agree >= bar else None, agree, secs * scale)
                    break
    return out


def one(D, series, plane, res, args):
    (dense, t_dense), (ref, t_ref) = maps(D, series, plane, res)
    agree = float((vertices(dense) == vertices(ref)).all(1).mean())
    row = {"res": res, "t_dense": t_dense, "t_ref": t_ref, "agree": agree,
           "integrated": float(ref.integrated_fraction[0]) if "integrated_fraction" in ref else 1.0,
           "nfe": float(ref.nfe.mean()), "nfe_dense": float(dense.nfe.mean()),
           "outcome": sp_outcome(ref), "bound": float(ref.audit_bound[0]) if "audit_bound" in ref else float("nan")}
    if res == args.peer_res:
        row["peers"] = peers(D, plane, res, vertices(dense), max(0.999, agree) if agree < 1 else 0.999,
                             args.peer_points)
    return row


def sp_outcome(ds):
    from scoreprobe.probes.refine import OUTCOMES
    return OUTCOMES[int(ds.refine_outcome[0])] if "refine_outcome" in ds else "dense (res < 32)"


def line(step, r):
    bound = "" if np.isnan(r["bound"]) else f"{r['bound']:.3f}"
    cells = [f"{step}", f"{r['res']}²", f"{r['integrated']:.3f}", f"{r['nfe']:.2f} / {r['nfe_dense']:.2f}",
             f"{r['t_ref']:.2f} / {r['t_dense']:.2f}", f"{r['t_dense'] / r['t_ref']:.1f}×", f"{r['agree']:.4f}",
             bound, r["outcome"]]
    if "peers" in r:
        name, (tol, agree, secs) = min(r["peers"].items(), key=lambda kv: kv[1][2])
        cells += [f"{name} {'none' if tol is None else f'{tol:g}'} ({agree:.4f})", f"{secs:.1f}",
                  f"{secs / r['t_ref']:.1f}×"]
    else:
        cells += ["", "", ""]
    return "| " + " | ".join(cells) + " |"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", default=None, help="checkpoints (default: every one of the shipped series)")
    p.add_argument("--res", default="16,64,128")
    p.add_argument("--peer-res", type=int, default=64)
    p.add_argument("--peer-points", type=int, default=512, help="peers' timed sample of the grid (0: every point)")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    series = sp.load_series()
    plane = sp.auto_plane(series.dataset, series.rule, seed=0)
    steps = [int(s) for s in args.steps.split(",")] if args.steps else list(series.steps)
    res_list = [int(r) for r in args.res.split(",")]
    print(f"basins refined vs dense vs peers: σ_start 1, automatic plane; {torch.get_num_threads()} torch thread(s); "
          f"load average at start {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; peers on "
          f"{args.peer_points or 'all'} points of the {args.peer_res}² grid, time scaled to the grid", flush=True)
    print("| step | grid | integrated | NFE/px refined / dense | s refined / dense | speed-up vs dense | agreement "
          "| audit bound | outcome | fastest peer at tol (agreement) | peer s | ratio |")
    print("|" + "---|" * 12)
    for step in steps:
        D = series.denoiser(step)
        for res in res_list:
            print(line(step, one(D, series, plane, res, args)), flush=True)
    print(f"load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
