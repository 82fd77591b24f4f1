"""Per-model readings of patching effects (`sp.circuits` on a DiT, `sp.patch` with the logit metric on a GPT): every
quantity per σ, never averaged over σ; pooled effects through the checked ratio
(scoreprobe.probes.circuits.reduce_pairs), NaN with the reason where the pairs' contrasts have mixed sign or are
below the floor, with bootstrap intervals over pairs.

All functions are pure: Dataset (or series) in, plain dict of lists out (json-ready once NaN is made None:
`scoreprobe.store.json_ready`).
"""
import warnings

import numpy as np

from scoreprobe.probes.circuits import reduce_pairs


def crossing(steps, curve, final):
    """First step where `curve` reaches final/2, interpolated linearly in log(step + 1) between the
    checkpoints around it; checkpoints where the curve is NaN (no contrast to split, e.g. step 0 of an
    adaLN-Zero network) are skipped; at the first finite checkpoint already: that step (a bound).
    NaN when final ≤ 0 or never reached."""
    if not np.isfinite(final) or final <= 0:
        return np.nan
    ok = np.isfinite(curve)
    steps, curve = np.asarray(steps, float)[ok], np.asarray(curve, float)[ok]
    above = np.flatnonzero(curve >= final / 2)
    if len(above) == 0:
        return np.nan
    i = above[0]
    if i == 0:
        return float(steps[0])
    a, b = np.log(steps[i - 1] + 1), np.log(steps[i] + 1)
    f = (final / 2 - curve[i - 1]) / (curve[i] - curve[i - 1])
    return float(np.exp(a + f * (b - a)) - 1)


def decay(steps, curve):
    """First step after the curve's peak where it falls to half of the peak (log(step + 1)-interpolated);
    NaN if it never does. As `crossing`, only the checkpoints where the curve is defined take part
    (a NaN metric is a checkpoint that says nothing; NaN when none is defined)."""
    ok = np.isfinite(curve)
    if not ok.any():
        return np.nan
    steps, curve = np.asarray(steps, float)[ok], np.asarray(curve, float)[ok]
    k = int(np.argmax(curve))
    below = np.flatnonzero(curve[k:] <= curve[k] / 2)
    if len(below) == 0:
        return np.nan
    i = k + below[0]
    a, b = np.log(steps[i - 1] + 1), np.log(steps[i] + 1)
    f = (curve[k] / 2 - curve[i - 1]) / (curve[i] - curve[i - 1])
    return float(np.exp(a + f * (b - a)) - 1)


def arrays(ds, kind):
    """(num (step, σ, site, pair), den (step, σ, pair)) of one pair kind."""
    num = ds[f"{kind}_numerator_pair"].transpose("step", "sigma", "site", f"{kind}_pair").values
    return num, ds[f"{kind}_total_pair"].transpose("step", "sigma", f"{kind}_pair").values


def pair_ci(num, den, n_boot, seed, floor):
    """Bootstrap over pairs of the last checkpoint's pooled effects: (lo, hi (σ, site), defined share (σ, site)).
    num (σ, site, pair), den (σ, pair); percentiles over the resamples where the effect is defined."""
    n = num.shape[-1]
    rng = np.random.default_rng(seed)
    boot = np.stack([reduce_pairs(num[..., i], den[..., i], floor)[0]
                     for i in (rng.integers(0, n, n) for _ in range(n_boot))])      # (B, σ, site)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)                        # all-NaN cells: NaN bounds
        lo, hi = np.nanpercentile(boot, [2.5, 97.5], axis=0)
    return lo, hi, np.isfinite(boot).mean(0)


def effects(ds, kind, tau, n_boot, seed, floor):
    """Per σ and site: the last checkpoint's pooled effect, its reason, a pair-bootstrap CI, and the step at
    which the effect first reaches half of its last value, in units of `tau` (the model's clock; a bound
    `half_step_is_bound` where it is already there at the first checkpoint with a defined effect)."""
    num, den = arrays(ds, kind)
    curves, reason, _ = reduce_pairs(num, den, floor)                          # (step, σ, site)
    lo, hi, share = pair_ci(num[-1], den[-1], n_boot, seed, floor)
    steps = ds.step.values.astype(float)
    half = np.array([[crossing(steps, curves[:, s, j], curves[-1, s, j]) for j in range(curves.shape[2])]
                     for s in range(curves.shape[1])])                          # (σ, site)
    first = np.array([[steps[np.isfinite(curves[:, s, j])][0] if np.isfinite(curves[:, s, j]).any() else np.nan
                       for j in range(curves.shape[2])] for s in range(curves.shape[1])])
    return {"effect": curves[-1].tolist(), "reason": reason[-1].tolist(), "pair_ci": np.stack([lo, hi], -1).tolist(),
            "pair_ci_defined_share": share.tolist(), "half_step": half.tolist(),
            "half_step_over_tau": (half / (np.nan if tau is None else tau)).tolist(),
            "half_step_is_bound": (half == first).tolist(), "curve": np.round(curves, 4).tolist()}   # curve: figure only


def copy_contrast(ds, tau_mem):
    """Per σ: the copy contrast (mean over pairs, with its sign) at every checkpoint, the number of pairs with
    a negative contrast at the last one, and the step at which it falls to half of its peak / τ_mem."""
    den = ds.copy_total_pair.transpose("step", "sigma", "copy_pair").values                # (step, σ, pair)
    steps = ds.step.values.astype(float)
    mean = den.mean(-1)
    return {"total": mean.T.tolist(), "negative_last": (den[-1] < 0).sum(-1).tolist(), "n_pairs": den.shape[-1],
            "half_decay_over_tau": [decay(steps, mean[:, s]) / (np.nan if tau_mem is None else tau_mem)
                                    for s in range(mean.shape[1])]}


def rule_contrast(ds):
    """Per σ: the rule contrast (mean over pairs) at every checkpoint and the negative pairs at the last one."""
    den = ds.rule_total_pair.transpose("step", "sigma", "rule_pair").values
    return {"total": den.mean(-1).T.tolist(), "negative_last": (den[-1] < 0).sum(-1).tolist()}


def attention(ds):
    """(σ, layer, head) attention mass to same-group keys at the last checkpoint, and the uniform share."""
    if "attn_same_group" not in ds:
        return None
    a = ds.attn_same_group.isel(step=-1).transpose("sigma", "layer", "head").values
    return {"last": a.tolist(), "chance": float(ds.attrs["attn_same_group_chance"])}


def sub_blocks(ds, kind, floor):
    """Per σ, at the last checkpoint: Σ over layers of the attention and of the MLP sub-block effects (NaN
    where one of them is undefined)."""
    num, den = arrays(ds, kind)
    e = reduce_pairs(num[-1], den[-1], floor)[0]                                # (σ, site)
    labels = np.array([str(s) for s in ds.site.values])
    is_attn, is_mlp = np.char.endswith(labels, "hook_attn_out"), np.char.endswith(labels, "hook_mlp_out")
    return {"attn": e[:, is_attn].sum(1).tolist(), "mlp": e[:, is_mlp].sum(1).tolist()}


def read_model(ds, taus, n_boot, seed, floor):
    """Everything the study reads from one model's Dataset (see the functions above)."""
    return {"effects": {k: effects(ds, k, taus["tau_rule" if k == "rule" else "tau_mem"], n_boot, seed, floor)
                        for k in ("rule", "copy")},
            "copy_contrast": copy_contrast(ds, taus["tau_mem"]), "rule_contrast": rule_contrast(ds),
            "attention": attention(ds), "sub_blocks": {k: sub_blocks(ds, k, floor) for k in ("rule", "copy")}}


def _logit_patch(net, pair, sites, floor):
    """(numerators (site, pair), contrasts (pair,), site labels) of one pair kind at one GPT checkpoint; pair =
    (clean, corrupt) or (clean, corrupt, positions)."""
    from scoreprobe.inside import patch
    ds = patch(net, pair[0], pair[1], None, sites=sites, metric="logit_diff", floor=floor,
               positions=pair[2] if len(pair) > 2 else None)
    den = (ds.metric_clean - ds.metric_corrupt).values
    return ds.effect_numerator.transpose("site", "sample").values, den, [str(s) for s in ds.site.values]


def gpt_effects(series, n_pairs, sites, floor, n_boot, log=None):
    """JSON-able readings of one GPT series, every checkpoint patched teacher-forced with the logit metric
    (copy pairs: `copy_pairs`; rule pairs: `gpt_rule_pairs`): per pair kind, the pooled effect per (step, site),
    its reason and a pair-bootstrap CI, the contrast's mean and negative pairs per step (logit units), and the
    step at which each site's effect first reaches half of its last value. `log(str)` hears of each step."""
    from scoreprobe.probes.circuits import copy_pairs, gpt_rule_pairs
    steps = [int(s) for s in series.steps]
    pairs = {"copy": copy_pairs(series.dataset, n_pairs),
             "rule": gpt_rule_pairs(series.dataset, series.rule, n_pairs, 0)}
    num = {k: [] for k in pairs}
    den = {k: [] for k in pairs}
    labels = None
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning)               # undefined cells: kept with reasons
        for st in steps:
            net = series.sampler(st)
            for k, pair in pairs.items():
                n_, d_, labels = _logit_patch(net, pair, sites, floor)
                num[k].append(n_)
                den[k].append(d_)
            if log is not None:
                log(f"gpt step {st}: patched")
    out = {"steps": steps, "sites": labels, "n_pairs": n_pairs}
    for k in pairs:
        nu, de = np.stack(num[k]), np.stack(den[k])                             # (step, site, pair), (step, pair)
        pooled, reason, _ = reduce_pairs(nu, de, floor)                  # (step, site)
        lo, hi, share = pair_ci(nu, de, n_boot, 0, floor)         # (step, site) each
        half = [crossing(np.asarray(steps, float), pooled[:, j], pooled[-1, j]) for j in range(len(labels))]
        out[k] = {"effect": pooled.tolist(), "reason": reason.tolist(), "ci": np.stack([lo, hi], -1).tolist(),
                  "ci_defined_share": share.tolist(), "half_step": half,
                  "contrast_mean": de.mean(1).tolist(), "contrast_negative": (de < 0).sum(1).tolist()}
    return out
