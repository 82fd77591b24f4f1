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
  python analyses/two_clocks --from-results        # rewrite the md, json and figure from the json (current readers)
Any preset value can be overridden (--Ns 32,64,128,256 --views 12000 --jobs 1 ...).

What the paper (arXiv 2605.10019) reports: τ_rule grows about tenfold per unit of G and barely
with N; τ_mem grows nearly linearly with N (≈ 35·N^1.14 for its reference DiT) and barely with G.
"""
import argparse
import json
import logging
import sys
from pathlib import Path

from scoreprobe.atomic import atomic_write_text
from scoreprobe.reports.clock_tables import fit_lines, ratio_lines, sweep_table
from scoreprobe.stats.run_ci_fits import g_ratio, mem_fit
from scoreprobe.store import normalize_config
from scoreprobe.studies.queue import apply_preset
from analyses.two_clocks.recipe_runs import plan_runs, run_all
from scoreprobe.studies.recipes import run_name, total_steps, train_config  # noqa: F401  (two_clocks' recipe)
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
    p.add_argument("--from-results", action="store_true",
                   help="rewrite <results>/two_clocks_<preset>.md/.json/.png from the json's runs (no training, no clocks)")
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


def run_figure_of(ds, args, name, G, N):
    """The per-run figure (scoreprobe.viz.clock_runs.run_figure) beside the tables."""
    run_figure(ds, Path(args.results) / f"two_clocks_{args.preset}_{name}.png", title=f"G={G}, N={N}")


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
    if args.from_results:
        return rewrite(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = plan_runs(args)
    logger.info("%d runs on %s (preset %s, %s): %s", len(runs), args.device, args.preset,
                "stacked ensembles" if args.ensemble else f"{args.jobs} at a time",
                [(G, N, s, total_steps(args, N)) for G, N, s in runs])
    rows = run_all(args, runs, run_figure_of)
    if args.train_only:
        return
    write_results(rows, args)


def rewrite(args):
    """--from-results: the tables, fit and figure again from <results>/two_clocks_<preset>.json, with the settings
    it was made with (its "args") and the current readers (e.g. the fit's lack-of-fit line)."""
    js = Path(args.results) / f"two_clocks_{args.preset}.json"
    if not js.is_file():
        print(f"two_clocks: error: --from-results: {js} is missing", file=sys.stderr)
        raise SystemExit(2)
    report = json.loads(js.read_text())
    saved = report["args"]
    # a json made before runs named their training seed holds one seed per run: the args' "seed" (default 0)
    rows = [{"seed": saved.get("seed", 0), **r} for r in report["runs"]]
    write_results(rows, argparse.Namespace(**{**vars(args), **saved, "results": args.results}))


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
