"""The last checkpoint's per-site readings with intervals, and each site's best latents with their top inputs.

    python analyses/features --last              # adds "last" to features_<preset>.json, rewrites the .md, the PNGs

At the study's last checkpoint, per site: TopK SAEs with the study's settings at several seeds (seed 0 is the
study's own cell: its readings are checked against the table's row), and for each seed a bootstrap over the rows
(n_boot resamples of the rows with replacement, the same resamples for every seed; percentile 95% interval) of the
best group F1 (max over the 18 groups and both polarities), the group coverage (groups with a latent of F1 >= 0.8)
and the MCC against the 18 'group odd' mean-difference directions, those refitted by sp.probe_directions on each
resample. The bootstrap measures the rows' sampling noise for one SAE; the seeds measure the SAE's own spread.
Next to them, the F1 of a latent on in every row, 2q/(1+q) with q the share of rows where the group is odd (the
largest over groups): a best F1 at that level is no better than "always on".

The best latents: per site, seed 0's `n_best` latents with the highest F1 against any group feature, and their
`k_top` top-activating rows (sp.top_activating), drawn with sp.plot_top_activating (clean item, noisy x; the title
names each latent's best feature of all, pixels and items included).
"""
import math

import numpy as np
import torch
import xarray as xr

import scoreprobe as sp
from scoreprobe.features.rows import site_rows
from scoreprobe.features.scores import F1_THRESHOLD, classifier_scores, mcc_scores

LAST = {"cpu": dict(seeds=[0, 1, 2], n_boot=100, n_best=3, k_top=6, boot_seed=0),
        "smoke": dict(seeds=[0, 1], n_boot=5, n_best=2, k_top=3, boot_seed=0)}


def last_checkpoint(series, cfg, clean, x, opts, summary):
    """(readings for JSON, {site: (tops, scores)} for the figures) at the last of cfg's steps.
    summary : run._summary (the table row's readings of one SAE's scores)."""
    step = max(cfg["steps"])
    names = [f"blocks.{i}.hook_resid_post" for i in cfg["sites"]]
    _, cache = sp.run_with_cache(series.denoiser(step), x, cfg["sigma"], names=names)
    truth = sp.rule_features(series.rule, sp.to_bits(x).numpy(), clean=clean, train=series.dataset.train)
    n_groups = int((truth.kind == "group").sum()) // 2
    odd = [f"group{j}=odd" for j in range(n_groups)]
    gtruth = truth.sel(feature=[f for f in truth.feature.values if f.startswith("group")])
    q = gtruth.sel(feature=odd).values.mean(0)
    out = dict(step=step, opts=opts, always_on_f1=float(np.max(2 * q / (1 + q))), sites={})
    drawn = {}
    for site in names:
        probes = sp.probe_directions(cache, truth, site=site)
        X = site_rows(cache, site)
        idx = _resamples(len(X), opts)
        dirs = [sp.probe_directions(X.isel(row=i), truth).mean_difference.sel(feature=odd).values for i in idx]
        t = gtruth.sel(sample=X["sample"].values)
        out["sites"][site] = {"seeds": {}}
        for seed in opts["seeds"]:
            sae = sp.train_sae(cache, cfg["d_sae"], site=site, k=cfg["k"], steps=cfg["sae_steps"], seed=seed,
                               progress=False)
            s = sp.sae_scores(sae, cache, truth, probes.mean_difference.sel(feature=odd), site=site)
            r = dict(summary(s, probes, n_groups, odd), boot=_bootstrap(sae, X, t, dirs, idx, n_groups))
            if seed == opts["seeds"][0]:
                tops, r["best_latents"] = best_latents(sae, cache, site, s, opts)
                drawn[site] = (tops, s)
            out["sites"][site]["seeds"][str(seed)] = r
    return out, drawn


def _resamples(n, opts):
    rng = np.random.default_rng(opts["boot_seed"])
    return [rng.integers(0, n, n) for _ in range(opts["n_boot"])]


def _bootstrap(sae, X, truth, dirs, idx, n_groups):
    """Percentile 95% intervals of best group F1, group coverage and MCC over the row resamples `idx`."""
    with torch.no_grad():
        active = (sae.encode(torch.as_tensor(X.values)) > 0).numpy()             # (n, d_sae)
    W = sae.W_dec.detach().numpy()
    best, cover, mcc = [], [], []
    for i, d in zip(idx, dirs):
        t = xr.DataArray(truth.values[i], dims=("row", "feature"), coords={"feature": truth.feature.values})
        g = group_best(classifier_scores(active[i], t).best_f1, n_groups)
        best.append(best_of(g))
        cover.append(int(np.sum(g >= F1_THRESHOLD)))
        mcc.append(float(mcc_scores(W, d).mcc))
    return {name: _interval(v) for name, v in (("best_f1", best), ("coverage", cover), ("mcc", mcc))}


def _interval(values):
    """[2.5%, 97.5%] percentiles over the defined replicates, and how many were defined (NaN: undefined)."""
    v = np.asarray(values, dtype=np.float64)
    ok = v[np.isfinite(v)]
    lo, hi = (np.percentile(ok, [2.5, 97.5]) if ok.size else (np.nan, np.nan))
    return dict(lo=float(lo), hi=float(hi), n=int(ok.size))


def group_best(best_f1, n_groups):
    """(n_groups,) the better of each group's two polarities' best F1 (NaN where both are undefined)."""
    return polarity_best(best_f1, [(f"group{j}=even", f"group{j}=odd") for j in range(n_groups)])


def polarity_best(best_f1, pairs):
    """(len(pairs),) the better best F1 of each (feature, its other polarity) pair; NaN where both are undefined
    (a feature constant over the rows), never a number made up for it."""
    pair = np.stack([best_f1.sel(feature=[p[k] for p in pairs]).values for k in (0, 1)]).astype(np.float64)
    out = np.full(len(pairs), np.nan)
    ok = np.isfinite(pair).any(0)
    out[ok] = np.nanmax(pair[:, ok], axis=0)
    return out


def probe_means(probes, odd):
    """{"probe_accuracy", "probe_majority"}: the 'group odd' probes' held-out accuracy and majority answer, each
    averaged over the groups whose probe is defined (a group constant on the fitting part has none: NaN, skipped);
    NaN when no group's is."""
    def mean(v):
        v = np.asarray(v, dtype=np.float64)
        return float(v[np.isfinite(v)].mean()) if np.isfinite(v).any() else math.nan
    return dict(probe_accuracy=mean(probes.accuracy.sel(feature=odd)),
                probe_majority=mean(probes.majority.sel(feature=odd)))


def best_of(values):
    """The largest defined value, NaN where none is (the best F1 over groups whose F1 is defined)."""
    v = np.asarray(values, dtype=np.float64)
    return float(np.nanmax(v)) if np.isfinite(v).any() else math.nan


def best_latents(sae, cache, site, scores, opts):
    """The n_best latents with the highest F1 for any group feature (sp.best_latents), and their top rows."""
    chosen, feats, f1 = sp.best_latents(scores, opts["n_best"], prefix="group")
    tops = sp.top_activating(sae, cache, k=opts["k_top"], latents=chosen, site=site)
    rows = []
    for lat, feat, f in zip(chosen.tolist(), feats, f1):
        t = tops.sel(latent=lat)
        rows.append(dict(latent=lat, group_feature=str(feat), group_f1=float(f), n_active=int(t.n_active),
                         samples=t["sample"].values.tolist(),
                         activations=[None if np.isnan(a) else float(a) for a in t.activation.values]))
    return tops, rows


def last_md(last, png_dir=""):
    """The .md section of the last checkpoint's intervals and best latents (from the JSON of last_checkpoint)."""
    o = last["opts"]
    lines = [f"## At the last checkpoint (step {last['step']}): SAE seeds and row bootstrap", "",
             f"Per site, TopK SAEs at seeds {', '.join(map(str, o['seeds']))} (seed {o['seeds'][0]} is the table's "
             f"cell: {'same readings' if last['seed0_equals_table'] else 'readings DIFFER from the table'}); in "
             f"brackets the percentile 95% interval over {o['n_boot']} resamples of the rows (the same resamples for "
             "every seed; the MCC's directions refitted on each). A latent on in every row has F1 "
             f"{last['always_on_f1']:.2f} for the commonest odd group (2q/(1+q)).", "",
             "| site | seed | group coverage | best group F1 | MCC | EV |", "|---|---:|---:|---:|---:|---:|"]
    for site, rec in last["sites"].items():
        for seed, r in rec["seeds"].items():
            b = r["boot"]
            lines.append(f"| {site} | {seed} | {r['group_coverage']}/{r['n_groups']} {_iv(b['coverage'], 0)} | "
                         f"{best_text(r['group_best_f1'])} {_iv(b['best_f1'], 2)} | {r['mcc']:.3f} "
                         f"{_iv(b['mcc'], 3)} | {r['explained_variance']:.3f} |")
    highest = max(r["boot"]["best_f1"]["hi"] for rec in last["sites"].values() for r in rec["seeds"].values())
    lines += ["", f"The highest upper end of best group F1 over every site and seed: {highest:.2f} (coverage needs "
              f"{F1_THRESHOLD}). The bootstrap of a maximum (the best of d_sae × 36 F1s) is biased upward: a resample "
              "repeats rows, and with them chance coincidences of a latent and a group, so its interval may lie above "
              "the point reading; as an upper bound it is generous, not tight.", "",
              "## Each site's best latents and their top-activating inputs", "",
              f"Seed {o['seeds'][0]}'s {o['n_best']} latents with the highest F1 for any group feature; their "
              f"{o['k_top']} strongest rows (sample index: activation); the figure's titles name each latent's best "
              "feature of all (pixels and items included).", ""]
    for site, rec in last["sites"].items():
        lines += [f"### {site}", "", "| latent | best group feature (F1) | active on rows | top rows (sample: activation) |",
                  "|---:|---|---:|---|"]
        for b in rec["seeds"][str(o["seeds"][0])]["best_latents"]:
            top = ", ".join(f"{s}: {a:.2f}" for s, a in zip(b["samples"], b["activations"]) if s >= 0) or "none"
            lines.append(f"| {b['latent']} | {b['group_feature']} ({b['group_f1']:.2f}) | {b['n_active']} | {top} |")
        if rec.get("png"):
            lines += ["", f"![{site}: top-activating inputs]({png_dir}{rec['png']})"]
        lines.append("")
    return lines


def best_text(values):
    """The best defined F1 of `values` to 2 digits, 'undefined' where none is defined."""
    v = best_of(values)
    return "undefined" if math.isnan(v) else f"{v:.2f}"


def _iv(iv, digits):
    return f"[{iv['lo']:.{digits}f}, {iv['hi']:.{digits}f}]" if iv["n"] else "[undefined]"
