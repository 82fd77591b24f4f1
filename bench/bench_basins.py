"""Benchmark: basin maps (batched Heun PF-ODE) vs the integrators people use, through the same network.

On the shipped series' last checkpoint, from every point of a res×res grid on the automatic plane at
σ_start, to σ = 0 (the PF-ODE dx/dσ = (x − D(x, σ))/σ down to σ_min = 0.002, then D(x, σ_min)):

  scoreprobe   `basin_map` (Heun, --n-steps, all points in one batch, torch.inference_mode);
  solve_ivp    scipy RK45 (rtol 1e-3, atol 1e-6: its defaults), one start at a time, the network
               called on one row per evaluation — how a researcher typically writes it;
  torchdiffeq  odeint dopri5 (rtol 1e-3, atol 1e-3) on the whole batch, in t = ln σ (in σ its
               steps overshoot σ_min into σ < 0); needs `pip install torchdiffeq` (the `bench`
               extra), skipped with a note when absent;
  integrator overhead: `integrate` time / (NFE × one batched forward of the same batch).

Agreement = share of points whose endpoint state (train / held-out / novel / violating / invalid,
by thresholded bits) equals scoreprobe's. solve_ivp runs on --ivp-points points spread over the
grid (it is slow), and its time is reported per point. Targets (issue #14): solve_ivp ≥ 100× per
point on 2 idle CPU cores (≥ 1000× on a GPU), torchdiffeq ≥ 5× at equal agreement, agreement ≥ 99%,
overhead ≤ 1.1.

    python bench/bench_basins.py                      # ≈ 1 min on 2 cores
    python bench/bench_basins.py --res 64 --device cuda
    python bench/bench_basins.py --compile            # also through torch.compile (≈ 40 s to compile)
    python bench/bench_basins.py --device cuda --arch 6,128 --res 256 --bf16 --peak-tflops 67   # MFU on an H200
    python bench/bench_basins.py --table --res 24     # the engine table (bench_engine_table.py), ≈ 15 min idle
"""
import argparse
import time

import numpy as np
import torch

import scoreprobe as sp
from scoreprobe.ode import integrate
from scoreprobe.probes.basins import basin_map
from scoreprobe.slices import classify

SIGMA_MIN = 0.002


def _timed(fn, repeat=1):
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    return best, out


def _rhs(D, device):
    """dx/dσ for one row (numpy in, numpy out), as a scipy user writes it."""
    def f(sigma, x):
        xt = torch.as_tensor(x, dtype=torch.float32, device=device)[None]       # (1, D)
        s = torch.full((1,), float(sigma), device=device)
        with torch.inference_mode():
            return ((xt - D(xt, s)) / sigma)[0].double().cpu().numpy()
    return f


def run_solve_ivp(D, x0, sigma_start, device):
    """Endpoints (P, D) from scipy RK45, one start at a time; and the number of D calls."""
    from scipy.integrate import solve_ivp
    f, ends, nfe = _rhs(D, device), [], 0
    for x in x0.cpu().double().numpy():
        sol = solve_ivp(f, (sigma_start, SIGMA_MIN), x, method="RK45")
        nfe += sol.nfev + 1
        xe = torch.as_tensor(sol.y[:, -1], dtype=torch.float32, device=device)[None]
        with torch.inference_mode():
            ends.append(D(xe, torch.full((1,), SIGMA_MIN, device=device))[0])
    return torch.stack(ends), nfe


def run_torchdiffeq(D, x0, sigma_start):
    """Endpoints (P, D) from torchdiffeq dopri5 on the whole batch; None when not installed."""
    try:
        from torchdiffeq import odeint
    except ImportError:
        return None

    def f(t, x):   # in t = ln σ: dx/dt = x − D(x, σ); adaptive steps may overshoot the end, σ stays > 0
        return x - D(x, t.exp().expand(x.shape[0]))
    t = torch.tensor([np.log(sigma_start), np.log(SIGMA_MIN)], dtype=torch.float32, device=x0.device)
    with torch.inference_mode():
        xe = odeint(f, x0, t, method="dopri5", rtol=1e-3, atol=1e-3)[-1]
        return D(xe, torch.full((x0.shape[0],), SIGMA_MIN, device=x0.device))


def overhead(D, x0, sigma_start, n_steps, repeat):
    """integrate time / (NFE × one batched forward), both on the same batch and both under no_grad
    (integrate's own mode: inference_mode would save ≈ 7% but breaks denoisers that use autograd)."""
    nfe = 2 * n_steps - 1
    s = torch.full((x0.shape[0],), sigma_start, device=x0.device)
    with torch.no_grad():
        D(x0, s)   # warm-up
        t_fwd, _ = _timed(lambda: D(x0, s), repeat=max(3, repeat))
    t_int, _ = _timed(lambda: integrate(D, x0, sigma_start, n_steps=n_steps, solver="heun"), repeat=repeat)
    return t_int / (nfe * t_fwd), t_int, t_fwd


def _compiled(D, x0, s0):
    """torch.compile(D), warmed up on the batch shape (and the chunk shapes basin_map uses)."""
    C = torch.compile(D, dynamic=False)
    with torch.inference_mode():
        C(x0, torch.full((x0.shape[0],), s0, device=x0.device))
    return C


def _random_dit(arch, device):
    """An EDM-wrapped DiT of `arch` = 'DEPTH,WIDTH' (patch 2, heads WIDTH/32, random weights) on 6x6 images."""
    from scoreprobe.models.dit import DiT
    from scoreprobe.models.edm import EDMDenoiser
    depth, width = (int(v) for v in arch.split(","))
    torch.manual_seed(0)
    net = DiT(input_size=(6, 6), patch_size=2, in_channels=1, hidden_size=width, depth=depth,
              num_heads=max(1, width // 32), learn_sigma=False)
    for p in net.parameters():
        torch.nn.init.normal_(p, std=0.02)
    return EDMDenoiser(net, (1, 6, 6), time_scale=250.0).to(device).eval()


def _flops_per_row(D, x0):
    from torch.utils.flop_counter import FlopCounterMode
    x = x0[:64]
    with FlopCounterMode(display=False) as fc, torch.inference_mode():
        D(x, torch.full((len(x),), 0.5, device=x.device))
    return fc.get_total_flops() / len(x)


def _describe(D):
    n = sum(p.numel() for p in D.parameters())
    net = getattr(D, "net", D)
    return f"{type(net).__name__} depth {len(getattr(net, 'blocks', []))}, {n / 1e6:.2f}M parameters"


def _states(x, ds, rule):
    return classify(x, ds, rule)["state"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--res", type=int, default=32, help="grid points per axis (scoreprobe, torchdiffeq)")
    ap.add_argument("--ivp-points", type=int, default=24, help="grid points integrated by solve_ivp")
    ap.add_argument("--sigma-start", type=float, default=1.0)
    ap.add_argument("--n-steps", type=int, default=sp.ode.DEFAULT_N_STEPS)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=2, help="best of this many timings")
    ap.add_argument("--compile", action="store_true", help="also time the network through torch.compile")
    ap.add_argument("--bf16", action="store_true", help="also time bfloat16 autocast and its agreement with float32")
    ap.add_argument("--arch", default=None, metavar="DEPTH,WIDTH",
                    help="a randomly initialised DiT of this size instead of the shipped checkpoint (speed only)")
    ap.add_argument("--peak-tflops", type=float, default=None,
                    help="the device's peak for the model-FLOP utilization (e.g. 67 for H200 fp32, 989 for bf16)")
    ap.add_argument("--table", action="store_true",
                    help="the engine table (issue #23): every method against Heun 256 at --table-steps and the oracles")
    ap.add_argument("--table-steps", default="896,1950,11214,36000", help="checkpoints of the --table ('' none)")
    ap.add_argument("--no-oracles", action="store_true", help="--table without the two oracles")
    ap.add_argument("--threads", type=int, default=2, help="--table: torch threads (1 on a busy machine: "
                    "2 threads oversubscribed wait on each other)")
    args = ap.parse_args(argv)
    if args.table:
        from bench_engine_table import engine_table
        return engine_table(args)
    device = torch.device(args.device)
    series = sp.load_series()
    D = series.denoiser(series.steps[-1], device=device) if args.arch is None else _random_dit(args.arch, device)
    ds, rule = series.dataset, series.rule
    plane = sp.auto_plane(ds, rule, seed=0)
    pts, _, _ = plane.grid(args.res, 0.5)
    x0 = torch.as_tensor(pts, dtype=torch.float32, device=device)               # (P, D)
    P, s0 = len(x0), args.sigma_start

    t_ours, m = _timed(lambda: basin_map(D, plane, [s0], args.res, args.n_steps, ds, rule, solver="heun",
                                          device=device),
                       repeat=args.repeat)
    ours = m["state"].reshape(-1)                                               # (P,)
    pick = np.unique(np.linspace(0, P - 1, min(args.ivp_points, P)).round().astype(int))
    t_ivp, (ivp_end, ivp_nfe) = _timed(lambda: run_solve_ivp(D, x0[pick], s0, device))
    agree_ivp = float((_states(ivp_end, ds, rule) == ours[pick]).mean())
    rows = [("scoreprobe basin_map (Heun)", t_ours / P, 1.0, (2 * args.n_steps - 1) * P, P),
            ("scipy solve_ivp RK45, per point", t_ivp / len(pick), agree_ivp, ivp_nfe, len(pick))]
    t_tde, tde = _timed(lambda: run_torchdiffeq(D, x0, s0))
    if tde is not None:
        rows.append(("torchdiffeq dopri5, batched", t_tde / P, float((_states(tde, ds, rule) == ours).mean()),
                     None, P))
    if args.compile:   # the same network through torch.compile (inductor): compile time reported apart
        t_c, C = _timed(lambda: _compiled(D, x0, s0))
        t_cmp, mc = _timed(lambda: basin_map(C, plane, [s0], args.res, args.n_steps, ds, rule, solver="heun",
                                                 device=device),
                           repeat=args.repeat)
        rows.append((f"scoreprobe, torch.compile ({t_c:.0f} s to compile)", t_cmp / P,
                     float((mc["state"].reshape(-1) == ours).mean()), (2 * args.n_steps - 1) * P, P))
    if args.bf16:   # the same map under bfloat16 autocast: speed and agreement with float32
        def bf16_map():
            with torch.autocast(device.type, dtype=torch.bfloat16):
                return basin_map(D, plane, [s0], args.res, args.n_steps, ds, rule, solver="heun", device=device)
        t_bf, mb = _timed(bf16_map, repeat=args.repeat)
        rows.append(("scoreprobe, bf16 autocast", t_bf / P, float((mb["state"].reshape(-1) == ours).mean()),
                     (2 * args.n_steps - 1) * P, P))
    ratio_o, t_int, t_fwd = overhead(D, x0, s0, args.n_steps, args.repeat)
    flops = _flops_per_row(D, x0) * (2 * args.n_steps - 1) * P / t_ours   # achieved, float32 map

    print(f"device {device}, {P} grid points ({args.res}x{args.res}), sigma_start {s0}, "
          f"torch threads {torch.get_num_threads()}")
    print(f"{'method':36s}{'s per point':>14s}{'agreement':>11s}{'D calls':>10s}{'points':>8s}")
    for name, per, agree, nfe, n in rows:
        print(f"{name:36s}{per:>14.3e}{agree:>11.3f}{'-' if nfe is None else nfe:>10}{n:>8d}")
    print(f"integrate {t_int:.3f} s = {ratio_o:.3f} x ({2 * args.n_steps - 1} NFE x one forward of "
          f"{t_fwd * 1e3:.2f} ms)")
    mfu = f", model-FLOP utilization {flops / (args.peak_tflops * 1e12):.2f}" if args.peak_tflops else ""
    print(f"network: {_describe(D)}; basin integration at {flops / 1e9:.1f} GFLOP/s (matmul FLOPs){mfu}")
    line = f"ratios: solve_ivp/scoreprobe per point {rows[1][1] / rows[0][1]:.0f}x"
    if args.compile:
        line += f" (compiled: {rows[1][1] / rows[-1][1]:.0f}x)"
    line += (f", torchdiffeq/scoreprobe {rows[2][1] / rows[0][1]:.1f}x" if tde is not None
             else ", torchdiffeq not installed (pip install torchdiffeq)")
    print(line + f", integrator overhead {ratio_o:.3f}, agreement solve_ivp {agree_ivp:.3f}")


if __name__ == "__main__":
    main()
