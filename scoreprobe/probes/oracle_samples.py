"""Sample-level comparison: the network's and each oracle's PF-ODE samples from the same initial noise.

Kamb & Ganguli (2025)'s main comparison. Sample i of the network and sample i of every oracle start
from the SAME noise σ_max·randn_per_sample(seed, [i], D) and are integrated by the same sampler on
the same grid (`scoreprobe.ode.samplers.sample`, the default Heun PF-ODE of 32 steps: exactly the
samples `clocks` draws with that seed), in the same dtype. The endpoints are thresholded at 0 (a
vertex, `to_bits`) and compared sample by sample:

    agree        share of samples whose vertex equals the oracle's (with a 95% Wilson interval
                 over samples: agree_low, agree_high)
    hamming      mean Hamming distance between the two vertices, / D
    pixel_agree  per pixel (row, col) share of samples with equal bits (channels averaged)
    class_agree  per pixel class (`pixel_classes`, CLASSES): border / interior pixels (bits
                 equal); pairs of pixels of one rule group lying in one DiT token / in two tokens
                 (pair_*: both bits equal; relation_*: the pair's relation s_i·s_j equal, what the
                 rule ties together. Every valid image of a G = 2 parity rule has s_i·s_j = +1, so
                 relation_* against an always-valid oracle is the network's own group validity:
                 it tells valid oracles from invalid ones, not memorizer from rule)
    traj_hamming the same distance between the thresholded ODE states at each σ of the grid
                 (ode_step, coordinate ode_sigma): where the two trajectories part (fixed grids and
                 the stochastic samplers; the adaptive engine has no shared grid and gives none)
    noise_hamming  Hamming distance / D of each endpoint from the sign of its initial noise: the
                 linear-shrinkage network x/(1+σ²) (the untrained adaLN-Zero DiT) ends exactly there,
                 so an oracle close to the network at such a step is only close to "keep the noise"
    r2_sample    1 − Σ‖x_net − x_or‖² / Σ‖x_net − mean x_net‖² over the continuous endpoints
    cosine       mean per-sample cosine of the continuous endpoints

A sample whose network or oracle endpoint is not finite is left out of that pair's means (counted
in n_compared and warned about); a class without members (e.g. no group pair inside one token) is
NaN, never 0. The intervals are over samples (noise draws) of ONE network: they say nothing about
other trained models.
"""
import json
from collections.abc import Mapping

import numpy as np
import torch
import xarray as xr

from scoreprobe.data.datasets import to_bits
from scoreprobe.defaults import DEFAULT_N_STEPS
from scoreprobe.errors import ConfigError
from scoreprobe.limits import check_rows, check_seed, warn_nonfinite
from scoreprobe.noise import NOISE, randn_per_sample
from scoreprobe.ode import edm_sigmas, resolve_device, samplers
from scoreprobe.probes.clocks import group_bits
from scoreprobe.probes.wilson import wilson_lower
from scoreprobe.sweep import dataset_and_rule, run_probe

CLASSES = ("border", "interior", "pair_within_token", "pair_across_token", "relation_within_token",
           "relation_across_token")
CLASS_KIND = ("pixel", "pixel", "pair", "pair", "relation", "relation")


# ---------------------------------------------------------------------------------------------
# Pixel classes
# ---------------------------------------------------------------------------------------------

def _token_patch(value):
    """(ph, pw) from an int or a pair of positive ints; None stays None."""
    if value is None:
        return None
    pair = (value, value) if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else tuple(value)
    if len(pair) != 2 or any(isinstance(p, bool) or int(p) != p or p < 1 for p in pair):
        raise ConfigError(f"token_patch must be a positive integer or a pair of them, got {value!r}")
    return int(pair[0]), int(pair[1])


def pixel_classes(rule, token_patch=None):
    """The pixel classes of `rule`'s image (C, H, W) (bit b: channel b // HW, row, col of b % HW).

    Returns dict: border (D,) bool (row or col on the image's edge), interior (D,) bool (its
    complement), pairs (P, 2) int64 (every unordered pair of bits of one rule group,
    `clocks.group_bits`; (0, 2) when the rule has no groups), pair_within_token (P,) bool (both bits
    in one ph×pw token) or None when token_patch is None."""
    _, h, w = rule.image_shape
    pix = np.arange(rule.n_bits) % (h * w)
    row, col = pix // w, pix % w
    border = (row == 0) | (row == h - 1) | (col == 0) | (col == w - 1)
    groups = group_bits(rule)
    pairs = np.zeros((0, 2), np.int64) if groups is None else np.array(
        [(g[a], g[b]) for g in groups for a in range(len(g)) for b in range(a + 1, len(g))], np.int64).reshape(-1, 2)
    within = None
    ph_pw = _token_patch(token_patch)
    if ph_pw is not None:
        token = (row // ph_pw[0]) * (w + 1) + col // ph_pw[1]                   # (D,) one id per token
        within = token[pairs[:, 0]] == token[pairs[:, 1]]                       # (P,)
    return {"border": border, "interior": ~border, "pairs": pairs, "pair_within_token": within}


def network_patch(D, token_patch=None):
    """The DiT token size (ph, pw) of denoiser D (its network's patch_shape), else `token_patch`."""
    from scoreprobe.inside.hooks import network_of
    try:
        net, kind = network_of(D)
    except ConfigError:
        return _token_patch(token_patch)
    return tuple(int(p) for p in net.patch_shape) if kind == "dit" else _token_patch(token_patch)


# ---------------------------------------------------------------------------------------------
# Oracles and endpoints
# ---------------------------------------------------------------------------------------------

def resolve_oracles(dataset, rule, oracles=None, patch=3):
    """[(name, denoiser)]: a mapping {name: callable} as given, else names built by
    `decompose.named_oracles` (None: every oracle that applies; unknown names: ConfigError)."""
    if isinstance(oracles, Mapping):
        if not oracles or any(not isinstance(k, str) or not k or not callable(v) for k, v in oracles.items()):
            raise ConfigError("oracles as a mapping must be non-empty {name (str): denoiser D(x, sigma)}")
        return list(oracles.items())
    if isinstance(oracles, str):
        oracles = (oracles,)
    from scoreprobe.probes.decompose import named_oracles
    return [(name, D) for name, _, _, D in named_oracles(dataset, rule, oracles, patch)]


def endpoints(D, n_samples, seed, n_steps, dim, sampler=None, device=None, dtype=torch.float32, trajectory=False):
    """Signed PF-ODE endpoints of D from the per-sample noise of `seed`: (n, D) float64 numpy; with
    trajectory=True also the thresholded states on the grid, (n_steps + 1, n, D) uint8 (fixed grids only)."""
    states = []
    keep = (lambda i, s, x: states.append(to_bits(x.detach().cpu()).numpy())) if trajectory else None
    x = samplers.sample(D, n_samples, seed, n_steps=n_steps, device=device, dtype=dtype, dim=dim, sampler=sampler,
                        progress=False, callback=keep)
    x = x.detach().to("cpu", torch.float64).numpy()
    return (x, np.stack(states)) if trajectory else x


# ---------------------------------------------------------------------------------------------
# The comparison
# ---------------------------------------------------------------------------------------------

def _nanmean(a, axis):
    """Mean over `axis` of a float array with NaN marking left-out entries (NaN where none is left)."""
    n = np.isfinite(a).sum(axis)
    return np.where(n > 0, np.nansum(a, axis) / np.maximum(n, 1), np.nan)


def _class_means(eq, rel, classes):
    """(K, 6) class agreement (CLASSES) from eq (K, n, D) and rel (K, n, P) (NaN: sample left out)."""
    within, p = classes["pair_within_token"], classes["pairs"]
    joint = eq[..., p[:, 0]] * eq[..., p[:, 1]]                                    # (K, n, P) both bits equal

    def split(a):                                                                  # (within, across) of (K, n, P)
        return (a[..., within], a[..., ~within]) if within is not None else (a[..., :0], a[..., :0])
    cols = [eq[..., classes["border"]], eq[..., classes["interior"]], *split(joint), *split(rel)]
    return np.stack([_nanmean(c.reshape(len(c), -1), 1) if c.shape[-1] else np.full(len(c), np.nan)
                     for c in cols], axis=1)


def trajectory_hamming(t_net, t_or, ok):
    """(K, S+1) mean Hamming distance / D between the thresholded states t_net (S+1, n, D) and t_or
    (K, S+1, n, D) on the ODE grid, over the samples ok (K, n) (NaN where none)."""
    diff = (t_net[None] != t_or).mean(-1)                                         # (K, S+1, n)
    return _nanmean(np.where(ok[:, None], diff, np.nan), -1)


def compare(x_net, x_or, classes, image_shape):
    """Per-oracle agreement of network endpoints x_net (n, D) with oracle endpoints x_or (K, n, D).

    Returns dict of arrays over oracle (K): agree, hamming, r2_sample, cosine, n_compared; pixel_agree
    (K, H, W); class_agree (K, 6) in the order of CLASSES; ok (K, n) the samples compared."""
    ok = np.isfinite(x_net).all(1)[None] & np.isfinite(x_or).all(2)              # (K, n)
    b_net, b_or = to_bits(x_net)[None].astype(np.int8), to_bits(x_or).astype(np.int8)
    eq = np.where(ok[..., None], b_net == b_or, np.nan)                           # (K, n, D)
    p = classes["pairs"]
    s_net, s_or = 2 * b_net - 1, 2 * b_or - 1
    rel = np.where(ok[..., None], (s_net[..., p[:, 0]] * s_net[..., p[:, 1]]) ==
                   (s_or[..., p[:, 0]] * s_or[..., p[:, 1]]), np.nan)             # (K, n, P)
    c, h, w = image_shape
    pixel = _nanmean(eq, 1).reshape(len(eq), c, h, w).mean(1)                     # (K, H, W)
    with np.errstate(invalid="ignore", divide="ignore"):
        xn = np.where(ok[..., None], x_net[None], np.nan)                         # (K, n, D)
        xo = np.where(ok[..., None], x_or, np.nan)
        ss_res = np.nansum((xn - xo) ** 2, axis=(1, 2))
        ss_tot = np.nansum((xn - _nanmean(xn, 1)[:, None]) ** 2, axis=(1, 2))
        r2 = np.where(ss_tot > 0, 1 - ss_res / ss_tot, np.nan)
        cos = _nanmean((xn * xo).sum(2) / (np.linalg.norm(xn, axis=2) * np.linalg.norm(xo, axis=2)), 1)
    same = np.where(ok, (b_net == b_or).all(2), np.nan)                           # (K, n)
    return {"agree": _nanmean(same, 1),
            "hamming": _nanmean(1 - _nanmean(eq, 2), 1), "r2_sample": r2, "cosine": cos,
            "n_compared": ok.sum(1), "ok": ok, "pixel_agree": pixel, "class_agree": _class_means(eq, rel, classes)}


def _membership(x, dataset, rule):
    """(share that are training items, share rule-valid) of the finite signed endpoints x (n, D); NaN if none."""
    bits = to_bits(x[np.isfinite(x).all(1)])
    if not len(bits):
        return np.nan, np.nan
    return float(np.mean(dataset.train_index.lookup(bits) >= 0)), float(np.mean(rule.is_valid(bits)))


_VARS = {  # name: (dims, long_name)
    "agree": (("oracle",), "share of samples whose thresholded endpoint equals the oracle's from the same noise"),
    "agree_low": (("oracle",), "agree: lower end of the 95% Wilson interval over samples"),
    "agree_high": (("oracle",), "agree: upper end of the 95% Wilson interval over samples"),
    "hamming": (("oracle",), "mean Hamming distance between the thresholded endpoints, / D"),
    "r2_sample": (("oracle",), "1 − Σ‖x_net − x_oracle‖² / Σ‖x_net − mean x_net‖², continuous endpoints"),
    "cosine": (("oracle",), "mean cosine of the network's and the oracle's continuous endpoints"),
    "n_compared": (("oracle",), "samples compared (both endpoints finite)"),
    "pixel_agree": (("oracle", "row", "col"), "per pixel: share of samples with equal bits (channels averaged)"),
    "class_agree": (("oracle", "pixel_class"), ("per pixel class: share of equal bits (pixels; both bits of "
                                                "a group pair) or of equal relations s_i·s_j; NaN: empty class")),
    "oracle_agree": (("oracle", "oracle_b"), ("share of samples on which two oracles end on the same vertex "
                                              "(the same at every step)")),
    "oracle_train_item": (("oracle",), "share of the oracle's samples that are training items"),
    "oracle_valid": (("oracle",), "share of the oracle's samples that satisfy the rule"),
    "noise_hamming": (("oracle",), ("mean Hamming distance / D of the oracle's endpoints from the sign of their "
                                    "initial noise (where the linear-shrinkage network ends)")),
    "net_noise_hamming": ((), ("mean Hamming distance / D of the network's endpoints from the sign of their "
                               "initial noise (0: the network keeps the noise's signs, as a shrinkage does)")),
    "net_train_item": ((), "share of the network's finite samples that are training items"),
    "net_valid": ((), "share of the network's finite samples that satisfy the rule"),
    "token_patch_h": ((), "DiT token height used for the token classes (0: unknown)"),
    "token_patch_w": ((), "DiT token width used for the token classes (0: unknown)"),
}


def _dataset(cmp, extra, names, classes, image_shape):
    """The per-step Dataset from `compare`'s dict and the step-independent `extra` dict."""
    n = int(extra.pop("n_samples"))
    p, m = np.nan_to_num(cmp["agree"]), np.maximum(cmp["n_compared"], 1)
    lo, hi = wilson_lower(p, m), 1 - wilson_lower(1 - p, m)                       # Wilson is symmetric in p, 1 − p
    cmp = {**cmp, **extra, "agree_low": np.where(cmp["n_compared"] > 0, lo, np.nan),
           "agree_high": np.where(cmp["n_compared"] > 0, hi, np.nan)}
    data = {k: (dims, np.asarray(cmp[k]), {"long_name": ln, "units": "1"}) for k, (dims, ln) in _VARS.items()}
    within = classes["pair_within_token"]
    pairs = (-1, -1) if within is None else (int(within.sum()), int((~within).sum()))
    size = [int(classes["border"].sum()), int(classes["interior"].sum()), *pairs, *pairs]
    data["class_size"] = ("pixel_class", np.array(size, np.int64), {
        "long_name": "pixels or pairs in the class (-1: token size unknown)", "units": "1"})
    names = np.array(names, dtype=object)
    _, h, w = image_shape
    return xr.Dataset(data, coords={
        "oracle": ("oracle", names, {"long_name": "oracle denoiser sampled from the same noise"}),
        "oracle_b": ("oracle_b", names.copy(), {"long_name": "oracle denoiser (second index of oracle_agree)"}),
        "pixel_class": ("pixel_class", np.array(CLASSES, dtype=object), {"long_name": "pixel class"}),
        "class_kind": ("pixel_class", np.array(CLASS_KIND, dtype=object), {"long_name": "what is compared"}),
        "row": ("row", np.arange(h)), "col": ("col", np.arange(w))}).assign_attrs(n_samples=n)


# ---------------------------------------------------------------------------------------------
# The probe
# ---------------------------------------------------------------------------------------------

def _check(n_samples, seed, n_steps, rule, dtype, token_patch):
    check_rows(n_samples, rule.n_bits, "n_samples")
    check_seed(seed)
    edm_sigmas(n_steps)                                                          # n_steps within limits
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ConfigError(f"dtype must be a torch floating-point dtype, got {dtype!r}")
    if len(rule.image_shape) != 3:
        raise ConfigError(f"oracle_samples needs a (C, H, W) image shape, the rule has {rule.image_shape}")
    return _token_patch(token_patch)


def _noise_hamming(x, noise_bits):
    """Mean Hamming distance / D of the finite rows of x (..., n, D) from noise_bits (n, D); NaN if none."""
    ok = np.isfinite(x).all(-1)
    return _nanmean(np.where(ok, (to_bits(x) != noise_bits).mean(-1), np.nan), -1)


def _oracle_side(named, dataset, rule, draw, device, noise_bits):
    """Step-independent part: oracle endpoints (K, n, D), their grid states (K, S+1, n, D) or None, and
    what is read off them alone."""
    runs = [draw(D, resolve_device(device)) for _, D in named]
    x_or = np.stack([x for x, _ in runs])                                         # (K, n, D)
    t_or = None if runs[0][1] is None else np.stack([t for _, t in runs])         # (K, S+1, n, D)
    bits = to_bits(x_or)
    ok = np.isfinite(x_or).all(2)                                                # (K, n)
    warn_nonfinite(int((~ok).sum()), ok.size, "oracle endpoints", "those samples are left out", stacklevel=4)
    pair = ok[:, None] & ok[None]
    same = (bits[:, None] == bits[None]).all(3)                                   # (K, K, n)
    with np.errstate(invalid="ignore", divide="ignore"):
        oracle_agree = np.where(pair.any(2), (same & pair).sum(2) / pair.sum(2), np.nan)
    member = np.array([_membership(x, dataset, rule) for x in x_or]).reshape(-1, 2)
    return x_or, t_or, {"oracle_agree": oracle_agree, "oracle_train_item": member[:, 0], "oracle_valid": member[:, 1],
                  "noise_hamming": _noise_hamming(x_or, noise_bits)}


def _with_trajectory(ds, traj, n_steps, spec):
    """ds with traj_hamming (oracle, ode_step) and the grid's σ as coordinate ode_sigma."""
    sig = edm_sigmas(n_steps).numpy()
    return ds.assign(traj_hamming=(("oracle", "ode_step"), traj, {
        "long_name": "mean Hamming distance / D between the thresholded ODE states of the network and the oracle "
                     "at each grid σ (where their trajectories part)", "units": "1"})).assign_coords(
        ode_step=("ode_step", np.arange(len(sig))),
        ode_sigma=("ode_step", sig, {"long_name": f"σ of the {spec.describe()} grid (state after the step)"}))


def _config(n, seed, n_steps, spec, names, patch, fallback, dtype, rule):
    """The store's config: everything the samples depend on."""
    return {"probe": "oracle_samples", "n_samples": n, "seed": int(seed), "n_steps": int(n_steps), "noise": NOISE,
            "sampler": spec.config(), "oracles": names, "patch": patch if isinstance(patch, int) else list(patch),
            "token_patch": None if fallback is None else list(fallback), "dtype": str(dtype).replace("torch.", ""),
            "rule": rule.spec()}


def oracle_samples(D_or_series, dataset=None, rule=None, oracles=None, n_samples=256, seed=0,
                   n_steps=DEFAULT_N_STEPS, *, patch=3, token_patch=None, sampler=None, dtype=torch.float32,
                   steps=None, out=None, device=None, progress=None, overwrite=False, model_id=None):
    """The network's and each oracle's samples from the same initial noise, compared (module docstring).

    Parameters
    ----------
    D_or_series : a denoiser, a CheckpointSeries or {step: denoiser}.
    dataset, rule : needed for a plain denoiser; a series brings its own.
    oracles : None (every oracle of `decompose.ORACLES` that can be built; one that cannot is left
        out with a warning), names among them (strict), or a mapping {name: denoiser}.
    n_samples, seed, n_steps, sampler : sample i starts from σ_max·randn_per_sample(seed, [i], D), for
        the network and every oracle alike; `sampler` as for `sp.sample` (default: Heun PF-ODE).
    patch : window side(s) of the local oracles (`decompose.named_oracles`).
    token_patch : the DiT token size (int or (ph, pw)) for denoisers that are not DiTs; a DiT's own
        patch_shape is used when it has one (recorded as token_patch_h / token_patch_w).
    dtype : the dtype of every integration (network and oracles alike; float32 = `clocks`' samples).
    steps, out, device, progress, overwrite, model_id : as for the other probes (`scoreprobe.sweep`).

    Returns
    -------
    xarray.Dataset over ([step], oracle, …): agree, agree_low, agree_high, hamming, r2_sample, cosine,
    n_compared (oracle); pixel_agree (oracle, row, col); class_agree (oracle, pixel_class) with
    coordinate class_kind and class_size (pixel_class); oracle_agree (oracle, oracle_b), oracle_train_item,
    oracle_valid, noise_hamming (oracle); net_train_item, net_valid, net_noise_hamming, token_patch_h,
    token_patch_w.
    """
    dataset, rule = dataset_and_rule(D_or_series, dataset, rule, need_rule=True, who="oracle_samples")
    fallback = _check(n_samples, seed, n_steps, rule, dtype, token_patch)
    spec = samplers.as_sampler(sampler)
    named = resolve_oracles(dataset, rule, oracles, patch)
    names = [name for name, _ in named]
    n, d = int(n_samples), rule.n_bits
    config = _config(n, seed, n_steps, spec, names, patch, fallback, dtype, rule)

    grid = spec.name != "adaptive"                 # a fixed grid: the states along it are compared too

    def draw(D, dev):                              # (n, D) signed endpoints, (S+1, n, D) states or None
        out = endpoints(D, n, seed, n_steps, d, spec, dev, dtype, trajectory=grid)
        return out if grid else (out, None)
    noise_bits = to_bits(randn_per_sample(seed, np.arange(n), d, dtype=torch.float64).numpy())   # (n, D)
    side = {}

    def probe(D):
        if not side:     # once, on the first checkpoint that is not already stored
            side["x"], side["t"], side["extra"] = _oracle_side(named, dataset, rule, draw, device, noise_bits)
        x_net, t_net = draw(D, resolve_device(device, D))                           # (n, D), (S+1, n, D)
        warn_nonfinite(int((~np.isfinite(x_net).all(1)).sum()), n, "network endpoints",
                       "those samples are left out of every comparison", stacklevel=4)
        ph_pw = network_patch(D, fallback)
        classes = pixel_classes(rule, ph_pw)
        member = _membership(x_net, dataset, rule)
        extra = {**side["extra"], "net_train_item": member[0], "net_valid": member[1], "n_samples": n,
                 "net_noise_hamming": float(_noise_hamming(x_net, noise_bits)),
                 "token_patch_h": 0 if ph_pw is None else ph_pw[0], "token_patch_w": 0 if ph_pw is None else ph_pw[1]}
        cmp = compare(x_net, side["x"], classes, rule.image_shape)
        ds = _dataset(cmp, extra, names, classes, rule.image_shape)
        if grid:
            ds = _with_trajectory(ds, trajectory_hamming(t_net, side["t"], cmp["ok"]), n_steps, spec)
        return ds.assign_attrs(title="the network's samples against the oracles' from the same noise",
                               scoreprobe_config=json.dumps(config, sort_keys=True))
    probe.n_bits = d
    sweep_device = "cpu" if device is None else str(resolve_device(device))
    return run_probe(probe, D_or_series, config, steps=steps, out=out, device=sweep_device, progress=progress,
                     overwrite=overwrite, model_id=model_id)


def oracle_samples_json(ds, digits=4):
    """The headline variables of an `oracle_samples` Dataset as JSON-able lists rounded to `digits`: agree,
    agree_low, agree_high, hamming (step, oracle); border and interior class agreement (step, oracle); the
    network's own share of training items and of valid images (step,)."""
    cls = ds.class_agree.transpose("step", "oracle", "pixel_class")
    r = lambda a: np.round(a, digits).tolist()                                  # noqa: E731
    return {**{v: r(ds[v].transpose("step", "oracle").values) for v in ("agree", "agree_low", "agree_high", "hamming")},
            "border": r(cls.sel(pixel_class="border").values), "interior": r(cls.sel(pixel_class="interior").values),
            "net_train_item": r(ds.net_train_item.values), "net_valid": r(ds.net_valid.values)}
