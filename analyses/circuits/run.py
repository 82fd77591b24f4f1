"""Where do trained DiTs of the shipped recipe carry the rule and the copies, read per σ over 3 models?

    python analyses/circuits --plan            # what the preset computes, and its cost
    python analyses/circuits --smoke --out /tmp/c   # < 2 min: the pipeline at toy size (the shipped model only)
    python analyses/circuits                   # CPU preset: 3 models x 24 checkpoints, ≈ 5 min on 1 thread
    python analyses/circuits --models s0       # a subset of the models
    python analyses/circuits --series closed   # the closed-window series (trained by analyses/decompose)
    python analyses/circuits --series gpt      # 3 GPTs patched with the logit metric (trains them: run_gpt)
    python analyses/circuits --from-results    # rewrite the .md (and .png) from the .json

Through the API only: `sp.circuits` over each model's series (resumable stores analyses/results/
circuits_<model>.zarr, not committed). Every effect is read per σ (a site can carry +a at one σ and −a at
another; a mean over σ would call that nothing). Per model (scoreprobe.stats.circuit_effects): the pooled
effect at the last checkpoint per σ and site, NaN with the reason where the pairs' contrasts have mixed
sign or are below the floor, with a bootstrap CI over pairs; the step at which it reaches half of that,
in units of the model's own τ (its clocks.json: checkpoints/measure.py); the copy contrast per σ with
its sign. Across models (models are the units,
scoreprobe.stats.circuit_effects_across): mean, t interval (n − 1 df),
per-model values, Holm over the stated family. At the last checkpoint, patching along the PF-ODE
(sp.patch_ode) with outcomes split into to-clean / to-corrupt / to-a-third basin over the pairs that end
apart unpatched. Results: analyses/results/circuits.{md,json,png}.
"""
import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from scoreprobe.atomic import atomic_write_text
from scoreprobe.inside.ratio import DEN_FLOOR
from scoreprobe.probes.circuits import ode_outcomes
from analyses.circuits import circuits_gpt_md
from analyses.circuits import circuits_md
from scoreprobe.stats import circuit_effects_across as across
from scoreprobe.stats.circuit_effects import gpt_effects, read_model
from scoreprobe.store.json_ready import json_ready
from scoreprobe.studies.trained_models import CLOSED_RUNS, SHIPPED_RUNS, clock_summary, train_and_clock
from scoreprobe.viz.circuits import plot_effect_maps
from scoreprobe.viz.common import save_figure

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SERIES = {"open": dict(zip(("s0", "s1", "s2"), SHIPPED_RUNS)),
          "closed": {f"closed-s{i}": d for i, d in enumerate(CLOSED_RUNS)},   # analyses/decompose trains them
          "gpt": {f"gpt-s{i}": f"runs/circuits-gpt/s{i}" for i in range(3)}}
RESULT_NAME = {"open": "circuits", "closed": "circuits_closed", "gpt": "circuits_gpt"}
SERIES_WHO = {"open": "trained DiTs of the shipped recipe (N = 120: the window opens)",
              "closed": "trained DiTs of the closed-window series (N = 30: τ_mem before any τ_rule; trained by "
                        "analyses/decompose, runs/closed-window)"}
COMMAND = "python analyses/circuits --series open|closed|gpt"
GPT_COMMAND = "python analyses/circuits --series gpt"

PRESETS = {
    "cpu": dict(models=None, steps=None, n_pairs=16, sigmas=[0.3, 0.7, 1.5], sites=["block", "sub", "head"],
                n_boot=1000, floor=DEN_FLOOR, ode_pairs=16, ode_sigma_start=2.0, ode_stars=[2.0, 0.7, 0.3],
                ode_steps=12, gpt_steps=None, gpt_clock_samples=1000, gpt_runs="runs/circuits-gpt"),
    "smoke": dict(models=None, steps=[500, 2876, 36000], n_pairs=4, sigmas=[0.3, 1.5], sites=["block", "sub", "head"],
                  n_boot=50, floor=DEN_FLOOR, ode_pairs=3, ode_sigma_start=2.0, ode_stars=[2.0], ode_steps=4,
                  gpt_steps=40, gpt_clock_samples=16, gpt_runs=None),       # gpt_runs None: <out>/gpt_runs
}


def plan(cfg):
    steps = "all 24 checkpoints" if cfg["steps"] is None else f"checkpoints {cfg['steps']}"
    n_sites = sum({"block": 4, "sub": 8, "head": 16}[g] for g in cfg["sites"])
    n_steps = 24 if cfg["steps"] is None else len(cfg["steps"])
    fw = len(cfg["models"]) * n_steps * 2 * len(cfg["sigmas"]) * (n_sites + 3)
    return (f"sp.circuits on models {cfg['models']}: {steps}, σ {cfg['sigmas']} (read one by one), {cfg['n_pairs']} "
            f"copy and {cfg['n_pairs']} rule pairs, sites {cfg['sites']} ({n_sites} on the shipped DiT), floor "
            f"{cfg['floor']:g}\n≈ {fw} patched forwards of {cfg['n_pairs']} rows (≈ {fw * 0.02 / 60:.1f} min at 20 ms "
            f"each, 1 thread), then {cfg['n_boot']} bootstrap resamples over pairs per model, t intervals over "
            f"models, Holm per pair kind, and sp.patch_ode at each model's last checkpoint ({cfg['ode_pairs']} "
            f"pairs, σ_start {cfg['ode_sigma_start']}, σ* {cfg['ode_stars']}, {cfg['ode_steps']} Heun steps)")


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


def probe_models(sp, cfg, out_dir, name, log):
    """{model: (series, Dataset, taus)} for the preset's models (stores <name>_<model>.zarr), and the probe
    seconds."""
    got, t0 = {}, time.time()
    for model in cfg["models"]:
        series = sp.load_series(ROOT / SERIES[cfg["series"]][model])     # smoke: the steps of the shipped series
        taus = clock_summary(series.path)
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
    chosen = {k: across.ode_sites(cells[k], sigmas, kinds_of) for k in ("rule", "copy")}
    ode = {n: ode_outcomes(got[n][0], chosen, cfg["ode_pairs"], cfg["ode_stars"], cfg["ode_sigma_start"],
                           cfg["ode_steps"]) for n in names}
    result = {"preset": cfg, "series": cfg["series"], "models": {n: str(Path(SERIES[cfg["series"]][n])) for n in names},
              "steps": [int(s) for s in first.step.values], "sites": sites, "site_kinds": kinds_of, "sigmas": sigmas,
              "taus": {n: got[n][2] for n in names}, "per_model": per_model, "cells": cells, "family": family,
              "contrasts": across.contrasts_across(per_model, names), "ode": ode,
              "ode_across": across.ode_across(json_ready(ode), names),
              "seconds": {"probe": round(t_probe, 1), "ode": round(time.time() - t1, 1)}}
    result = json_ready(result)
    atomic_write_text(out_dir / f"{name}.json", json.dumps(result, indent=1))
    write(result, out_dir, name)
    log(f"wrote {out_dir / name}.{{json,md,png}} (probe {t_probe:.0f} s)")
    return result


def run_gpt(cfg, out_dir, name, log):
    """The GPT reading (issue 55 item 7): a GPT has no noise level, so it is patched teacher-forced on bits with
    the logit metric (`scoreprobe.stats.circuit_effects.gpt_effects`; rule pairs flip a parity group's first member
    and read the log-odds at its last: `scoreprobe.probes.circuits.gpt_rule_pairs`). Train and clock the GPTs
    (resumable; clocks.json from 1000 ancestral samples), patch every checkpoint, models as units at the
    checkpoints nearest the clocks and the last. With a constant learning rate seed 0 follows gpt_clocks'
    12 000-step run (their step-100 weights are equal); its τ differ a little because they are read on another
    checkpoint grid (τ_mem 894 [873, 915] here, 898 [874, 922] there)."""
    import torch
    torch.set_num_threads(1)
    seeds = [int(m.rsplit("-s", 1)[1]) for m in cfg["models"]]
    models = gpt_models(ROOT, seeds, cfg["gpt_runs"] or Path(out_dir).resolve() / "gpt_runs", cfg["gpt_steps"])
    series = train_and_clock(models, cfg["gpt_clock_samples"], log)
    t0 = time.time()
    per_model = {n: gpt_effects(s, cfg["n_pairs"], cfg["sites"], cfg["floor"], cfg["n_boot"], log)
                 for n, s in series.items()}
    names = list(per_model)
    taus = {n: clock_summary(models[n][1]) for n in names}
    at = across.read_steps(per_model[names[0]]["steps"], taus)
    result = json_ready({"preset": cfg, "series": "gpt",
                         "models": {n: os.path.relpath(models[n][1], ROOT) for n in names},
                     "steps": per_model[names[0]]["steps"], "taus": taus, "read_steps": at, "per_model": per_model,
                     "across": across.gpt_across(per_model, names, at),
                     "seconds": {"probe": round(time.time() - t0, 1)}})
    atomic_write_text(out_dir / f"{name}.json", json.dumps(result, indent=1))
    write(result, out_dir, name)
    log(f"wrote {out_dir / name}.{{json,md}}")
    return result


def reread(res):
    """`res` (a DiT series' JSON) with its readings over models recomputed from the stored per-model readings
    and PF-ODE outcomes under the current definitions (ranks within σ, shares' intervals inside [0, 1])."""
    names = list(res["models"])
    cells, family = {}, {}
    for kind in ("rule", "copy"):
        cells[kind], family[kind] = across.effects_across(res["per_model"], kind, names, res["sites"], res["sigmas"])
    return json_ready({**res, "cells": cells, "family": family, "ode_across": across.ode_across(res["ode"], names)})


def write(res, out_dir, name):
    """The .md (and, for a DiT series, the heat map .png) of one result, from its json."""
    if res.get("series") == "gpt":
        atomic_write_text(Path(out_dir) / f"{name}.md", circuits_gpt_md.markdown(res, GPT_COMMAND))
        return
    atomic_write_text(Path(out_dir) / f"{name}.md", circuits_md.markdown(res, SERIES_WHO, RESULT_NAME, COMMAND))
    save_figure(plot_effect_maps(res), Path(out_dir) / f"{name}.png", dpi=110)


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
        print(plan(cfg))
        return 0
    if a.from_results:
        res = json.loads((out_dir / f"{name}.json").read_text())
        if res.get("series") != "gpt":      # the readings over models from the stored per-model ones
            res = reread(res)
            atomic_write_text(out_dir / f"{name}.json", json.dumps(res, indent=1))
        write(res, out_dir, name)
        print(f"wrote {out_dir / name} (.md, and .png for a DiT series)")
        return 0
    (run_gpt if a.series == "gpt" else run)(cfg, out_dir, name, print)
    return 0


if __name__ == "__main__":
    sys.exit(main())
