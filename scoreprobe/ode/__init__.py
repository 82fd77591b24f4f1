"""The probability-flow ODE, one file per part (as torchdiffeq's `_impl/` and diffrax's `_solver/`):

    integrator.py   the EDM σ schedule, the fixed-grid Heun/Euler steps and `integrate`, the front
                    door that dispatches to a solver; `sample` from σ_max
    engine.py       the adaptive engine: per-row steps, early decision, batch compaction
    tableaux.py     the embedded Runge–Kutta pairs the engine steps with, and its step controller
    samplers.py     the samplers (deterministic PF-ODE, EDM stochastic, DDIM, ancestral) behind `sp.sample`

The PF-ODE of a denoiser D in the EDM parameterization is dx/dσ = (x - D(x, σ))/σ.
"""
from scoreprobe.ode.integrator import (AUTO_CPU_ROWS, NOISE, SOLVERS, auto_chunk_rows, describe_solver,
                                       edm_sigmas, finer, fitting_rows, integrate, randn_per_sample,
                                       resolve_device, resolve_solver, sample, solver_config)

__all__ = ["AUTO_CPU_ROWS", "NOISE", "SOLVERS", "auto_chunk_rows", "describe_solver", "edm_sigmas", "finer",
           "fitting_rows", "integrate", "randn_per_sample", "resolve_device", "resolve_solver", "sample",
           "solver_config"]
