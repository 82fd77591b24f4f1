"""Where the adaptive engine's evaluations go (issue 59): per-row NFE by checkpoint and σ_start.

On the 24×24 default plane of the shipped series (`sp.auto_plane`, the grid of `scoreprobe basins`),
from σ_start to 0 with the engine at its defaults, for every checkpoint (`--steps all`) and each
σ_start of `--sigma-starts`: a histogram of the evaluations per row (NFE), and for the rows that need
more than `--over` evaluations, what they were spent on: NFE = 1 (the first point) + 3 per accepted
bs3 step + 3 per rejected one, so

  rej       share of those rows with a rejected step, and the mean evaluations they spent on rejections;
  undec     share never decided (integrated to σ_min: the decision rule never held);
  acc       mean accepted steps; dσ the median σ of the decision (decided rows).

`--variants` instead compares engine settings (a `;`-separated list of `k=v,k=v` overrides of
`EngineSettings`) with the defaults: NFE per row and label agreement (thresholded bits) against a
tight reference, Heun 256 (511 evaluations), over all points and over the points whose reference ends
on-vertex, at `--steps` and on both oracles (`sp.RuleDenoiser`, `sp.EmpiricalDenoiser`):

    python bench/bench_engine_nfe.py                                        # ≈ 3 min on one busy core
    python bench/bench_engine_nfe.py --variants "safety=0.7;decide_tol=0.3" --steps 896,1950,11214,36000
"""
import argparse
import os
import time

import numpy as np
import torch

import scoreprobe as sp
from scoreprobe.ode import integrate
from scoreprobe.ode.engine import EngineSettings
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser

BINS = (0, 7, 10, 13, 19, 29, 10 ** 6)   # histogram edges: NFE in (a, b]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", default="all", help="checkpoints of the shipped series, or all")
    p.add_argument("--sigma-starts", default="0.5,1,2")
    p.add_argument("--res", type=int, default=24)
    p.add_argument("--over", type=int, default=10, help="rows with more evaluations than this are dissected")
    p.add_argument("--variants", default=None, help="';'-separated EngineSettings overrides to compare")
    p.add_argument("--threads", type=int, default=1)
    return p.parse_args(argv)


def overrides(text):
    """'safety=0.7,h0=2' -> {"safety": 0.7, "h0": 2.0} (pair as a string, patience / max_steps as ints)."""
    out = {}
    for part in filter(None, text.split(",")):
        key, value = part.split("=")
        key = key.strip()
        out[key] = value.strip() if key == "pair" else int(value) if key in ("patience", "max_steps") \
            else float(value)
    return out


def dissect(res, over):
    """One line's numbers from an EngineResult: histogram shares (len(BINS) − 1,) and the rows > over."""
    nfe = res.nfe
    hist = np.histogram(nfe, bins=np.asarray(BINS) + 0.5)[0] / len(nfe)
    big = nfe > over
    out = {"mean": float(nfe.mean()), "max": int(nfe.max()), "hist": hist, "over": float(big.mean())}
    if big.any():
        rej = res.rejected[big]
        dec = res.decided_sigma[big]
        out.update(rej=float((rej > 0).mean()), rej_nfe=float(3 * rej.mean()), undec=float((dec == 0).mean()),
                   acc=float(res.accepted[big].mean()),
                   dsig=float(np.median(dec[dec > 0])) if (dec > 0).any() else float("nan"))
    return out


def histograms(args, series, x0):
    """The NFE table: one row per (checkpoint, σ_start)."""
    steps = series.steps if args.steps == "all" else [int(s) for s in args.steps.split(",")]
    heads = " ".join(f"≤{b}" if i == 0 else (f"{BINS[i] + 1}-{b}" if b < 10 ** 6 else f">{BINS[i]}")
                     for i, b in enumerate(BINS[1:]))
    print(f"| step | σ_start | NFE mean | max | share of rows by NFE ({heads}) | > {args.over} | of those: "
          f"with a rejection | NFE on rejections | undecided | accepted steps | median decided σ |")
    print("|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for step in steps:
        D = series.denoiser(int(step))
        for s0 in (float(s) for s in args.sigma_starts.split(",")):
            d = dissect(integrate(D, x0, s0, info=True), args.over)
            hist = " ".join(f"{h:.2f}" for h in d["hist"])
            tail = (f"{d['rej']:.2f} | {d['rej_nfe']:.1f} | {d['undec']:.2f} | {d['acc']:.1f} | {d['dsig']:.3f}"
                    if "rej" in d else "– | – | – | – | –")
            print(f"| {step} | {s0:g} | {d['mean']:.2f} | {d['max']} | {hist} | {d['over']:.3f} | {tail} |",
                  flush=True)


def _agreement(x, ref):
    """(all points, points whose reference ends on-vertex): shares of equal thresholded bits."""
    same = ((x > 0) == (ref > 0)).all(1)
    on = ((ref.abs() - 1).abs() <= 0.5).all(1)
    return float(same.float().mean()), float(same[on].float().mean()) if on.any() else float("nan")


def compare(args, series, x0):
    """Default engine vs each variant: NFE and agreement with Heun 256, per model and σ_start."""
    variants = [("default", {})] + [(v, overrides(v)) for v in args.variants.split(";") if v]
    models = [(f"step {s}", lambda s=s: series.denoiser(int(s))) for s in args.steps.split(",")]
    models += [("rule oracle", lambda: RuleDenoiser(series.rule)),
               ("memorizer", lambda: EmpiricalDenoiser(series.dataset.train))]
    print("| model | σ_start | settings | NFE mean | rejected steps | agreement | agreement, reference on-vertex |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for name, get in models:
        D = get()
        for s0 in (float(s) for s in args.sigma_starts.split(",")):
            ref = integrate(D, x0, s0, n_steps=256, solver="heun")
            for label, kw in variants:
                r = integrate(D, x0, s0, solver=EngineSettings(**kw), info=True)
                share, share_on = _agreement(r.x, ref)
                print(f"| {name} | {s0:g} | {label} | {r.nfe.mean():.2f} | {r.rejected.mean():.2f} | {share:.4f} | "
                      f"{share_on:.4f} |", flush=True)


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    series = sp.load_series()
    plane = sp.auto_plane(series.dataset, series.rule, seed=0)
    pts, _, _ = plane.grid(args.res, 0.5)
    x0 = torch.as_tensor(pts, dtype=torch.float32)                     # (res², D): the same starts at every σ_start (as `basins`)
    t0 = time.perf_counter()
    if args.variants:
        compare(args, series, x0)
    else:
        histograms(args, series, x0)
    print(f"({time.perf_counter() - t0:.0f} s; load average {os.getloadavg()[0]:.1f}; "
          f"torch threads {torch.get_num_threads()})")


if __name__ == "__main__":
    main()
