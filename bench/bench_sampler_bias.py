"""Bias of the PF-ODE step count: each candidate default against a 4× finer integration.

On the shipped series, at checkpoints around both crossings, draws the same samples (same seed,
so the same initial noise) with n and 4n Heun steps and reports, per checkpoint and pooled:
rule_acc and mem_ratio at both, their paired difference (fine − coarse) with its z, and the
sampling noise of the default sample count (the standard error of a fraction p from n_samples
samples). For `basins` the same is done for the labels of a plane's grid: the fraction of grid
points whose endpoint state changes between n and 4n steps.

  python bench/bench_sampler_bias.py                        # ≈ 10 min on one core
  python bench/bench_sampler_bias.py --candidates 18,32 --steps 2368,4243,11214

Prints a table per candidate and a last line with the pooled biases; the numbers are quoted in
docs/definitions.md ("Sampler") and checkpoints/README.md.

`--vs-heun N` instead compares each of `--solvers` with one reference of N Heun steps, on the same
starts (the clocks' samples: seed 0, sample indices 0..n-1): fixed Heun grids ("heun32", the default of
`sample` / `clocks`), the adaptive sampler ("adaptive": the engine at `defaults.SAMPLE_ENGINE`), the
engine at basins' settings ("engine-defaults"), and `--engine-variants` (overrides of SAMPLE_ENGINE).
It prints the paired bias with its z, the evaluations per sample (NFE) and the seconds of each, timed
one after another in the same run, pooled with ratios to the first solver:

  python bench/bench_sampler_bias.py --vs-heun 128 --steps 1322,4243,7602,11214      # ≈ 15 min on one busy core
  python bench/bench_sampler_bias.py --vs-heun 128 --steps 2368 --engine-variants "sigma_knee=0.5;safety=0.9"
"""
import argparse
import time

import numpy as np
import torch

import scoreprobe as sp
from scoreprobe.defaults import SAMPLE_ENGINE
from scoreprobe.endpoints import classify_endpoints
from scoreprobe.noise import randn_per_sample
from scoreprobe.ode import integrate
from scoreprobe.ode.engine import EngineSettings
from scoreprobe.probes.basins import basin_map
from scoreprobe.probes.clocks import clock_step
from scoreprobe.slices import plane_from_spec

DEFAULT_STEPS = (1322, 2368, 2876, 4243, 7602, 11214, 36000)  # both crossings of the shipped series


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--candidates", default="18,32", help="step counts n to test (each against 4n)")
    p.add_argument("--steps", default=",".join(map(str, DEFAULT_STEPS)), help="checkpoints of the series")
    p.add_argument("--n-samples", type=int, default=1000)
    p.add_argument("--res", type=int, default=24, help="basins grid (the CLI default)")
    p.add_argument("--sigma-start", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--vs-heun", type=int, default=None, metavar="N", help="compare --solvers with N Heun steps")
    p.add_argument("--solvers", default="heun32,adaptive,engine-defaults",
                   help="with --vs-heun: heunK, adaptive (the sampler's engine), engine-defaults (basins' engine)")
    p.add_argument("--engine-variants", default=None, metavar="K=V,..;..",
                   help="with --vs-heun: ';'-separated overrides of SAMPLE_ENGINE, each compared too")
    return p.parse_args(argv)


def paired(a, b):
    """Mean of b − a over paired 0/1 outcomes and its z (mean / standard error); z = 0 when all equal."""
    d = b.astype(np.float64) - a.astype(np.float64)
    se = d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else 0.0
    return float(d.mean()), float(d.mean() / se) if se > 0 else 0.0


def clock_outcomes(D, series, n, n_samples, solver="heun"):
    ds = clock_step(D, series.dataset, series.rule, n_samples=n_samples, seed=0, n_steps=n, sampler=solver)
    return _outcomes(ds["state"].values)


def _outcomes(state):
    """(valid, memorized) (n,) bool from endpoint state codes."""
    codes = sp.data.datasets.STATE_CODES
    valid = np.isin(state, [codes["valid_novel"], codes["valid_heldout"], codes["valid_memorized"]])
    return valid, state == codes["valid_memorized"]


def _solvers(args):
    """[(label, solver of `integrate`, n_steps)] of --solvers and --engine-variants: "adaptive" is the
    sampler's engine (`defaults.SAMPLE_ENGINE`), "engine-defaults" the engine at `EngineSettings()` (basins'
    settings, what `sampler="adaptive"` ran before issue 59), "heunK" K fixed Heun steps; each variant
    is SAMPLE_ENGINE with `k=v,...` overrides."""
    out = []
    for name in filter(None, args.solvers.split(",")):
        if name == "adaptive":
            out.append((name, EngineSettings(**SAMPLE_ENGINE), 1))
        elif name == "engine-defaults":
            out.append((name, EngineSettings(), 1))
        else:
            out.append((name, "heun", int(name.removeprefix("heun"))))
    for text in filter(None, (args.engine_variants or "").split(";")):
        out.append((text, EngineSettings(**{**SAMPLE_ENGINE, **overrides(text)}), 1))
    return out


def overrides(text):
    """'sigma_knee=0.5,rtol=0.01' -> {"sigma_knee": 0.5, "rtol": 0.01} (patience, max_steps: ints; pair: str)."""
    out = {}
    for part in filter(None, text.split(",")):
        key, value = (v.strip() for v in part.split("="))
        out[key] = value if key == "pair" else int(value) if key in ("patience", "max_steps") else float(value)
    return out


def _endpoints(D, series, solver, n, n_samples):
    """(valid, memorized, NFE per sample (n,), seconds) of one sampler from σ_max on the clocks' starts
    (`sample`'s noise: seed 0, sample indices 0..n_samples-1), timed here."""
    x0 = 80.0 * randn_per_sample(0, np.arange(n_samples), series.rule.n_bits, dtype=torch.float32)
    t = time.perf_counter()
    r = integrate(D, x0, 80.0, n_steps=n, solver=solver, info=True)
    dt = time.perf_counter() - t
    state = classify_endpoints(r.x.double().numpy(), series.dataset, series.rule)["state"]
    return (*_outcomes(np.asarray(state)), r.nfe, dt)


def vs_reference(args, series, steps):
    """Each of the solvers against args.vs_heun Heun steps, paired per checkpoint and pooled; NFE per
    sample and seconds per checkpoint of each, all timed in this run (one after another per checkpoint)."""
    solvers = _solvers(args)
    print(f"## {', '.join(s[0] for s in solvers)} vs {args.vs_heun} Heun steps ({args.n_samples} samples, seed 0)")
    print(f"{'solver':>9} {'step':>6} {'rule':>7} {'rule@ref':>8} {'Δrule':>7} {'z':>5} {'mem':>6} {'mem@ref':>7} "
          f"{'Δmem':>7} {'z':>5} {'NFE':>6} {'s':>6}")
    out = {s[0]: [] for s in solvers}
    for step in steps:
        D = series.denoiser(step)
        vr, mr, _, _ = _endpoints(D, series, "heun", args.vs_heun, args.n_samples)
        for name, solver, n in solvers:
            va, ma, nfe, dt = _endpoints(D, series, solver, n, args.n_samples)
            (dr, zr), (dm, zm) = paired(va, vr), paired(ma, mr)
            out[name].append((va, vr, ma, mr, nfe, dt))
            print(f"{name:>9} {step:>6} {va.mean():>7.3f} {vr.mean():>8.3f} {dr:>+7.3f} {zr:>5.1f} {ma.mean():>6.3f} "
                  f"{mr.mean():>7.3f} {dm:>+7.3f} {zm:>5.1f} {nfe.mean():>6.1f} {dt:>6.2f}", flush=True)
    _pooled(out, args.n_samples)


def _pooled(out, n_samples):
    """The pooled lines: bias with z, NFE per sample and seconds, and both as ratios to the first solver."""
    first = next(iter(out.values()))
    nfe0, t0 = np.mean([r[4].mean() for r in first]), sum(r[5] for r in first)
    for name, rows in out.items():
        va, vr, ma, mr = (np.concatenate([r[i] for r in rows]) for i in range(4))
        (dr, zr), (dm, zm) = paired(va, vr), paired(ma, mr)
        nfe, secs = np.mean([r[4].mean() for r in rows]), sum(r[5] for r in rows)
        print(f"pooled {name}: Δrule {dr:+.4f} (z {zr:.1f}), Δmem {dm:+.4f} (z {zm:.1f}) (reference − {name}); "
              f"NFE per sample {nfe:.1f} ({nfe0 / nfe:.2f}x fewer than the first); {secs:.1f} s "
              f"({t0 / secs:.2f}x); sampling noise {np.sqrt(0.09 / n_samples):.4f}")


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    series = sp.load_series()
    steps = [int(s) for s in args.steps.split(",")]
    if args.vs_heun:
        t0 = time.perf_counter()
        vs_reference(args, series, steps)
        print(f"({time.perf_counter() - t0:.0f} s)")
        return
    plane = plane_from_spec("auto", series.dataset, series.rule, seed=0)
    t0 = time.perf_counter()
    pooled = []
    for n in [int(c) for c in args.candidates.split(",")]:
        print(f"\n## {n} vs {4 * n} Heun steps ({args.n_samples} samples, seed 0)")
        print(f"{'step':>6} {'rule@n':>7} {'rule@4n':>7} {'Δrule':>7} {'z':>5} {'mem@n':>6} {'mem@4n':>6} "
              f"{'Δmem':>7} {'z':>5} {'basin flips':>11}")
        rows = []
        for step in steps:
            D = series.denoiser(step)
            (va, ma), (vb, mb) = (clock_outcomes(D, series, k, args.n_samples, "heun") for k in (n, 4 * n))
            dr, zr = paired(va, vb)
            dm, zm = paired(ma, mb)
            maps = [basin_map(D, plane, [args.sigma_start], args.res, k, series.dataset, series.rule,
                              solver="heun")["state"]
                    for k in (n, 4 * n)]
            flips = float(np.mean(maps[0] != maps[1]))
            rows.append((va, vb, ma, mb, flips))
            print(f"{step:>6} {va.mean():>7.3f} {vb.mean():>7.3f} {dr:>+7.3f} {zr:>5.1f} {ma.mean():>6.3f} "
                  f"{mb.mean():>6.3f} {dm:>+7.3f} {zm:>5.1f} {flips:>11.3f}")
        va, vb, ma, mb = (np.concatenate([r[i] for r in rows]) for i in range(4))
        dr, zr = paired(va, vb)
        dm, zm = paired(ma, mb)
        flips = float(np.mean([r[4] for r in rows]))
        noise = np.sqrt(0.9 * 0.1 / args.n_samples)  # SE of a fraction near the thresholds (0.9 / 0.1)
        print(f"pooled: Δrule {dr:+.4f} (z {zr:.1f}), Δmem {dm:+.4f} (z {zm:.1f}), basin flips {flips:.3f}; "
              f"sampling noise at {args.n_samples} samples {noise:.4f}")
        pooled.append(f"n={n}: Δrule {dr:+.4f}, Δmem {dm:+.4f}, flips {flips:.3f}")
    print(f"\n({time.perf_counter() - t0:.0f} s) " + "; ".join(pooled))


if __name__ == "__main__":
    main()
