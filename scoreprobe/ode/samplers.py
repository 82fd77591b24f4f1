"""Sampler variants: the deterministic PF-ODE (`ode.integrate`), EDM's stochastic sampler, DDIM-η.

`sample(D, n, seed, sampler=...)` (the public `sp.sample`) draws n samples from σ_max·ε with one
of the samplers of SAMPLERS, described by a `Sampler`:

- "heun", "euler": the deterministic PF-ODE of `scoreprobe.ode` (Heun is the default everywhere).
- "edm-stochastic": Karras et al. (2022), Algorithm 2. On the EDM steps σ_0 > ... > σ_{N-1} > σ_N = 0,
  with γ_i = min(S_churn/N, √2 − 1) where S_tmin ≤ σ_i ≤ S_tmax (else 0):
      σ̂ = σ_i (1 + γ_i),   x̂ = x_i + S_noise·sqrt(σ̂² − σ_i²)·z_i,
  then one Heun step of the PF-ODE from (x̂, σ̂) to σ_{i+1} (Euler on the last step to 0).
  With γ_i = 0 the step is the deterministic Heun step itself, so S_churn = 0 is Heun exactly.
- "ddim" (parameter η in [0, 1]) and "ancestral" (η = 1): DDIM-η (Song et al. 2021) written in the
  variance-exploding parameterization x = x0 + σ·ε; with x̂0 = D(x_i, σ_i), ε̂ = (x_i − x̂0)/σ_i:
      s_up = η·σ_{i+1}·sqrt(1 − σ_{i+1}²/σ_i²),   σ_down = sqrt(σ_{i+1}² − s_up²),
      x_{i+1} = x̂0 + σ_down·ε̂ + s_up·z_i = x_i + (σ_down − σ_i)·ε̂ + s_up·z_i.
  η = 0 is the Euler step of the PF-ODE (DDIM = Euler); η = 1 samples the exact posterior
  q(x_{σ'} | x_σ, x0 = x̂0) of the VE forward process (ancestral sampling). The derivation from the
  VP form: docs/definitions.md, "Samplers".

The fresh noise z_i of step i for the sample of index m is randn_per_sample(stream_seed(seed, i), [m], D)
(`scoreprobe.noise`): a pure function of (seed, i, m), independent of the batch size, the chunk
size, the device and of the initial noise. Stores record `Sampler.config()`, so a store made with
one sampler is refused rather than extended with another.
"""
import math
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from scoreprobe.ode import integrator as ode
from scoreprobe.defaults import DEFAULT_N_STEPS, SAMPLE_ENGINE
from scoreprobe.ode.engine import EngineSettings
from scoreprobe.errors import ConfigError, DataError
from scoreprobe.limits import warn_nonfinite_rows
from scoreprobe.models.hooked import SigmaWindowHooks
from scoreprobe.noise import randn_per_sample, stream_seed

STOCHASTIC = ("edm-stochastic", "ddim", "ancestral")
SAMPLERS = ode.SOLVERS + STOCHASTIC
PARAMS = {"edm-stochastic": ("s_churn", "s_noise", "s_tmin", "s_tmax"), "ddim": ("eta",), "ancestral": ()}
DEFAULTS = {"s_noise": 1.0, "s_tmin": 0.0, "s_tmax": math.inf, "eta": 0.0}   # s_churn has none
API_NAMES = {p: p for p in ("s_churn", "s_noise", "s_tmin", "s_tmax", "eta")}


# ---------------------------------------------------------------------------------------------
# The description of a sampler
# ---------------------------------------------------------------------------------------------

def _number(value, name):
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a number, got {value!r}") from None
    if math.isnan(value):
        raise ConfigError(f"{name} must be a number, got nan")
    return value


def resolve_params(name, given, names=None):
    """The parameters of sampler `name` with defaults filled in, checked. given: {param: value or None}.

    names : how to call each parameter in messages (default API_NAMES; the CLI passes its options).
    Returns {param: float} for the parameters of `name` (PARAMS). ConfigError on a bad value, a
    parameter that does not apply to `name`, or s_churn missing for "edm-stochastic".
    """
    names = names or API_NAMES
    if name not in SAMPLERS:
        raise ConfigError(f"unknown sampler {name!r}; use one of {', '.join(SAMPLERS)}")
    own = PARAMS.get(name, ())
    extra = [p for p, v in given.items() if v is not None and p not in own]
    if extra == ["eta"] and name == "ancestral":
        raise ConfigError(f"the ancestral sampler is ddim with {names['eta']} 1; for another value use ddim")
    if extra:
        users = [s for s in STOCHASTIC if extra[0] in PARAMS[s]]
        raise ConfigError(f"{names[extra[0]]} does not apply to the {name} sampler"
                          + (f" (only to {' and '.join(users)})" if users else ""))
    out = {p: _number(given[p], names[p]) if given.get(p) is not None else DEFAULTS.get(p) for p in own}
    if name == "edm-stochastic":
        _check_edm(out, names)
    if name == "ddim" and not 0.0 <= out["eta"] <= 1.0:
        raise ConfigError(f"{names['eta']} must lie in [0, 1] (1 is ancestral sampling), got {out['eta']:g}")
    return out


def _check_edm(p, names):
    if p["s_churn"] is None:
        raise ConfigError(f"the edm-stochastic sampler needs {names['s_churn']} (the churn, >= 0; EDM used 10 to 80, "
                          "and 0 is the deterministic Heun sampler)")
    if not 0.0 <= p["s_churn"] < math.inf:
        raise ConfigError(f"{names['s_churn']} must be finite and >= 0, got {p['s_churn']:g}")
    if not 0.0 < p["s_noise"] < math.inf:
        raise ConfigError(f"{names['s_noise']} must be finite and > 0 (EDM: 1 to 1.007), got {p['s_noise']:g}")
    if not 0.0 <= p["s_tmin"] < math.inf:
        raise ConfigError(f"{names['s_tmin']} must be finite and >= 0, got {p['s_tmin']:g}")
    if not p["s_tmax"] >= p["s_tmin"]:
        raise ConfigError(f"{names['s_tmax']} ({p['s_tmax']:g}) must be >= {names['s_tmin']} ({p['s_tmin']:g})")


@dataclass(frozen=True)
class Sampler:
    """A sampler and its parameters (module doc). Unset parameters take their defaults: S_noise 1,
    S_tmin 0, S_tmax inf, η 0 (ddim); "ancestral" is η = 1; "edm-stochastic" needs s_churn.
    `engine` (an `engine.EngineSettings` or a dict of its fields) applies to "adaptive" only: the
    engine's settings for sampling from σ_max, by default `defaults.SAMPLE_ENGINE` (docs/definitions.md,
    "The adaptive engine as sampler"). Giving a parameter that does not apply to `name` is a ConfigError."""
    name: str = "heun"
    s_churn: float = None
    s_noise: float = None
    s_tmin: float = None
    s_tmax: float = None
    eta: float = None
    engine: object = None

    def __post_init__(self):
        given = {p: getattr(self, p) for p in API_NAMES}
        for p, value in resolve_params(self.name, given).items():
            object.__setattr__(self, p, value)
        if self.name == "ancestral":
            object.__setattr__(self, "eta", 1.0)
        if self.name == "adaptive":
            object.__setattr__(self, "engine", EngineSettings.of(SAMPLE_ENGINE if self.engine is None else self.engine))
        elif self.engine is not None:
            raise ConfigError(f"engine settings apply to the adaptive sampler only, not to {self.name!r}")

    @property
    def solver(self):
        """What `ode.integrate` takes as `solver=` for a deterministic sampler: its name, or the engine's settings."""
        return self.engine if self.name == "adaptive" else self.name

    @property
    def deterministic(self):
        """True for the PF-ODE solvers (integrated by `ode.integrate`)."""
        return self.name not in STOCHASTIC

    def config(self):
        """The JSON-able record stores keep: {"name": ..., and the parameters of this sampler}
        (S_tmax = inf is recorded as null: no upper bound)."""
        out = {"name": self.name, **{p: getattr(self, p) for p in PARAMS.get(self.name, ())}}
        if self.name == "ancestral":
            out["eta"] = 1.0
        if self.name == "adaptive":   # the engine's settings: a retuned engine is another sampler
            out["engine"] = self.engine.spec()
        if out.get("s_tmax") == math.inf:
            out["s_tmax"] = None
        return out

    def describe(self):
        """One line for people: 'Heun PF-ODE', 'EDM stochastic (S_churn 40, ...)', 'DDIM (eta 0.5)'."""
        if self.name == "adaptive":
            return f"PF-ODE by {ode.describe_solver(self.engine, 1)}"
        if self.deterministic:
            return f"{self.name.capitalize()} PF-ODE"
        if self.name == "edm-stochastic":
            return (f"EDM stochastic (S_churn {self.s_churn:g}, S_noise {self.s_noise:g}, S_tmin {self.s_tmin:g}, "
                    f"S_tmax {self.s_tmax:g}), Heun steps")
        return "ancestral (DDIM, eta 1)" if self.name == "ancestral" else f"DDIM (eta {self.eta:g})"


def as_sampler(sampler=None, solver="heun"):
    """A Sampler from None (the deterministic PF-ODE with `solver`), a name, a dict of its fields, an
    `engine.EngineSettings` (the adaptive sampler with those settings) or a Sampler. A name or Sampler
    for a deterministic solver must agree with `solver` unless that is the default "heun"."""
    if sampler is None:
        return Sampler(solver)
    if isinstance(sampler, EngineSettings):
        sampler = Sampler("adaptive", engine=sampler)
    elif isinstance(sampler, str):
        sampler = Sampler(sampler)
    elif isinstance(sampler, dict):
        sampler = Sampler(**sampler)
    elif not isinstance(sampler, Sampler):
        raise ConfigError(f"sampler must be a name ({', '.join(SAMPLERS)}), a dict, an EngineSettings or a Sampler, "
                          f"got {type(sampler).__name__}")
    if solver != "heun" and sampler.name != solver:
        raise ConfigError(f"solver={solver!r} and sampler={sampler.name!r} disagree; give one of them")
    return sampler


# ---------------------------------------------------------------------------------------------
# The stochastic steps
# ---------------------------------------------------------------------------------------------

def step_noise(seed, step, index, d, like):
    """z (B, d) of ODE step `step` for rows with sample indices `index` (B,), dtype/device of `like`."""
    return randn_per_sample(stream_seed(seed, step), index, d, dtype=like.dtype, device=like.device)


def churn_gamma(sampler, sigma, n_steps):
    """EDM's γ_i at noise level sigma: min(S_churn/N, √2 − 1) inside [S_tmin, S_tmax], else 0."""
    if sampler.s_tmin <= sigma <= sampler.s_tmax:
        return min(sampler.s_churn / n_steps, math.sqrt(2.0) - 1.0)
    return 0.0


def _edm_step(D, x, sigma, sigma_next, gamma, s_noise, z):
    """One step of Algorithm 2 on rows x (B, D): churn to σ̂ = σ(1 + γ), then Heun to sigma_next."""
    sigma_hat = sigma * (1.0 + gamma)
    if gamma > 0:
        x = x + (s_noise * math.sqrt(sigma_hat ** 2 - sigma ** 2)) * z                # (B, D)
    return ode._step(D, x, sigma_hat, sigma_next, "heun")


def ddim_scales(eta, sigma, sigma_next):
    """(σ_down, s_up) of the DDIM-η step from sigma to sigma_next (module doc); s_up = 0 gives σ_down = σ'."""
    s_up = eta * sigma_next * math.sqrt(max(0.0, 1.0 - (sigma_next / sigma) ** 2))
    if s_up == 0.0:
        return sigma_next, 0.0
    return math.sqrt(max(0.0, sigma_next ** 2 - s_up ** 2)), s_up


def _ddim_step(D, x, sigma, sigma_next, eta, z):
    """x_{i+1} = x + (σ_down − σ)·ε̂ + s_up·z on rows x (B, D); η = 0 is ode's Euler step exactly."""
    sigma_down, s_up = ddim_scales(eta, sigma, sigma_next)
    x_next = ode._step(D, x, sigma, sigma_down, "euler")                              # (B, D)
    return x_next + s_up * z if s_up > 0 else x_next


def _one_step(D, x, i, sigmas, sampler, z):
    """Step i (sigmas[i] -> sigmas[i + 1]) of a stochastic sampler on rows x (B, D) with noise z (B, D)."""
    if sampler.name == "edm-stochastic":
        gamma = churn_gamma(sampler, sigmas[i], len(sigmas) - 1)
        return _edm_step(D, x, sigmas[i], sigmas[i + 1], gamma, sampler.s_noise, z)
    return _ddim_step(D, x, sigmas[i], sigmas[i + 1], sampler.eta, z)


def _needs_noise(sampler, sigmas, i):
    if sampler.name == "edm-stochastic":
        return churn_gamma(sampler, sigmas[i], len(sigmas) - 1) > 0
    return ddim_scales(sampler.eta, sigmas[i], sigmas[i + 1])[1] > 0


@torch.no_grad()
def integrate_with(D, x0, sigma_start, sampler, seed, index=None, n_steps=DEFAULT_N_STEPS, chunk_size=None,
                   callback=None, progress=None, *, sigma_min=0.002, rho=7.0):
    """Integrate from x0 at sigma_start down to 0 with `sampler` (a Sampler, name or dict).

    Deterministic samplers are `ode.integrate` (the same steps, the same numbers). Stochastic ones
    take the same EDM steps and draw the noise of step i for row b from (seed, i, index[b]).

    Parameters
    ----------
    x0 : (B, D) float tensor at noise level sigma_start. seed : int, the noise streams' seed.
    index : (B,) ints, the sample index of each row (default 0..B-1); rows with equal indices get
        equal noise (the K copies of a sample in a stacked denoiser).
    n_steps, chunk_size, callback, progress, sigma_min, rho : as in `ode.integrate`.

    Returns
    -------
    x : (B, D) tensor like x0, the endpoints at σ = 0 (not thresholded).
    """
    sampler = as_sampler(sampler)
    if sampler.deterministic:
        return ode.integrate(D, x0, sigma_start, n_steps=n_steps, solver=sampler.solver, chunk_size=chunk_size,
                             callback=callback, progress=progress, sigma_min=sigma_min, rho=rho)
    sigmas, index = _check_inputs(x0, sigma_start, index, n_steps, sigma_min, rho)
    if chunk_size == "auto":
        chunk_size = ode.auto_chunk_rows(D, x0, sigmas[0])
    rows, x = ode._chunks(x0.shape[0], chunk_size), x0
    if callback is not None:
        callback(0, sigmas[0], x)
    for i in tqdm(range(len(sigmas) - 1), desc=sampler.name, disable=None if progress is None else not progress,
                  leave=False):
        z = step_noise(seed, i, index, x.shape[1], x) if _needs_noise(sampler, sigmas, i) else None   # (B, D)
        x = torch.cat([_one_step(D, x[r], i, sigmas, sampler, None if z is None else z[r]) for r in rows])
        if callback is not None:
            callback(i + 1, sigmas[i + 1], x)
    warn_nonfinite_rows(x, "sampled endpoints", "they propagate as NaN and are classified `invalid`")
    return x


def _check_inputs(x0, sigma_start, index, n_steps, sigma_min, rho):
    """(sigmas as a list, index (B,) numpy) for `integrate_with`; ConfigError / DataError on bad input."""
    if not torch.is_tensor(x0) or x0.ndim != 2 or not x0.is_floating_point():
        raise DataError("x0 must be a floating-point torch tensor of shape (B, D)")
    sigma_start = float(sigma_start)
    if not 0 < sigma_start < float("inf"):
        raise ConfigError(f"sigma_start must be positive and finite, got {sigma_start}")
    index = np.arange(x0.shape[0]) if index is None else np.asarray(index).reshape(-1)
    if index.shape != (x0.shape[0],):
        raise DataError(f"index must hold one sample index per row of x0 ({x0.shape[0]}), got {index.shape}")
    return ode.edm_sigmas(n_steps, min(sigma_min, sigma_start), sigma_start, rho).tolist(), index


def sample(D, n, seed, n_steps=DEFAULT_N_STEPS, sigma_max=80.0, chunk_size=None, device=None,
           dtype=torch.float32, *, dim=None, solver="heun", sampler=None, sigma_min=0.002, rho=7.0,
           callback=None, progress=None, fwd_hooks=None, sigma_window=None):
    """Draw n samples from σ_max·ε, ε ~ N(0, I) per sample index, with `sampler` (default: the Heun PF-ODE).

    As `ode.sample`, plus `sampler`: None (the deterministic PF-ODE with `solver`), a name of
    SAMPLERS, a dict of `Sampler` fields or a Sampler, e.g.
    `sample(D, 1000, 0, sampler=Sampler("edm-stochastic", s_churn=40, s_noise=1.007))`.
    Sample i depends only on (seed, i) and the sampler: the same for any n > i, chunk size or device
    (up to the denoiser's own floating-point differences).

    fwd_hooks : [(name_or_filter, fn(activation, name) -> tensor or None), ...] as `run_with_hooks`, applied to every
        evaluation of D whose σ lies in `sigma_window` = (lo, hi) (ends included; None: every σ). The Heun step
        evaluates D at σ_i and σ_{i+1}: each evaluation is hooked by its own σ (models.hooked.SigmaWindowHooks).

    Returns
    -------
    x : (n, D) tensor of `dtype` on `device`, signed endpoints (threshold with `to_bits`).
    """
    if fwd_hooks is not None:
        D = SigmaWindowHooks(D, fwd_hooks, sigma_window)
    elif sigma_window is not None:
        raise ConfigError("sigma_window= needs fwd_hooks= (the hooks to apply inside the window)")
    spec = as_sampler(sampler, solver)
    kw = dict(n_steps=n_steps, sigma_max=sigma_max, chunk_size=chunk_size, device=device, dtype=dtype, dim=dim,
              sigma_min=sigma_min, rho=rho, callback=callback, progress=progress)
    if spec.deterministic:
        return ode.sample(D, n, seed, solver=spec.solver, **kw)
    if int(n) != n or n < 1:
        raise ConfigError(f"n must be a positive integer, got {n!r}")
    d, device = ode._infer_dim(D, dim), ode.resolve_device(device, D)
    x0 = float(sigma_max) * randn_per_sample(seed, np.arange(int(n)), d, dtype=dtype, device=device)   # (n, D)
    return integrate_with(D, x0, sigma_max, spec, seed, n_steps=n_steps, chunk_size=chunk_size, callback=callback,
                          progress=progress, sigma_min=sigma_min, rho=rho)
