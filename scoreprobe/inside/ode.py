"""Patching along the PF-ODE: does a site decide which basin a trajectory ends in?

A clean and a corrupt trajectory start at σ_start from y_c + σ_start·ε and y_r + σ_start·ε (one ε per
pair) and are integrated together on one fixed Heun grid (`scoreprobe.ode.integrate`), so every
evaluation of the corrupt row has a clean twin at the same σ. At every evaluation with σ ≤ σ*,
the corrupt row runs with the site's activations taken from its clean twin. The endpoint's basin is
its vertex (signs). Outcomes are counted only over the pairs whose clean and corrupt trajectories end
in *different* basins unpatched (`apart`): there the patched corrupt endpoint lands in exactly one of
the clean basin (`to_clean`), the unpatched corrupt basin (`to_corrupt`: no flip) or another basin
(`to_third`), and the three shares sum to 1. Pairs that end together unpatched cannot tell "to clean"
from "stayed": they are left out of the shares and counted apart (`n_together`, and how many of them
the patch moved anyway, `together_moved`).
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


def outcomes(end_clean, end_corrupt, ends):
    """Outcome masks of patched corrupt endpoints. end_clean, end_corrupt (B, D) unpatched endpoints (bits);
    ends (S, B, D) patched corrupt endpoints per site -> dict of bool arrays: to_clean, to_corrupt, to_third
    (S, B) and apart (B,) (the unpatched pair ends in two basins; only there are the three exclusive)."""
    to_clean = (ends == end_clean[None]).all(-1)                                 # (S, B)
    to_corrupt = (ends == end_corrupt[None]).all(-1)
    apart = ~(end_clean == end_corrupt).all(-1)                                 # (B,)
    return {"to_clean": to_clean, "to_corrupt": to_corrupt, "to_third": ~to_clean & ~to_corrupt, "apart": apart}


def _shares(o):
    """(site,) shares over the apart pairs (NaN: none apart), and the together pairs the patch moved."""
    n = int(o["apart"].sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        share = {k: (o[k] & o["apart"]).sum(1) / n if n else np.full(len(o[k]), np.nan)
                 for k in ("to_clean", "to_corrupt", "to_third")}
    return share, n, (~o["to_corrupt"] & ~o["apart"]).sum(1)


def patch_ode(D, clean, corrupt, sites, sigma_star=None, sigma_start=1.0, n_steps=18, seed=0):
    """Where patching a site at every PF-ODE evaluation with σ ≤ σ* sends the corrupt trajectory.

    Parameters
    ----------
    D : a denoiser wrapping a DiT.  clean, corrupt : (B, D) vertices (0/1 or ±1), pairs by row.
    sites : labels or Sites (inside.sites), each patched in its own integration.
    sigma_star : patch where σ ≤ sigma_star (default sigma_start: every evaluation).
    sigma_start, n_steps : the fixed Heun grid edm_sigmas(n_steps, 0.002, sigma_start) then σ = 0.
    seed : the shared noise ε of pair b (scoreprobe.noise, per sample index).

    Returns
    -------
    xarray.Dataset. Per (site, sample) bool: `to_clean` (patched corrupt endpoint in the clean basin),
    `to_corrupt` (in the unpatched corrupt basin: not flipped), `to_third` (in neither), `flip` (= not
    to_corrupt). Per sample: `apart_unpatched` (clean and corrupt end in different basins unpatched),
    `same_basin_unpatched` (its negation). Per site, over the apart pairs only (NaN if none):
    `to_clean_share`, `to_corrupt_share`, `to_third_share` (they sum to 1); `together_moved` (count of
    together pairs whose patched endpoint left their shared basin). attrs n_apart, n_together, sigma_star,
    sigma_start, n_steps, solver "heun", seed.
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
    ends = np.stack([to_bits(integrate(PairedPatch(D, site, sigma_star), x0, sigma_start, n_steps, solver="heun",
                                       progress=False)).cpu().numpy()[1::2] for site in site_list])   # (S, B, D)
    o = outcomes(base[0::2], base[1::2], ends)
    share, n_apart, moved = _shares(o)
    ss, one = ("site", "sample"), {"units": "1"}
    return xr.Dataset(
        {"to_clean": (ss, o["to_clean"], {"long_name": "patched corrupt endpoint in the clean basin"}),
         "to_corrupt": (ss, o["to_corrupt"], {"long_name": "patched corrupt endpoint in the unpatched corrupt basin"}),
         "to_third": (ss, o["to_third"], {"long_name": "patched corrupt endpoint in neither basin"}),
         "flip": (ss, ~o["to_corrupt"], {"long_name": "patched corrupt endpoint in another basin than unpatched"}),
         "apart_unpatched": ("sample", o["apart"], {"long_name": "clean and corrupt end in two basins unpatched"}),
         "same_basin_unpatched": ("sample", ~o["apart"]),
         **{f"{k}_share": ("site", v, {**one, "long_name": f"share of the apart pairs {k.replace('_', ' ')} basin"})
            for k, v in share.items()},
         "together_moved": ("site", moved, {"long_name": "together pairs whose patched endpoint left their basin"})},
        coords={"site": [s.label for s in site_list], "sample": np.arange(len(xc))},
        attrs={"n_apart": n_apart, "n_together": int(len(xc) - n_apart), "sigma_star": sigma_star,
               "sigma_start": float(sigma_start), "n_steps": int(n_steps), "solver": "heun", "seed": int(seed)})
