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
import time
from pathlib import Path

import numpy as np

from scoreprobe.stats.extrapolate import extrapolate_tau
from scoreprobe.studies.queue import finished, in_parallel, measured_clocks, train_ensembles
from analyses.remedies.compare import comparison_lines, comparisons
from scoreprobe.loading.series import load_series
from scoreprobe.data.curriculum import beyond_pieces
from scoreprobe.stats.taus import tau_summary
from scoreprobe.data.rules import rule_from_spec
from scoreprobe.store import normalize_config
from scoreprobe.training.train import TrainConfig, train_run
from scoreprobe.viz import new_figure
from scoreprobe.viz.common import save_figure
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
    a = ds.attrs
    row = {"variant": variant, "seed": seed, "run": name, "params": series.describe()["n_params"],
           **{k: a.get(k) for k in ("tau_rule", "tau_rule_ci", "tau_mem", "tau_mem_ci", "window_open",
                                    "window_log10_width", "window_log10_width_ci")},
           "peak_rule_acc": float(ds.rule_acc.max()), "final_rule_acc": float(ds.rule_acc[-1]),
           "final_mem_ratio": float(ds.mem_ratio[-1]),
           "curve": {"step": ds.step.values.tolist(), "rule_acc": ds.rule_acc.values.tolist(),
                     "mem_ratio": ds.mem_ratio.values.tolist()}, "seconds": round(time.time() - t0, 1)}
    if not np.isfinite(row["tau_rule"]):
        row["tau_rule_extrapolated"] = extrapolate_tau(ds)
    row["switch"] = plan[1] if plan else None
    row["views"] = round((cfg.total_steps - (row["switch"] or 0)) * cfg.batch_size / cfg.n_train)
    if plan is not None:
        row["beyond"] = beyond_row(ds, cfg, plan[0])
    logger.info("%s: τ_rule=%s τ_mem=%s", name, row["tau_rule"], row["tau_mem"])
    return row


def beyond_row(ds, cfg, g_start):
    """The rule clock counting only samples that break the curriculum's pieces (`beyond_pieces`)."""
    out = beyond_pieces(ds, rule_from_spec(cfg.rule), g_start)
    t = tau_summary(out, warn=False)
    row = {k: t[k] for k in ("tau_rule", "tau_rule_ci", "window_open", "window_log10_width")}
    row.update(peak_rule_acc=float(out.rule_acc.max()), final_rule_acc=float(out.rule_acc[-1]),
               rule_acc=out.rule_acc.values.tolist(), piece_share=out.piece_share.values.tolist())
    if not np.isfinite(row["tau_rule"]):
        row["tau_rule_extrapolated"] = extrapolate_tau(out)
    return row


def _fmt(v, ci=None, budget=None):
    """'1234 [1100, 1400]'; a τ not reached is a bound at the run's budget: '> 15000 (not reached)'."""
    if v is None or not np.isfinite(v):
        return "not reached" if budget is None else f"> {budget} (not reached)"
    out = f"{v:.0f}"
    if ci and ci[0] is not None:     # an upper end not reached (inf, or None in an export) reads ∞)
        hi = ci[1] if ci[1] is not None and np.isfinite(ci[1]) else None
        out += f" [{ci[0]:.0f}, {hi:.0f}]" if hi is not None else f" [{ci[0]:.0f}, ∞)"
    return out


def _extrapolated(ext, row):
    """' (extrapolated τ [lo, hi])' from the logit trend of the last checkpoints, '' without one."""
    if not ext:
        return ""
    last = row["curve"]["step"][-1]
    if ext["tau"] > 1000 * max(last, 1):
        return f" (extrapolated beyond 1000x the last step, {last})"
    lo, hi = ext["ci"]
    return f" (extrapolated {ext['tau']:.3g} [{lo:.3g}, {hi:.3g}])"


def rule_clock(row):
    """The rule clock to report for a run: beyond the curriculum's pieces for a curriculum run."""
    return row.get("beyond", row)


def by_variant(rows):
    """Per variant, the seeds side by side: peak and final rule accuracy, final copies, τ_mem, windows."""
    lines = ["| variant | seeds | peak rule_acc | final rule_acc | final mem | τ_mem | windows open |",
             "|---|---:|---|---|---|---|---:|"]
    for v in dict.fromkeys(r["variant"] for r in rows):
        rs = [r for r in rows if r["variant"] == v]
        peak, final = (" / ".join(f"{rule_clock(r)[k]:.3f}" for r in rs) for k in ("peak_rule_acc", "final_rule_acc"))
        mem = " / ".join(f"{r['final_mem_ratio']:.3f}" for r in rs)
        tau_mem = " / ".join(_fmt(r["tau_mem"], None, r["curve"]["step"][-1]) for r in rs)
        lines.append(f"| {v} | {len(rs)} | {peak} | {final} | {mem} | {tau_mem} "
                     f"| {sum(bool(rule_clock(r)['window_open']) for r in rs)} of {len(rs)} |")
    return lines


def markdown(rows, skipped, args):
    steps = rows[0]["curve"]["step"][-1] if rows else 0
    lines = [f"# Remedies at G = {args.G}, N = {args.N} (preset {args.preset})", "",
             f"Generated by `python analyses/remedies{'' if args.preset == 'cpu' else ' --preset ' + args.preset}`: "
             f"{steps} training steps (batch {args.batch_size}, {args.views} views per image), {args.n_checkpoints} "
             f"log-spaced checkpoints, clocks from {args.n_samples} samples each (docs/definitions.md: rule accuracy "
             "0.9 for τ_rule, copies 0.1 for τ_mem, 95% bootstrap CIs). The switches: docs/remedies.md.", "",
             "| variant | seed | parameters | steps | views | τ_rule [95% CI] | τ_mem [95% CI] | window (log10 width) "
             "| peak rule_acc |", "|---|---:|---:|---:|---:|---|---|---|---:|"]
    for r in rows:
        c, mark = rule_clock(r), " †" if "beyond" in r else ""
        budget = r["curve"]["step"][-1]
        rule = _fmt(c["tau_rule"], c["tau_rule_ci"], budget) + _extrapolated(c.get("tau_rule_extrapolated"), r)
        width = f"{c['window_log10_width']:.2f}" if c["window_open"] else "closed"
        lines.append(f"| {r['variant']} | {r['seed']} | {r['params']:,} | {r['curve']['step'][-1]} | {r['views']} "
                     f"| {rule}{mark} | {_fmt(r['tau_mem'], r['tau_mem_ci'], budget)} | {width}{mark} "
                     f"| {c['peak_rule_acc']:.3f}{mark} |")
    if any("beyond" in r for r in rows):
        lines += ["", "views: passes over each image of the run's own training set (a curriculum's first phase "
                  "draws other images). † curriculum runs: the rule clock beyond the curriculum's images (last "
                  "section); rule accuracy alone reads " + ", ".join(
                      f"{r['run']} τ_rule {_fmt(r['tau_rule'], r['tau_rule_ci'])} (peak {r['peak_rule_acc']:.3f})"
                      for r in rows if "beyond" in r) + "."]
    lines += [f"\n{v}: left out — {why}" for v, why in skipped.items()]
    lines += ["", "## By variant (seeds in the order of the table above)", ""] + by_variant(rows)
    lines += beyond_lines(rows)
    cmp = comparisons(rows)
    lines += comparison_lines(cmp, sum(1 for c in cmp if np.isfinite(c["p"])))
    return "\n".join(lines) + "\n"


def beyond_lines(rows):
    """The curriculum runs' rule clock beyond the pieces (docs/remedies.md), when there are any."""
    rs = [r for r in rows if "beyond" in r]
    if not rs:
        return []
    lines = ["", "## Curriculum runs: the rule clock beyond the curriculum's images", "",
             "Every image of the curriculum's first phase is valid under the rule, so rule accuracy cannot tell a "
             "model that learned only that narrower set from one that learned the rule. Here a valid, non-copied "
             "sample counts only when it breaks a piece (`scoreprobe.data.curriculum.beyond_pieces`; a uniform sampler "
             "of the rule's images does so with probability 1 − 2^-(number of pieces − groups)).", "",
             "| run | τ_rule beyond [95% CI] | window | peak | final | piece share: peak / final |",
             "|---|---|---|---:|---:|---|"]
    for r in rs:
        b = r["beyond"]
        width = f"{b['window_log10_width']:.2f}" if b["window_open"] else "closed"
        lines.append(f"| {r['run']} | {_fmt(b['tau_rule'], b['tau_rule_ci'], r['curve']['step'][-1])}"
                     f"{_extrapolated(b.get('tau_rule_extrapolated'), r)} "
                     f"| {width} | {b['peak_rule_acc']:.3f} | {b['final_rule_acc']:.3f} "
                     f"| {max(b['piece_share']):.3f} / {b['piece_share'][-1]:.3f} |")
    return lines


def figure(rows, path):
    fig = new_figure((11, 4.2))
    ax1, ax2 = fig.subplots(1, 2)
    colours = dict(zip(VARIANTS, ("black", "tab:blue", "tab:orange", "tab:green", "tab:red", "tab:gray")))
    for r in rows:
        c, ls = r["curve"], "-" if r["seed"] == rows[0]["seed"] else "--"
        x = np.asarray(c["step"]) + 1
        colour, label = colours[r["variant"]], f"{r['variant']} s{r['seed']}"
        if "beyond" in r:   # the curriculum's own images count too in the faint line; the reported clock does not
            ax1.plot(x, c["rule_acc"], ls, color=colour, lw=0.8, alpha=0.35)
            ax1.axvline(r["switch"] + 1, color="0.6", ls=":", lw=0.8)
        ax1.plot(x, rule_clock(r)["rule_acc"] if "beyond" in r else c["rule_acc"], ls, color=colour, label=label)
        ax2.plot(x, c["mem_ratio"], ls, color=colour)
    for ax, name in ((ax1, "rule accuracy (curriculum runs: beyond the pieces;\nfaint: every valid sample; dotted: switch)"),
                     (ax2, "memorized share")):
        ax.set_xscale("log")
        ax.set_xlabel("training step + 1")
        ax.set_ylabel(name)
    if rows:
        ax1.legend(fontsize=7)
    save_figure(fig, path, dpi=110)


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
    first["comparisons"] = comparisons(rows)
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
    report = {"args": vars(args), "runs": rows, "skipped": skipped, "comparisons": comparisons(rows)}
    atomic_write_text(stem.with_suffix(".json"), json.dumps(normalize_config(report), indent=1))
    figure(rows, stem.with_suffix(".png"))
    print(stem.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
