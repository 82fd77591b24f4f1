"""Activation patching at one noise level, and its gradient approximation (attribution patching, AtP).

Pairs of clean images (vertices) y_c, y_r get the same noise: x_c = y_c + σε, x_r = y_r + σε. The
corrupt input x_r is run with the activations at a site replaced by those of the clean run. The
metric of an output d (B, D) is its projection on the difference of the two vertices,

    m(d) = ⟨d, y_c − y_r⟩ / ‖y_c − y_r‖²

and the effect of a site is (m(patched) − m(corrupt)) / (m(clean*) − m(corrupt)), 0 = the corrupt
output, 1 = clean*: the output when every activation of the network is the clean run's (the final
layer patched). clean* differs from D(x_c) only by the preconditioning's skip term c_skip·x, which
reads the input directly and no site inside the network can move (docs/inside.md).

AtP (Kramár et al. 2024): effect ≈ ⟨∂m/∂a |corrupt, a_clean − a_corrupt⟩ / (m(clean*) − m(corrupt)),
all sites from one forward and one backward; first-order, so it misses saturated softmaxes and
effects that cancel between entries; `confirm=k` patches the k sites it ranks highest for real.
"""
import numpy as np
import torch
import xarray as xr

from scoreprobe.data.datasets import to_signed
from scoreprobe.errors import ConfigError, DataError
from scoreprobe.inside.hooks import hook_points, installed, keepers, network_of
from scoreprobe.inside.sites import atp_numerators, resolve_sites, with_atoms
from scoreprobe.inside.cache import check_cache_size
from scoreprobe.inside.gpt_patch import gpt_patch
from scoreprobe.limits import MAX_SIGMA, check_int
from scoreprobe.noise import randn_per_sample

FINAL = "final.hook_out"


def vertices(y, dim, device):
    """(B, D) 0/1 integer bits or ±1 floats -> float32 signed vertices on `device`; DataError otherwise."""
    y = y if torch.is_tensor(y) else torch.as_tensor(np.asarray(y))
    if y.ndim != 2 or y.shape[1] != dim:
        raise DataError(f"expected images of shape (B, {dim}), got {tuple(y.shape)}")
    ok = torch.all(y.abs() == 1) if y.is_floating_point() else torch.all((y == 0) | (y == 1))
    if not ok:
        raise DataError("clean and corrupt must be vertices: integer 0/1 bits or ±1 floats")
    return (y.float() if y.is_floating_point() else to_signed(y)).to(device)


def pair_inputs(D, clean, corrupt, sigma, seed):
    """Signed vertices (B, D) each, their noisy inputs with shared noise, σ (B,), Δ = y_c − y_r."""
    dim = D.dim
    device = next(D.parameters()).device
    yc, yr = vertices(clean, dim, device), vertices(corrupt, dim, device)
    if yc.shape != yr.shape:
        raise DataError(f"clean {tuple(yc.shape)} and corrupt {tuple(yr.shape)} must have one shape")
    delta = yc - yr                                                          # (B, D)
    if (delta.abs().sum(1) == 0).any():
        raise DataError("a clean and a corrupt image are identical: the metric needs them to differ")
    s = torch.as_tensor(sigma, dtype=torch.float32, device=device).reshape(-1).expand(len(yc))
    if not torch.all((s > 0) & (s <= MAX_SIGMA)):
        raise ConfigError(f"sigma must be positive and at most {MAX_SIGMA:g} (scoreprobe.limits)")
    eps = randn_per_sample(seed, np.arange(len(yc)), dim, device=device)     # (B, D)
    return yc + s[:, None] * eps, yr + s[:, None] * eps, s, delta


def _direction(direction, delta):
    """A user's metric direction (B, D) checked against the pairs' shape; no row may be zero."""
    w = torch.as_tensor(np.asarray(direction), dtype=torch.float32, device=delta.device)
    if w.shape != delta.shape or not torch.isfinite(w).all() or (w.abs().sum(1) == 0).any():
        raise DataError(f"direction must be finite, of shape {tuple(delta.shape)}, with no zero row")
    return w


def metric(out, delta):
    """(B,) projection of the outputs (B, D) on Δ (B, D), divided by ‖Δ‖²."""
    return (out.double() * delta.double()).sum(1) / (delta.double() ** 2).sum(1)


def capture(D, net, x, s, names, grad=False):
    """D(x, s) and the activations at `names` ({name: tensor}); grad: keep them in the graph (AtP)."""
    fns, kept = keepers(names, grad)
    with installed(net, fns):
        out = D(x, s)
    return out, kept


def _replace(point, atoms, clean):
    """Hook function: the activation with the atoms' entries taken from `clean` (same shape)."""
    return lambda a: with_atoms(a, clean, point, atoms)


def patched_output(D, net, x, s, site, clean_acts):
    """D(x, s) with the site's atoms taken from clean_acts."""
    points = hook_points(net)
    by_hook = {}
    for at in site.atoms:
        by_hook.setdefault(at.hook, []).append(at)
    fns = {h: _replace(points[h], ats, clean_acts[h]) for h, ats in by_hook.items()}
    with installed(net, fns):
        return D(x, s)


def _needed(sites):
    return sorted({at.hook for site in sites for at in site.atoms} | {FINAL})


def patch(D, clean, corrupt, sigma, sites="all", seed=0, method="patch", confirm=None, direction=None):
    """Activation patching of a DiT denoiser at one noise level.

    Parameters
    ----------
    D : a denoiser wrapping a DiT (series.denoiser(step), load_checkpoint(...)), or a GPT (then clean and
        corrupt are 0/1 bits, sigma None, and the metric the log-likelihood of the clean tokens:
        inside/gpt_patch.py).
    clean, corrupt : (B, D) images (0/1 bits or ±1), pair b is (clean[b], corrupt[b]); they must differ.
    sigma : scalar or (B,) noise level; the two inputs share the noise ε of sample b (seeded by `seed`).
    sites : "all" (inside.sites.site_grid), a granularity ("block", "sub", "head", "token"), or labels.
    method : "patch" (one forward per site), "atp" (gradient estimate, all sites at once), or "both".
    confirm : with "atp", patch the `confirm` sites of largest |pooled AtP effect| for real.
    direction : (B, D) optional, the metric's direction per pair instead of y_c − y_r (e.g. the
        group mates of a flipped bit: the probe `circuits` measures the rule that way).

    Returns
    -------
    xarray.Dataset, dims (site, sample): `effect` (real patching; NaN where not run), `effect_atp`
    (with atp), their pooled versions over samples `effect_pooled`, `effect_atp_pooled` (site):
    Σ(m − m_r)/Σ(m_c* − m_r); `metric_corrupt`, `metric_clean` (clean*), `metric_clean_input`
    (D(x_c), skip term included) (sample); coords `site` (labels), `site_kind`, `site_layer` (-1: outside the blocks).
    """
    if method not in ("patch", "atp", "both"):
        raise ConfigError(f"method must be 'patch', 'atp' or 'both', got {method!r}")
    net, kind = network_of(D)
    site_list = resolve_sites(net, sites)
    if confirm is not None:
        check_int(confirm, "confirm", 1, len(site_list))
    if kind == "gpt":
        return _gpt(net, clean, corrupt, sigma, site_list, method, confirm, direction)
    xc, xr, s, delta = pair_inputs(D, clean, corrupt, sigma, seed)
    check_cache_size(D, net, kind, xc, s, _needed(site_list))
    delta = delta if direction is None else _direction(direction, delta)
    with torch.no_grad():
        out_c, acts_c = capture(D, net, xc, s, _needed(site_list))
        out_r = D(xr, s)
        m_c_in, m_r = metric(out_c, delta), metric(out_r, delta)
        m_c = metric(patched_output(D, net, xr, s, resolve_sites(net, FINAL)[0], acts_c), delta)
    den = m_c - m_r                                                          # (B,)
    n = len(site_list)
    effect = np.full((n, len(xc)), np.nan)
    atp = None
    if method in ("atp", "both"):
        atp = _atp(D, net, xr, s, delta, site_list, acts_c) / den[None].cpu().numpy()
    todo = range(n) if method != "atp" else _top(atp, den.cpu().numpy(), confirm)
    with torch.no_grad():
        for i in todo:
            m_p = metric(patched_output(D, net, xr, s, site_list[i], acts_c), delta)
            effect[i] = ((m_p - m_r) / den).cpu().numpy()
    return _dataset(site_list, effect, atp, m_r, m_c, m_c_in, den)


def _gpt(net, clean, corrupt, sigma, site_list, method, confirm, direction):
    """patch() of a GPT: bits, no σ, the clean tokens' log-likelihood as the metric (inside.gpt_patch)."""
    if sigma is not None or direction is not None:
        raise ConfigError("a GPT is patched on bits with its log-likelihood metric: pass sigma=None, no direction")
    effect, atp, m_r, m_c, den = gpt_patch(net, clean, corrupt, site_list, method, confirm)
    d = den.cpu().numpy()
    return _dataset(site_list, effect, None if atp is None else atp / d[None], m_r, m_c, m_c, den)


def _top(atp, den, confirm):
    """Indices of the `confirm` sites of largest |pooled AtP effect| (none when confirm is None)."""
    if confirm is None:
        return []
    pooled = (atp * den).sum(1) / den.sum()
    return [int(i) for i in np.argsort(-np.abs(pooled), kind="stable")[:int(confirm)]]


def _atp(D, net, xr, s, delta, site_list, acts_c):
    """(site, sample) AtP numerators: Σ over each site's entries of ∂m/∂a · (a_clean − a_corrupt)."""
    points = hook_points(net)
    with torch.enable_grad():
        x = xr.detach().requires_grad_(True)
        out, acts_r = capture(D, net, x, s, _needed(site_list), grad=True)
        metric(out, delta).sum().backward()
    return atp_numerators(points, site_list, acts_r, acts_c, len(xr))


def _dataset(site_list, effect, atp, m_r, m_c, m_c_in, den):
    """The result Dataset (see `patch`)."""
    np_ = lambda t: t.cpu().numpy()                                          # noqa: E731
    d = np_(den)
    coords = {"site": [st.label for st in site_list], "site_kind": ("site", [st.kind for st in site_list]),
              "site_layer": ("site", [st.layer for st in site_list]), "sample": np.arange(effect.shape[1])}
    data = {
        "effect": (("site", "sample"), effect, {"units": "1", "long_name": "patching effect (0 corrupt, 1 clean)"}),
        "effect_pooled": ("site", np.nansum(effect * d, 1) / d.sum() if np.isfinite(effect).any() else
                          np.full(len(site_list), np.nan), {"units": "1", "long_name": "Σ(m − m_r)/Σ(m_c − m_r)"}),
        "metric_corrupt": ("sample", np_(m_r), {"units": "1"}),
        "metric_clean": ("sample", np_(m_c), {"units": "1", "long_name": "metric, network fully clean"}),
        "metric_clean_input": ("sample", np_(m_c_in), {"units": "1", "long_name": "metric of D(x_clean)"}),
    }
    data["effect_pooled"][1][~np.isfinite(effect).any(1)] = np.nan
    if atp is not None:
        data["effect_atp"] = (("site", "sample"), atp, {"units": "1", "long_name": "AtP estimate of the effect"})
        data["effect_atp_pooled"] = ("site", (atp * d).sum(1) / d.sum(), {"units": "1"})
    return xr.Dataset(data, coords=coords)

