"""Is the null a property of the network or of one SAE setting? One SAE per (site, σ, setting) at chosen steps.

    python analyses/features --sweep          # adds "sweep" to features_<preset>.json, rewrites the .md

At each of the sweep's checkpoints, the study's rows (every training item, then held-out items) are noised at each
σ of the sweep with their own draw (the σ = 0.7 cell's inputs equal the main table's), cached at every site
(sp.run_with_cache) and stacked over σ into one Dataset (sigma, sample, ...); sp.sae_sweep trains and scores one
TopK SAE per (site, σ) for each (d_sae, k) setting, against the rule's features of that σ's noisy bits and the
18 'group odd' mean-difference directions of that cell (sp.probe_directions). Per cell: the group coverage (groups
with a latent of F1 >= 0.8 for either polarity, the main table's definition), the best group F1, the MCC, EV,
L0 and the linear probe's held-out accuracy against the majority answer. SAE seed 0 in every cell.
"""
import numpy as np
import torch
import xarray as xr

import scoreprobe as sp
from analyses.features.inputs import noised
from analyses.features.last import best_of, best_text, group_best, probe_means

SWEEP = {"cpu": dict(steps=[4243, 36000], sigmas=[0.35, 0.7, 1.4], settings=[[128, 8], [512, 32]]),
         "smoke": dict(steps=[36000], sigmas=[0.35, 0.7], settings=[[64, 4], [32, 4]])}
KEYS = ("group_best_f1", "mcc", "explained_variance")   # compared with the main table where a cell repeats it


def sigma_cache(series, step, names, clean, sigmas):
    """(Dataset (sigma, sample, ...) of the sites' activations, {σ: rule features of that σ's noisy bits})."""
    D, parts, truth = series.denoiser(step), [], {}
    for s in sigmas:
        x = noised(clean, s)
        _, ds = sp.run_with_cache(D, x, s, names=names, return_type="dataset")
        parts.append(ds.drop_vars("sigma").expand_dims(sigma=[float(s)]))
        truth[float(s)] = sp.rule_features(series.rule, sp.to_bits(x).numpy(), clean=clean,
                                           train=series.dataset.train)
    return xr.concat(parts, dim="sigma"), truth


def sweep_step(series, step, cfg, clean, opts):
    """Rows (one per site, σ and setting) of the sweep at one checkpoint."""
    names = [f"blocks.{i}.hook_resid_post" for i in cfg["sites"]]
    cache, truth = sigma_cache(series, step, names, clean, opts["sigmas"])
    n_groups = int((next(iter(truth.values())).kind == "group").sum()) // 2
    odd = [f"group{j}=odd" for j in range(n_groups)]
    probes = {(site, s): sp.probe_directions(cache, truth[s], site=site, sigmas=[s])
              for site in names for s in truth}
    rows = []
    for d_sae, k in opts["settings"]:
        ds = sp.sae_sweep(cache, names, d_sae, k=k, steps=cfg["sae_steps"], seed=0, progress=False,
                          ground_truth=lambda _step, s: truth[s],
                          directions=lambda site, _step, s: probes[site, s].mean_difference.sel(feature=odd).values)
        for site in names:
            for s in truth:
                cell, pr = ds.sel(site=site, sigma=s), probes[site, s]
                best = np.asarray(group_best(cell.best_f1, n_groups))
                rows.append(dict(step=int(step), site=site, sigma=s, d_sae=int(d_sae), k=int(k), n_groups=n_groups,
                                 group_coverage=int(np.sum(best >= 0.8)), group_best_f1=[float(v) for v in best],
                                 mcc=float(cell.mcc), explained_variance=float(cell.explained_variance),
                                 l0=float(cell.l0), odd_share=float(truth[s].sel(feature=odd).values.mean()),
                                 **probe_means(pr, odd)))
    return rows


def run_sweep(series, cfg, clean, opts, log=None):
    """{"opts": opts, "rows": [...]} over the sweep's steps (each step's cache built once)."""
    torch.set_num_threads(1)
    rows = []
    for step in opts["steps"]:
        rows += sweep_step(series, step, cfg, clean, opts)
        if log:
            log(f"features sweep: step {step} done\n")
    return dict(opts=opts, rows=rows)


def matches_table(sweep, report):
    """Whether every sweep cell that repeats a main-table cell (same step, site, σ and (d_sae, k)) reads the same;
    None when no cell repeats one."""
    cfg = report["config"]
    table = {(r["step"], r["site"]): r for r in report["rows"]}
    same = [all(np.array_equal(r[k], table[r["step"], r["site"]][k], equal_nan=True) for k in KEYS)
            for r in sweep["rows"] if (r["step"], r["site"]) in table and r["sigma"] == cfg["sigma"]
            and [r["d_sae"], r["k"]] == [cfg["d_sae"], cfg["k"]]]
    return all(same) if same else None


def sweep_md(sweep, tau_rule=None):
    """The .md section of the sweep (from its JSON)."""
    o = sweep["opts"]
    lines = ["## SAE settings and σ (sp.sae_sweep)", "",
             f"Steps {', '.join(map(str, o['steps']))}, σ {', '.join(f'{s:g}' for s in o['sigmas'])}, TopK SAEs "
             f"(d_sae, k) in {', '.join(f'({d}, {k})' for d, k in o['settings'])}, seed 0, one SAE per cell; each σ's "
             "inputs noised with their own draw (σ 0.7: the main table's inputs). 'odd share': the share of "
             "(row, group) pairs whose noisy bits have odd parity (the feature's base rate). Probe: held-out accuracy "
             "of the linear readout of 'group odd', mean over groups (majority answer in brackets). The cells that repeat "
             "a cell of the main table (its step, σ and SAE setting): "
             + {True: "same readings", False: "readings DIFFER", None: "none"}[sweep.get("equals_table")] + ".", "",
             "| step | site | σ | odd share | probe acc (majority) | (d_sae, k) | group coverage | best group F1 | MCC | EV | L0 |",
             "|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    for r in sweep["rows"]:
        lines.append(f"| {r['step']} | {r['site']} | {r['sigma']:g} | {r['odd_share']:.3f} | "
                     f"{r['probe_accuracy']:.3f} ({r['probe_majority']:.3f}) | ({r['d_sae']}, {r['k']}) | "
                     f"{r['group_coverage']}/{r['n_groups']} | {best_text(r['group_best_f1'])} | {r['mcc']:.3f} | "
                     f"{r['explained_variance']:.3f} | {r['l0']:.1f} |")
    top = max(sweep["rows"], key=lambda r: (r["group_coverage"], np.nan_to_num(best_of(r["group_best_f1"]), nan=-1)))
    lines += ["", f"Over all {len(sweep['rows'])} cells the highest group coverage is {top['group_coverage']}/"
              f"{top['n_groups']} and the best group F1 {best_text(top['group_best_f1'])} (step {top['step']}, "
              f"{top['site']}, σ {top['sigma']:g}, (d_sae, k) = ({top['d_sae']}, {top['k']})); coverage needs 0.8."
              + ("" if tau_rule is None else f" τ_rule = {tau_rule:.0f}."), ""]
    return lines
