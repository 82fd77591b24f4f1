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
import math
import time
from pathlib import Path

import numpy as np

from scoreprobe.stats.extrapolate import extrapolate_tau
from scoreprobe.studies.queue import apply_preset, finished, in_parallel, measured_clocks, train_ensembles
from scoreprobe.studies.recipes import run_name, total_steps, train_config  # noqa: F401  (two_clocks' recipe)
from scoreprobe.atomic import atomic_write_text
from scoreprobe.loading.series import load_series
from scoreprobe.stats.taus import fit_power_law
from scoreprobe.store import normalize_config
from scoreprobe.training.train import train_run
from scoreprobe.viz import new_figure, plot_clocks, plot_states
from scoreprobe.viz.common import save_figure

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
    save_run_figure(ds, Path(args.results) / f"two_clocks_{args.preset}_{name}.png", title=f"G={G}, N={N}")
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


def _new_figure(figsize, ncols):
    fig = new_figure(figsize)
    return fig, fig.subplots(1, ncols)


def save_run_figure(ds, path, title):
    fig, (ax1, ax2) = _new_figure((12, 4.2), 2)
    plot_clocks(ds, ax=ax1)
    plot_states(ds, ax=ax2)
    fig.suptitle(title)
    save_figure(fig, path, dpi=110)


# ---------------------------------------------------------------------------------------------
# Fits, table, figure
# ---------------------------------------------------------------------------------------------


def _finite(rows, key):
    return [r for r in rows if r[key] is not None and math.isfinite(r[key]) and r[key] > 0]


def _log_se(row, key):
    """Standard error of ln τ from its bootstrap CI (half-width / 1.96); NaN when the CI is open."""
    lo, hi = row.get(key + "_ci") or (None, None)
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)) or lo <= 0:
        return math.nan
    return (math.log(hi) - math.log(lo)) / (2 * 1.96)


def g_ratio(rows, args):
    """τ_rule(G') / τ_rule(G) for consecutive G of the sweep at N_fixed (per seed), with a CI from the two
    bootstrap CIs (log-normal), or the bound."""
    out = {}
    for seed in args.seeds:
        by_g = {r["G"]: r for r in rows if r["N"] == args.N_fixed and r["seed"] == seed}
        out.update(_g_ratios(by_g, f" (seed {seed})" if len(args.seeds) > 1 else ""))
    return out


def _g_ratios(by_g, suffix):
    out, gs = {}, sorted(by_g)
    for G, G1 in zip(gs, gs[1:]):
        lo, hi = by_g[G], by_g[G1]
        if not _finite([lo], "tau_rule"):
            continue
        key = f"G{G1}/G{G}{suffix}"
        if _finite([hi], "tau_rule"):
            r = hi["tau_rule"] / lo["tau_rule"]
            se = math.hypot(_log_se(lo, "tau_rule"), _log_se(hi, "tau_rule"))
            if math.isfinite(se):
                out[key] = {"ratio": r, "ci": [r * math.exp(-1.96 * se), r * math.exp(1.96 * se)]}
            else:  # an open CI (not reached in some resamples): the conservative lower bound only
                out[key] = {"ratio": r, "ci": [hi["tau_rule_ci"][0] / lo["tau_rule_ci"][1], math.inf]}
        else:
            ext = hi.get("tau_rule_extrapolated")
            out[key] = {"ratio_above": hi["steps"] / lo["tau_rule"],
                        "extrapolated": None if ext is None else ext["tau"] / lo["tau_rule"],
                        "extrapolated_ci": None if ext is None else [v / lo["tau_rule"] for v in ext["ci"]]}
    return out


def mem_fit(rows, args, n_draws=2000, seed=0):
    """τ_mem = a·N^b over the N sweep: least squares in log-log with its t-interval, and the spread of b
    when each τ_mem is redrawn within its own bootstrap CI (measurement noise alone)."""
    ok = _finite([r for r in rows if r["G"] == args.G_fixed], "tau_mem")
    try:
        fit = fit_power_law([r["N"] for r in ok], [r["tau_mem"] for r in ok])
    except Exception as e:  # too few runs reached τ_mem within the budget
        return {"error": str(e)}
    se = np.array([_log_se(r, "tau_mem") for r in ok])
    if np.all(np.isfinite(se)):
        rng = np.random.default_rng(seed)
        logn = np.log([r["N"] for r in ok])
        draws = np.log([r["tau_mem"] for r in ok]) + rng.normal(size=(n_draws, len(ok))) * se
        b = np.polyfit(logn, draws.T, 1)[0]
        fit["b_ci_measurement"] = [float(np.percentile(b, 2.5)), float(np.percentile(b, 97.5))]
    return fit


def _fmt(v, digits=0):
    return "—" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.{digits}f}"


def _tau_cell(r, key):
    ci = r.get(key + "_ci")
    text = _fmt(r[key])
    if ci and r[key] is not None and math.isfinite(r[key]):
        text += f" [{_fmt(ci[0])}, {'not reached' if ci[1] is None or not math.isfinite(ci[1]) else _fmt(ci[1])}]"
    return text


def _window_cell(r):
    if not r["window_open"]:
        return "closed"
    spans = " ∪ ".join(f"{_fmt(lo)}–{_fmt(hi)}" for lo, hi in r["window_intervals"])
    ci = r.get("window_log10_width_ci") or [math.nan, math.nan]
    return f"{spans}{'+' if r['window_hi_censored'] else ''}: {r['window_log10_width']:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]"


def markdown(rows, fit, ratios, args):
    lines = [f"# Two clocks ({args.model}, width {args.hidden_size}, {args.layout} layout, preset {args.preset})", "",
             f"Generated by `python analyses/two_clocks{'' if args.preset == 'cpu' else ' --preset ' + args.preset}`"
             f" ({args.n_samples} samples per checkpoint, {args.views} views per training image, batch "
             f"{args.batch_size}, {args.n_checkpoints} log-spaced checkpoints). Definitions: docs/definitions.md; "
             "τ with 95% bootstrap CIs; the window as step intervals and its log10 width [CI] "
             "(`+`: still open at the last checkpoint).", "",
             "| run | G | N | steps | τ_rule | τ_novel | τ_mem | window: steps, log10 width | peak rule_acc "
             "| final rule_acc | final mem |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['run']} | {r['G']} | {r['N']} | {r['steps']} | {_tau_cell(r, 'tau_rule')} | "
                     f"{_tau_cell(r, 'tau_novel')} | {_tau_cell(r, 'tau_mem')} | {_window_cell(r)} | "
                     f"{r['peak_rule_acc']:.3f} | {r['final_rule_acc']:.3f} | {r['final_mem_ratio']:.3f} |")
    lines += ["", "— = not reached within the run. Under-resolved crossings (no checkpoint within a factor 1.5): "
              + (", ".join(f"{r['run']} {k}" for r in rows for k in r["under_resolved"]) or "none") + ".", ""]
    lines += _ratio_lines(ratios, args) + [""] + _fit_lines(fit, args)
    return "\n".join(lines) + "\n"


def _ratio_lines(ratios, args):
    lines = [f"## τ_rule vs G (N = {args.N_fixed})", ""]
    for key, v in ratios.items():
        if "ratio" in v:
            upper = f"{v['ci'][1]:.1f}" if math.isfinite(v["ci"][1]) else "unbounded: the larger G is not reached in some resamples"
            lines.append(f"- τ_rule {key} = {v['ratio']:.1f}× [95% CI {v['ci'][0]:.1f}, {upper}]")
        else:
            ext = "" if v["extrapolated"] is None else (
                f"; extrapolating the logit of rule_acc linearly in log step: {v['extrapolated']:.0f}× "
                f"[{v['extrapolated_ci'][0]:.0f}, {v['extrapolated_ci'][1]:.0f}]")
            lines.append(f"- τ_rule {key} > {v['ratio_above']:.1f}× (the larger G not reached in the run){ext}")
    return lines + (["- no ratio: τ_rule not reached at the smaller G"] if not ratios else [])


def _fit_lines(f, args):
    lines = [f"## τ_mem vs N (G = {args.G_fixed})", ""]
    if "error" in f:
        return lines + [f"- no fit: {f['error']}"]
    lines.append(f"- τ_mem = a·N^b: a = {f['a']:.3g}, b = {f['b']:.2f}, 95% CI of b [{f['b_ci'][0]:.2f}, "
                 f"{f['b_ci'][1]:.2f}] (t-interval of the log-log fit, {f['n']} runs, r² = {f['r2']:.3f})")
    if "b_ci_measurement" in f:
        lo, hi = f["b_ci_measurement"]
        lines.append(f"- b from measurement noise alone (each τ_mem redrawn within its CI): [{lo:.2f}, {hi:.2f}]")
    return lines + ["- the paper's reference DiT: τ_mem ≈ 35·N^1.14"]


def scaling_figure(rows, fit, args, path):
    fig, (ax1, ax2) = _new_figure((10, 4), 2)
    for ax, sel, x in ((ax1, lambda r: r["N"] == args.N_fixed, "G"), (ax2, lambda r: r["G"] == args.G_fixed, "N")):
        for key, color, fmt, shift in (("tau_rule", "#2ca02c", "o", 0.97), ("tau_novel", "#9467bd", "D", 1.03),
                                       ("tau_mem", "#ff9f1c", "s", 1.0)):   # shift: τ_rule ≈ τ_novel side by side
            pts = _finite([r for r in rows if sel(r)], key)
            if not pts:
                continue
            ci = np.array([[r[key] - (r[key + "_ci"][0] or r[key]), ((r[key + "_ci"][1] or np.inf) - r[key])]
                           for r in pts]).T
            xs = [r[x] * shift if x == "N" else r[x] + (shift - 1) * 2 for r in pts]
            ax.errorbar(xs, [r[key] for r in pts], yerr=np.minimum(ci, 10 * np.array([r[key] for r in pts])),
                        fmt=fmt, mfc="none" if key == "tau_novel" else color, color=color, capsize=3,
                        label=key.replace("tau_", "τ_"))
    if "error" not in fit:
        xs = np.geomspace(min(args.Ns), max(args.Ns), 50)
        ax2.plot(xs, fit["a"] * xs ** fit["b"], "-", color="#ff9f1c", lw=1, label=f"{fit['a']:.3g}·N^{fit['b']:.2f}")
    ax1.set(xlabel="group size G", ylabel="training step", title=f"N = {args.N_fixed}", yscale="log")
    ax2.set(xlabel="training set size N", ylabel="training step", title=f"G = {args.G_fixed}", xscale="log",
            yscale="log")
    for ax in (ax1, ax2):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no clock reached in this budget", ha="center", transform=ax.transAxes)
    save_figure(fig, path, dpi=110)


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
    fit, ratios = mem_fit(rows, args), g_ratio(rows, args)
    atomic_write_text(stem.with_suffix(".md"), markdown(rows, fit, ratios, args))
    report = normalize_config({"args": vars(args), "runs": rows, "tau_mem_vs_N": fit, "tau_rule_vs_G": ratios})
    atomic_write_text(stem.with_suffix(".json"), json.dumps(report, indent=1))  # strict JSON: NaN, inf -> null
    scaling_figure(rows, fit, args, stem.with_suffix(".png"))
    print(stem.with_suffix(".md").read_text())
    print(f"wrote {stem}.md, .json, .png and {stem}_<run>.png")


if __name__ == "__main__":
    main()
