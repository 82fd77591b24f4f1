"""Noise schedules, the PF-ODE integrators (the adaptive engine; the fixed EDM Heun/Euler grid) and the sampler.

`integrate(..., solver=)` dispatches: "adaptive" (the default) to `scoreprobe.ode.engine` (per-row
adaptive steps, per-row early decision, batch compaction; docs/definitions.md, "The adaptive
engine"); "heun" and "euler" to the fixed grid below.

The probability-flow ODE of a denoiser D in the EDM parameterization is

    dx/dσ = (x - D(x, σ)) / σ,

integrated from a starting noise level down to σ = 0 on the EDM time steps
σ_i = (σ_max^(1/ρ) + i/(N-1)·(σ_min^(1/ρ) - σ_max^(1/ρ)))^ρ, i = 0..N-1, followed by σ_N = 0.
Heun's second-order correction is applied on every step except the last one (to σ = 0), exactly as
in Karras et al. (2022), Algorithm 1 without stochasticity.

Noise is drawn per sample index (`scoreprobe.noise.randn_per_sample`, counter-based), so a sample
does not depend on the batch size, the chunk size or the device it was computed on.
"""
import logging
import warnings

import numpy as np
import torch
from tqdm.auto import tqdm

from scoreprobe.defaults import DEFAULT_N_STEPS, DEFAULT_SAMPLE_SOLVER, DEFAULT_SOLVER
from scoreprobe.ode.engine import STATUS, EngineResult, EngineSettings, solve
from scoreprobe.errors import ConfigError, DataError, ScoreprobeWarning
from scoreprobe.limits import MAX_ODE_STEPS, MAX_SIGMA, check_int, check_real, check_rows, check_seed, warn_nonfinite_rows
from scoreprobe.noise import NOISE, randn_per_sample  # noqa: F401  (re-exported)

logger = logging.getLogger(__name__)

SOLVERS = ("adaptive", "heun", "euler")   # "adaptive": scoreprobe.ode.engine; "heun", "euler": the fixed EDM grid
AUTO_CPU_ROWS = 4096   # chunk_size="auto" off CUDA: rows per forward (the long-standing default)


# ---------------------------------------------------------------------------------------------
# Schedule
# ---------------------------------------------------------------------------------------------

def edm_sigmas(n_steps, sigma_min=0.002, sigma_max=80.0, rho=7.0):
    """EDM time steps from sigma_max down to sigma_min, followed by a final 0.

    Parameters
    ----------
    n_steps : int >= 1, number of ODE steps N (the schedule has N + 1 entries).
    sigma_min, sigma_max : float, 0 < sigma_min <= sigma_max.
    rho : float > 0, the schedule's curvature (7 in EDM).

    Returns
    -------
    sigmas : (n_steps + 1,) torch.float64, decreasing, sigmas[0] = sigma_max, sigmas[-2] =
        sigma_min (when n_steps > 1), sigmas[-1] = 0.
    """
    check_int(int(n_steps) if isinstance(n_steps, float) and n_steps.is_integer() else n_steps, "n_steps", 1,
              MAX_ODE_STEPS)   # limits.MAX_ODE_STEPS
    if not (0 < sigma_min <= sigma_max < float("inf")):
        raise ConfigError(f"need 0 < sigma_min <= sigma_max < inf, got sigma_min={sigma_min}, "
                          f"sigma_max={sigma_max}")
    check_real(rho, "rho", 0.01, 1000.0)        # 1/rho and the power overflow far outside (EDM's rho is 7)
    n = int(n_steps)
    frac = torch.arange(n, dtype=torch.float64) / max(n - 1, 1)                  # (N,) in [0, 1]
    lo, hi = sigma_min ** (1.0 / rho), sigma_max ** (1.0 / rho)
    sigmas = (hi + frac * (lo - hi)) ** rho                                      # (N,)
    sigmas[0], sigmas[-1] = sigma_max, (sigma_min if n > 1 else sigma_max)       # exact ends
    return torch.cat([sigmas, torch.zeros(1, dtype=torch.float64)])             # (N + 1,)


# ---------------------------------------------------------------------------------------------
# Integrator
# ---------------------------------------------------------------------------------------------

def _denoise(D, x, sigma):
    """D(x, σ) with σ broadcast to (B,); checks the returned shape. x: (B, D)."""
    s = torch.full((x.shape[0],), float(sigma), dtype=x.dtype, device=x.device)  # (B,)
    out = D(x, s)
    if not torch.is_tensor(out) or out.shape != x.shape:
        shape = tuple(out.shape) if torch.is_tensor(out) else type(out).__name__
        raise DataError(f"the denoiser returned {shape} for input {tuple(x.shape)}; "
                        "it must return a tensor of the same shape (B, D)")
    return out.to(x.dtype)


def _step(D, x, sigma, sigma_next, solver):
    """One PF-ODE step from sigma to sigma_next (Euler, plus Heun's correction if sigma_next > 0)."""
    d = (x - _denoise(D, x, sigma)) / sigma                                      # dx/dσ at σ
    x_next = x + (sigma_next - sigma) * d                                        # Euler step
    if solver == "heun" and sigma_next > 0:
        d_next = (x_next - _denoise(D, x_next, sigma_next)) / sigma_next         # dx/dσ at σ'
        x_next = x + (sigma_next - sigma) * (0.5 * d + 0.5 * d_next)             # trapezoid
    return x_next


def fitting_rows(free_bytes, bytes_per_row, n_rows, share=0.25, least=256, multiple=1):
    """Rows per chunk that keep `share` of `free_bytes` for one forward at `bytes_per_row`: at least
    `least`, a multiple of `multiple` (a stack's K); None when all n_rows fit at once."""
    rows = int(free_bytes * share // max(bytes_per_row, 1))
    if rows >= n_rows:
        return None
    return max(least, rows) // multiple * multiple or multiple


def auto_chunk_rows(D, x0, sigma, probe_rows=256):
    """chunk_size="auto": off CUDA AUTO_CPU_ROWS; on CUDA the rows that a quarter of the free memory
    holds, from the peak memory of one forward of D on `probe_rows` rows of x0 (None: all fit). On
    CUDA it resets the device's peak-memory statistics (torch.cuda.reset_peak_memory_stats)."""
    from scoreprobe.models.stack import stack_size
    k = stack_size(D)                                    # a StackedDenoiser's rows come in groups of K
    if x0.device.type != "cuda":
        return max(k, AUTO_CPU_ROWS // k * k)
    dev, probe = x0.device, x0[:max(k, probe_rows // k * k)]
    torch.cuda.synchronize(dev)
    base = torch.cuda.memory_allocated(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    _denoise(D, probe, sigma)
    per_row = (torch.cuda.max_memory_allocated(dev) - base) / len(probe)
    free, _ = torch.cuda.mem_get_info(dev)
    return fitting_rows(free, per_row, len(x0), least=len(probe), multiple=k)


def _chunks(n, chunk_size):
    if chunk_size is None:
        return [slice(0, n)]
    if int(chunk_size) != chunk_size or chunk_size < 1:
        raise ConfigError(f"chunk_size must be a positive integer, None or \"auto\", got {chunk_size!r}")
    return [slice(i, min(i + int(chunk_size), n)) for i in range(0, n, int(chunk_size))]


def resolve_solver(solver):
    """`solver=` of integrate, sample and the probes -> (name, EngineSettings or None).

    "adaptive" is the engine with its default tolerances, an `engine.EngineSettings` (or a dict of
    its fields) the engine with those; "heun" and "euler" the fixed EDM grid of n_steps."""
    if isinstance(solver, (EngineSettings, dict)):
        return "adaptive", EngineSettings.of(solver)
    if not isinstance(solver, str) or solver not in SOLVERS:
        raise ConfigError(f"unknown solver {solver!r}; use one of {SOLVERS} or an engine.EngineSettings")
    return solver, (EngineSettings() if solver == "adaptive" else None)


def solver_config(solver, n_steps):
    """The store-config entries of an ODE setting: {solver, n_steps} on the fixed grid, {solver,
    engine: the tolerances} for the adaptive engine (n_steps does not enter it there)."""
    name, settings = resolve_solver(solver)
    edm_sigmas(n_steps)                                                         # checks n_steps
    return {"solver": name, "n_steps": int(n_steps)} if settings is None else {"solver": name, "engine": settings.spec()}


def finer(solver, n_steps):
    """The convergence check's tighter setting: (solver, 2·n_steps) on the fixed grid; the engine
    with rtol and atol / 10 and decide_tol / 2 (same n_steps, unused)."""
    from dataclasses import replace
    name, settings = resolve_solver(solver)
    if settings is None:
        return name, 2 * int(n_steps)
    return replace(settings, rtol=settings.rtol / 10, atol=settings.atol / 10,
                   decide_tol=settings.decide_tol / 2), int(n_steps)


def describe_solver(solver, n_steps):
    """One phrase for messages: "32 Heun steps" or "the adaptive engine (bs3, rtol 0.005, ...)"."""
    name, settings = resolve_solver(solver)
    if settings is None:
        return f"{int(n_steps)} {'Heun' if name == 'heun' else 'Euler'} steps"
    extra = "".join(f", {name.replace('_', ' ')} {getattr(settings, name):g}" for name in ("sigma_knee", "safety")
                    if name in settings.spec())
    return (f"the adaptive engine ({settings.pair}, rtol {settings.rtol:g}, atol {settings.atol:g}, "
            f"decide_tol {settings.decide_tol:g}, patience {settings.patience}{extra})")


def _fixed_grid(D, x0, sigmas, solver, chunk_size, callback, progress):
    """The fixed EDM grid: x0 (B, D) along `sigmas` (a list ending in 0) -> endpoints (B, D)."""
    rows = _chunks(x0.shape[0], chunk_size)
    x = x0
    if callback is not None:
        callback(0, sigmas[0], x)
    disable = None if progress is None else not progress
    for i in tqdm(range(len(sigmas) - 1), desc="PF-ODE", disable=disable, leave=False):
        sigma, sigma_next = sigmas[i], sigmas[i + 1]
        x = torch.cat([_step(D, x[r], sigma, sigma_next, solver) for r in rows])  # (B, D)
        if callback is not None:
            callback(i + 1, sigma_next, x)
    return x


def _fixed_result(x, n_steps, solver):
    """An engine.EngineResult for the fixed grid: every row took the same n_steps, none decided early."""
    b = x.shape[0]
    nfe = 2 * n_steps - 1 if solver == "heun" else n_steps
    zeros = np.zeros(b, dtype=np.int64)
    status = np.where((~torch.isfinite(x)).flatten(1).any(dim=1).cpu().numpy(), STATUS.index("non_finite"), 0)
    return EngineResult(x, np.zeros(b), np.full(b, nfe, dtype=np.int64), np.full(b, n_steps, dtype=np.int64),
                        zeros, status.astype(np.int8))


def _warn_spent(res):
    n = int(np.count_nonzero(res.status == 1))
    if n:
        warnings.warn(f"{n} of {len(res.status)} PF-ODE rows used up max_steps before σ_min: their endpoint "
                      "is D(x, σ) where they stopped; loosen rtol/atol or raise max_steps", ScoreprobeWarning,
                      stacklevel=4)


@torch.no_grad()
def integrate(D, x0, sigma_start, n_steps=DEFAULT_N_STEPS, solver=DEFAULT_SOLVER, chunk_size=None, callback=None,
              progress=None, *, sigma_min=0.002, rho=7.0, info=False):
    """Integrate the PF-ODE dx/dσ = (x - D(x, σ))/σ from σ = sigma_start down to 0.

    solver="adaptive" (the default) runs `scoreprobe.ode.engine.solve`: per-row adaptive steps and
    per-row early decision (a decided row ends on its vertex; docs/definitions.md, "The adaptive
    engine"); n_steps is not used. solver="heun" / "euler" run the fixed grid
    `edm_sigmas(n_steps, min(sigma_min, sigma_start), sigma_start, rho)`, i.e. the EDM schedule
    restricted to [σ_min, σ_start], then a last (Euler) step to σ = 0.
    Non-finite values returned by D are not an error: they propagate to the endpoints, which
    the endpoint classification later labels `invalid`; a NonFiniteWarning gives their count.

    Parameters
    ----------
    D : callable D(x (B, D), sigma (B,)) -> (B, D), a denoiser.
    x0 : (B, D) float tensor, the starting points at noise level sigma_start (signed space).
    sigma_start : float > 0.
    n_steps : int >= 1, number of fixed-grid steps (Heun uses 2·n_steps - 1 denoiser calls per row).
    solver : "adaptive", "heun", "euler", or an engine.EngineSettings (or dict of its fields): the
        engine with those tolerances.
    chunk_size : int, None (the whole batch) or "auto" (`auto_chunk_rows`: AUTO_CPU_ROWS off CUDA, from
        the free memory on CUDA), rows passed to D at once.
    callback : fixed grid only: callable called as callback(i, sigma_i, x_i) for i = 0..n_steps with
        x_i (B, D) the state at noise level sigma_i (x_0 = x0, x_n = the endpoint, sigma_n = 0).
        x_i is not modified afterwards, so keeping a reference records the trajectory.
    progress : fixed grid only: None (a bar on terminals only), True or False.
    sigma_min, rho : float, schedule parameters (keyword only; rho: fixed grid only).
    info : return the engine.EngineResult (endpoints plus per-row decided σ, NFE, steps, status).

    Returns
    -------
    x : (B, D) tensor like x0, the endpoints at σ = 0 (not thresholded); or an EngineResult.
    """
    name, settings = resolve_solver(solver)
    if not torch.is_tensor(x0) or x0.ndim != 2 or not x0.is_floating_point():
        raise DataError("x0 must be a floating-point torch tensor of shape (B, D)")
    sigma_start = check_real(sigma_start, "sigma_start", 0.0, MAX_SIGMA)   # limits.MAX_SIGMA: float32 overflows past it
    if not sigma_start > 0:
        raise ConfigError(f"sigma_start must be positive and finite, got {sigma_start}")
    sigmas = edm_sigmas(n_steps, min(sigma_min, sigma_start), sigma_start, rho).tolist()
    if chunk_size == "auto":
        chunk_size = auto_chunk_rows(D, x0, sigmas[0])
    _chunks(x0.shape[0], chunk_size)                                            # checks chunk_size
    if settings is not None:
        if callback is not None:
            raise ConfigError("callback= needs a fixed-grid solver (solver='heun' or 'euler'): the "
                              "adaptive engine's rows have no shared steps")
        from scoreprobe.models.stack import stack_size
        res = solve(D, x0, sigma_start, settings, sigma_min=min(sigma_min, sigma_start),
                    chunk_size=chunk_size, k=stack_size(D))
        _warn_spent(res)
    else:
        res = _fixed_result(_fixed_grid(D, x0, sigmas, name, chunk_size, callback, progress), int(n_steps), name)
    warn_nonfinite_rows(res.x, "PF-ODE endpoints", "they propagate as NaN and are classified `invalid`")
    return res if info else res.x


def _infer_dim(D, dim):
    if dim is not None:
        return int(dim)
    for attr in ("dim", "n_bits"):
        value = getattr(D, attr, None)
        if isinstance(value, (int, np.integer)):
            return int(value)
    raise ConfigError("cannot tell the data dimension of this denoiser (it has no integer `.dim`"
                      " or `.n_bits`); pass dim=D to sample()")


def resolve_device(device=None, D=None):
    """The torch device to run on: "auto" -> CUDA when available, else CPU; an explicit name is
    checked (asking for CUDA where there is none is a ConfigError); None -> the denoiser's own device
    (its `.device` or a parameter's), else CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device is not None:
        try:
            device = torch.device(device)
        except (RuntimeError, TypeError, ValueError):
            raise ConfigError(f"unknown device {device!r}; use cpu, cuda, cuda:N or auto") from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ConfigError(f"device {device} asked for, but CUDA is not available here; use cpu")
        return device
    if getattr(D, "device", None) is not None:
        return torch.device(D.device)
    if isinstance(D, torch.nn.Module):
        for p in D.parameters():
            return p.device
    return torch.device("cpu")


def sample(D, n, seed, n_steps=DEFAULT_N_STEPS, sigma_max=80.0, chunk_size=None, device=None,
           dtype=torch.float32, *, dim=None, solver=DEFAULT_SAMPLE_SOLVER, sigma_min=0.002, rho=7.0,
           callback=None, progress=None):
    """Draw n samples by integrating the PF-ODE from σ_max·ε, ε ~ N(0, I) per sample index.

    Sample i starts from sigma_max·randn_per_sample(seed, [i], dim), so it is the same for any
    n > i, chunk size or device (up to the denoiser's own floating-point differences).

    Parameters
    ----------
    D : denoiser callable; its dimension is read from `D.dim` (or `D.n_bits`) unless dim is given.
    n : int >= 1, number of samples. seed : int.
    n_steps, solver, sigma_min, rho, chunk_size, callback, progress : as in `integrate`.
    sigma_max : float, the starting noise level.
    device : torch device (default: D.device, a module's parameter device, else CPU).
    dtype : torch float dtype of the computation.
    dim : int or None, the data dimension D.

    Returns
    -------
    x : (n, D) tensor of `dtype` on `device`, signed endpoints (threshold with `to_bits`).
    """
    d = _infer_dim(D, dim)
    n = check_rows(int(n) if isinstance(n, float) and n.is_integer() else n, d, "n_samples")  # limits.MAX_SAMPLES
    check_seed(seed)
    edm_sigmas(n_steps)   # n_steps checked before the noise is drawn
    device = resolve_device(device, D)
    x0 = float(sigma_max) * randn_per_sample(seed, np.arange(int(n)), d, dtype=dtype,
                                             device=device)                      # (n, D)
    return integrate(D, x0, sigma_max, n_steps=n_steps, solver=solver, chunk_size=chunk_size,
                     callback=callback, progress=progress, sigma_min=sigma_min, rho=rho)
