"""What kind of denoiser is the shipped model, step by step? (issue 38)

1. `sp.decompose` over every checkpoint of the shipped series (parity G = 2, N = 120): the r² of the
   memorizer, the rule oracle and the local (3×3 patch) oracles, per σ, on noised training items,
   held-out items and fresh valid images; where each oracle explains the network best.
2. The loss crossover (`scoreprobe.probes.crossover`): the network's EDM-weighted training loss
   against the oracles' per σ and averaged over the training σ distribution; τ_cross (the step
   from which the network beats the perfect generalizer on its own training set) next to τ_mem;
   the generalizer's excess over the memorizer as a function of N, next to τ_mem(N) measured by
   analyses/two_clocks.py (results/two_clocks_cpu.json).
3. Disjoint pairs: small DiTs trained on disjoint training sets (one stacked ensemble, N = 8, 16),
   their clocks and their agreement over steps (`scoreprobe.probes.disjoint`).

Writes analyses/results/decompose.{md,json} and decompose_*.png.

Usage:
  nice -n 10 python analyses/decompose              # CPU preset (see --plan for the sizes)
  python analyses/decompose --plan                  # what would run, and at which size
  python analyses/decompose --smoke                 # < 2 min, checks the pipeline end to end
  python analyses/decompose --from-results          # rewrite md + figures from the json
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
from analyses.decompose.pairs import measure_pairs, train_pairs
from analyses.decompose.write import write_all
from scoreprobe.atomic import atomic_write_text

logger = logging.getLogger("decompose")

PRESETS = {
    "smoke": dict(steps=[500, 36000], sigmas=[0.3, 1.0, 3.0], n_points=8, n_noise=1,
                  cross_sigmas=[0.1, 0.5, 2.0], cross_noise=1, cross_steps=[500, 36000], Ns=[8, 16], excess_noise=1,
                  pair_Ns=[4], pair_heldout=16, pair_width=16, pair_depth=1, pair_batch=8, pair_steps=40,
                  pair_checkpoints=3, pair_first=10, pair_clock_samples=16, pair_points=8, pair_samples=16,
                  pair_planes=1, pair_res=4, pair_ode_steps=6),
    "cpu": dict(steps=None, sigmas=[0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 3.0, 5.0], n_points=64,
                n_noise=2, cross_sigmas=list(np.geomspace(0.02, 20, 16)), cross_noise=4, cross_steps=None,
                Ns=[30, 60, 120, 240, 480], excess_noise=4,
                pair_Ns=[8, 16], pair_heldout=64, pair_width=48, pair_depth=2, pair_batch=64, pair_steps=3000,
                pair_checkpoints=12, pair_first=100, pair_clock_samples=200, pair_points=64, pair_samples=200,
                pair_planes=2, pair_res=16, pair_ode_steps=18),
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
    return ap.parse_args(argv)


def plan(p, name):
    lines = [f"preset {name}:",
             f"  decompose: shipped series, {'all' if p['steps'] is None else len(p['steps'])} checkpoints, "
             f"{len(p['sigmas'])} σ, {p['n_points']} points × 3 splits × {p['n_noise']} noise draws, 4 oracles",
             f"  crossover: shipped series, {'all' if p['cross_steps'] is None else len(p['cross_steps'])} checkpoints, "
             f"{len(p['cross_sigmas'])} σ, all 120 training items × {p['cross_noise']} draws",
             f"  excess vs N: oracles only, N = {p['Ns']}",
             f"  disjoint pairs: N = {p['pair_Ns']}, 2 members each (disjoint data), DiT width {p['pair_width']} "
             f"depth {p['pair_depth']}, batch {p['pair_batch']}, {p['pair_steps']} steps, "
             f"{p['pair_checkpoints']} checkpoints; clocks with {p['pair_clock_samples']} samples; agreement with "
             f"{p['pair_samples']} samples, {p['pair_planes']} planes at res {p['pair_res']}"]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------

def shipped_taus():
    c = json.loads((ROOT / "checkpoints" / "parity-default" / "clocks.json").read_text())["taus"]
    return {k: c[k] for k in ("tau_rule", "tau_rule_ci", "tau_mem", "tau_mem_ci")}


def measure_decompose(p, series):
    import scoreprobe as sp
    ds = sp.decompose(series, sigmas=p["sigmas"], n_points=p["n_points"], n_noise=p["n_noise"], steps=p["steps"],
                      progress=False)
    return {"steps": [int(s) for s in ds.step.values], "sigma": [float(s) for s in ds.sigma.values],
            "split": list(ds.split.values), "oracle": list(ds.oracle.values),
            **{v: np.round(ds[v].transpose("step", "sigma", "split", ...).values, 6).tolist()
               for v in ("r2", "weight", "weight_simplex", "r2_joint", "r2_simplex", "residual", "condition")}}


def measure_crossover(p, series):
    import scoreprobe as sp
    ds = sp.crossover(series, sigmas=p["cross_sigmas"], n_noise=p["cross_noise"], steps=p["cross_steps"],
                      progress=False)
    return {"steps": [int(s) for s in ds.step.values], "sigma": [float(s) for s in ds.sigma.values],
            "oracle": list(ds.oracle.values), "loss": ds.loss.values.tolist(), "loss_avg": ds.loss_avg.values.tolist(),
            "oracle_loss": ds.oracle_loss.values.tolist(), "oracle_loss_avg": ds.oracle_loss_avg.values.tolist(),
            "excess": ds.excess.values.tolist(), "sigma_weight": ds.sigma_weight.values.tolist(),
            "tau_cross": _num(ds.attrs.get("tau_cross")),
            "tau_cross_sigma": [_num(v) for v in ds.tau_cross_sigma.values]}


def measure_excess_by_n(p, rule):
    """The rule oracle's and the memorizer's weighted training loss (σ-averaged) for datasets of N items."""
    from scoreprobe.data.datasets import make_dataset
    from scoreprobe.oracles import RuleDenoiser
    from scoreprobe.probes.crossover import crossover
    out = {"N": [], "rule": [], "memorizer": [], "excess": []}
    gen = RuleDenoiser(rule)
    for n in p["Ns"]:
        ds = make_dataset(rule, n, 1, seed=0)
        c = crossover(gen, dataset=ds, rule=rule, sigmas=p["cross_sigmas"], n_noise=p["excess_noise"],
                      oracles=("memorizer", "rule"), progress=False)
        avg = dict(zip(c.oracle.values, c.oracle_loss_avg.values))
        out["N"].append(n)
        out["rule"].append(float(avg["rule"]))
        out["memorizer"].append(float(avg["memorizer"]))
        out["excess"].append(float(avg["rule"] - avg["memorizer"]))
    path = ROOT / "analyses" / "results" / "two_clocks_cpu.json"
    if path.is_file():
        runs = [r for r in json.loads(path.read_text())["runs"] if r.get("G") == 2 and r.get("tau_mem")]
        out["tau_mem_measured"] = {str(r["N"]): r["tau_mem"] for r in runs}
    return out


def _num(v):
    return None if v is None or not np.isfinite(v) else float(v)


def run(p, name, args):
    import torch
    torch.set_num_threads(1)
    import scoreprobe as sp
    series = sp.load_series()
    timings, res = {}, {"preset": name, "params": p, "taus": shipped_taus()}
    runs_dir = Path(args.runs) / name
    runs_dir.mkdir(parents=True, exist_ok=True)
    for key, fn in (("decompose", lambda: measure_decompose(p, series)),
                    ("crossover", lambda: measure_crossover(p, series)),
                    ("excess_by_n", lambda: measure_excess_by_n(p, series.rule))):
        cache = runs_dir / f"stage_{key}.json"        # a stage already measured with these parameters is reused
        if cache.is_file() and json.loads(cache.read_text())["params"] == json.loads(json.dumps(p)):
            saved = json.loads(cache.read_text())
            res[key], timings[key] = saved["result"], saved["seconds"]
            continue
        t = time.time()
        res[key] = fn()
        timings[key] = round(time.time() - t, 1)
        atomic_write_text(cache, json.dumps({"params": p, "result": res[key], "seconds": timings[key]}))
        logger.info("%s done in %.0f s", key, timings[key])
    if args.no_pairs:
        return None
    t = time.time()
    dirs = train_pairs(p, series.config["rule"], runs_dir)
    timings["pairs_train"] = round(time.time() - t, 1)
    first = runs_dir / "train_seconds.json"       # the run that trained them (a rerun finds them finished)
    if not first.is_file():
        atomic_write_text(first, json.dumps({"seconds": timings["pairs_train"]}))
    timings["pairs_train_first"] = json.loads(first.read_text())["seconds"]
    t = time.time()
    res["pairs"] = measure_pairs(p, dirs)
    timings["pairs_measure"] = round(time.time() - t, 1)
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
    js = out / f"{prefix}decompose.json"
    if args.from_results:
        res = json.loads(js.read_text())
    else:
        res = run(p, name, args)
        if res is None:
            print(f"shipped-series stages cached under {args.runs}")
            return 0
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(js, json.dumps(res, indent=1))
    write_all(res, out, prefix)
    print(f"wrote {js} and {out / (prefix + 'decompose.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
