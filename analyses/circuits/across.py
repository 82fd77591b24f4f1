"""Trained models as the units: per σ and site, the mean over models of a per-model value with a t interval
(n − 1 df), the per-model values, and a one-sample t test of "≠ 0" Holm-adjusted over a stated family.

A cell undefined in any model (its pooled effect NaN: contrasts of mixed sign or below the floor) stays
undefined across models, with the models and reasons that made it so.
"""
import numpy as np
from scipy import stats

from scoreprobe.stats.pvalues import adjust_family
from scoreprobe.stats.intervals import t_interval

ALPHA = 0.05


def t_summary(values, ci=0.95):
    """values (M, ...) over models -> mean, lo, hi, p (two-sided one-sample t test of mean 0), each (...);
    NaN wherever a model's value is NaN, or fewer than 2 models."""
    v = np.asarray(values, np.float64)
    m = v.shape[0]
    mean, lo, hi = t_interval(np.moveaxis(v, 0, -1), ci)                         # models (first axis) as units
    if m < 2:
        return mean, lo, hi, np.full(mean.shape, np.nan)
    se = v.std(0, ddof=1) / np.sqrt(m)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = 2 * stats.t.sf(np.abs(mean / se), m - 1)
    p = np.where(se > 0, p, np.where(mean != 0, 0.0, 1.0))
    p = np.where(np.isfinite(mean), p, np.nan)
    return mean, lo, hi, p


def why_undefined(reasons, names):
    """reasons (M, ...) per model ("" defined) -> (...) object: "" or e.g. "s1: mixed sign; s2: below floor"."""
    r = np.asarray(reasons, dtype=object)
    out = np.full(r.shape[1:], "", dtype=object)
    for idx in np.ndindex(r.shape[1:]):
        parts = [f"{n}: {r[(i,) + idx]}" for i, n in enumerate(names) if r[(i,) + idx]]
        out[idx] = "; ".join(parts)
    return out


def effects_across(per_model, kind, names, sites, sigmas):
    """Per σ and site, the last checkpoint's effect over models: mean, t CI, per-model values, the reason where
    undefined, and Holm over the family of all defined (σ, site) cells of this pair kind."""
    e = np.array([per_model[n]["effects"][kind]["effect"] for n in names], np.float64)       # (M, σ, site)
    mean, lo, hi, p = t_summary(e)
    p_holm = adjust_family(p)
    why = why_undefined([per_model[n]["effects"][kind]["reason"] for n in names], names)
    half = np.array([per_model[n]["effects"][kind]["half_step_over_tau"] for n in names], np.float64)
    steps = np.array([per_model[n]["effects"][kind]["half_step"] for n in names], np.float64)
    sm, slo, shi, _ = (np.exp(v) for v in t_summary(np.log(steps)))            # geometric: steps are > 0
    bound = np.array([per_model[n]["effects"][kind]["half_step_is_bound"] for n in names], bool)
    hm, hlo, hhi, _ = t_summary(half)
    cells = []
    for s, sig in enumerate(sigmas):
        for j, site in enumerate(sites):
            cells.append({"sigma": float(sig), "site": site, "mean": mean[s, j], "ci": [lo[s, j], hi[s, j]],
                          "per_model": e[:, s, j].tolist(), "p": p[s, j], "p_holm": p_holm[s, j],
                          "undefined": why[s, j], "half_over_tau": half[:, s, j].tolist(),
                          "half_is_bound": bound[:, s, j].tolist(), "half_step": steps[:, s, j].tolist(),
                          "half_step_mean": sm[s, j], "half_step_ci": [slo[s, j], shi[s, j]],
                          "half_over_tau_mean": hm[s, j], "half_over_tau_ci": [hlo[s, j], hhi[s, j]]})
    family = {"what": f"{kind} pairs: effect ≠ 0 (one-sample t over models), every defined (σ, site) cell at the "
                      "last checkpoint", "size": int(np.isfinite(p).sum()), "alpha": ALPHA, "method": "holm"}
    return cells, family


def ranked(cells, sigma, kinds_of, n_top=3):
    """The cells of one σ ranked by mean effect over models (undefined last): the n_top best, then the best
    of each site kind (block, sub, head) not among them."""
    row = sorted([c for c in cells if c["sigma"] == sigma],
                 key=lambda c: -c["mean"] if np.isfinite(c["mean"]) else np.inf)
    out = row[:n_top]
    for k in ("block", "sub", "head"):
        best = next((c for c in row if kinds_of[c["site"]] == k and np.isfinite(c["mean"])), None)
        if best is not None and best not in out:
            out.append(best)
    return out


def scalar_across(per_model, names, get):
    """mean, [lo, hi], per-model values of a per-model list (σ,) picked by get(model dict)."""
    v = np.array([get(per_model[n]) for n in names], np.float64)               # (M, σ)
    mean, lo, hi, _ = t_summary(v)
    return {"mean": mean.tolist(), "ci": np.stack([lo, hi], -1).tolist(), "per_model": v.tolist()}


def ode_across(ode, names):
    """Per (kind, site, σ*): the outcome shares over the apart pairs, mean over models with a t CI and the
    per-model values, and the counts summed over models (apart, together, together moved)."""
    rows = {}
    for n in names:
        for r in ode[n]:
            rows.setdefault((r["kind"], r["site"], r["sigma_star"]), []).append(r)
    out = []
    for (kind, site, star), rs in rows.items():
        row = {"kind": kind, "site": site, "sigma_star": star, "n_apart": [r["n_apart"] for r in rs],
               "n_together": [r["n_together"] for r in rs], "together_moved": [r["together_moved"] for r in rs]}
        for k in ("to_clean", "to_corrupt", "to_third"):
            v = np.array([[np.nan if r[k] is None else r[k]] for r in rs], np.float64)        # (M, 1)
            mean, lo, hi, _ = t_summary(v)
            row[k] = {"mean": mean[0], "ci": [lo[0], hi[0]], "per_model": v[:, 0].tolist()}
        out.append(row)
    return out


def contrasts_across(per_model, names):
    """Per σ across models: the copy and rule contrasts at the last checkpoint (with their signs), the pairs
    with a negative contrast, the copy contrast's half-decay step / τ_mem, and attn − MLP sub-block sums."""
    last = lambda key: (lambda m: [t[-1] for t in m[key]["total"]])                      # noqa: E731
    out = {"copy_last": scalar_across(per_model, names, last("copy_contrast")),
           "rule_last": scalar_across(per_model, names, last("rule_contrast")),
           "copy_negative": [per_model[n]["copy_contrast"]["negative_last"] for n in names],
           "rule_negative": [per_model[n]["rule_contrast"]["negative_last"] for n in names],
           "copy_half_decay_over_tau": scalar_across(per_model, names,
                                                     lambda m: m["copy_contrast"]["half_decay_over_tau"])}
    for kind in ("rule", "copy"):
        out[f"{kind}_attn_minus_mlp"] = scalar_across(per_model, names, lambda m, k=kind: np.subtract(
            m["sub_blocks"][k]["attn"], m["sub_blocks"][k]["mlp"]))
    return out
