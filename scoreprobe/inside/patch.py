"""Activation patching at one noise level, and its gradient approximation (attribution patching, AtP).

Pairs of clean images (vertices) y_c, y_r get the same noise: x_c = y_c + σε, x_r = y_r + σε. The
corrupt input x_r is run with the activations at a site replaced by those of the clean run. The
metric of an output d (B, D) is its projection on the difference of the two vertices,

    m(d) = ⟨d, y_c − y_r⟩ / ‖y_c − y_r‖²

and the effect of a site is (m(patched) − m(corrupt)) / (m(clean*) − m(corrupt)), 0 = the corrupt
output, 1 = clean*: the output when every activation of the network is the clean run's (the final
layer patched). clean* differs from D(x_c) only by the preconditioning's skip term c_skip·x, which
reads the input directly and no site inside the network can move (docs/inside.md).

The denominator (the pair's contrast m(clean*) − m(corrupt)) is checked (scoreprobe.inside.ratio): a pair's
effect is NaN where |contrast| < floor, a pooled effect Σ(m − m_r)/Σ(m_c* − m_r) is NaN where the pairs'
contrasts have mixed sign or |mean contrast| < floor, the reason kept beside it, with one warning.

AtP (Kramár et al. 2024; scoreprobe.inside.atp): the joint first-order estimate of each site (one per site:
atoms in series are not counted twice); AtP* adds the exact softmax for query / key / score / pattern sites
and GradDrop; `confirm=k` patches the k sites it ranks highest for real.
"""
import warnings

import numpy as np
import torch
import xarray as xr

from scoreprobe.data.datasets import to_signed
from scoreprobe.errors import ConfigError, DataError
from scoreprobe.inside import atp as atp_
from scoreprobe.inside.cache import check_cache_size
from scoreprobe.inside.gpt_patch import gpt_runner
from scoreprobe.inside.hooks import hook_points, installed, keepers, network_of
from scoreprobe.inside.sites import patch_fns, resolve_sites
from scoreprobe.limits import MAX_SIGMA, check_int
from scoreprobe.noise import randn_per_sample
from scoreprobe.inside.ratio import DEN_FLOOR, pooled_ratio, unit_ratio

FINAL = "final.hook_out"
METHODS = ("patch", "atp", "atp*", "both")


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


def patched_output(D, net, x, s, site, clean_acts):
    """D(x, s) with the site's atoms taken from clean_acts."""
    with installed(net, patch_fns(hook_points(net), site, clean_acts)):
        return D(x, s)


def _needed(sites, star=False):
    """The hooks whose clean activations patching and AtP of `sites` need (and the final output)."""
    return sorted({at.hook for site in sites for at in site.atoms} | atp_.needed_hooks(sites, star) | {FINAL})


def patch(D, clean, corrupt, sigma, sites="all", seed=0, method="patch", confirm=None, direction=None,
          atp_star=False, metric=None, floor=DEN_FLOOR, positions=None):
    """Activation patching of a DiT denoiser (or a GPT) at one noise level, and its AtP / AtP* estimates.

    Parameters
    ----------
    D : a denoiser wrapping a DiT (series.denoiser(step), load_checkpoint(...)), or a GPT (then clean and
        corrupt are 0/1 bits, sigma None: inside/gpt_patch.py).
    clean, corrupt : (B, D) images (0/1 bits or ±1), pair b is (clean[b], corrupt[b]); they must differ.
    sigma : scalar or (B,) noise level; the two inputs share the noise ε of sample b (seeded by `seed`).
    sites : "all" (inside.sites.site_grid), a granularity ("block", "sub", "head", "token"), or labels.
    method : "patch" (one forward per site), "atp" (first-order estimate, scoreprobe.inside.atp), "atp*"
        (= "atp" with atp_star), or "both" (patch and the estimate).
    confirm : with "atp", patch the `confirm` sites the estimate ranks highest for real (|pooled AtP|, with
        AtP* the GradDrop score; the mean over pairs where the pooled value is undefined).
    direction : (B, D) optional, the metric's direction per pair instead of y_c − y_r (DiT only).
    atp_star : the estimate is AtP* (Kramár et al. 2024): exact softmax for q/k/score/pattern sites, and
        the GradDrop score `effect_atp_graddrop` (a magnitude) besides.
    metric : GPT only: "log_lik" (default: the clean tokens' log-likelihood) or "logit_diff".
    positions : GPT "logit_diff" only: (B, D) weights of the positions the logit difference sums (default 1
        from the pair's first differing bit on), e.g. one-hot at the bit a rule fixes.
    floor : the smallest |contrast| (metric units) a ratio is taken over (scoreprobe.inside.ratio).

    Returns
    -------
    xarray.Dataset, dims (site, sample): `effect` (real patching; NaN where not run or where the pair's
    |contrast| < floor), `effect_numerator` (m(patched) − m(corrupt)); with AtP `effect_atp`,
    `effect_atp_numerator`; with AtP* `effect_atp_graddrop` (≥ 0) and its numerator. Pooled over samples (site):
    `effect_pooled`, `effect_atp_pooled` (Σ numerators / Σ contrasts), `effect_atp_graddrop_pooled`
    (Σ scores / |Σ contrasts|), NaN where undefined, the reason in `effect_pooled_undefined` ("" defined,
    "mixed sign", "below floor", "not run"; attrs["pooled_undefined"]: the contrasts' reason, shared by
    every pooled value). Per sample: `metric_corrupt`, `metric_clean` (clean*),
    `metric_clean_input` (D(x_c), skip term included). Coords `site`, `site_kind`, `site_layer` (-1: outside
    the blocks).
    """
    if method not in METHODS:
        raise ConfigError(f"method must be one of {METHODS}, got {method!r}")
    star = bool(atp_star) or method == "atp*"
    method = "atp" if method == "atp*" else method
    if star and method == "patch":
        raise ConfigError("atp_star needs method 'atp', 'atp*' or 'both'")
    if not floor >= 0:
        raise ConfigError(f"floor must be a non-negative number, got {floor!r}")
    net, kind = network_of(D)
    site_list = resolve_sites(net, sites)
    if confirm is not None:
        check_int(confirm, "confirm", 1, len(site_list))
    names = _needed(site_list, star and method != "patch")
    if kind == "gpt":
        if sigma is not None or direction is not None:
            raise ConfigError("a GPT is patched on bits with its own metric: pass sigma=None and no direction")
        run, acts_c, m_r, m_c = gpt_runner(net, clean, corrupt, names, "log_lik" if metric is None else metric,
                                           positions)
        m_c_in = m_c
    else:
        if metric is not None or positions is not None:
            raise ConfigError("metric= and positions= are for a GPT; a DiT's metric is the projection on `direction`")
        run, acts_c, m_r, m_c, m_c_in = _dit_runner(D, net, clean, corrupt, sigma, seed, direction, names)
    est = _estimates(net, kind, run, site_list, acts_c, m_r, m_c, method, star, confirm, floor)
    return _dataset(site_list, est, m_r, m_c, m_c_in, floor, star)


def _dit_runner(D, net, clean, corrupt, sigma, seed, direction, names):
    """(run, clean activations, m_corrupt, m_clean*, m(D(x_c))): run(fns) -> (B,) metric of the corrupt input
    with hook functions `fns` installed."""
    xc, xr, s, delta = pair_inputs(D, clean, corrupt, sigma, seed)
    check_cache_size(D, net, "dit", xc, s, names)
    delta = delta if direction is None else _direction(direction, delta)

    def run(fns):
        with installed(net, fns):
            return metric(D(xr, s), delta)
    with torch.no_grad():
        out_c, acts_c = capture(D, net, xc, s, names)
        m_r = run({})
        m_c = run(patch_fns(hook_points(net), resolve_sites(net, FINAL)[0], acts_c))
    return run, acts_c, m_r, m_c, metric(out_c, delta)


def _estimates(net, kind, run, site_list, acts_c, m_r, m_c, method, star, confirm, floor):
    """{"num": (S, B) m(patched) − m(corrupt) (NaN where not run), "atp", "gd": AtP numerators / GradDrop
    scores (S, B) or None}."""
    n, points = len(m_r), hook_points(net)
    est = {"num": np.full((len(site_list), n), np.nan), "atp": None, "gd": None}
    if method in ("atp", "both"):
        est["atp"], est["gd"] = atp_.estimate(net, run, site_list, acts_c, n, star, causal=kind == "gpt")
    den = (m_c - m_r).cpu().numpy()
    todo = range(len(site_list)) if method != "atp" else _top(est["gd"] if star else est["atp"], den, confirm,
                                                               floor, magnitude=star)
    with torch.no_grad():
        for i in todo:
            est["num"][i] = (run(patch_fns(points, site_list[i], acts_c)) - m_r).cpu().numpy()
    return est


def _top(num, den, confirm, floor, magnitude=False):
    """Indices of the `confirm` sites of largest |pooled estimate| (magnitude: of the GradDrop score over
    |Σ den|); where the pooled value is undefined, the largest |mean over pairs of the per-pair ratio|."""
    if confirm is None:
        return []
    per_pair, _ = unit_ratio(num, np.abs(den) if magnitude else den, floor)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)                      # all-NaN rows: ranked last
        pooled, _ = pooled_ratio(num, np.broadcast_to(den, num.shape), axis=1, floor=floor)
        score = np.where(np.isfinite(pooled), np.abs(pooled), np.abs(np.nanmean(per_pair, 1)))
    return [int(i) for i in np.argsort(-np.nan_to_num(score, nan=-1.0), kind="stable")[:int(confirm)]]


def _pooled(num, den, floor, magnitude=False):
    """(site,) pooled ratio (magnitude: Σ num / |Σ den|, num ≥ 0) and its reason ("not run" where num is NaN)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)                      # rows not run: all NaN
        ratio, reason = pooled_ratio(num, np.broadcast_to(den, num.shape), axis=1, floor=floor)
    reason = np.where(np.isfinite(num).any(1), reason, "not run").astype(object)
    return (np.abs(ratio) if magnitude else ratio), reason


def _dataset(site_list, est, m_r, m_c, m_c_in, floor, star):
    """The result Dataset (see `patch`), and one warning where ratios are left undefined."""
    np_ = lambda t: t.cpu().numpy()                                          # noqa: E731
    d = np_(m_c - m_r)
    coords = {"site": [st.label for st in site_list], "site_kind": ("site", [st.kind for st in site_list]),
              "site_layer": ("site", [st.layer for st in site_list]), "sample": np.arange(len(d))}
    pooled, reason = _pooled(est["num"], d, floor)
    ss, one = ("site", "sample"), {"units": "1"}
    data = {
        "effect": (ss, unit_ratio(est["num"], d, floor)[0], 
                   {**one, "long_name": "patching effect (0 corrupt, 1 clean)"}),
        "effect_numerator": (ss, est["num"], {**one, "long_name": "m(patched) − m(corrupt)"}),
        "effect_pooled": ("site", pooled, {**one, "long_name": "Σ(m − m_r)/Σ(m_c − m_r)"}),
        "effect_pooled_undefined": ("site", reason, {"long_name": "why effect_pooled is NaN ('' where defined)"}),
        "metric_corrupt": ("sample", np_(m_r), one),
        "metric_clean": ("sample", np_(m_c), {**one, "long_name": "metric, network fully clean"}),
        "metric_clean_input": ("sample", np_(m_c_in), {**one, "long_name": "metric of D(x_clean)"}),
    }
    if est["atp"] is not None:
        a = est["atp"]
        data["effect_atp"] = (ss, unit_ratio(a, d, floor)[0], {**one, "long_name": "AtP estimate of the effect"})
        data["effect_atp_numerator"] = (ss, a, {**one, "long_name": "AtP estimate of m(patched) − m(corrupt)"})
        data["effect_atp_pooled"] = ("site", _pooled(a, d, floor)[0], one)
    if est["gd"] is not None:
        g = est["gd"]
        data["effect_atp_graddrop"] = (ss, unit_ratio(g, np.abs(d), floor)[0], {
            **one, "long_name": "AtP* GradDrop score (1/(L−1)) Σ_ℓ |I_ℓ| / |contrast| (a magnitude)"})
        data["effect_atp_graddrop_numerator"] = (ss, g, {**one, "long_name": "(1/(L−1)) Σ_ℓ |I_ℓ|"})
        data["effect_atp_graddrop_pooled"] = ("site", _pooled(g, d, floor, magnitude=True)[0], one)
    contrast = pooled_ratio(d, d, floor=floor)[1].item()                   # the pooled values' shared reason
    warn_undefined_effects("patch", contrast, len(site_list), d, floor)
    attrs = {"atp": "AtP*" if star else "AtP", "floor": float(floor), "pooled_undefined": contrast}
    return xr.Dataset(data, coords=coords, attrs=attrs)


def warn_undefined_effects(what, contrast, n_pooled, den, floor):
    """One UserWarning naming what is left undefined (NaN): every pooled value (the contrasts' reason), and the
    per-pair effects of pairs with |contrast| < floor; nothing when all are defined."""
    parts = [f"all {n_pooled} pooled effects (the pairs' contrasts: {contrast})"] if contrast else []
    small = int((~(np.abs(den) >= floor)).sum())
    if small:
        parts.append(f"the per-pair effects of {small} of {den.size} pairs (|contrast| < {floor:g})")
    if parts:
        warnings.warn(f"{what}: left undefined (NaN): " + "; ".join(parts), UserWarning, stacklevel=4)
