"""Trained models as the units of the patching readings (`scoreprobe.stats.circuit_effects`, one dict per model):
per σ and site, the mean over models of a per-model value with a t interval (n − 1 df), the per-model values, and
a one-sample t test of "≠ 0" Holm-adjusted over a stated family; the outcomes along the PF-ODE; for a GPT, the
same at reading steps near the models' clocks.

A cell undefined in any model (its pooled effect NaN: contrasts of mixed sign or below the floor) stays
undefined across models, with the models and reasons that made it so.
"""
import numpy as np

from scoreprobe.stats.nearest_steps import nearest_step
from scoreprobe.stats.pvalues import adjust_family
from scoreprobe.stats.unit_intervals import cluster_share, t_summary, why_undefined

ALPHA = 0.05


def effects_across(per_model, kind, names, sites, sigmas):
    """Per σ and site, the last checkpoint's effect over models: mean, t CI, per-model values, the reason where
    undefined, its rank within the σ (of n_ranked defined cells; top_mean the σ's largest mean among them: an
    undefined cell has no mean to compare; NaN when none is defined), and Holm over the family of all defined
    (σ, site) cells of this pair kind."""
    e = np.array([per_model[n]["effects"][kind]["effect"] for n in names], np.float64)       # (M, σ, site)
    mean, lo, hi, p = t_summary(e)
    p_holm = adjust_family(p)
    why = why_undefined([per_model[n]["effects"][kind]["reason"] for n in names], names)
    half = np.array([per_model[n]["effects"][kind]["half_step_over_tau"] for n in names], np.float64)
    steps = np.array([per_model[n]["effects"][kind]["half_step"] for n in names], np.float64)
    sm, slo, shi, _ = (np.exp(v) for v in t_summary(np.log(steps)))            # geometric: steps are > 0
    bound = np.array([per_model[n]["effects"][kind]["half_step_is_bound"] for n in names], bool)
    hm, hlo, hhi, _ = t_summary(half)
    rank = ranks(mean)
    n_ranked = np.isfinite(mean).sum(1)                                        # (σ,) defined cells per σ
    top = [float(np.nanmax(m)) if n else np.nan for m, n in zip(mean, n_ranked)]   # NaN (undefined) cells skipped
    cells = []
    for s, sig in enumerate(sigmas):
        for j, site in enumerate(sites):
            cells.append({"sigma": float(sig), "site": site, "mean": mean[s, j], "ci": [lo[s, j], hi[s, j]],
                          "rank": rank[s, j], "n_ranked": int(n_ranked[s]), "top_mean": top[s],
                          "per_model": e[:, s, j].tolist(), "p": p[s, j], "p_holm": p_holm[s, j],
                          "undefined": why[s, j], "half_over_tau": half[:, s, j].tolist(),
                          "half_is_bound": bound[:, s, j].tolist(), "half_step": steps[:, s, j].tolist(),
                          "half_step_mean": sm[s, j], "half_step_ci": [slo[s, j], shi[s, j]],
                          "half_over_tau_mean": hm[s, j], "half_over_tau_ci": [hlo[s, j], hhi[s, j]]})
    family = {"what": f"{kind} pairs: effect ≠ 0 (one-sample t over models), every defined (σ, site) cell at the "
                      "last checkpoint", "size": int(np.isfinite(p).sum()), "alpha": ALPHA, "method": "holm"}
    return cells, family


def ranks(mean):
    """(σ, site) rank of each defined cell within its σ by mean effect over models (1 = largest; NaN: undefined),
    so a Holm-significant cell is read beside the size of the effects that are not."""
    out = np.full(mean.shape, np.nan)
    for s in range(mean.shape[0]):
        ok = np.flatnonzero(np.isfinite(mean[s]))
        out[s, ok[np.argsort(-mean[s, ok], kind="stable")]] = np.arange(1, ok.size + 1)
    return out


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
    """Per (kind, site, σ*): the outcome shares over the apart pairs, mean over models with an interval inside
    [0, 1] (`unit_intervals.cluster_share`: Korn–Graubard, the models' spread in it) and the per-model values, and
    the counts per model (apart, together, together moved)."""
    rows = {}
    for n in names:
        for r in ode[n]:
            rows.setdefault((r["kind"], r["site"], r["sigma_star"]), []).append(r)
    out = []
    for (kind, site, star), rs in rows.items():
        row = {"kind": kind, "site": site, "sigma_star": star, "n_apart": [r["n_apart"] for r in rs],
               "n_together": [r["n_together"] for r in rs], "together_moved": [r["together_moved"] for r in rs]}
        n = np.array([[r["n_apart"]] for r in rs], np.float64)                                 # (M, 1)
        for k in ("to_clean", "to_corrupt", "to_third"):
            v = np.array([[np.nan if r[k] is None else r[k]] for r in rs], np.float64)        # (M, 1)
            mean, lo, hi = cluster_share(v, n)
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


def ode_sites(cells, sigmas, kinds_of):
    """The top sub-block and top head (by mean effect over models) at each σ, once each, then `*`."""
    out = []
    for s in sigmas:
        for k in ("sub", "head"):
            best = next((c["site"] for c in ranked(cells, s, kinds_of, n_top=0) if kinds_of[c["site"]] == k), None)
            if best is not None and best not in out:
                out.append(best)
    return out + ["*"]


def read_steps(steps, taus):
    """The common checkpoints nearest (in ln(step + 1)) to the models' mean τ_rule and τ_mem, and the last
    -> {"tau_rule": step, "tau_mem": step, "last": step} (a clock no model reaches is left out)."""
    out = {}
    for k in ("tau_rule", "tau_mem"):
        v = [t.get(k) for t in taus.values() if t.get(k) is not None]
        if v:
            out[k] = nearest_step(steps, np.mean(v))
    out["last"] = int(steps[-1])
    return out


def gpt_across(per_model, names, at):
    """Per pair kind, reading step (`at`) and site: the effect over models (mean, t CI, per-model values, the
    undefined models' reasons) and a one-sample t test of ≠ 0, Holm over every defined (reading, site) cell of
    the kind; the contrast per reading over models."""
    first = per_model[names[0]]
    idx = {k: first["steps"].index(s) for k, s in at.items()}
    out = {}
    for kind in ("rule", "copy"):
        e = np.array([[per_model[n][kind]["effect"][i] for i in idx.values()] for n in names], float)  # (M, R, site)
        mean, lo, hi, p = t_summary(e)
        p_holm = adjust_family(p)
        why = why_undefined([[per_model[n][kind]["reason"][i] for i in idx.values()] for n in names], names)
        c = np.array([[per_model[n][kind]["contrast_mean"][i] for i in idx.values()] for n in names], float)
        cm, clo, chi, _ = t_summary(c)
        cells = [{"read": r, "step": at[r], "site": site, "mean": mean[a, j], "ci": [lo[a, j], hi[a, j]],
                  "per_model": e[:, a, j].tolist(), "p": p[a, j], "p_holm": p_holm[a, j], "undefined": why[a, j]}
                 for a, r in enumerate(idx) for j, site in enumerate(first["sites"])]
        out[kind] = {"cells": cells, "family": {"size": int(np.isfinite(p).sum()), "alpha": ALPHA, "method": "holm",
                                                "what": f"{kind} pairs: effect ≠ 0 (one-sample t over models), every "
                                                        "defined (reading step, site) cell"},
                     "contrast": {r: {"mean": cm[a], "ci": [clo[a], chi[a]], "per_model": c[:, a].tolist()}
                                  for a, r in enumerate(idx)}}
    return out
