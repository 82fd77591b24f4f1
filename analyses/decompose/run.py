"""What kind of denoiser is the shipped model, step by step? (issue 38)

1. `sp.decompose` over every checkpoint of the shipped series (parity G = 2, N = 120): the r² of the
   memorizer, the rule oracle and the local (3×3 patch) oracles, per σ, on noised training items,
   held-out items and fresh valid images; where each oracle explains the network best.
2. The loss crossover (`scoreprobe.probes.crossover`): the network's EDM-weighted training loss
   against the oracles' per σ and averaged over the training σ distribution; τ_cross (the step
   from which the network beats the perfect generalizer on its own training set) next to τ_mem,
   with a bootstrap interval over noise draws per model and a t interval over the shipped recipe's
   training seeds (cross_series); the generalizer's excess over the memorizer as a function of N
   over several data seeds, next to τ_mem(N) measured by analyses/two_clocks.py.
3. Disjoint pairs at N where the rule is learned (N = 120, 240; 3 replicate pairs each, one stacked
   ensemble): their clocks and their agreement per σ (`scoreprobe.probes.disjoint`) between a floor
   (the two training sets' memorizers) and a ceiling (the rule oracle with itself; a same-data pair).
3b. The same at small N (N = 8, 16; preset "mem_pairs"), trained past τ_mem: agreement across memorization.
3c. The same at N = 120 (to 20 000 steps, about twice its τ_mem) and N = 240 (to 36 000 steps, past its τ_mem of
    about 27 000; one pair): preset "long_pairs", stage pairs_long.

Writes analyses/results/decompose.{md,json} and decompose_*.png.

Usage:
  nice -n 10 python analyses/decompose              # CPU preset (see --plan for the sizes)
  python analyses/decompose --plan                  # what would run, and at which size
  python analyses/decompose --smoke                 # < 2 min, checks the pipeline end to end
  python analyses/decompose --from-results          # rewrite md + figures from the json
  nohup nice -n 5 python analyses/decompose --pairs-only > /tmp/pairs.log 2>&1 &
                                                    # pairs (resumable) + crossover intervals into the json
  python analyses/decompose --only pairs_mem        # one stage (or several, comma-separated) into the json
  python analyses/decompose --train-member n240-r0-a # one long-pairs member (resumable); one process per core, then
                                                    # --only pairs_long measures them
"""
import argparse
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
from analyses.decompose.stages import (
    measure_cross_ci,
    measure_cross_ci_data,
    measure_excess_by_n,
    measure_models,
    measure_long_pairs,
    measure_pairs,
    mem_pair_params,
    train_pairs,
    with_clocks,
)
from scoreprobe.atomic import atomic_write_text
from scoreprobe.probes.crossover import crossover_json
from scoreprobe.studies.stage_cache import cached_json
from scoreprobe.studies.trained_models import clock_taus


PRESETS = {
    "smoke": dict(steps=[500, 36000], model_steps=[500, 36000], closed_steps=[100, 3750], model_patch=[3], model_boot=50, sigmas=[0.3, 1.0, 3.0], n_points=8, n_noise=1,
                  cross_sigmas=[0.1, 0.5, 2.0], cross_noise=1, cross_steps=[500, 36000], Ns=[8, 16], excess_noise=1,
                  excess_seeds=[0, 1], cross_series=["checkpoints/parity-default"], cross_ci_draws=2,
                  cross_ci_boot=50, cross_ci_steps=[500, 1089, 2373, 36000], cross_data_seeds=[], cross_data_steps=0,
                  pair_Ns=[4], pair_replicates=2, pair_same_data=[0], pair_heldout=16, pair_width=16, pair_depth=1,
                  pair_batch=8, pair_steps=40, pair_checkpoints=3, pair_first=10, pair_clock_samples=16,
                  pair_points=8, pair_samples=16, pair_planes=1, pair_res=4, pair_ode_steps=6,
                  pair_sigmas=[0.5, 1.0], pair_measure_at=[40],
                  mem_pairs=dict(pair_Ns=[6], pair_steps=60, pair_checkpoints=3, pair_first=10, pair_measure_at=[60]),
                  long_pairs=[dict(pair_Ns=[5], pair_replicates=1, pair_same_data=[], pair_steps=50, pair_checkpoints=3,
                                   pair_first=10, pair_measure_at=[50])]),
    "cpu": dict(steps=None, model_steps=[0, 607, 896, 1322, 1950, 2876, 4243, 6259, 9233, 13620, 24404, 36000],
                closed_steps=[0, 100, 200, 350, 531, 736, 1019, 1412, 1955, 2708, 3750],
                model_patch=[3, 5], model_boot=1000, sigmas=[0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 3.0, 5.0], n_points=64,
                n_noise=2, cross_sigmas=list(np.geomspace(0.02, 20, 16)), cross_noise=4, cross_steps=None,
                Ns=[30, 60, 120, 240, 480], excess_noise=4, excess_seeds=[0, 1, 2, 3, 4],
                cross_series=["checkpoints/parity-default", "runs/shipped/s1", "runs/shipped/s2"], cross_ci_draws=8,
                cross_ci_boot=1000, cross_ci_steps=None, cross_data_seeds=[1, 2], cross_data_steps=4000,
                pair_Ns=[120, 240], pair_replicates=3, pair_same_data=[0], pair_heldout=64, pair_width=80,
                pair_depth=4, pair_batch=96, pair_steps=7000, pair_checkpoints=10, pair_first=300,
                pair_clock_samples=200, pair_points=64, pair_samples=200, pair_planes=2, pair_res=16,
                pair_ode_steps=18, pair_sigmas=[0.1, 0.2, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 3.0],
                pair_measure_at=[1000, 3500, 7000],
                mem_pairs=dict(pair_Ns=[8, 16], pair_steps=3000, pair_checkpoints=12, pair_first=30,
                               pair_measure_at=[100, 400, 1000, 3000]),
                long_pairs=[dict(pair_Ns=[120], pair_replicates=1, pair_same_data=[0], pair_steps=20000,
                                 pair_checkpoints=12, pair_first=300, pair_measure_at=[2000, 5000, 10000, 20000]),
                            dict(pair_Ns=[240], pair_replicates=1, pair_same_data=[], pair_steps=36000,
                                 pair_checkpoints=14, pair_first=300, pair_measure_at=[2500, 10000, 27000, 36000])]),
}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, results under --results with a smoke_ prefix")
    ap.add_argument("--plan", action="store_true", help="print what would run and exit")
    ap.add_argument("--from-results", action="store_true", help="rewrite md and figures from the json")
    ap.add_argument("--results", default=str(ROOT / "analyses" / "results"), help="results folder")
    ap.add_argument("--runs", default=str(ROOT / "runs" / "decompose"),
                    help="run directories of the disjoint pairs and cached stage results (resumable; not committed)")
    ap.add_argument("--no-pairs", action="store_true", help="only the shipped-series stages (cached), no json")
    ap.add_argument("--models-only", action="store_true",
                    help="only section 1 over the trained models of both series (stages.py), merged into the "
                         "existing json")
    ap.add_argument("--pairs-only", action="store_true",
                    help="only the disjoint pairs (train, resumable; measure) and the crossover intervals (τ_cross over "
                         "the cross_series, the excess over data seeds); the other sections are kept from the json")
    ap.add_argument("--train-member", metavar="NAME", default=None,
                    help="train (or resume) one member of the long pairs (stage pairs_long: n120-r0-a, ...) and exit; "
                         "one process per core trains the members in parallel")
    ap.add_argument("--only", type=lambda v: v.split(","), default=None, metavar="STAGE[,STAGE]",
                    help=f"only these stages ({', '.join(STAGE_KEYS)}), merged into the existing json")
    args = ap.parse_args(argv)
    if args.only and not set(args.only) <= set(STAGE_KEYS):
        ap.error(f"--only: unknown stage(s) {sorted(set(args.only) - set(STAGE_KEYS))}; choose from {list(STAGE_KEYS)}")
    return args


def plan(p, name):
    lines = [f"preset {name}:",
             f"  decompose: 3 models of the shipped recipe at steps {p['model_steps']}, {len(p['sigmas'])} σ, "
             f"{p['n_points']} points × 3 splits × {p['n_noise']} noise draws, memorizer, rule, the two Gaussians and "
             f"the local families at patch sizes {p['model_patch']}; calls with {p['model_boot']} two-level resamples",
             f"  crossover: shipped series, {'all' if p['cross_steps'] is None else len(p['cross_steps'])} checkpoints, "
             f"{len(p['cross_sigmas'])} σ, all 120 training items × {p['cross_noise']} draws",
             f"  excess vs N: oracles only, N = {p['Ns']}",
             f"  excess vs N over data seeds {p['excess_seeds']}; τ_cross intervals over {p['cross_series']} "
             f"({p['cross_ci_draws']} noise draws, {p['cross_ci_boot']} resamples), and over data seeds "
             f"{[0] + list(p['cross_data_seeds'])} (training seed 0; the shipped recipe trained to "
             f"{p['cross_data_steps']} steps at data seeds {p['cross_data_seeds']})",
             f"  closed-window series: 3 models (trained if missing), decompose at steps {p['closed_steps']}",
             f"  disjoint pairs: N = {p['pair_Ns']}, {p['pair_replicates']} replicate pairs each (disjoint data, own "
             f"init seeds; same-data pairs for replicates {p['pair_same_data']}), DiT width {p['pair_width']} "
             f"depth {p['pair_depth']}, batch {p['pair_batch']}, {p['pair_steps']} steps, {p['pair_checkpoints']} "
             f"checkpoints; clocks with {p['pair_clock_samples']} samples; agreement at steps near "
             f"{p['pair_measure_at']} with {p['pair_samples']} samples, {p['pair_planes']} planes at res "
             f"{p['pair_res']}; floor (memorizers) and ceiling (rule oracle) alike",
             f"  disjoint pairs past τ_mem: the same with {p['mem_pairs']}",
             f"  disjoint pairs at large N past τ_mem (one stage, run directories under <runs>/long): "
             f"{p['long_pairs']}"]
    return "\n".join(lines)


STAGE_KEYS = {"models": ("sigmas", "n_points", "n_noise", "model_steps", "model_patch", "model_boot"),
              "models_closed": ("sigmas", "n_points", "n_noise", "closed_steps", "model_patch", "model_boot"),
              "crossover": ("cross_sigmas", "cross_noise", "cross_steps"),
              "excess_by_n": ("Ns", "excess_noise", "excess_seeds", "cross_sigmas"),
              "cross_ci": ("cross_series", "cross_ci_draws", "cross_ci_boot", "cross_ci_steps", "cross_sigmas"),
              "cross_ci_data": ("cross_data_seeds", "cross_data_steps", "cross_ci_draws", "cross_ci_boot", "cross_sigmas"),
              "pairs": tuple(k for k in PRESETS["cpu"] if k.startswith("pair_")),
              "pairs_mem": tuple(k for k in PRESETS["cpu"] if k.startswith("pair_")),
              "pairs_long": tuple(k for k in PRESETS["cpu"] if k.startswith("pair_")) + ("long_pairs",)}


def cached_stage(runs_dir, key, p, fn, res, timings):
    """res[key], timings[key] = fn() and its seconds, or those saved under runs_dir by a run with the same
    parameters of that stage (STAGE_KEYS)."""
    res[key], timings[key] = cached_json(runs_dir / f"stage_{key}.json", {k: p[k] for k in STAGE_KEYS[key]}, fn)


PAIRS_ONLY = ("excess_by_n", "cross_ci", "cross_ci_data", "pairs", "pairs_mem", "pairs_long")


def wanted(args):
    """The stages this invocation computes (the others are kept from the json): --only's list, --models-only's,
    --pairs-only's, or every stage."""
    if args.only:
        return set(args.only)
    if args.models_only:
        return {"models", "models_closed"}
    if args.pairs_only:
        return set(PAIRS_ONLY)
    return set(STAGE_KEYS)


def train_measure_pairs(q, key, rule, runs_dir, res, timings):
    """Train (resumable) and measure one pairs stage (`key`: "pairs" or "pairs_mem" with its parameters `q`)."""
    t = time.time()
    dirs = train_pairs(q, rule, runs_dir)
    timings[f"{key}_train"] = round(time.time() - t, 1)
    first = runs_dir / ("train_seconds.json" if key == "pairs" else f"train_seconds_{key}.json")
    if not first.is_file():                       # the run that trained them (a rerun finds them finished)
        atomic_write_text(first, json.dumps({"seconds": timings[f"{key}_train"]}))
    timings[f"{key}_train_first"] = json.loads(first.read_text())["seconds"]
    cached_stage(runs_dir, key, q, lambda: measure_pairs(q, dirs), res, timings)


def run(p, name, args, old=None):
    """Every stage (cached per stage), or those `wanted(args)` names merged into `old` (the existing json)."""
    import torch
    torch.set_num_threads(1)
    import scoreprobe as sp
    series = sp.load_series()
    runs_dir = Path(args.runs) / name
    runs_dir.mkdir(parents=True, exist_ok=True)
    res = dict(old) if old else {}
    res.update({"preset": name, "params": p, "taus": clock_taus(ROOT / "checkpoints" / "parity-default")})
    timings, todo = dict(res.get("timings_s", {})), wanted(args)
    stages = {"models": lambda: measure_models(p, ROOT, runs_dir),
              "models_closed": lambda: measure_models(p, ROOT, runs_dir, "closed", train=name == "cpu"),
              "crossover": lambda: crossover_json(sp.crossover(series, sigmas=p["cross_sigmas"],
                                                               n_noise=p["cross_noise"], steps=p["cross_steps"],
                                                               progress=False)),
              "excess_by_n": lambda: measure_excess_by_n(p, series.rule, ROOT),
              "cross_ci": lambda: measure_cross_ci(p, ROOT, runs_dir),
              "cross_ci_data": lambda: measure_cross_ci_data(p, ROOT, runs_dir)}
    for key, fn in stages.items():
        if key in todo:
            cached_stage(runs_dir, key, p, fn, res, timings)
    for key, which in (("models", "open"), ("models_closed", "closed")):
        if key in res:
            res[key] = with_clocks(res[key], ROOT, which)
    res.pop("decompose", None)      # the one-model r² table of issue 38, replaced by the models stage
    if args.no_pairs:
        return None
    rule = series.config["rule"]
    if "pairs" in todo:
        train_measure_pairs(p, "pairs", rule, runs_dir, res, timings)
    if "pairs_mem" in todo:
        train_measure_pairs(mem_pair_params(p), "pairs_mem", rule, runs_dir, res, timings)
    if "pairs_long" in todo:
        cached_stage(runs_dir, "pairs_long", p, lambda: measure_long_pairs(p, rule, runs_dir / "long"), res, timings)
    res["timings_s"] = timings
    res["torch_threads"] = torch.get_num_threads()
    return res


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    name = "smoke" if args.smoke else "cpu"
    p = PRESETS[name]
    prefix = "smoke_" if args.smoke else ""
    out = Path(args.results)
    if args.plan:
        print(plan(p, name))
        return 0
    if args.train_member:
        import torch
        from analyses.decompose.stages import long_member_params, train_long_member
        try:
            q = long_member_params(p, args.train_member)
        except ValueError as e:
            print(e, file=sys.stderr)
            return 2
        torch.set_num_threads(1)
        rule = __import__("scoreprobe").load_series().config["rule"]
        print(train_long_member(q, rule, Path(args.runs) / name / "long", args.train_member))
        return 0
    js = out / f"{prefix}decompose.json"
    merge = args.pairs_only or args.models_only or args.only
    if merge and not js.is_file():
        raise SystemExit(f"--pairs-only / --models-only / --only merge into {js}, which does not exist: run the whole "
                         "study first")
    if args.from_results:
        res = json.loads(js.read_text())
    else:
        old = json.loads(js.read_text()) if merge else None
        res = run(p, name, args, old)
        if res is None:
            print(f"shipped-series stages cached under {args.runs}")
            return 0
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(js, json.dumps(res, indent=1))
    from analyses.decompose.write import write_all  # after the json is safe: the measurements never wait on it
    write_all(res, out, prefix)
    print(f"wrote {js} and {out / (prefix + 'decompose.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
