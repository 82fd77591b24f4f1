"""Patching along the PF-ODE: does a site decide which basin a trajectory ends in?

A clean and a corrupt trajectory start at σ_start from y_c + σ_start·ε and y_r + σ_start·ε (one ε per
pair) and are integrated together on one fixed Heun grid (`scoreprobe.ode.integrate`), so every
evaluation of the corrupt row has a clean twin at the same σ. At every evaluation with σ ≤ σ*,
the corrupt row runs with the site's activations taken from its clean twin. The endpoint's basin is
its vertex (signs); the *basin-flip fraction* is the share of pairs whose patched corrupt endpoint
lies in another basin than the unpatched one, and `to_clean` the share that ends in the clean
trajectory's basin.
"""
import numpy as np
import torch
import xarray as xr

from scoreprobe.data.datasets import to_bits
from scoreprobe.errors import ConfigError
from scoreprobe.inside.hooks import hook_points, network_of
from scoreprobe.inside.patch import _needed, capture, pair_inputs, patched_output
from scoreprobe.inside.sites import parse_site, resolve_sites
from scoreprobe.ode import integrate


class PairedPatch:
    """Denoiser over interleaved rows (clean_0, corrupt_0, clean_1, ...) (2B, D): clean rows run
    plainly, corrupt rows with `site` taken from their clean twin where σ ≤ sigma_star."""

    def __init__(self, D, site, sigma_star):
        self.D, self.net = D, network_of(D)[0]
        self.site, self.sigma_star = site, float(sigma_star)
        self.dim = D.dim

    def __call__(self, x, sigma):
        """x (2B, D), sigma (2B,) -> (2B, D)."""
        sigma = torch.as_tensor(sigma, dtype=x.dtype, device=x.device).reshape(-1).expand(len(x))
        xc, xr, s = x[0::2], x[1::2], sigma[0::2]
        out = torch.empty_like(x)
        with torch.no_grad():
            out_c, acts = capture(self.D, self.net, xc, s, _needed([self.site]))
            out[0::2] = out_c
            on = s <= self.sigma_star                                           # (B,)
            plain = self.D(xr, s) if not on.all() else None
            patched = patched_output(self.D, self.net, xr, s, self.site, acts) if on.any() else None
            out[1::2] = patched if plain is None else (plain if patched is None else
                                                       torch.where(on[:, None], patched, plain))
        return out


def patch_ode(D, clean, corrupt, sites, sigma_star=None, sigma_start=1.0, n_steps=18, seed=0):
    """Basin flips from patching a site at every PF-ODE evaluation with σ ≤ σ*.

    Parameters
    ----------
    D : a denoiser wrapping a DiT.  clean, corrupt : (B, D) vertices (0/1 or ±1), pairs by row.
    sites : labels or Sites (inside.sites), each patched in its own integration.
    sigma_star : patch where σ ≤ sigma_star (default sigma_start: every evaluation).
    sigma_start, n_steps : the fixed Heun grid edm_sigmas(n_steps, 0.002, sigma_start) then σ = 0.
    seed : the shared noise ε of pair b (scoreprobe.noise, per sample index).

    Returns
    -------
    xarray.Dataset: `flip` and `to_clean` (site, sample) bool; `flip_fraction`, `to_clean_fraction`
    (site); `same_basin_unpatched` (sample): the clean and corrupt trajectories end in one basin
    without patching; attrs sigma_star, sigma_start, n_steps, solver "heun".
    """
    net, kind = network_of(D)
    if kind != "dit":
        raise ConfigError("patch_ode takes a denoiser wrapping a DiT")
    site_list = resolve_sites(net, sites)
    sigma_star = float(sigma_start if sigma_star is None else sigma_star)
    if not (sigma_star > 0 and sigma_start > 0):
        raise ConfigError("sigma_star and sigma_start must be positive")
    xc, x_r, _, _ = pair_inputs(D, clean, corrupt, sigma_start, seed)
    x0 = torch.stack([xc, x_r], dim=1).reshape(2 * len(xc), -1)                  # (2B, D) interleaved
    none = parse_site("none", hook_points(net))
    base = to_bits(integrate(PairedPatch(D, none, 0.0), x0, sigma_start, n_steps, solver="heun",
                             progress=False)).cpu().numpy()
    end_c, end_r = base[0::2], base[1::2]
    flip = np.zeros((len(site_list), len(xc)), bool)
    to_clean = np.zeros_like(flip)
    for i, site in enumerate(site_list):
        ends = to_bits(integrate(PairedPatch(D, site, sigma_star), x0, sigma_start, n_steps, solver="heun",
                                 progress=False)).cpu().numpy()[1::2]
        flip[i] = (ends != end_r).any(1)
        to_clean[i] = (ends == end_c).all(1)
    return xr.Dataset(
        {"flip": (("site", "sample"), flip, {"long_name": "patched corrupt endpoint in another basin"}),
         "to_clean": (("site", "sample"), to_clean, {"long_name": "patched corrupt endpoint in the clean basin"}),
         "flip_fraction": ("site", flip.mean(1), {"units": "1", "long_name": "basin-flip fraction"}),
         "to_clean_fraction": ("site", to_clean.mean(1), {"units": "1"}),
         "same_basin_unpatched": ("sample", (end_c == end_r).all(1))},
        coords={"site": [s.label for s in site_list], "sample": np.arange(len(xc))},
        attrs={"sigma_star": sigma_star, "sigma_start": float(sigma_start), "n_steps": int(n_steps),
               "solver": "heun", "seed": int(seed)})
