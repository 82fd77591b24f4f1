"""The calls of `sp.decompose` over several trained models of one series, as the study reports keep them (JSON): the
calls pooled over models (the model is the unit: t over models and sign flips over points, Holm over every tested
cell of the series) and per model, the mixture weights of the offered oracles with t intervals over models, the r²
of each oracle averaged over models and the best patch size per σ; then the regions of (step × σ) cells each label
holds, and how often each model's own call agrees with the pooled one.

A cell names an oracle only where `scoreprobe.stats.decompose_calls.decompose_summary` calls it; otherwise one of
NO_CALL ("undecided", "indistinguishable", "shrinkage", "undefined", "none": nothing explains r² ≥ 0.8, "linear":
the network's own held-out affine fit does as well as every oracle).
"""
import warnings

import numpy as np

from scoreprobe.stats.decompose_calls import best_patch, decompose_summary, mixture_weights

NO_CALL = ("undecided", "indistinguishable", "shrinkage", "undefined", "none", "linear")


def _round(a, nd=4):
    a = np.asarray(a, dtype=float)
    return np.where(np.isfinite(a), np.round(a, nd), np.nan).tolist()


def _summary_json(s):
    keep = ("lead", "lead_lower", "lead_upper", "over_shrink_lower", "discriminability", "r2_shrink", "best_value",
            "r2_affine", "r2_mixture", "over_affine", "p_adjusted")
    out = {"label": s.best_oracle.transpose("step", "sigma", "split").values.astype(str).tolist(),
           "leader": s.leader.transpose("step", "sigma", "split").values.astype(str).tolist()}
    out.update({k: _round(s[k].transpose("step", "sigma", "split").values) for k in keep if k in s})
    return out


NESTED = (("memorizer", "rule"), ("memorizer", "rule", "gaussian"))   # subsets of the offered oracles mixed too


def nested_mixtures(items, boot, nested=NESTED):
    """{"+".join(set): {oracle, weight, lower, upper (step, σ, split, oracle), r2 (step, σ, split)}} of the mixture
    weights over each set of `nested` that is a proper subset of the offered oracles (`mixture_weights`, models as
    the units): the weights are conditional on the set, so the report shows them over nested sets."""
    offered = [str(o) for o in items[0].oracle.values]
    out = {}
    for chosen in nested:
        if not set(chosen) < set(offered):
            continue
        mx = mixture_weights(items, oracles=list(chosen), **boot)
        out["+".join(chosen)] = {"oracle": list(chosen), "r2": _round(mx["r2_simplex"].transpose("step", "sigma",
                                                                                                  "split").values),
                                 **{k: _round(mx[k].transpose("step", "sigma", "split", "oracle").values)
                                    for k in ("weight", "lower", "upper")}}
    return out


def calls_over_models(dss, n_boot, model_dirs):
    """{model: decompose Dataset} of one series' models ({model: run dir}: `model_dirs`) -> JSON-able: the calls pooled
    over models and per model (`decompose_summary`; "calls": its level, min_r2, adjust, family and unit), the mixture
    weights of the offered oracles ("oracle") with intervals over models (one model: `n_boot` point resamples) and
    over the nested sets of `NESTED` ("mixture_nested": `nested_mixtures`), the r² of each oracle averaged over models (step, σ, split, oracle) and the best patch size per σ of the first
    model."""
    names = list(dss)
    items = [dss[n] for n in names]
    boot = dict(n_boot=n_boot, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # undefined cells are kept as such in the labels
        pooled = decompose_summary(items)
        per_model = {n: _summary_json(decompose_summary(d)) for n, d in dss.items()}
        mix = mixture_weights(items, **boot)
        nested = nested_mixtures(items, boot)
        best_p = best_patch(items[0])
    first = items[0]
    r2 = np.mean([d.r2.transpose("step", "sigma", "split", "oracle").values for d in items], axis=0)
    return {"models": names, "model_dirs": {n: model_dirs[n] for n in names},
            "steps": [int(s) for s in first.step.values], "sigma": [float(s) for s in first.sigma.values],
            "split": [str(s) for s in first.split.values], "oracle": [str(o) for o in first.oracle.values],
            "n_boot": n_boot, "pooled": _summary_json(pooled), "per_model": per_model,
            "calls": {k: pooled.attrs[k] for k in ("level", "min_r2", "adjust", "family", "n_family", "unit",
                                                   "oracles")},
            "r2_mean": _round(r2),
            "mixture": {k: _round(mix[k].transpose("step", "sigma", "split", "oracle").values)
                        for k in ("weight", "lower", "upper")},
            "mixture_r2": _round(mix["r2_simplex"].transpose("step", "sigma", "split").values),
            "mixture_nested": nested,
            "best_patch_seed0": {"family": [str(f) for f in best_p.family.values],
                                 "patch": _round(best_p.best_patch.transpose("step", "sigma", "split", "family")
                                                 .values, 0)}}


def labels(m, split, which="pooled"):
    """(step, σ) labels of one split."""
    j = m["split"].index(split)
    return np.array(m[which]["label"] if which == "pooled" else m["per_model"][which]["label"], dtype=object)[:, :, j]


def regions(m, split):
    """{label: {cells, steps [lo, hi], sigma [lo, hi]}} of the pooled calls of one split."""
    lab = labels(m, split)
    out = {}
    for name in sorted(set(lab.ravel()), key=lambda n: (n in NO_CALL, n)):
        i, k = np.nonzero(lab == name)
        steps, sig = [m["steps"][a] for a in i], [m["sigma"][b] for b in k]
        out[name] = {"cells": int(len(i)), "steps": [min(steps), max(steps)], "sigma": [min(sig), max(sig)]}
    return out


def models_summary(m):
    """{"regions": {split: regions}, "per_model_agree": {model: [agreeing, called]}} of a `calls_over_models` result
    (held-out cells with a pooled call against each model's own call); None for None."""
    if not m:
        return None
    per_model_agree = {}
    for name in m["models"]:
        a, b = labels(m, "heldout"), labels(m, "heldout", name)
        called = ~np.isin(a, NO_CALL)
        per_model_agree[name] = [int((a[called] == b[called]).sum()), int(called.sum())]
    return {"regions": {sp: regions(m, sp) for sp in m["split"]}, "per_model_agree": per_model_agree}
