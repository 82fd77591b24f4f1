"""The engine table of issue #23 (`python bench/bench_basins.py --table`): basin maps by every method, one run.

For each of `--table-steps` of the shipped series and for the two oracles (the memorizer
EmpiricalDenoiser and the rule oracle RuleDenoiser), from every point of a res×res grid on the
automatic plane at σ_start (1), to σ = 0:

  reference     scoreprobe Heun, 256 fixed steps (511 NFE), all points; checked against per-point
                scipy RK45 (rtol = atol = 1e-6) on --ivp-points points of the grid;
  engine        `integrate(solver="adaptive")` at its defaults; with the first step h0 = 0.5 instead
                of 1 (labels that depend on the step sequence show up as a difference here); with early
                decision off (patience 0); at rtol = atol = 0.02 (the defaults of DEFINITIONS_VERSION
                3); with the Heun–Euler pair;
  fixed grid    scoreprobe Heun 8 / 16 / 32 (32: the old default of `basins`), Euler 32;
  torchdiffeq   odeint dopri5 in t = ln σ on the whole batch (one shared step), rtol = atol = 1e-2/1e-3/1e-4;
  torchode      dopri5 and tsit5 per sample (each row its own step; the batch is evaluated whole), same tolerances;
  solve_ivp     scipy RK45 at its default tolerances, one point at a time (s per point).

Agreement = share of grid points whose thresholded endpoint bits equal the reference's, over all
points and over the points whose reference endpoint is on-vertex (a point ending off-vertex, e.g. on a
saddle of an early checkpoint, has bits that follow a coordinate near 0: not a basin, as
`label_change` says, and only tolerances near 1e-4 reproduce them). NFE = mean
denoiser evaluations per row (for batched torchdiffeq: per batch call). Every method is timed in the same
run (the fastest of 7 runs where one takes under 0.5 s, as on the oracles), so the ratios are fair under
load; the load average is printed.
"""
import os
import time

import numpy as np
import torch

import scoreprobe as sp
from scoreprobe.ode.engine import EngineSettings
from scoreprobe.ode import integrate
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser

SIGMA_MIN = 0.002
TOLS = (1e-2, 1e-3, 1e-4)


class Counted:
    """D with a call counter (batched calls) and a row counter."""

    def __init__(self, D):
        self.D, self.calls, self.rows = D, 0, 0

    def __call__(self, x, s):
        self.calls += 1
        self.rows += len(x)
        return self.D(x, s)


def _end(D, x):
    return D(x, torch.full((len(x),), SIGMA_MIN, dtype=x.dtype))


def ours(solver, n_steps=32):
    def run(D, x0, s0):
        r = integrate(D, x0, s0, n_steps=n_steps, solver=solver, info=True)
        return r.x, float(r.nfe.mean()), int(r.nfe.max())
    return run


def tde(tol):
    def run(D, x0, s0):
        from torchdiffeq import odeint
        c = Counted(D)
        t = torch.tensor([np.log(s0), np.log(SIGMA_MIN)], dtype=x0.dtype)
        xe = odeint(lambda t, x: x - c(x, t.exp().expand(len(x))), x0, t, method="dopri5", rtol=tol, atol=tol)[-1]
        return _end(D, xe), c.calls + 1, c.calls + 1
    return run


def tode(method, tol):
    def run(D, x0, s0):
        import torchode as to
        term = to.ODETerm(lambda t, y: y - D(y, t.exp()))
        step = {"dopri5": to.Dopri5, "tsit5": to.Tsit5}[method](term=term)
        solver = to.AutoDiffAdjoint(step, to.IntegralController(atol=tol, rtol=tol, term=term))
        n = len(x0)
        sol = solver.solve(to.InitialValueProblem(y0=x0, t_start=torch.full((n,), np.log(s0), dtype=x0.dtype),
                                                  t_end=torch.full((n,), np.log(SIGMA_MIN), dtype=x0.dtype)))
        nfe = sol.stats["n_f_evals"].double() + 1
        return _end(D, sol.ys[:, -1]), float(nfe.mean()), int(nfe.max())
    return run


def ivp(D, x0, s0, rtol=1e-3, atol=1e-6):
    """scipy RK45 one row at a time (the network on one row per evaluation)."""
    from scipy.integrate import solve_ivp
    ends, nfe = [], []
    for row in x0.double().numpy():
        def f(t, x):
            xt = torch.as_tensor(x, dtype=x0.dtype)[None]
            return (xt - D(xt, torch.full((1,), float(np.exp(t)), dtype=x0.dtype)))[0].double().numpy()
        sol = solve_ivp(f, (np.log(s0), np.log(SIGMA_MIN)), row, method="RK45", rtol=rtol, atol=atol)
        ends.append(sol.y[:, -1])
        nfe.append(sol.nfev + 1)
    return _end(D, torch.as_tensor(np.stack(ends), dtype=x0.dtype)), float(np.mean(nfe)), int(max(nfe))


METHODS = [("engine (bs3, default)", ours("adaptive")),
           ("engine, first step h0 = 0.5", ours(EngineSettings(h0=0.5))),
           ("engine, no early decision", ours(EngineSettings(patience=0))),
           ("engine, rtol = atol = 0.02", ours(EngineSettings(rtol=0.02, atol=0.02))),
           ("engine, heun-euler pair", ours(EngineSettings(pair="heun-euler"))),
           *[(f"Heun {n}", ours("heun", n)) for n in (8, 16, 32)],
           ("Euler 32", ours("euler", 32)),
           *[(f"torchdiffeq dopri5 {t:g}", tde(t)) for t in TOLS],
           *[(f"torchode {m} {t:g}", tode(m, t)) for m in ("dopri5", "tsit5") for t in TOLS[:2]]]


def _bits(x):
    return (x > 0) & torch.isfinite(x)


def _on_vertex(x):
    """(N,) bool: every coordinate within 0.5 of ±1 (not `off_vertex`, docs/definitions.md)."""
    return ((x.abs() - 1).abs() <= 0.5).all(1)


def _timed_best(run, *args, short=0.5, repeats=7):
    """(result, seconds) of run(*args): the fastest of up to `repeats` runs when one takes under `short`
    seconds (the oracles' maps take milliseconds, where one timing on a loaded machine is noise)."""
    t = time.perf_counter()
    out = run(*args)
    best = time.perf_counter() - t
    for _ in range(repeats - 1 if best < short else 0):
        t = time.perf_counter()
        run(*args)
        best = min(best, time.perf_counter() - t)
    return out, best


def one_model(name, D, x0, s0, n_ivp):
    """Rows (method, s per point, NFE mean, NFE max, agreement, agreement where the reference ends
    on-vertex) for one denoiser."""
    with torch.no_grad():
        t = time.perf_counter()
        ref = integrate(D, x0, s0, n_steps=256, solver="heun")
        t_ref = time.perf_counter() - t
        on = _on_vertex(ref)                                                    # (P,)
        agree = lambda xe, sel=slice(None): ((_bits(xe) == _bits(ref[sel])).all(1), on[sel])
        pick = np.unique(np.linspace(0, len(x0) - 1, n_ivp).round().astype(int))
        ivp_ref, _, _ = ivp(D, x0[pick], s0, rtol=1e-6, atol=1e-6)
        ref_ok = float((_bits(ivp_ref) == _bits(ref[pick])).all(1).float().mean())
        rows = [("Heun 256 (reference)", t_ref / len(x0), 511, 511, 1.0, 1.0)]
        for label, run in METHODS:
            if label.startswith("torchdiffeq") or label.startswith("torchode"):
                try:
                    __import__(label.split()[0])
                except ImportError:
                    continue
            (xe, nfe, nfe_max), dt = _timed_best(run, D, x0, s0)
            rows.append((label, dt / len(x0), nfe, nfe_max, *_shares(*agree(xe))))
        (xe, nfe, nfe_max), dt = _timed_best(ivp, D, x0[pick], s0)
        rows.append(("solve_ivp RK45 per point", dt / len(pick), nfe, nfe_max, *_shares(*agree(xe, pick))))
    print(f"\n### {name}: {len(x0)} points ({int((~on).sum())} end off-vertex in the reference); Heun 256 vs "
          f"per-point RK45 rtol 1e-6 on {len(pick)} points: bits agree {ref_ok:.3f}; load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    print("| method | s per point | NFE mean | NFE max | agreement | agreement, reference on-vertex |\n"
          "|---|---:|---:|---:|---:|---:|")
    for label, per, nfe, nfe_max, share, share_on in rows:
        print(f"| {label} | {per:.2e} | {nfe:.1f} | {nfe_max} | {share:.4f} | {share_on:.4f} |", flush=True)
    return rows


def _shares(equal, on):
    """(agreement, agreement among the points whose reference endpoint is on-vertex)."""
    return float(equal.float().mean()), float(equal[on].float().mean()) if on.any() else float("nan")


def targets(rows):
    """The issue's ratios from one model's rows."""
    by = {r[0]: r for r in rows}
    eng = by["engine (bs3, default)"]
    out = {"agreement": eng[4], "agreement_on": eng[5], "nfe": eng[2], "vs_heun32": by["Heun 32"][1] / eng[1],
           "vs_ivp": by["solve_ivp RK45 per point"][1] / eng[1]}
    for key, col in (("", 4), ("_on", 5)):      # all points; points whose reference ends on-vertex
        reach = [r for r in rows if r[0].startswith("torchdiffeq") and r[col] >= 0.999]
        if reach:
            loosest = max(reach, key=lambda r: float(r[0].split()[-1]))
            out["vs_tde" + key], out["tde_tol" + key] = loosest[1] / eng[1], loosest[0].split()[-1]
    return out


def engine_table(args):
    torch.set_num_threads(args.threads)
    series = sp.load_series()
    ds, rule = series.dataset, series.rule
    plane = sp.auto_plane(ds, rule, seed=0)
    pts, _, _ = plane.grid(args.res, 0.5)
    x0 = torch.as_tensor(pts, dtype=torch.float32)                             # (P, D)
    t0 = time.perf_counter()
    models = [(f"step {s}", lambda s=s: series.denoiser(int(s))) for s in args.table_steps.split(",") if s]
    if not args.no_oracles:
        models += [("memorizer (EmpiricalDenoiser)", lambda: EmpiricalDenoiser(ds.train)),
                   ("rule oracle (RuleDenoiser)", lambda: RuleDenoiser(rule))]
    summary = []
    for name, get in models:
        summary.append((name, targets(one_model(name, get(), x0, args.sigma_start, args.ivp_points))))
    print("\n| model | agreement (on-vertex) | NFE mean | vs Heun 32 | vs torchdiffeq (loosest tol at >= 0.999; "
          "on-vertex) | vs solve_ivp per point |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, t in summary:
        cells = [f"{t['vs_tde' + k]:.1f}x ({t['tde_tol' + k]})" if "vs_tde" + k in t else "none reaches 0.999"
                 for k in ("", "_on")]
        print(f"| {name} | {t['agreement']:.4f} ({t['agreement_on']:.4f}) | {t['nfe']:.1f} | {t['vs_heun32']:.1f}x "
              f"| {cells[0]}; {cells[1]} | {t['vs_ivp']:.0f}x |")
    print(f"({time.perf_counter() - t0:.0f} s; torch threads {torch.get_num_threads()})")
