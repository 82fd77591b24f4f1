"""Where do trained DiTs of the shipped recipe carry the rule and the copies, read per σ over 3 models?

    python analyses/circuits --plan            # what the preset computes, and its cost
    python analyses/circuits --smoke --out /tmp/c   # < 2 min: the pipeline at toy size (the shipped model only)
    python analyses/circuits                   # CPU preset: 3 models x 24 checkpoints, ≈ 5 min on 1 thread
    python analyses/circuits --models s0       # a subset of the models
    python analyses/circuits --series closed   # the closed-window series (trained by analyses/decompose)
    python analyses/circuits --series gpt      # 3 GPTs patched with the logit metric (trains them: gpt.py)
    python analyses/circuits --from-results    # rewrite the .md (and .png) from the .json

Through the API only: `sp.circuits` over each model's series (resumable stores analyses/results/
circuits_<model>.zarr, not committed). Every effect is read per σ (a site can carry +a at one σ and −a at
another; a mean over σ would call that nothing). Per model (analyses/circuits/models.py): the pooled
effect at the last checkpoint per σ and site, NaN with the reason where the pairs' contrasts have mixed
sign or are below the floor, with a bootstrap CI over pairs; the step at which it reaches half of that,
in units of the model's own τ (its clocks.json: checkpoints/measure.py); the copy contrast per σ with
its sign. Across models (models are the units, analyses/circuits/across.py): mean, t interval (n − 1 df),
per-model values, Holm over the stated family. At the last checkpoint, patching along the PF-ODE
(sp.patch_ode) with outcomes split into to-clean / to-corrupt / to-a-third basin over the pairs that end
apart unpatched. Results: analyses/results/circuits.{md,json,png}.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from analyses.circuits import across
from analyses.circuits import report as circuits_report
from analyses.circuits.models import crossing, decay, read_model  # noqa: F401  (crossing, decay: tests)
from scoreprobe.atomic import atomic_write_text
from scoreprobe.errors import ConfigError
from scoreprobe.inside.ratio import DEN_FLOOR

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SERIES = {"open": {"s0": "checkpoints/parity-default", "s1": "runs/shipped/s1", "s2": "runs/shipped/s2"},
          "closed": {f"closed-s{i}": f"runs/closed-window/closed-s{i}" for i in range(3)},   # analyses/decompose trains them
          "gpt": {f"gpt-s{i}": f"runs/circuits-gpt/s{i}" for i in range(3)}}
RESULT_NAME = {"open": "circuits", "closed": "circuits_closed", "gpt": "circuits_gpt"}

PRESETS = {
    "cpu": dict(models=None, steps=None, n_pairs=16, sigmas=[0.3, 0.7, 1.5], sites=["block", "sub", "head"],
                n_boot=1000, floor=DEN_FLOOR, ode_pairs=16, ode_sigma_start=2.0, ode_stars=[2.0, 0.7, 0.3],
                ode_steps=12, gpt_steps=None, gpt_clock_samples=1000, gpt_runs="runs/circuits-gpt"),
    "smoke": dict(models=None, steps=[500, 2876, 36000], n_pairs=4, sigmas=[0.3, 1.5], sites=["block", "sub", "head"],
                  n_boot=50, floor=DEN_FLOOR, ode_pairs=3, ode_sigma_start=2.0, ode_stars=[2.0], ode_steps=4,
                  gpt_steps=40, gpt_clock_samples=16, gpt_runs=None),       # gpt_runs None: <out>/gpt_runs
}


def read_taus(path):
    """τ_rule, τ_mem (CIs, share of resamples reaching them; None: not reached) and the largest and last rule
    accuracy from a series' clocks.json (checkpoints/measure.py); ConfigError if absent."""
    f = Path(path) / "clocks.json"
    if not f.is_file():
        raise ConfigError(f"{f} is missing: measure the clocks first (python checkpoints/measure.py {path}; the "
                          "closed-window models: python analyses/decompose --models-only trains and measures them)")
    c = json.loads(f.read_text())
    t = c["taus"]
    return {**{k: t.get(k) for k in ("tau_rule", "tau_rule_ci", "tau_rule_reached", "tau_mem", "tau_mem_ci",
                                     "tau_mem_reached", "rule_threshold")},
            "rule_acc_max": max(r["rule_acc"] for r in c["table"]), "rule_acc_last": c["table"][-1]["rule_acc"]}


def ode_sites(cells, sigmas, kinds_of):
    """The top sub-block and top head (by mean effect over models) at each σ, once each, then `*`."""
    out = []
    for s in sigmas:
        for k in ("sub", "head"):
            best = next((c["site"] for c in across.ranked(cells, s, kinds_of, n_top=0) if kinds_of[c["site"]] == k), None)
            if best is not None and best not in out:
                out.append(best)
    return out + ["*"]


def ode_flips(sp, series, sites, cfg):
    """At the last checkpoint of one model: outcome shares of patching each site at σ ≤ σ* (sp.patch_ode)."""
    from scoreprobe.probes.circuits import copy_pairs, rule_pairs
    D = series.denoiser(int(max(series.steps)))
    n = cfg["ode_pairs"]
    pairs = {"copy": copy_pairs(series.dataset, n), "rule": rule_pairs(series.dataset, series.rule, n, 0)[:2]}
    out = []
    for kind in ("rule", "copy"):
        for star in cfg["ode_stars"]:
            f = sp.patch_ode(D, *pairs[kind], sites[kind], sigma_star=star, sigma_start=cfg["ode_sigma_start"],
                             n_steps=cfg["ode_steps"], seed=5)
            for s in sites[kind]:
                c = f.sel(site=s)
                out.append({"kind": kind, "site": s, "sigma_star": star, "n_apart": int(f.attrs["n_apart"]),
                            "n_together": int(f.attrs["n_together"]), "together_moved": int(c.together_moved),
                            **{k: float(c[f"{k}_share"]) for k in ("to_clean", "to_corrupt", "to_third")}})
    return out


def probe_models(sp, cfg, out_dir, name, log):
    """{model: (series, Dataset, taus)} for the preset's models (stores <name>_<model>.zarr), and the probe
    seconds."""
    got, t0 = {}, time.time()
    for model in cfg["models"]:
        series = sp.load_series(ROOT / SERIES[cfg["series"]][model])     # smoke: the steps of the shipped series
        taus = read_taus(series.path)
        ds = sp.circuits(series, sigmas=cfg["sigmas"], n_pairs=cfg["n_pairs"], sites=cfg["sites"], steps=cfg["steps"],
                         floor=cfg["floor"], out=out_dir / f"{name}_{model}.zarr")
        got[model] = (series, ds, taus)
        log(f"{model}: probed {len(ds.step)} checkpoints ({time.time() - t0:.0f} s so far)")
    return got, time.time() - t0


def run(cfg, out_dir, name, log):
    import warnings

    import torch

    import scoreprobe as sp
    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="circuits: ", category=UserWarning)   # the md lists every NaN
        got, t_probe = probe_models(sp, cfg, out_dir, name, log)
    names = list(got)
    first = got[names[0]][1]
    sites, sigmas = [str(s) for s in first.site.values], [float(s) for s in first.sigma.values]
    kinds_of = dict(zip(sites, [str(k) for k in first.site_kind.values]))
    per_model = {n: read_model(ds, taus, cfg["n_boot"], 0, cfg["floor"]) for n, (_, ds, taus) in got.items()}
    cells, family = {}, {}
    for kind in ("rule", "copy"):
        cells[kind], family[kind] = across.effects_across(per_model, kind, names, sites, sigmas)
    t1 = time.time()
    chosen = {k: ode_sites(cells[k], sigmas, kinds_of) for k in ("rule", "copy")}
    ode = {n: ode_flips(sp, got[n][0], chosen, cfg) for n in names}
    result = {"preset": cfg, "series": cfg["series"], "models": {n: str(Path(SERIES[cfg["series"]][n])) for n in names},
              "steps": [int(s) for s in first.step.values], "sites": sites, "site_kinds": kinds_of, "sigmas": sigmas,
              "taus": {n: got[n][2] for n in names}, "per_model": per_model, "cells": cells, "family": family,
              "contrasts": across.contrasts_across(per_model, names), "ode": ode,
              "ode_across": across.ode_across(_clean(ode), names), "seconds": {"probe": round(t_probe, 1), "ode": round(time.time() - t1, 1)}}
    result = _clean(result)
    atomic_write_text(out_dir / f"{name}.json", json.dumps(result, indent=1))
    circuits_report.write(result, out_dir, name)
    log(f"wrote {out_dir / name}.{{json,md,png}} (probe {t_probe:.0f} s)")
    return result


def run_gpt(cfg, out_dir, name, log):
    """The GPT reading (analyses/circuits/gpt.py): train and clock the GPTs (resumable), patch every checkpoint
    with the logit metric, models as units at the checkpoints nearest the clocks and the last."""
    import torch

    import scoreprobe as sp
    from analyses.circuits import gpt, gpt_report
    torch.set_num_threads(1)
    seeds = [int(m.rsplit("-s", 1)[1]) for m in cfg["models"]]
    models = gpt.gpt_models(ROOT, seeds, cfg["gpt_runs"] or Path(out_dir).resolve() / "gpt_runs", cfg["gpt_steps"])
    series = gpt.train_and_clock(sp, models, cfg["gpt_clock_samples"], log)
    t0 = time.time()
    per_model = {n: gpt.gpt_circuits(sp, s, cfg, log) for n, s in series.items()}
    names = list(per_model)
    taus = {n: read_taus(models[n][1]) for n in names}
    at = gpt.read_steps(per_model[names[0]]["steps"], taus)
    result = _clean({"preset": cfg, "series": "gpt", "models": {n: os.path.relpath(models[n][1], ROOT) for n in names},
                     "steps": per_model[names[0]]["steps"], "taus": taus, "read_steps": at, "per_model": per_model,
                     "across": gpt.gpt_across(per_model, names, at), "seconds": {"probe": round(time.time() - t0, 1)}})
    atomic_write_text(out_dir / f"{name}.json", json.dumps(result, indent=1))
    gpt_report.write(result, out_dir, name)
    log(f"wrote {out_dir / name}.{{json,md}}")
    return result


def _clean(v):
    """json-ready: numpy scalars to floats, NaN / inf to None."""
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, (float, np.floating)):
        return float(v) if np.isfinite(v) else None
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.str_):
        return str(v)
    return v


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--smoke", action="store_true", help="toy size (the shipped model, 3 checkpoints, 4 pairs, 2 σ)")
    p.add_argument("--plan", action="store_true", help="print what the preset computes and stop")
    p.add_argument("--from-results", action="store_true", help="rewrite the .md and .png from the .json")
    p.add_argument("--series", default="open", choices=list(SERIES),
                   help="open: the shipped recipe (default); closed: the closed-window series; gpt: GPTs, logit metric")
    p.add_argument("--models", default=None, help="comma list of models of the series (open: s0, s1, s2)")
    p.add_argument("--out", default=None, help="results folder (default analyses/results)")
    a = p.parse_args(argv)
    preset = "smoke" if a.smoke else "cpu"
    cfg = {**PRESETS[preset], "series": a.series}
    known = SERIES[a.series]
    if a.models:
        chosen = [m.strip() for m in a.models.split(",") if m.strip()]
        if not chosen or set(chosen) - set(known):
            p.error(f"--models takes names among {', '.join(known)}, got {a.models!r}")
        cfg["models"] = chosen
    elif cfg["models"] is None:
        cfg["models"] = list(known)[:1] if preset == "smoke" else list(known)
    out_dir = Path(a.out or HERE.parent / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    name = RESULT_NAME[a.series] + ("" if preset == "cpu" else "_smoke")
    if a.plan:
        print(circuits_report.plan(cfg))
        return 0
    if a.from_results:
        result = json.loads((out_dir / f"{name}.json").read_text())
        if a.series == "gpt":
            from analyses.circuits import gpt_report
            gpt_report.write(result, out_dir, name)
        else:
            circuits_report.write(result, out_dir, name)
        print(f"wrote {out_dir / name} (.md, and .png for a DiT series)")
        return 0
    (run_gpt if a.series == "gpt" else run)(cfg, out_dir, name, print)
    return 0


if __name__ == "__main__":
    sys.exit(main())
