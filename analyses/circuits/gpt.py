"""The GPT of analyses/gpt_clocks patched with a logit metric, checkpoint by checkpoint (issue 55 item 7).

`sp.circuits` patches a DiT at a noise level; a GPT has none. It is patched teacher-forced on bits with
`sp.patch(..., metric="logit_diff")` (scoreprobe/inside/gpt_patch.py): the run's log-odds for the clean image's
bits from the first position where clean and corrupt differ. The two pair kinds as for the DiT:

    copy  clean = a training item, corrupt = its nearest held-out item (scoreprobe.probes.circuits.copy_pairs):
          which sites carry the log-odds of the training item's continuation.
    rule  clean = a held-out (valid) item, corrupt = the same with one bit flipped — the *first* member, in
          token order, of a parity group — and the log-odds read only at the group's *last* member
          (`positions=` one-hot there), the bit parity fixes given the others: the rule's own log-odds. The sum
          over every later position mixes in how the whole continuation depends on the prefix, and its
          contrasts had mixed sign over pairs in every model (the first run of this study).

Effects are pooled over pairs per checkpoint with the checked ratio (reduce_pairs: NaN where the pairs'
contrasts have mixed sign or are below the floor), with a bootstrap interval over pairs at every checkpoint.

The models: GPTs of analyses/gpt_clocks' recipe (the shipped DiT's data, split, batch and EMA; GPT "tiny", lr
1e-3, constant) at training seeds 0, 1, 2, stopped at 1500 steps (past τ_mem), trained here under
runs/circuits-gpt/s<seed> and their clocks measured here (1000 ancestral samples, seed 0) into each run's
clocks.json. With a constant learning rate seed 0 follows gpt_clocks' 12 000-step run (their step-100
weights are equal); its τ differ a little because they are read on another checkpoint grid (τ_mem 894 [873, 915]
here, 898 [874, 922] there). Models are the units of the across-model intervals, as for the DiT.
"""
import dataclasses
import json
from pathlib import Path

import numpy as np

from analyses.circuits.models import crossing, pair_ci
from scoreprobe.atomic import atomic_write_text
from scoreprobe.probes.circuits import copy_pairs, reduce_pairs
from scoreprobe.store import normalize_config

GPT_RECIPE = dict(model="gpt", size="tiny", hidden_size=None, lr=1e-3, total_steps=1500, n_checkpoints=20,
                  first_checkpoint=100)      # analyses/gpt_clocks' GPT_SETTINGS, stopped at 1500 steps


def gpt_models(root, seeds, runs="runs/circuits-gpt", total_steps=None):
    """{f"gpt-s{seed}": (TrainConfig, run dir)} of the shipped DiT's config with GPT_RECIPE at each seed."""
    from scoreprobe.training.config import TrainConfig, stored_config
    dit = json.loads((Path(root) / "checkpoints" / "parity-default" / "run.json").read_text())["config"]
    base = TrainConfig.from_dict({**stored_config(dit), **GPT_RECIPE})
    if total_steps is not None:
        base = dataclasses.replace(base, total_steps=total_steps)
    return {f"gpt-s{s}": (dataclasses.replace(base, seed=s), Path(root) / runs / f"s{s}") for s in seeds}


def train_and_clock(sp, models, n_samples, log=print):
    """Train (or resume) each GPT and write its clocks.json (τ with CIs, per-checkpoint rule accuracy and
    memorization) unless it is there -> {name: series}."""
    from scoreprobe.training.train import train_run
    out = {}
    for name, (cfg, d) in models.items():
        train_run(cfg, d, device="cpu", progress=False)
        series = sp.load_series(d)
        f = d / "clocks.json"
        if not f.is_file():
            ds = sp.clocks(series, n_samples=n_samples, seed=0, out=str(d / "clocks.zarr"), progress=False)
            taus = {k: v for k, v in ds.attrs.items() if k.startswith("tau_") or k in ("rule_threshold", "mem_threshold")}
            table = [{"step": int(st), "rule_acc": float(ds.rule_acc.sel(step=st)),
                      "mem_ratio": float(ds.mem_ratio.sel(step=st))} for st in ds.step.values]
            atomic_write_text(f, json.dumps(normalize_config({"n_samples": n_samples, "seed": 0, "taus": taus,
                                                              "table": table}), indent=1))
        log(f"{name}: trained, clocks in {f}")
        out[name] = series
    return out


def gpt_rule_pairs(dataset, rule, n, seed):
    """(clean, corrupt uint8 (n, D), positions float (n, D)): held-out items, the first member (token order = bit
    index) of a randomly chosen parity group flipped; positions one-hot at that group's last member."""
    groups = np.sort(np.asarray(rule.groups), axis=1)                          # (n_groups, G), ascending
    clean = dataset.heldout[:n].copy()
    g = np.random.default_rng(seed).integers(0, len(groups), len(clean))
    rows = np.arange(len(clean))
    corrupt = clean.copy()
    corrupt[rows, groups[g, 0]] ^= 1
    positions = np.zeros(clean.shape)
    positions[rows, groups[g, -1]] = 1.0
    return clean, corrupt, positions


def _one(sp, net, pair, sites, floor):
    """(numerators (site, pair), contrasts (pair,), site labels) of one pair kind at one checkpoint; pair =
    (clean, corrupt) or (clean, corrupt, positions)."""
    ds = sp.patch(net, pair[0], pair[1], None, sites=sites, metric="logit_diff", floor=floor,
                  positions=pair[2] if len(pair) > 2 else None)
    den = (ds.metric_clean - ds.metric_corrupt).values
    return ds.effect_numerator.transpose("site", "sample").values, den, [str(s) for s in ds.site.values]


def gpt_circuits(sp, series, cfg, log=print):
    """JSON-able readings of one GPT series: per pair kind, the pooled effect per (step, site), its reason and
    a pair-bootstrap CI, the contrast's mean and negative pairs per step, and the step at which each site's
    effect first reaches half of its last value."""
    import warnings
    steps = [int(s) for s in series.steps]
    pairs = {"copy": copy_pairs(series.dataset, cfg["n_pairs"]),
             "rule": gpt_rule_pairs(series.dataset, series.rule, cfg["n_pairs"], 0)}
    num = {k: [] for k in pairs}
    den = {k: [] for k in pairs}
    labels = None
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning)               # undefined cells: kept with reasons
        for st in steps:
            net = series.sampler(st)
            for k, pair in pairs.items():
                n_, d_, labels = _one(sp, net, pair, cfg["sites"], cfg["floor"])
                num[k].append(n_)
                den[k].append(d_)
            log(f"gpt step {st}: patched")
    out = {"steps": steps, "sites": labels, "n_pairs": cfg["n_pairs"]}
    for k in pairs:
        nu, de = np.stack(num[k]), np.stack(den[k])                             # (step, site, pair), (step, pair)
        pooled, reason, _ = reduce_pairs(nu, de, cfg["floor"])                  # (step, site)
        lo, hi, share = pair_ci(nu, de, cfg["n_boot"], 0, cfg["floor"])         # (step, site) each
        half = [crossing(np.asarray(steps, float), pooled[:, j], pooled[-1, j]) for j in range(len(labels))]
        out[k] = {"effect": pooled.tolist(), "reason": reason.tolist(), "ci": np.stack([lo, hi], -1).tolist(),
                  "ci_defined_share": share.tolist(), "half_step": half,
                  "contrast_mean": de.mean(1).tolist(), "contrast_negative": (de < 0).sum(1).tolist()}
    return out


def read_steps(steps, taus):
    """The common checkpoints nearest (in ln(step + 1)) to the models' mean τ_rule and τ_mem, and the last
    -> {"tau_rule": step, "tau_mem": step, "last": step} (a clock no model reaches is left out)."""
    x = np.log(np.asarray(steps, float) + 1)
    out = {}
    for k in ("tau_rule", "tau_mem"):
        v = [t.get(k) for t in taus.values() if t.get(k) is not None]
        if v:
            out[k] = int(steps[int(np.argmin(abs(x - np.log(np.mean(v) + 1))))])
    out["last"] = int(steps[-1])
    return out


def gpt_across(per_model, names, at):
    """Per pair kind, reading step (`at`) and site: the effect over models (mean, t CI, per-model values, the
    undefined models' reasons) and a one-sample t test of ≠ 0, Holm over every defined (reading, site) cell of
    the kind; the contrast per reading over models."""
    from analyses.circuits.across import ALPHA, t_summary, why_undefined
    from scoreprobe.stats.pvalues import adjust_family
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
