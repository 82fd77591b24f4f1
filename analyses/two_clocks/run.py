"""The two clocks across a training sweep: τ_rule vs the group size G, τ_mem vs the data size N.

Trains one model per run with the project's trainer (parity on 6x6, offset layout, DiT width 80,
patch 2 — the shipped series' family), `--jobs` runs at a time in one-thread worker processes,
measures the clocks of every checkpoint (`sp.clocks`: τ with bootstrap CIs, the window; see
docs/definitions.md) and writes

  <results>/two_clocks_<preset>.md    τ_rule, τ_novel, τ_mem and the window per run; τ_rule(G+1)/τ_rule(G);
                                      the power law τ_mem = a·N^b with its CI
  <results>/two_clocks_<preset>.json  the same numbers, machine-readable
  <results>/two_clocks_<preset>.png   τ vs G (fixed N) and vs N (fixed G), with CIs and the fit
  <results>/two_clocks_<preset>_<run>.png   rule accuracy / memorization and endpoint states per run
  <out>/<run>/                        run directories (resumable: reruns skip finished training and clocks)

Each run trains `views`·N/batch steps (memorization tracks views per image; checkpoints/README.md).

Usage:
  python analyses/two_clocks                       # CPU preset: ≈ 1.5 h on 2 cores (2 runs at a time)
  python analyses/two_clocks --train-only          # only train (e.g. first, on a busy machine)
  python analyses/two_clocks --device cuda         # GPU preset: G = 2, 3, 4, 6, N = 64…1024, 3 seeds,
                                                      # runs of one length as stacked ensembles
  python analyses/two_clocks --smoke               # < 1 min: checks the pipeline end to end
Any preset value can be overridden (--Ns 32,64,128,256 --views 12000 --jobs 1 ...).

What the paper (arXiv 2605.10019) reports: τ_rule grows about tenfold per unit of G and barely
with N; τ_mem grows nearly linearly with N (≈ 35·N^1.14 for its reference DiT) and barely with G.
"""
import argparse
import functools
import json
import logging
import time
from pathlib import Path

import numpy as np

from scoreprobe.atomic import atomic_write_text
from scoreprobe.loading.series import load_series
from scoreprobe.reports.clock_tables import fit_lines, ratio_lines, sweep_table
from scoreprobe.stats.extrapolate import extrapolate_tau
from scoreprobe.stats.run_ci_fits import g_ratio, mem_fit
from scoreprobe.store import normalize_config
from scoreprobe.studies.queue import apply_preset, finished, in_parallel, measured_clocks, train_ensembles
from scoreprobe.studies.recipes import run_name, total_steps, train_config  # noqa: F401  (two_clocks' recipe)
from scoreprobe.training.train import train_run
from scoreprobe.viz.clock_runs import run_figure, scaling_figure

logger = logging.getLogger("two_clocks")

PRESETS = {  # Gs at fixed N = N_fixed; Ns at fixed G = G_fixed; each run trains views·N/batch steps
    "smoke": dict(Gs=[2, 3], N_fixed=8, Ns=[8, 16], G_fixed=2, views=60, min_steps=30, n_checkpoints=5,
                  first_checkpoint=5, n_samples=32, n_steps=6, n_heldout=32, batch_size=16, hidden_size=32,
                  jobs=1, seeds=[0]),
    # Sized from checkpoints/README.md: ≈ 23 steps/s at batch 96 on one thread; memorization 0.1 at
    # ≈ 9–10k views per image, so 12k views brackets τ_mem; N = 240 keeps τ_mem (≈ 24k steps) far
    # from G = 2's τ_rule (≈ 2.6k). Two one-thread runs in parallel use both cores: ≈ 70 min.
    "cpu": dict(Gs=[2, 3], N_fixed=240, Ns=[30, 60, 120, 240], G_fixed=2, views=12000, min_steps=3000,
                n_checkpoints=20, first_checkpoint=200, n_samples=1000, n_steps=None, n_heldout=1024,
                batch_size=96, hidden_size=80, jobs=2, seeds=[0]),
    # G = 2…6 (5 does not divide 36 pixels), 3 seeds; runs of one length train as one stacked ensemble
    "gpu": dict(Gs=[2, 3, 4, 6], N_fixed=256, Ns=[64, 128, 256, 512, 1024], G_fixed=2, views=14000,
                min_steps=20000, n_checkpoints=24, first_checkpoint=200, n_samples=1000, n_steps=None,
                n_heldout=1024, batch_size=256, hidden_size=80, jobs=1, seeds=[0, 1, 2]),
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="runs/two_clocks", help="output folder (runs, per-run figures)")
    p.add_argument("--results", default=None, help="folder for the tables and figures, two_clocks_<preset>.md/.json"
                   "/.png (default: analyses/results, or --out for --smoke)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto")
    p.add_argument("--preset", choices=sorted(PRESETS), default=None, help="default: gpu on CUDA, else cpu")
    p.add_argument("--smoke", action="store_true", help="same as --preset smoke")
    p.add_argument("--train-only", action="store_true", help="train (or resume) the runs, measure nothing")
    p.add_argument("--model", choices=["dit", "gpt"], default="dit")
    p.add_argument("--size", default="tiny", help="model size preset")
    p.add_argument("--layout", default="offset", help="parity layout (offset, contiguous, random)")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seeds", type=lambda s: [int(v) for v in s.split(",")], default=None,
                   help="training seeds (comma-separated); a run of seed s > 0 is named g<G>-n<N>-s<s>")
    p.add_argument("--ensemble", action=argparse.BooleanOptionalAction, default=None,
                   help="train runs of equal length as stacked ensembles (scoreprobe.training.ensemble; default: on CUDA)")
    for key in ("Gs", "Ns"):
        p.add_argument(f"--{key}", type=lambda s: [int(v) for v in s.split(",")], default=None)
    for key in ("N_fixed", "G_fixed", "views", "min_steps", "n_checkpoints", "first_checkpoint", "n_samples",
                "n_steps", "n_heldout", "batch_size", "hidden_size", "jobs"):
        p.add_argument("--" + key.replace("_", "-"), dest=key, type=int, default=None)
    args = p.parse_args(argv)
    preset = apply_preset(args, PRESETS)
    args.ensemble = args.device.startswith("cuda") if args.ensemble is None else args.ensemble
    if args.results is None:
        args.results = args.out if preset == "smoke" else "analyses/results"
    Path(args.results).mkdir(parents=True, exist_ok=True)   # per-run figures are written there as runs finish
    return args


def plan_runs(args):
    """[(G, N, seed)] for the G sweep at N_fixed and the N sweep at G_fixed, each seed, without
    duplicates, longest first."""
    grid = list(dict.fromkeys([(G, args.N_fixed) for G in args.Gs] + [(args.G_fixed, N) for N in args.Ns]))
    return sorted([(G, N, s) for G, N in grid for s in args.seeds], key=lambda r: -total_steps(args, r[1]))


def run_one(args, G, N, seed):
    """Train (or resume) one run and measure its clocks; returns the row of the table (None: train only)."""
    name = run_name(G, N, seed)
    run_dir = Path(args.out) / name
    cfg = train_config(args, G, N, seed)
    t0 = time.time()
    if not finished(run_dir, cfg):
        train_run(cfg, run_dir, device=args.device, progress=False)
    t1 = time.time()
    logger.info("%s: trained (%.0f s)", name, t1 - t0)
    if args.train_only:
        return None
    return measure_run(args, run_dir, name, G, N, seed, train_s=t1 - t0)


def run_all(args, runs):
    """run_one over `runs` (rows in `runs` order): `args.jobs` at a time in one-thread worker processes,
    or, with args.ensemble, training first as stacked ensembles (`grid.train_ensembles`)."""
    if args.ensemble:
        train_ensembles([train_config(args, *r) for r in runs], [Path(args.out) / run_name(*r) for r in runs],
                        args.device)
    return in_parallel(functools.partial(run_one, args), runs, 1 if args.ensemble else args.jobs)


def measure_run(args, run_dir, name, G, N, seed, train_s):
    """Clocks of one trained run (resumable store in the run directory); the row of the table."""
    t0 = time.time()
    kw = {} if args.n_steps is None else {"n_steps": args.n_steps}
    ds = measured_clocks(load_series(run_dir), run_dir / "clocks.zarr", n_samples=args.n_samples, device=args.device,
                         **kw)
    run_figure(ds, Path(args.results) / f"two_clocks_{args.preset}_{name}.png", title=f"G={G}, N={N}")
    a = ds.attrs
    keys = ("tau_rule", "tau_rule_ci", "tau_novel", "tau_novel_ci", "tau_mem", "tau_mem_ci", "window_open",
            "window_intervals", "window_log10_width", "window_log10_width_ci", "window_hi_censored",
            "under_resolved", "log10_ratio")
    row = {"run": name, "G": G, "N": N, "seed": seed, "steps": int(ds.step.max()), **{k: a.get(k) for k in keys},
           "peak_rule_acc": float(ds.rule_acc.max()), "final_rule_acc": float(ds.rule_acc[-1]),
           "final_mem_ratio": float(ds.mem_ratio[-1]), "train_s": round(train_s, 1),
           "clocks_s": round(time.time() - t0, 1)}
    if not np.isfinite(row["tau_rule"]):
        row["tau_rule_extrapolated"] = extrapolate_tau(ds)
    logger.info("%s: τ_rule=%s τ_mem=%s (clocks %.0f s)", name, row["tau_rule"], row["tau_mem"], row["clocks_s"])
    return row


def markdown(rows, fit, ratios, args):
    """The report: its header, the runs (scoreprobe.reports.clock_tables), τ_rule vs G and τ_mem vs N."""
    lines = [f"# Two clocks ({args.model}, width {args.hidden_size}, {args.layout} layout, preset {args.preset})", "",
             f"Generated by `python analyses/two_clocks{'' if args.preset == 'cpu' else ' --preset ' + args.preset}`"
             f" ({args.n_samples} samples per checkpoint, {args.views} views per training image, batch "
             f"{args.batch_size}, {args.n_checkpoints} log-spaced checkpoints). Definitions: docs/definitions.md; "
             "τ with 95% bootstrap CIs; the window as step intervals and its log10 width [CI] "
             "(`+`: still open at the last checkpoint).", ""]
    lines += sweep_table(rows) + ratio_lines(ratios, args.N_fixed) + [""] + fit_lines(fit, args.G_fixed)
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = plan_runs(args)
    logger.info("%d runs on %s (preset %s, %s): %s", len(runs), args.device, args.preset,
                "stacked ensembles" if args.ensemble else f"{args.jobs} at a time",
                [(G, N, s, total_steps(args, N)) for G, N, s in runs])
    rows = run_all(args, runs)
    if args.train_only:
        return
    write_results(rows, args)


def write_results(rows, args):
    results = Path(args.results if args.results else args.out)
    results.mkdir(parents=True, exist_ok=True)
    stem = results / f"two_clocks_{args.preset}"
    fit, ratios = mem_fit(rows, args.G_fixed), g_ratio(rows, args.N_fixed, args.seeds)
    atomic_write_text(stem.with_suffix(".md"), markdown(rows, fit, ratios, args))
    report = normalize_config({"args": vars(args), "runs": rows, "tau_mem_vs_N": fit, "tau_rule_vs_G": ratios})
    atomic_write_text(stem.with_suffix(".json"), json.dumps(report, indent=1))  # strict JSON: NaN, inf -> null
    scaling_figure(rows, fit, args.N_fixed, args.G_fixed, args.Ns, stem.with_suffix(".png"))
    print(stem.with_suffix(".md").read_text())
    print(f"wrote {stem}.md, .json, .png and {stem}_<run>.png")


if __name__ == "__main__":
    main()
