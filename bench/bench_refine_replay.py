"""Issue 75: boundary refinement replayed on every checkpoint's dense map (agreement and cost, no timing).

For each checkpoint of the shipped series the dense basin map (`basins(refine=False)`, the adaptive engine at
every point of the automatic plane, σ_start 1) is integrated once, and `probes.refine.refined_maps` is run
with its rows looked up in that map instead of integrated again. A row's endpoint, status and evaluation
count do not depend on the rows it is batched with (docs/definitions.md, "The adaptive engine"), so this is
the refined map `basins()` returns, at the cost of one dense map per checkpoint. Printed per checkpoint:
the outcome, the share of points integrated, the share of the dense map's evaluations those points cost
(the refined map's cost relative to dense), the agreement with the dense map (same endpoint vertex), the
audit's bound, S_bb, the boundary's dimension (`probes.fractal`), and the same shares for the ideal of any boundary method: only the points with a
4-neighbour ending elsewhere.

    python bench/bench_refine_replay.py --res 64 --cache /tmp/dense64     # ≈ 1 min per checkpoint on one core

With --warm, each checkpoint's map is also replayed warm (`probes.warm`), seeded from the previous checkpoint's
warm map (as `basins` over the series does; the first map is cold), and the cold and warm maps are printed side
by side: integrated share, evaluations vs dense, agreement with dense, audit bound, outcome, and for warm the
seeding, the points found changed from the seed and the share of lattice cells re-opened; last column the warm
map's evaluations over the cold map's.
"""
import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_basins_refine import shipped   # noqa: E402
from scoreprobe.probes.basins import basins   # noqa: E402
from scoreprobe.probes.refine import OUTCOMES, RefineSettings, refined_maps   # noqa: E402
from scoreprobe.probes.warm import SEEDINGS, seed_of, warm_maps   # noqa: E402


def dense_rows(series, plane, step, res, cache):
    """Flat (res*res, ...) arrays of the dense map, from `cache`/dense_{res}_{step}.npz when there."""
    path = Path(cache) / f"dense_{res}_{step}.npz" if cache else None
    if path is None or not path.exists():
        a = basins(series.denoiser(step), plane, sigma_start=1.0, res=res, dataset=series.dataset, rule=series.rule,
                   refine=False, keep_bits=True)
        z = {"bits": a.endpoint_bits.values[0], "nfe": a.nfe.values[0], "state": a.endpoint_state.values[0],
             "off": a.endpoint_off_vertex.values[0], "status": a.endpoint_status.values[0]}
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(path, **z)
    else:
        z = np.load(path)
    return {"bits": z["bits"].reshape(res * res, -1), "nfe": z["nfe"].ravel(), "state": z["state"].ravel(),
            "off_vertex": z["off"].ravel().astype(bool), "status": z["status"].ravel()}


def ideal(flat, res):
    """Points with a 4-neighbour ending on another vertex or flag: (share of points, share of evaluations)."""
    key = np.concatenate([np.packbits(flat["bits"], axis=1), flat["off_vertex"][:, None].astype(np.uint8)], 1)
    lab = np.unique(key, axis=0, return_inverse=True)[1].reshape(res, res)
    edge = np.zeros((res, res), dtype=bool)
    dv, du = lab[1:] != lab[:-1], lab[:, 1:] != lab[:, :-1]
    edge[1:] |= dv
    edge[:-1] |= dv
    edge[:, 1:] |= du
    edge[:, :-1] |= du
    return edge.mean(), flat["nfe"][edge.ravel()].sum() / flat["nfe"].sum()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--res", type=int, default=64)
    p.add_argument("--steps", default=None)
    p.add_argument("--cache", default=None, help="folder of dense maps (dense_RES_STEP.npz), written when missing")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--max-entropy", type=float, default=None,
                   help="RefineSettings.max_entropy (default: none; ln 2 = 0.6931 was the criterion before max_dimension)")
    p.add_argument("--max-dimension", default=None,
                   help="RefineSettings.max_dimension (default: its default; 'none': no fractal test)")
    p.add_argument("--warm", action="store_true", help="also replay the warm start, cold and warm side by side")
    args = p.parse_args()
    series, plane, steps = shipped(args)
    res, t0 = args.res, time.perf_counter()
    kw = {"max_entropy": args.max_entropy}
    if args.max_dimension is not None:
        kw["max_dimension"] = None if args.max_dimension.lower() == "none" else float(args.max_dimension)
    settings = RefineSettings(**kw)
    print(f"refinement replayed on the dense maps: {res}² automatic plane, σ_start 1, {settings}; "
          f"load average {os.getloadavg()[0]:.1f}")
    if args.warm:
        return warm_table(series, plane, steps, res, settings, args.cache, t0)
    print("| step | outcome | integrated | evaluations vs dense | speed-up (evaluations) | agreement | audit bound "
          "| S_bb | boundary dimension | ideal: points, evaluations |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for step in steps:
        flat = dense_rows(series, plane, step, res, args.cache)
        m = refined_maps(lambda idx: [{k: v[idx] for k, v in flat.items()}], res, 1, settings)[0]
        same = (np.packbits(m["bits"].reshape(res * res, -1), axis=1) == np.packbits(flat["bits"], axis=1)).all(1)
        cost = flat["nfe"][m["integrated"].ravel()].sum() / flat["nfe"].sum()
        i_pts, i_cost = ideal(flat, res)
        bound = "" if np.isnan(m["audit_bound"]) else f"{m['audit_bound']:.3f}"
        print(f"| {step} | {OUTCOMES[int(m['outcome'])]} | {m['integrated_fraction']:.3f} | {cost:.3f} | "
              f"{1 / cost:.1f}× | {same.mean():.4f} | {bound} | {m['boundary_entropy']:.3f} | "
              f"{m['boundary_dimension']:.3f} | {i_pts:.3f}, {i_cost:.3f} |", flush=True)
    print(f"{time.perf_counter() - t0:.0f} s")


def scores(m, flat, res):
    """(integrated share, evaluations vs dense, agreement with dense, audit bound text, outcome) of map m."""
    same = (np.packbits(m["bits"].reshape(res * res, -1), axis=1) == np.packbits(flat["bits"], axis=1)).all(1)
    cost = flat["nfe"][m["integrated"].ravel()].sum() / flat["nfe"].sum()
    bound = "" if np.isnan(m["audit_bound"]) else f"{m['audit_bound']:.3f}"
    return m["integrated_fraction"], cost, same.mean(), bound, OUTCOMES[int(m["outcome"])]


def warm_table(series, plane, steps, res, settings, cache, t0):
    """Cold and warm replays side by side; the warm chain seeds each map with the previous warm map."""
    from statistics import median
    print("| step | cold: integrated | evaluations vs dense | agreement | audit bound | outcome | warm: seeded from "
          "| integrated | evaluations vs dense | agreement | audit bound | outcome | changed points | cells re-opened "
          "| warm / cold evaluations |")
    print("|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---|---:|---:|---:|")
    seed, ratios = None, []
    for step in steps:
        flat = dense_rows(series, plane, step, res, cache)
        rows_of = lambda idx: [{k: v[idx] for k, v in flat.items()}]   # noqa: E731
        cold = refined_maps(rows_of, res, 1, settings)[0]
        warm = warm_maps(rows_of, res, 1, settings, 0, [(seed, step)])[0]
        seed = seed_of(step, warm)
        c, w = scores(cold, flat, res), scores(warm, flat, res)
        ratios.append(w[1] / c[1])
        how = SEEDINGS[int(warm["warm_start"])] + ("" if warm["warm_seed_step"] < 0 else f" {warm['warm_seed_step']}")
        changed = "" if np.isnan(warm["warm_changed_points"]) else f"{warm['warm_changed_points']:.0f}"
        reopened = "" if np.isnan(warm["warm_reopened_fraction"]) else f"{warm['warm_reopened_fraction']:.3f}"
        print(f"| {step} | {c[0]:.3f} | {c[1]:.3f} | {c[2]:.4f} | {c[3]} | {c[4]} | {how} | {w[0]:.3f} | {w[1]:.3f} "
              f"| {w[2]:.4f} | {w[3]} | {w[4]} | {changed} | {reopened} | {ratios[-1]:.3f} |", flush=True)
    print(f"warm / cold evaluations: median {median(ratios):.3f}, worst {max(ratios):.3f}, best {min(ratios):.3f}; "
          f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
