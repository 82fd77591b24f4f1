"""The two clocks across a training sweep: τ_rule vs the group size G, τ_mem vs the data size N.

Trains one model per run with the project's trainer (parity on 6x6, random layout), measures
the clocks at every checkpoint, and writes to --out:

  two_clocks.md       table of τ_rule, τ_mem and the innovation window per run, and the fits
  two_clocks.json     the same numbers, machine-readable
  clocks_<run>.png    rule accuracy / memorization and endpoint states vs step, per run
  scaling.png         τ_rule and τ_mem vs G (fixed N) and vs N (fixed G), with the power-law fit
  <run>/              each run directory (resumable: rerunning skips finished training and clocks)

Usage:
  python analyses/two_clocks.py                       # CPU preset, about an hour on 2 cores
  python analyses/two_clocks.py --device cuda         # GPU preset: larger N, longer training
  python analyses/two_clocks.py --smoke               # a minute: checks the pipeline end to end
Any preset value can be overridden (--Ns 32,64,128,256 --total-steps 8000 ...).

What to expect (DESIGN.md): τ_rule grows about tenfold per unit of G and barely with N; τ_mem
grows nearly linearly with N (≈ 35·N^1.14 for the reference DiT) and barely with G.
"""
import argparse
import json
import logging
import math
import time
from pathlib import Path

import numpy as np
import scipy.stats

from scoreprobe.checkpoints import load_series
from scoreprobe.probes.clocks import clocks, fit_power_law, resolve_device
from scoreprobe.store import normalize_config
from scoreprobe.train import TrainConfig, train_run
from scoreprobe.viz import new_figure, plot_clocks, plot_states

logger = logging.getLogger("two_clocks")

PRESETS = {  # Gs at fixed N = N_fixed; Ns at fixed G = G_fixed
    "smoke": dict(Gs=[2, 3], N_fixed=8, Ns=[8, 16], G_fixed=2, total_steps=30, n_checkpoints=5,
                  n_samples=32, n_steps=6, n_heldout=32, batch_size=16),
    "cpu": dict(Gs=[2, 3, 4], N_fixed=64, Ns=[16, 32, 64, 128], G_fixed=2, total_steps=8000, n_checkpoints=16,
                n_samples=256, n_steps=18, n_heldout=256, batch_size=128),
    "gpu": dict(Gs=[2, 3, 4], N_fixed=256, Ns=[64, 128, 256, 512, 1024], G_fixed=2, total_steps=60000,
                n_checkpoints=24, n_samples=1000, n_steps=18, n_heldout=1024, batch_size=256),
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="runs/two_clocks", help="output folder (runs, tables, figures)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto")
    p.add_argument("--preset", choices=sorted(PRESETS), default=None, help="default: gpu on CUDA, else cpu")
    p.add_argument("--smoke", action="store_true", help="same as --preset smoke")
    p.add_argument("--model", choices=["dit", "gpt"], default="dit")
    p.add_argument("--size", default="tiny", help="model size preset")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=0)
    for key in ("Gs", "Ns"):
        p.add_argument(f"--{key}", type=lambda s: [int(v) for v in s.split(",")], default=None)
    for key in ("N_fixed", "G_fixed", "total_steps", "n_checkpoints", "n_samples", "n_steps", "n_heldout",
                "batch_size"):
        p.add_argument("--" + key.replace("_", "-"), dest=key, type=int, default=None)
    args = p.parse_args(argv)
    args.device = resolve_device(args.device)
    preset = "smoke" if args.smoke else args.preset or ("gpu" if args.device.startswith("cuda") else "cpu")
    for key, value in PRESETS[preset].items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    args.preset = preset
    return args


def plan_runs(args):
    """[(G, N)] for the G sweep at N_fixed and the N sweep at G_fixed, without duplicates."""
    runs = [(G, args.N_fixed) for G in args.Gs] + [(args.G_fixed, N) for N in args.Ns]
    return list(dict.fromkeys(runs))


def run_one(args, G, N):
    """Train (or resume) one run and measure its clocks; returns the row of the table."""
    name = f"g{G}-n{N}"
    run_dir = Path(args.out) / name
    cfg = TrainConfig(rule={"name": "parity", "G": G, "shape": [6, 6], "layout": "random", "seed": 0},
                      n_train=N, n_heldout=args.n_heldout, seed=args.seed, model=args.model, size=args.size,
                      lr=args.lr, batch_size=args.batch_size, total_steps=args.total_steps,
                      n_checkpoints=args.n_checkpoints)
    t0 = time.time()
    if not finished(run_dir, cfg):
        train_run(cfg, run_dir, device=args.device)
    t1 = time.time()
    ds = clocks(load_series(run_dir), n_samples=args.n_samples, n_steps=args.n_steps, device=args.device,
                out=run_dir / "clocks.zarr")
    t2 = time.time()
    save_run_figure(ds, Path(args.out) / f"clocks_{name}.png", title=f"G={G}, N={N}")
    a = ds.attrs
    row = {"run": name, "G": G, "N": N, "tau_rule": a["tau_rule"], "tau_mem": a["tau_mem"],
           "window_open": bool(a["window_open"]), "log10_ratio": a["log10_ratio"],
           "final_rule_acc": float(ds.rule_acc[-1]), "final_mem_ratio": float(ds.mem_ratio[-1]),
           "train_s": round(t1 - t0, 1), "clocks_s": round(t2 - t1, 1)}
    logger.info("%s: τ_rule=%s τ_mem=%s (train %.0fs, clocks %.0fs)", name, row["tau_rule"], row["tau_mem"],
                t1 - t0, t2 - t1)
    return row


def finished(run_dir, cfg):
    """True when `run_dir` holds this config's run with its last checkpoint written (skip training)."""
    meta = Path(run_dir) / "run.json"
    if not meta.is_file() or (Path(run_dir) / "resume.pt").exists():
        return False
    if json.loads(meta.read_text()).get("config") != cfg.to_dict():
        return False  # train_run explains the difference
    return cfg.total_steps in load_series(run_dir).steps


def _new_figure(figsize, ncols):
    fig = new_figure(figsize)
    return fig, fig.subplots(1, ncols)


def save_run_figure(ds, path, title):
    fig, (ax1, ax2) = _new_figure((12, 4.2), 2)
    plot_clocks(ds, ax=ax1)
    plot_states(ds, ax=ax2)
    fig.suptitle(title)
    fig.savefig(path, dpi=110)


# ---------------------------------------------------------------------------------------------
# Fits, table, figure
# ---------------------------------------------------------------------------------------------


def _finite(rows, key):
    return [r for r in rows if r[key] is not None and math.isfinite(r[key]) and r[key] > 0]


def decades_per_unit(xs, taus):
    """Slope of log10 τ vs x (e.g. decades of τ_rule per unit of G), or None with < 2 points."""
    if len(xs) < 2 or len(set(xs)) < 2:
        return None
    fit = scipy.stats.linregress(xs, np.log10(taus))
    return {"slope": float(fit.slope), "stderr": float(fit.stderr) if len(xs) > 2 else None}


def fits(rows, args):
    """Power laws in N (fixed G) and decades per unit G (fixed N) for both clocks."""
    out = {}
    by_n = [r for r in rows if r["G"] == args.G_fixed]
    by_g = [r for r in rows if r["N"] == args.N_fixed]
    for key in ("tau_mem", "tau_rule"):
        ok = _finite(by_n, key)
        try:
            out[f"{key}_vs_N"] = fit_power_law([r["N"] for r in ok], [r[key] for r in ok])
        except Exception as e:  # too few runs reached this clock within the budget
            out[f"{key}_vs_N"] = {"error": str(e)}
        ok = _finite(by_g, key)
        out[f"{key}_vs_G"] = decades_per_unit([r["G"] for r in ok], [r[key] for r in ok])
    return out


def _fmt(v, digits=0):
    return "—" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.{digits}f}"


def _fit_line(name, f):
    if "error" in f:
        return f"- {name}: no fit ({f['error']})"
    ci = "" if not math.isfinite(f["b_ci"][0]) else \
        f", 95% CI a ∈ [{f['a_ci'][0]:.3g}, {f['a_ci'][1]:.3g}], b ∈ [{f['b_ci'][0]:.2f}, {f['b_ci'][1]:.2f}]"
    return f"- {name} = a·N^b: a = {f['a']:.3g}, b = {f['b']:.2f}{ci} ({f['n']} runs, r² = {f['r2']:.3f})"


def markdown(rows, fit, args):
    lines = [f"# Two clocks ({args.model}, size {args.size}, preset {args.preset}, {args.total_steps} steps, "
             f"{args.n_samples} samples per checkpoint)", "",
             "| run | G | N | τ_rule | τ_mem | window | log10(τ_mem/τ_rule) | final rule_acc | final mem_ratio |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        window = f"open [{_fmt(r['tau_rule'])}, {_fmt(r['tau_mem'])}]" if r["window_open"] else "closed"
        lines.append(f"| {r['run']} | {r['G']} | {r['N']} | {_fmt(r['tau_rule'])} | {_fmt(r['tau_mem'])} | {window} "
                     f"| {_fmt(r['log10_ratio'], 2)} | {r['final_rule_acc']:.3f} | {r['final_mem_ratio']:.3f} |")
    lines += ["", "— = not reached within the training budget.", "", f"## Fits (G = {args.G_fixed} for N, "
              f"N = {args.N_fixed} for G)", "", _fit_line("τ_mem", fit["tau_mem_vs_N"]),
              _fit_line("τ_rule", fit["tau_rule_vs_N"])]
    for key in ("tau_rule_vs_G", "tau_mem_vs_G"):
        f = fit[key]
        lines.append(f"- {key.split('_vs')[0].replace('tau_', 'τ_')} vs G: "
                     + ("fewer than two runs reached it" if f is None else
                        f"{f['slope']:+.2f} decades per unit G (×{10 ** f['slope']:.1f})"))
    return "\n".join(lines) + "\n"


def scaling_figure(rows, fit, args, path):
    fig, (ax1, ax2) = _new_figure((10, 4), 2)
    for key, color in (("tau_rule", "#2ca02c"), ("tau_mem", "#ff9f1c")):
        g = _finite([r for r in rows if r["N"] == args.N_fixed], key)
        ax1.plot([r["G"] for r in g], [r[key] for r in g], "o-", color=color, label=key.replace("tau_", "τ_"))
        n = _finite([r for r in rows if r["G"] == args.G_fixed], key)
        ax2.plot([r["N"] for r in n], [r[key] for r in n], "o", color=color, label=key.replace("tau_", "τ_"))
    f = fit["tau_mem_vs_N"]
    if "error" not in f:
        xs = np.geomspace(min(args.Ns), max(args.Ns), 50)
        ax2.plot(xs, f["a"] * xs ** f["b"], "-", color="#ff9f1c", lw=1, label=f"{f['a']:.3g}·N^{f['b']:.2f}")
    ax1.set(xlabel="group size G", ylabel="training step", title=f"N = {args.N_fixed}")
    ax2.set(xlabel="training set size N", ylabel="training step", title=f"G = {args.G_fixed}")
    for ax, scales in ((ax1, ("y",)), (ax2, ("x", "y"))):
        if not any(len(line.get_xdata()) for line in ax.lines):  # log axes need data
            ax.text(0.5, 0.5, "no clock reached in this budget", ha="center", transform=ax.transAxes)
            continue
        for axis in scales:
            getattr(ax, f"set_{axis}scale")("log")
        ax.legend(fontsize=8)
    fig.savefig(path, dpi=110)


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = plan_runs(args)
    logger.info("%d runs on %s (preset %s): %s", len(runs), args.device, args.preset, runs)
    rows = [run_one(args, G, N) for G, N in runs]
    fit = fits(rows, args)
    (out / "two_clocks.md").write_text(markdown(rows, fit, args))
    report = normalize_config({"args": vars(args), "runs": rows, "fits": fit})  # strict JSON: NaN -> null
    (out / "two_clocks.json").write_text(json.dumps(report, indent=1))
    scaling_figure(rows, fit, args, out / "scaling.png")
    print((out / "two_clocks.md").read_text())
    print(f"wrote {out}/two_clocks.md, two_clocks.json, scaling.png and clocks_<run>.png")


if __name__ == "__main__":
    main()
