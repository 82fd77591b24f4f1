"""The paper's remedies against the two clocks: baseline vs --global-token, --multiplicative,
--curriculum and all of them together, at one G, with several seeds (issue #15).

Trains every (variant, seed) with the project's trainer (parity on 6x6, offset layout, DiT width 80,
patch 2 — the shipped series' family), `--jobs` runs at a time in one-thread worker processes,
measures the clocks of every checkpoint (`sp.clocks`: τ with bootstrap CIs, the window) and writes

  <results>/remedies_<preset>.md / .json   τ_rule, τ_mem, the window (log10 width) and the parameter
                                           count per run and per variant (seeds side by side); a τ
                                           not reached in budget is reported with its extrapolation
  <results>/remedies_<preset>.png          rule accuracy and memorization vs step, a colour per variant
  <out>/<variant>-s<seed>/                 run directories (resumable)

The curriculum trains on parity over pieces of --curriculum-g pixels of each group (at G = 3 from 2: a
pair and one pixel that stays 0) until a --curriculum-share of the steps. See docs/remedies.md.

Usage:
  python analyses/remedies                 # CPU preset (G = 3, N = 120, 2 seeds; ≈ 1 h 35 min on 2 cores)
  python analyses/remedies --smoke         # < 1 min: the pipeline end to end
  python analyses/remedies --rereport A.json,B.json   # re-report shipped exports together, no training
  python analyses/remedies --device cuda   # GPU preset (G = 4, N = 256, 3 seeds; a variant's seeds
                                              # train as one stacked ensemble, --ensemble on CPU)
  python analyses/remedies --preset g3     # the remedies where the baseline learns (G = 3, N = 240,
                                              # 30 000 steps, 3 seeds, the curriculum's control): g3_run.py
"""
import argparse
import functools
import json
import logging
import math
import time
from pathlib import Path

import numpy as np

from scoreprobe.studies.queue import finished, in_parallel, measured_clocks, train_ensembles
from scoreprobe.loading.series import load_series
from scoreprobe.store import normalize_config
from scoreprobe.training.train import TrainConfig, train_run
from analyses.remedies.holm_md import comparison_lines
from analyses.remedies.variant_table_md import rule_clock, table_lines
from analyses.remedies import paired_seeds
from analyses.remedies.curriculum_rows import beyond_row, clocks_row
from analyses.remedies.figures import run_figure
from scoreprobe.atomic import atomic_write_text

logger = logging.getLogger("remedies")

PRESETS = {
    "smoke": dict(G=4, N=8, seeds=[0], views=60, min_steps=30, n_checkpoints=5, n_samples=50, n_heldout=64),
    "cpu": dict(G=3, N=120, seeds=[0, 1], views=12000, min_steps=3000, n_checkpoints=16, n_samples=1000,
                n_heldout=1024),
    "gpu": dict(G=4, N=256, seeds=[0, 1, 2], views=14000, min_steps=3000, n_checkpoints=24, n_samples=2000,
                n_heldout=1024),
}
VARIANTS = {"baseline": {}, "global_token": {"global_token": True}, "multiplicative": {"multiplicative": True},
            "curriculum": {"curriculum": True}, "all": {"global_token": True, "multiplicative": True,
                                                        "curriculum": True},
            "baseline_matched": {"matched": True}}
# baseline_matched: the baseline stopped after the curriculum's second phase's steps, so it has seen each
# training image as often as a curriculum run has by its end (memorization follows views per image);
# with a constant learning rate its steps are the baseline's first ones, bit for bit on CPU.
# (variant, reference, quantity): the comparisons the README's verdicts rest on
FAMILY = [(v, "baseline", q) for q in ("final_rule_acc", "final_mem_ratio")
          for v in ("global_token", "multiplicative", "curriculum", "all")] + \
         [("curriculum", "baseline_matched", q) for q in ("final_rule_acc", "final_mem_ratio")] + \
         [("multiplicative", "baseline", "log_tau_mem")]
LABELS = {"final_rule_acc": "final rule accuracy (curriculum runs: beyond the pieces)",
          "final_mem_ratio": "final memorized share", "log_tau_mem": "τ_mem ratio"}


def value(row, quantity):
    """A run's value of `quantity`; NaN for a τ not reached (a bound, left out of any difference)."""
    if quantity == "final_rule_acc":
        return float(row["beyond"]["final_rule_acc"] if "beyond" in row else row["final_rule_acc"])
    if quantity == "final_mem_ratio":
        return float(row["final_mem_ratio"])
    tau = row.get("tau_mem")
    return math.log(tau) if isinstance(tau, (int, float)) and math.isfinite(tau) else math.nan


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/remedies", help="output folder (run directories)")
    p.add_argument("--results", default=None, help="folder of the tables and figure (default: analyses/results, "
                                                   "or --out for --smoke)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--preset", choices=sorted(PRESETS), default=None, help="default: gpu on CUDA, else cpu")
    p.add_argument("--smoke", action="store_true", help="same as --preset smoke")
    p.add_argument("--variants", default=",".join(VARIANTS), help="which of " + ", ".join(VARIANTS))
    p.add_argument("--curriculum-g", type=int, default=2, help="group size of the curriculum's first phase")
    p.add_argument("--curriculum-share", type=float, default=0.25, help="share of the steps on the finer groups")
    p.add_argument("--jobs", type=int, default=2, help="runs at a time (one thread each)")
    p.add_argument("--ensemble", action=argparse.BooleanOptionalAction, default=None,
                   help="train the seeds of each variant as one stacked ensemble (default: on CUDA)")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--batch-size", type=int, default=96)
    for key in ("G", "N", "views", "min_steps", "n_checkpoints", "n_samples", "n_heldout"):
        p.add_argument("--" + key.replace("_", "-"), dest=key, type=int, default=None)
    p.add_argument("--seeds", type=lambda s: [int(v) for v in s.split(",")], default=None)
    args = p.parse_args(argv)
    args.preset = "smoke" if args.smoke else args.preset or ("gpu" if args.device.startswith("cuda") else "cpu")
    for key, value in PRESETS[args.preset].items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    args.ensemble = args.device.startswith("cuda") if args.ensemble is None else args.ensemble
    args.results = args.results or (args.out if args.preset == "smoke" else "analyses/results")
    Path(args.results).mkdir(parents=True, exist_ok=True)
    return args


def train_config(args, variant, seed):
    """TrainConfig of one (variant, seed); None for a curriculum that G does not allow."""
    steps = max(args.min_steps, -(-args.views * args.N // args.batch_size))
    switches, switch = dict(VARIANTS[variant]), max(1, int(steps * args.curriculum_share))
    if switches.pop("matched", False):
        steps -= switch
    if switches.pop("curriculum", False):
        if not 1 < args.curriculum_g < args.G:
            return None
        switches["curriculum"] = f"{args.curriculum_g}:{args.G}:{switch}"
    rule = {"name": "parity", "G": args.G, "shape": [6, 6], "layout": "offset", "seed": 0}
    return TrainConfig(rule=rule, n_train=args.N, n_heldout=args.n_heldout, seed=seed, hidden_size=80, depth=4,
                       num_heads=4, lr=args.lr, batch_size=args.batch_size, total_steps=steps,
                       n_checkpoints=args.n_checkpoints, save_dtype="float16", **switches)


def run_one(args, variant, seed):
    """Train (or resume) one run and measure its clocks; the row of the table."""
    cfg, name = train_config(args, variant, seed), f"{variant}-s{seed}"
    run_dir, t0 = Path(args.out) / name, time.time()
    if not finished(run_dir, cfg):
        train_run(cfg, run_dir, device=args.device, progress=False)
    series, plan = load_series(run_dir), cfg.curriculum_plan()
    ds = measured_clocks(series, run_dir / "clocks.zarr", n_samples=args.n_samples, device=args.device,
                         keep_bits=plan is not None)
    row = {"variant": variant, "seed": seed, "run": name, "params": series.describe()["n_params"], **clocks_row(ds),
           "seconds": round(time.time() - t0, 1)}
    row["switch"] = plan[1] if plan else None
    row["views"] = round((cfg.total_steps - (row["switch"] or 0)) * cfg.batch_size / cfg.n_train)
    if plan is not None:
        row["beyond"] = beyond_row(ds, cfg, plan[0])
    logger.info("%s: τ_rule=%s τ_mem=%s", name, row["tau_rule"], row["tau_mem"])
    return row


def markdown(rows, skipped, args):
    """The study's md: the tables of `variant_table_md`, then the comparisons across seeds (Holm over FAMILY)."""
    cmp = paired_seeds.comparisons(rows, FAMILY, value)
    lines = table_lines(rows, skipped, args) + comparison_lines(cmp, sum(1 for c in cmp if np.isfinite(c["p"])), LABELS)
    return "\n".join(lines) + "\n"


def rereport(paths):
    """Re-report shipped remedies exports (no training): the md of the first one's settings over the runs of
    all of them (e.g. a later seed's export), with the comparisons across seeds; the first json gains
    `comparisons` and `extra_runs_from`. Returns the md."""
    exports = [json.loads(Path(p).read_text()) for p in paths]
    first = exports[0]
    args = argparse.Namespace(**first["args"])
    rows = [r for e in exports for r in e["runs"]]
    rows.sort(key=lambda r: (list(VARIANTS).index(r["variant"]), r["seed"]))
    md = markdown(rows, first.get("skipped", {}), args)
    if len(paths) > 1:
        md = md.replace("\n\n", f"\n\nRe-reported (issue 35) by `python analyses/remedies --rereport "
                        f"{','.join(map(str, paths))}`: the runs of every export together.\n\n", 1)
    first["comparisons"] = paired_seeds.comparisons(rows, FAMILY, value)
    first["extra_runs_from"] = [str(p) for p in paths[1:]]
    atomic_write_text(paths[0], json.dumps(normalize_config(first), indent=1))
    atomic_write_text(Path(paths[0]).with_suffix(".md"), md)
    return md


def _g3(argv):
    """Whether the command names one of g3_grid's presets (--preset g3, g3-smoke, g3-gpu)."""
    names = [a.split("=", 1)[1] for a in argv if a.startswith("--preset=")]
    names += [b for a, b in zip(argv, argv[1:]) if a == "--preset"]
    return any(n.startswith("g3") for n in names)


def main(argv=None):
    if argv is None:
        import sys
        argv = sys.argv[1:]
    if argv[:1] == ["--rereport"]:
        print(rereport(argv[1].split(",")))
        return
    if _g3(argv):   # the remedies where the baseline learns: their own presets and tables (g3_run.py)
        from analyses.remedies.g3_run import main as g3_main
        return g3_main(argv)
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    variants = args.variants.split(",")
    skipped = {v: f"--curriculum-g {args.curriculum_g} must be > 1 and < G = {args.G}"
               for v in variants if train_config(args, v, 0) is None}
    runs = [(v, s) for v in variants if v not in skipped for s in args.seeds]
    logger.info("%d runs (preset %s, %d at a time)", len(runs), args.preset, args.jobs)
    if args.ensemble:   # the seeds of a variant train as one stacked ensemble
        train_ensembles([train_config(args, v, s) for v, s in runs], [Path(args.out) / f"{v}-s{s}" for v, s in runs],
                        args.device)
    rows = in_parallel(functools.partial(run_one, args), runs, 1 if args.ensemble else args.jobs)
    stem = Path(args.results) / f"remedies_{args.preset}"
    atomic_write_text(stem.with_suffix(".md"), markdown(rows, skipped, args))
    report = {"args": vars(args), "runs": rows, "skipped": skipped, "comparisons": paired_seeds.comparisons(rows, FAMILY, value)}
    atomic_write_text(stem.with_suffix(".json"), json.dumps(normalize_config(report), indent=1))
    run_figure(rows, stem.with_suffix(".png"), VARIANTS, lambda r: rule_clock(r)["rule_acc"] if "beyond" in r else r["curve"]["rule_acc"])
    print(stem.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
