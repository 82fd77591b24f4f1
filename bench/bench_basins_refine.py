"""Issue 75: basin maps with boundary refinement vs dense integration and the fastest general ODE library.

Per checkpoint of the shipped series and per grid size (`scoreprobe basins`' automatic plane, σ_start 1):
  dense     `basins(refine=False)`: the adaptive engine at every point (today's map);
  refined   `basins()` at its defaults (refinement from res 32 on; at 16² it is the dense map);
  peers     torchode dopri5 (per-row steps) and torchdiffeq dopri5 (one step for the batch; tsit5 was never
            the fastest by more than noise in bench_engine_peers.py and is left out for time) at the loosest of
            rtol = atol = 1e-2 … 1e-5 whose agreement with a Heun-128 reference reaches the refined map's,
            on a seeded sample of --peer-points points of the --peer-res grid (issue 59's criterion).
agreement = share of the grid ending on the same vertex (thresholded endpoint bits) as the dense map.
integrated = share of points integrated; NFE/px = denoiser evaluations per grid point (filled points: 0).
Peers are timed on that sample and their time scaled to the whole grid (their cost per point; larger batches
are a little cheaper per row for torchode, and torchdiffeq's shared step follows the batch's hardest row, which
a whole grid only makes harder); each peer's tolerance search doubles as its warm-up.
ratio = fastest peer's time for the grid / refined time; all in one run, with the load average printed.

    python bench/bench_basins_refine.py --steps 500,1950,9233,36000 --res 16,64
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
from scoreprobe.ode import integrate   # noqa: E402
from scoreprobe.probes.basins import basins   # noqa: E402
from scoreprobe.probes.refine import AUTO_RES   # noqa: E402

TOLS = (1e-2, 1e-3, 1e-4, 1e-5)
PEERS = {"torchode dopri5": lambda t: tode("dopri5", t), "torchdiffeq dopri5": lambda t: tde(t)}


def timed(f):
    t = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t


def maps(D, series, plane, res):
    """(dense Dataset, seconds), (refined Dataset, seconds); below res 32 the default is the dense map
    itself (one call, timed once)."""
    kw = dict(sigma_start=1.0, res=res, dataset=series.dataset, rule=series.rule, keep_bits=True)
    basins(D, plane, **{**kw, "res": 4})                                    # warm-up: first calls of the network
    dense = timed(lambda: basins(D, plane, refine=False, **kw))
    return dense, (dense if res < AUTO_RES else timed(lambda: basins(D, plane, **kw)))


def vertices(ds):
    return ds.endpoint_bits.values[0].reshape(-1, ds.sizes["bit"])            # (P, D)


def sample(plane, res, n):
    """The peers' seeded sample of the res² grid: (sorted indices into the grid, (n, D) starting points, grid size / n);
    n 0 or more than the grid: every point."""
    pts, _, _ = plane.grid(res, 0.5)
    n = min(n or len(pts), len(pts))
    idx = np.sort(np.random.default_rng(0).choice(len(pts), n, replace=False))
    return idx, torch.as_tensor(pts[idx], dtype=torch.float32), len(pts) / n


def peers(D, plane, res, refined_bits, args):
    """Heun-128 reference on a seeded sample of the grid; our agreement there; each peer at the loosest
    tolerance reaching it: (our agreement, n points, {peer: (tol or None, agreement, seconds for the whole grid)})."""
    idx, x0, scale = sample(plane, res, args.peer_points)
    n = len(idx)
    out = {}
    with torch.no_grad():
        ref = _bits(integrate(D, x0, 1.0, n_steps=args.ref_steps, solver="heun")).numpy()
        ours = float((refined_bits[idx] == ref).all(1).mean())
        for name, make in PEERS.items():
            for tol in TOLS:
                (x, _, _), secs = timed(lambda: make(tol)(D, x0, 1.0))
                agree = float((_bits(x).numpy() == ref).all(1).mean())
                if agree >= ours or tol == TOLS[-1]:
                    _, secs = timed(lambda: make(tol)(D, x0, 1.0))          # the search run was the warm-up
                    out[name] = (tol if agree >= ours else None, agree, secs * scale)
                    break
    return ours, n, out


def one(D, series, plane, res, args):
    (dense, t_dense), (ref, t_ref) = maps(D, series, plane, res)
    agree = float((vertices(dense) == vertices(ref)).all(1).mean())
    row = {"res": res, "t_dense": t_dense, "t_ref": t_ref, "agree": agree,
           "integrated": float(ref.integrated_fraction[0]) if "integrated_fraction" in ref else 1.0,
           "nfe": float(ref.nfe.mean()), "nfe_dense": float(dense.nfe.mean()),
           "outcome": sp_outcome(ref), "bound": float(ref.audit_bound[0]) if "audit_bound" in ref else float("nan")}
    if res == args.peer_res:
        row["ours_heun"], row["n_peer"], row["peers"] = peers(D, plane, res, vertices(ref), args)
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
        cells += [f"{r['ours_heun']:.4f}", f"{name} {'none' if tol is None else f'{tol:g}'} ({agree:.4f})",
                  f"{secs:.1f}", f"{secs / r['t_ref']:.1f}×"]
    else:
        cells += ["", "", "", ""]
    return "| " + " | ".join(cells) + " |"


def shipped(args):
    """Sets the torch threads; the shipped series, its automatic plane and the --steps (default: all)."""
    torch.set_num_threads(args.threads)
    series = sp.load_series()
    plane = sp.auto_plane(series.dataset, series.rule, seed=0)
    return series, plane, [int(s) for s in args.steps.split(",")] if args.steps else list(series.steps)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", default=None, help="checkpoints (default: every one of the shipped series)")
    p.add_argument("--res", default="16,64,128")
    p.add_argument("--peer-res", type=int, default=64)
    p.add_argument("--peer-points", type=int, default=256, help="peers' timed sample of the grid (0: every point)")
    p.add_argument("--ref-steps", type=int, default=128, help="Heun steps of the peers' reference")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    series, plane, steps = shipped(args)
    res_list = [int(r) for r in args.res.split(",")]
    print(f"basins refined vs dense vs peers: σ_start 1, automatic plane; {torch.get_num_threads()} torch thread(s); "
          f"load average at start {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; peers on "
          f"{args.peer_points or 'all'} points of the {args.peer_res}² grid, time scaled to the grid", flush=True)
    print("| step | grid | integrated | NFE/px refined / dense | s refined / dense | speed-up vs dense | agreement "
          "| audit bound | outcome | refined vs Heun 128 (sample) | fastest peer at tol (agreement) | peer s (scaled) "
          "| ratio |")
    print("|" + "---|" * 13)
    for step in steps:
        D = series.denoiser(step)
        for res in res_list:
            print(line(step, one(D, series, plane, res, args)), flush=True)
    print(f"load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
