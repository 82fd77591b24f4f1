"""Issue 75 item 4: where a basin map's endpoint differs from Heun 128 on the refine bench's sample, who is right?

On bench_basins_refine.py's seeded sample (256 points of the 64² grid of the automatic plane, σ_start 1), per
checkpoint: the refined map's endpoint against Heun 128, Heun 512 and torchdiffeq dopri5 at rtol = atol = 1e-7 at
every point where it differs from Heun 128; then, with --tolerances, how many of the 256 points the engine at other
settings (early decision off, tighter tolerances) ends off Heun 512. Prints lines; bench/RESULTS.md quotes them.

    python bench/bench_refine_heun.py --steps 896,1088,9233,24404 --tolerances
"""
import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scoreprobe as sp   # noqa: E402
from bench_basins_refine import sample, vertices   # noqa: E402
from bench_engine_table import _bits, tde   # noqa: E402
from scoreprobe.ode import integrate   # noqa: E402
from scoreprobe.ode.engine import EngineSettings   # noqa: E402
from scoreprobe.probes.basins import basins   # noqa: E402

SETTINGS = {"default (5e-3)": "adaptive", "patience 0": EngineSettings(patience=0),
            "2e-3": EngineSettings(rtol=2e-3, atol=2e-3), "1e-3": EngineSettings(rtol=1e-3, atol=1e-3),
            "1e-3, patience 0": EngineSettings(rtol=1e-3, atol=1e-3, patience=0)}


def disagreements(D, series, plane, step):
    """One line per sampled point where the refined map's vertex differs from Heun 128's."""
    ds = basins(D, plane, sigma_start=1.0, res=64, dataset=series.dataset, rule=series.rule, keep_bits=True)
    ours = vertices(ds)                                                              # (P, D)
    idx, x0, _ = sample(plane, 64, 256)
    h128 = _bits(integrate(D, x0, 1.0, n_steps=128, solver="heun")).numpy()
    bad = np.where((ours[idx] != h128).any(1))[0]
    if not len(bad):
        return [f"{step}: no sampled point differs from Heun 128"]
    h512 = _bits(integrate(D, x0[bad], 1.0, n_steps=512, solver="heun")).numpy()
    d7 = _bits(tde(1e-7)(D, x0[bad], 1.0)[0]).numpy()
    same = lambda a, b: bool((a == b).all())   # noqa: E731
    return [f"{step} point {idx[b]}: refined = Heun 512 {same(ours[idx[b]], h512[j])}, Heun 128 = Heun 512 "
            f"{same(h128[b], h512[j])}, refined = dopri5 1e-7 {same(ours[idx[b]], d7[j])}, Heun 512 = dopri5 1e-7 "
            f"{same(h512[j], d7[j])}" for j, b in enumerate(bad)]


def off_reference(D, plane, step):
    """How many of the 256 sampled points each engine setting ends off Heun 512."""
    _, x0, _ = sample(plane, 64, 256)
    ref = _bits(integrate(D, x0, 1.0, n_steps=512, solver="heun")).numpy()
    counts = {name: int((_bits(integrate(D, x0, 1.0, solver=s)).numpy() != ref).any(1).sum())
              for name, s in SETTINGS.items()}
    return f"{step}: points of 256 off Heun 512 — " + "; ".join(f"{k}: {v}" for k, v in counts.items())


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", required=True, help="checkpoints of the shipped series, comma-separated")
    p.add_argument("--tolerances", action="store_true", help="also count each engine setting's points off Heun 512")
    args = p.parse_args()
    torch.set_num_threads(1)
    series = sp.load_series()
    plane = sp.auto_plane(series.dataset, series.rule, seed=0)
    with torch.no_grad():
        for step in (int(s) for s in args.steps.split(",")):
            D = series.denoiser(step)
            print("\n".join(disagreements(D, series, plane, step)), flush=True)
            if args.tolerances:
                print(off_reference(D, plane, step), flush=True)


if __name__ == "__main__":
    main()
