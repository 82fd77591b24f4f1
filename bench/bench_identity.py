"""What recording a step's model identity costs and how robust the behavioural fingerprint is.

Cost: for each of the checkpoints a default `scoreprobe basins` measures (about 8 of the shipped
series, `--steps auto`), the time to load it, to hash its tensors (`identity.weights_digest`) and
to compute one default basin map (res 24, sigma_start 1, 18 Heun steps); the digest's share of a
run is digest / (load + map). Target (issue 20): not noticeable (< 1%).

Robustness of the fingerprint (`identity.fingerprint`, tolerance FINGERPRINT_TOL): for the two
oracles and two shipped checkpoints, the largest change of a fingerprint value under float64
instead of float32 inputs, 1 or 2 torch threads, 100 draws of 1e-6 relative noise on every output
(and, with CUDA, the GPU instead of the CPU), against a SHA-256 of the outputs rounded to 1e-3;
and the distance between the fingerprints of different models.

    python bench/bench_identity.py          # about 30 s on 2 cores
"""
import argparse
import hashlib
import time

import numpy as np
import torch

import scoreprobe as sp
from scoreprobe.sweep import identity as I
from scoreprobe.cli.common import choose_steps
from scoreprobe.probes.basins import basin_map
from scoreprobe.slices import auto_plane


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def cost(series, repeat):
    plane = auto_plane(series.dataset, series.rule, seed=0)
    steps = choose_steps("auto", series)
    load = digest = compute = 0.0
    for step in steps:
        t, D = best(lambda: series.denoiser(step), repeat)
        load += t
        digest += best(lambda: I.weights_digest(D), repeat)[0]
        compute += best(lambda: basin_map(D, plane, [1.0], 24, 18, series.dataset, series.rule), 1)[0]
    n = len(steps)
    print(f"{n} checkpoints (--steps auto): load {1e3 * load / n:.1f} ms, weights digest {1e3 * digest / n:.2f} ms, "
          f"basin map (res 24) {1e3 * compute / n:.0f} ms per checkpoint; digest = "
          f"{100 * digest / (load + compute):.2f}% of load + map")


def outputs(D, x, s, dtype=torch.float32, device="cpu"):
    with torch.no_grad():
        return torch.as_tensor(D(x.to(device, dtype), s.to(device, dtype))).double().cpu().numpy()


def rounded_hash(o, q=1e-3):
    return hashlib.sha256(np.round(o / q).astype(np.int64).tobytes()).hexdigest()


def robustness(series, n_noise):
    d = series.rule.n_bits
    x, s = I.probe_batch(d)
    models = {"RuleDenoiser": sp.RuleDenoiser(series.rule),
              "EmpiricalDenoiser": sp.EmpiricalDenoiser(series.dataset.train),
              f"DiT step {series.steps[-1]}": series.denoiser(series.steps[-1]),
              f"DiT step {series.steps[-2]}": series.denoiser(series.steps[-2])}
    rng, threads, fps = np.random.default_rng(0), torch.get_num_threads(), {}
    for name, D in models.items():
        base = outputs(D, x, s)
        variants = [outputs(D, x, s, torch.float64)]
        for t in (1, 2):
            torch.set_num_threads(t)
            variants.append(outputs(D, x, s))
        torch.set_num_threads(threads)
        variants += [base * (1 + 1e-6 * rng.standard_normal(base.shape)) for _ in range(n_noise)]
        if torch.cuda.is_available():
            variants.append(outputs(D.to("cuda") if isinstance(D, torch.nn.Module) else D, x, s, device="cuda"))
        f0 = I.project(base, d)
        moves = [np.abs(I.project(o, d) - f0).max() for o in variants]
        same_hash = sum(rounded_hash(o) == rounded_hash(base) for o in variants)
        print(f"{name:20s} {len(variants)} variants: fingerprint moved at most {max(moves):.1e} "
              f"(tolerance {I.FINGERPRINT_TOL:g}; same model in {sum(m <= I.FINGERPRINT_TOL for m in moves)}/"
              f"{len(variants)}); sha256 of outputs rounded to 1e-3 unchanged in {same_hash}/{len(variants)}")
        fps[name] = f0
    names = list(fps)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            print(f"distance {a} vs {b}: {np.abs(fps[a] - fps[b]).max():.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="each load / digest timing is the best of this many")
    parser.add_argument("--n-noise", type=int, default=100, help="draws of 1e-6 relative output noise")
    args = parser.parse_args()
    series = sp.load_series()
    cost(series, args.repeat)
    robustness(series, args.n_noise)


if __name__ == "__main__":
    main()
