"""Which sites of the network carry the copies and which carry the rule, checkpoint by checkpoint.

For each checkpoint, noise level σ and patching site (scoreprobe.inside.sites), the patching effect
(scoreprobe.inside.patch: 0 = corrupt output, 1 = the network fully clean) of two kinds of pairs:

    copy  clean = a training item, corrupt = the held-out item nearest to it (Hamming); the metric
          projects D on their difference: which sites carry what makes a training item come back.
    rule  clean = a held-out (valid) item, corrupt = the same with one bit flipped (rule-violating);
          the metric projects D on the clean values of the flipped bit's *group mates* (parity): what
          moves the flipped bit's information to the pixels whose value the rule ties to it.

and, for parity rules, (c) the attention of every head to the keys that share a parity group with
the query token (`attn_same_group`) against the share such keys would get from uniform attention: where
a head looks, not an effect.

Every effect is read per σ: a site can carry +a at one noise level and −a at another, and a mean over σ
would call that "no effect". An effect is a fraction of the pairs' contrast (metric clean* − corrupt);
pooled over pairs it is Σ numerators / Σ contrasts (scoreprobe.inside.ratio.pooled_ratio), left NaN where
the contrasts have mixed sign or |mean contrast| < floor, the reason kept in `*_effect_undefined`. The
copy contrast itself is read with its sign: near 0 or negative, the network's output on the held-out
neighbour points as far or further towards the training item than its output on the item itself, which
is what copying looks like, not the absence of an effect.
"""
import json
import warnings
from collections.abc import Mapping

import numpy as np
import torch
import xarray as xr

from scoreprobe.data.datasets import to_signed
from scoreprobe.errors import ConfigError, DataError
from scoreprobe.inside import patch, run_with_cache
from scoreprobe.inside.hooks import network_of
from scoreprobe.inside.sites import resolve_sites
from scoreprobe.limits import MAX_SIGMA, MAX_SIGMAS
from scoreprobe.noise import randn_per_sample
from scoreprobe.inside.ratio import DEN_FLOOR, pooled_ratio, unit_ratio, warn_undefined
from scoreprobe.sweep import dataset_and_rule, is_series, run_probe

DEFAULT_SIGMAS = (0.3, 0.7, 1.5)
COPY_SEED, RULE_SEED = 1, 2           # noise streams of the two pair kinds (offsets of `seed`)


def copy_pairs(dataset, n):
    """(clean, corrupt) uint8 (n, D): the first n training items and their nearest held-out items."""
    train, held = dataset.train[:n].astype(np.int16), dataset.heldout.astype(np.int16)
    if len(train) == 0 or len(held) == 0:
        raise DataError("copy pairs need training and held-out items")
    dist = np.abs(train[:, None, :] - held[None]).sum(2)                        # (n, H)
    return dataset.train[:n], dataset.heldout[np.argmin(dist, axis=1)]


def rule_pairs(dataset, rule, n, seed):
    """(clean, corrupt, direction, flipped): held-out items, one bit flipped (a group member chosen per
    pair from rng(seed)); direction = the clean signed values of the flipped bit's group mates."""
    groups = getattr(rule, "groups", None)
    if groups is None:
        raise ConfigError(f"rule pairs need a parity rule (groups); {type(rule).__name__} has none")
    clean = dataset.heldout[:n].copy()
    rng = np.random.default_rng(seed)
    g = rng.integers(0, len(groups), len(clean))
    member = rng.integers(0, groups.shape[1], len(clean))
    bit = groups[g, member]                                                     # (n,)
    corrupt = clean.copy()
    corrupt[np.arange(len(clean)), bit] ^= 1
    direction = np.zeros(clean.shape, np.float32)
    for i, (gi, b) in enumerate(zip(g, bit)):
        mates = groups[gi][groups[gi] != b]
        direction[i, mates] = to_signed(clean[i, mates])
    return clean, corrupt, direction, bit


def token_groups(net, rule):
    """(T, T) bool: tokens i ≠ j hold pixels of one parity group (DiT patches; a register shares none)."""
    (ph, pw), (gh, gw) = net.patch_shape, net.grid
    W = net.input_size[1]
    pix = np.arange(rule.n_bits) % (net.input_size[0] * W)                      # channel-free pixel index
    token = (pix // W // ph) * gw + (pix % W) // pw                             # (D,)
    T = gh * gw + (net.register is not None)
    share = np.zeros((T, T), bool)
    for grp in rule.groups:
        t = np.unique(token[grp])
        share[np.ix_(t, t)] = True
    np.fill_diagonal(share, False)
    return share


def group_attention(D, net, rule, bits, sigmas, seed):
    """(sigma, layer, head) attention mass from each query token to keys sharing a group with it, and
    the uniform-attention share (sigma-independent scalar)."""
    share = token_groups(net, rule)                                             # (T, T)
    y = to_signed(torch.as_tensor(bits))
    eps = randn_per_sample(seed, np.arange(len(bits)), bits.shape[1])
    out = []
    for s in sigmas:
        _, c = run_with_cache(D, y + float(s) * eps, float(s), names="blocks.*.attn.hook_pattern",
                              return_type="dataset")
        pat = c.attn_pattern.values                                             # (B, L, h, T, T)
        out.append((pat * share).sum(-1).mean(axis=(0, 3)))                     # (L, h)
    return np.stack(out), float(share.sum(1).mean() / share.shape[0])


def reduce_pairs(num, den, floor=DEN_FLOOR):
    """Per-pair and pooled effects from numerators num (..., site, pair) = m(patched) − m(corrupt) and
    contrasts den (..., pair) = m(clean*) − m(corrupt).

    Returns (pooled (..., site), reason (..., site) "" / "mixed sign" / "below floor", per_pair (..., site,
    pair)): per pair num / den (unit_ratio: NaN where |den| < floor); pooled = Σ num / Σ den over the pairs
    whose own |den| ≥ floor (pooled_ratio: NaN where their den have mixed sign or |mean| < floor, or none
    is left). A pair without a contrast says nothing about the fraction restored: it neither enters the
    sums nor makes the signs "mixed" by a noise-sized value of the other sign."""
    num = np.asarray(num, np.float64)
    den = np.broadcast_to(np.asarray(den, np.float64)[..., None, :], num.shape)
    per_pair, small = unit_ratio(num, den, floor)
    keep = small == ""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)                      # no pair left: all-NaN mean
        pooled, reason = pooled_ratio(np.where(keep, num, np.nan), np.where(keep, den, np.nan), axis=-1,
                                      floor=floor)
    return pooled, np.asarray(reason, dtype="U11"), per_pair


def _patch_sigma(D, pair, s, site_list, seed):
    """(numerators (site, pair), contrasts (pair,)) of one pair kind at one σ; patch's own warning is left
    to the caller, which counts the undefined cells of the whole probe once."""
    clean, corrupt, direction = pair
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ds = patch(D, clean, corrupt, float(s), sites=site_list, seed=seed, direction=direction)
    return ds.effect_numerator.values, (ds.metric_clean - ds.metric_corrupt).values


def _one(D, sigmas, sites, pairs, seed, floor):
    """The probe on one denoiser -> Dataset (sigma, site[, pair])."""
    net, kind = network_of(D)
    if kind != "dit":
        raise ConfigError("circuits takes DiT denoisers (a GPT series has no noise level to patch at)")
    site_list = resolve_sites(net, sites)
    data, one = {}, {"units": "1"}
    for name, pair in pairs.items():
        if pair[0] is None:
            continue
        got = [_patch_sigma(D, pair, s, site_list, seed + (COPY_SEED if name == "copy" else RULE_SEED))
               for s in sigmas]
        num, den = np.stack([g[0] for g in got]), np.stack([g[1] for g in got])        # (σ, site, pair), (σ, pair)
        pooled, reason, per_pair = reduce_pairs(num, den, floor)
        sign = (" (negative or near 0 on copy pairs: the held-out neighbour is answered like the training item, "
                "as copying does)" if name == "copy" else "")
        data[f"{name}_effect"] = (("sigma", "site"), pooled, {**one, "long_name": f"{name} pairs: patching effect "
                                  "pooled over pairs, Σ numerator / Σ contrast (0 corrupt, 1 clean); NaN: see "
                                  f"{name}_effect_undefined"})
        data[f"{name}_effect_undefined"] = (("sigma", "site"), reason, {
            "long_name": f"why {name}_effect is NaN ('' where defined: contrasts of one sign, |mean| ≥ floor)"})
        data[f"{name}_effect_pair"] = (("sigma", "site", f"{name}_pair"), per_pair, {
            **one, "long_name": "per-pair effect, NaN where the pair's |contrast| < floor"})
        data[f"{name}_numerator_pair"] = (("sigma", "site", f"{name}_pair"), num, {
            **one, "long_name": "m(patched) − m(corrupt) per pair"})
        data[f"{name}_total_pair"] = (("sigma", f"{name}_pair"), den, {
            **one, "long_name": "contrast m(clean*) − m(corrupt) per pair (the pooled effect's denominators)" + sign})
        data[f"{name}_total"] = (("sigma",), den.mean(-1), {
            **one, "long_name": f"{name} pairs: mean contrast m(clean*) − m(corrupt), with its sign" + sign})
    coords = {"sigma": ("sigma", np.asarray(sigmas, float), {"units": "1", "long_name": "noise level σ"}),
              "site": [st.label for st in site_list], "site_kind": ("site", [st.kind for st in site_list]),
              "site_layer": ("site", [st.layer for st in site_list])}
    return xr.Dataset(data, coords=coords, attrs={"floor": float(floor)})


def _check_sites(obj, sites, steps):
    """Sites resolved against the first model (a series: its first chosen checkpoint), before any work."""
    if is_series(obj):
        first = min(int(s) for s in (obj.steps if steps is None else np.atleast_1d(steps)))
        model = obj.denoiser(first) if first in set(int(s) for s in obj.steps) else None
    else:
        model = next(iter(obj.values())) if isinstance(obj, Mapping) and obj else obj
    if model is not None:
        resolve_sites(network_of(model)[0], sites)


def circuits(D_or_series, sigmas=DEFAULT_SIGMAS, n_pairs=32, sites="all", seed=0, attention=True, dataset=None,
             rule=None, *, floor=DEN_FLOOR, steps=None, out=None, device="cpu", progress=None, overwrite=False,
             model_id=None):
    """Patching effects per checkpoint, σ and site for copy and rule pairs; attention by parity group.

    Parameters
    ----------
    D_or_series : a DiT denoiser, a CheckpointSeries or {step: denoiser}.
    sigmas : noise levels (default 0.3, 0.7, 1.5: the band where the basins change).
    n_pairs : pairs of each kind (the first n_pairs training / held-out items).
    sites : as for `scoreprobe.patch` ("all": block, sub-block, head and token sites of every block).
    seed : noise (shared by a pair's two inputs) and the choice of flipped bits.
    attention : also measure attention to same-group keys (parity rules only).
    dataset, rule : for a plain denoiser (a series brings its own).
    floor : the smallest |contrast| (metric units) an effect is taken over (scoreprobe.inside.ratio).
    steps, out, device, progress, overwrite, model_id : as for the other probes (`sweep`; `out` resumes).

    Returns
    -------
    xarray.Dataset, dims (step, sigma, site, copy_pair, rule_pair, layer, head): `copy_effect`,
    `rule_effect` (step, sigma, site) pooled effects, NaN where undefined, the reason in
    `*_effect_undefined` (step, sigma, site) ("" defined, "mixed sign", "below floor"; one UserWarning
    counts them); `*_effect_pair` per pair (NaN where the pair's |contrast| < floor) and
    `*_numerator_pair` (m(patched) − m(corrupt)); `*_total` (step, sigma) the mean contrast clean* − corrupt
    they are fractions of, with its sign (`*_total_pair` per pair: pooled = Σ numerator / Σ total);
    `attn_same_group` (step, sigma, layer, head) with `attn_same_group_chance` in attrs (where heads look,
    not an effect); `rule_bit` (rule_pair) the flipped bits. Read per σ: never average effects over σ.
    """
    dataset, rule = dataset_and_rule(D_or_series, dataset, rule, need_rule=True, who="circuits")
    sig = np.atleast_1d(np.asarray(sigmas, dtype=np.float64))
    if sig.ndim != 1 or not np.all(np.isfinite(sig) & (sig > 0) & (sig <= MAX_SIGMA)) or sig.size > MAX_SIGMAS:
        raise ConfigError(f"sigmas must be at most {MAX_SIGMAS} positive numbers of at most {MAX_SIGMA:g}, "
                          f"got {str(sigmas)[:80]}")
    if int(n_pairs) < 1:
        raise ConfigError(f"n_pairs must be a positive integer, got {n_pairs!r}")
    if not floor >= 0:
        raise ConfigError(f"floor must be a non-negative number, got {floor!r}")
    clean, corrupt = copy_pairs(dataset, int(n_pairs))
    rc, rr, rdir, bit = rule_pairs(dataset, rule, int(n_pairs), seed)
    pairs = {"copy": (clean, corrupt, None), "rule": (rc, rr, rdir)}
    _check_sites(D_or_series, sites, steps)
    parity = attention and getattr(rule, "groups", None) is not None
    config = {"probe": "circuits", "reading": "per-sigma, checked contrasts", "floor": float(floor),
              "sigmas": sig.tolist(), "n_pairs": int(n_pairs), "seed": int(seed),
              "sites": sites if isinstance(sites, str) else [str(s) for s in sites], "attention": bool(parity)}

    def probe(D):
        ds = _one(D, sig, sites, pairs, seed, floor)
        if parity:
            mass, chance = group_attention(D, network_of(D)[0], rule, rc, sig, seed + 3)
            ds["attn_same_group"] = (("sigma", "layer", "head"), mass, {
                "units": "1", "long_name": "attention mass on keys sharing a parity group with the query"})
            ds.attrs["attn_same_group_chance"] = chance
        return ds.assign_coords(rule_bit=("rule_pair", bit)).assign_attrs(
            title="patching effects: copy and rule pairs", scoreprobe_config=json.dumps(config, sort_keys=True))

    ds = run_probe(probe, D_or_series, config, steps=steps, out=out, device=device, progress=progress,
                   overwrite=overwrite, model_id=model_id)
    for name in ("rule", "copy"):
        if f"{name}_effect_undefined" in ds:                  # read back from a store: numpy's StringDType
            v = ds[f"{name}_effect_undefined"]
            ds[f"{name}_effect_undefined"] = v.copy(data=np.asarray(v.values.tolist(), dtype="U11"))
            warn_undefined(ds[f"{name}_effect_undefined"].values, what=f"circuits: {name} pooled effects "
                           "(step, σ, site)", floor=floor)
    return ds


def gpt_rule_pairs(dataset, rule, n, seed):
    """(clean, corrupt uint8 (n, D), positions float (n, D)) for a GPT read teacher-forced: held-out items, the first
    member (token order = bit index) of a randomly chosen parity group flipped; positions one-hot at that group's
    last member, the bit parity fixes given the others (read it with `patch(..., metric="logit_diff",
    positions=...)`: the rule's own log-odds)."""
    groups = np.sort(np.asarray(rule.groups), axis=1)                          # (n_groups, G), ascending
    clean = dataset.heldout[:n].copy()
    g = np.random.default_rng(seed).integers(0, len(groups), len(clean))
    rows = np.arange(len(clean))
    corrupt = clean.copy()
    corrupt[rows, groups[g, 0]] ^= 1
    positions = np.zeros(clean.shape)
    positions[rows, groups[g, -1]] = 1.0
    return clean, corrupt, positions


def ode_outcomes(series, sites, n_pairs, sigma_stars, sigma_start, n_steps, seed=5):
    """At the last checkpoint of a series: where patching each site at every PF-ODE evaluation with σ ≤ σ* sends
    the corrupt trajectory (`scoreprobe.inside.patch_ode`), for n_pairs rule and copy pairs; `sites` {"rule":
    [label], "copy": [label]}. -> [{kind, site, sigma_star, n_apart, n_together, together_moved, to_clean,
    to_corrupt, to_third}]: shares of the pairs that end apart unpatched, counts over pairs."""
    from scoreprobe.inside import patch_ode
    D = series.denoiser(int(max(series.steps)))
    pairs = {"copy": copy_pairs(series.dataset, n_pairs),
             "rule": rule_pairs(series.dataset, series.rule, n_pairs, 0)[:2]}
    out = []
    for kind in ("rule", "copy"):
        for star in sigma_stars:
            f = patch_ode(D, *pairs[kind], sites[kind], sigma_star=star, sigma_start=sigma_start, n_steps=n_steps,
                          seed=seed)
            for s in sites[kind]:
                c = f.sel(site=s)
                out.append({"kind": kind, "site": s, "sigma_star": star, "n_apart": int(f.attrs["n_apart"]),
                            "n_together": int(f.attrs["n_together"]), "together_moved": int(c.together_moved),
                            **{k: float(c[f"{k}_share"]) for k in ("to_clean", "to_corrupt", "to_third")}})
    return out
