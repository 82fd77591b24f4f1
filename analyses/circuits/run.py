"""Where do trained DiTs of the shipped recipe carry the rule and the copies, read per σ over 3 models?

    python analyses/circuits --plan            # what the preset computes, and its cost
    python analyses/circuits --smoke --out /tmp/c   # < 2 min: the pipeline at toy size (the shipped model only)
    python analyses/circuits                   # CPU preset: 3 models x 24 checkpoints, ≈ 5 min on 1 thread
    python analyses/circuits --models s0       # a subset of the models
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
import sys
import time
from pathlib import Path

import numpy as np

from analyses.circuits import across
from analyses.circuits import report as circuits_report
from analyses.circuits.models import crossing, decay, read_model  # noqa: F401  (crossing, decay: tests)
from scoreprobe.atomic import atomic_write_text
from scoreprobe.errors import ConfigError
from scoreprobe.stats.ratio import DEN_FLOOR

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MODELS = {"s0": "checkpoints/parity-default", "s1": "runs/shipped/s1", "s2": "runs/shipped/s2"}

PRESETS = {
    "cpu": dict(models=list(MODELS), steps=None, n_pairs=16, sigmas=[0.3, 0.7, 1.5], sites=["block", "sub", "head"],
                n_boot=1000, floor=DEN_FLOOR, ode_pairs=16, ode_sigma_start=2.0, ode_stars=[2.0, 0.7, 0.3],
                ode_steps=12),
    "smoke": dict(models=["s0"], steps=[500, 2876, 36000], n_pairs=4, sigmas=[0.3, 1.5], sites=["block", "sub", "head"],
                  n_boot=50, floor=DEN_FLOOR, ode_pairs=3, ode_sigma_start=2.0, ode_stars=[2.0], ode_steps=4),
}


def read_taus(path):
    """τ_rule, τ_mem (CIs, share of resamples reaching them; None: not reached) and the largest and last rule
    accuracy from a series' clocks.json (checkpoints/measure.py); ConfigError if absent."""
    f = Path(path) / "clocks.json"
    if not f.is_file():
        raise ConfigError(f"{f} is missing: measure the clocks first (python checkpoints/measure.py {path})")
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
        series = sp.load_series(ROOT / MODELS[model])
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
    result = {"preset": cfg, "models": {n: str(Path(MODELS[n])) for n in names},
              "steps": [int(s) for s in first.step.values], "sites": sites, "site_kinds": kinds_of, "sigmas": sigmas,
              "taus": {n: got[n][2] for n in names}, "per_model": per_model, "cells": cells, "family": family,
              "contrasts": across.contrasts_across(per_model, names), "ode": ode,
              "ode_across": across.ode_across(_clean(ode), names), "seconds": {"probe": round(t_probe, 1), "ode": round(time.time() - t1, 1)}}
    result = _clean(result)
    atomic_write_text(out_dir / f"{name}.json", json.dumps(result, indent=1))
    circuits_report.write(result, out_dir, name)
    log(f"wrote {out_dir / name}.{{json,md,png}} (probe {t_probe:.0f} s)")
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
    p.add_argument("--models", default=None, help=f"comma list of models among {', '.join(MODELS)}")
    p.add_argument("--out", default=None, help="results folder (default analyses/results)")
    a = p.parse_args(argv)
    preset = "smoke" if a.smoke else "cpu"
    cfg = PRESETS[preset]
    if a.models:
        chosen = [m.strip() for m in a.models.split(",") if m.strip()]
        if not chosen or set(chosen) - set(MODELS):
            p.error(f"--models takes names among {', '.join(MODELS)}, got {a.models!r}")
        cfg = {**cfg, "models": chosen}
    out_dir = Path(a.out or HERE.parent / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    name = "circuits" if preset == "cpu" else "circuits_smoke"
    if a.plan:
        print(circuits_report.plan(cfg))
        return 0
    if a.from_results:
        result = json.loads((out_dir / f"{name}.json").read_text())
        circuits_report.write(result, out_dir, name)
        print(f"wrote {out_dir / name}.md and .png")
        return 0
    run(cfg, out_dir, name, print)
    return 0


if __name__ == "__main__":
    sys.exit(main())
