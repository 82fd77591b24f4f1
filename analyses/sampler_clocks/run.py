"""Does memorization depend on the sampler? The clocks of the shipped series under each sampler.

Measures `sp.clocks` on every checkpoint of `checkpoints/parity-default` (1000 samples, seed 0, 32
steps: the same initial noise for every sampler) with the deterministic Heun PF-ODE (the default),
EDM's stochastic sampler (S_churn 10 and 40, S_noise 1 and 1.007, S_tmin 0, S_tmax inf), ancestral
sampling (DDIM, η = 1) and DDIM (η = 0, the Euler PF-ODE), and writes

  analyses/results/sampler_clocks.json   per sampler: its config, τ_rule and τ_mem with CIs, the
                                         window, peak / final rule_acc, final mem_ratio, the curves
  analyses/results/sampler_clocks.md     the table the README quotes

    python analyses/sampler_clocks    # ≈ 4 min per sampler on 2 idle cores (DDIM ones: half)

The stores go to --stores (resumable: an interrupted run continues where it stopped). The samplers:
docs/definitions.md, "Samplers"; the clocks: "Clocks".
"""
import argparse
import json
import logging
import time
from pathlib import Path

import numpy as np
import torch

import scoreprobe as sp
from scoreprobe.atomic import atomic_write_text
from scoreprobe.data.datasets import STATE_CODES
from scoreprobe.defaults import DEFAULT_N_STEPS

logger = logging.getLogger("sampler_clocks")
SAMPLERS = {   # label: Sampler fields
    "heun": {"name": "heun"},
    "ddim": {"name": "ddim", "eta": 0.0},
    "ancestral": {"name": "ancestral"},
    "edm-churn10": {"name": "edm-stochastic", "s_churn": 10.0},
    "edm-churn40": {"name": "edm-stochastic", "s_churn": 40.0},
    "edm-churn10-noise1.007": {"name": "edm-stochastic", "s_churn": 10.0, "s_noise": 1.007},
    "edm-churn40-noise1.007": {"name": "edm-stochastic", "s_churn": 40.0, "s_noise": 1.007},
}
TAUS = ("tau_rule", "tau_novel", "tau_mem")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--series", default=None, help="run directory (default: the shipped series)")
    p.add_argument("--stores", default="/tmp/sampler-clocks", help="folder of the zarr stores (one per sampler)")
    p.add_argument("--results", default="analyses/results")
    p.add_argument("--name", default="sampler_clocks", help="results file stem")
    p.add_argument("--n-samples", type=int, default=1000)
    p.add_argument("--steps", default="all", help="all, or S1,S2,... (a subset of the series' steps)")
    p.add_argument("--only", default=None, help="comma-separated labels of SAMPLERS to measure (default: all)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--heun-check", default="0,500,607,738",
                   help="Heun: take the shipped clocks.json (the same settings) and re-measure only these steps "
                        "(and the last) to check it; 'all' measures Heun on every step like the others")
    p.add_argument("--combine", default=None, help="comma-separated JSON files of earlier runs (e.g. run in parallel "
                                                   "with --only and --name): write their rows together, measure nothing")
    return p.parse_args(argv)


def _slug(label):
    return "".join(c if c.isalnum() else "-" for c in label).strip("-")


def measure(series, label, fields, args, steps):
    """One sampler's row: its config, the τ with CIs, the window and the curves."""
    t0 = time.time()
    spec = sp.Sampler(**fields)
    ds = sp.clocks(series, n_samples=args.n_samples, seed=0, steps=steps, sampler=spec, progress=False,
                   out=str(Path(args.stores) / f"{_slug(label)}.zarr"))
    a = ds.attrs
    logger.info("%s: %.0f s", label, time.time() - t0)
    rule_acc, mem = ds["rule_acc"].values, ds["mem_ratio"].values                  # (step,)
    return {"label": label, "sampler": spec.config(), "sampler_fields": fields, "n_samples": args.n_samples,
            **{k: a[k] for k in TAUS}, **{k + "_ci": a.get(k + "_ci") for k in TAUS},
            "window_open": bool(a["window_open"]), "window_log10_width": a["window_log10_width"],
            "window_log10_width_ci": a.get("window_log10_width_ci"), "under_resolved": a.get("under_resolved"),
            "peak_rule_acc": float(rule_acc.max()), "final_rule_acc": float(rule_acc[-1]),
            "final_mem_ratio": float(mem[-1]), "final_novel_valid": float(ds["novel_valid"].values[-1]),
            "curves": {"step": ds.step.values.tolist(), "rule_acc": rule_acc.tolist(), "mem_ratio": mem.tolist(),
                       "novel_valid": ds["novel_valid"].values.tolist()},
            "final_state": ds["state"].isel(step=-1).values.astype(int).tolist()}


def shipped_heun(series, args):
    """The Heun row from the shipped clocks.json (checkpoints/measure.py: `clocks` with these same
    settings on every checkpoint), after re-measuring the steps of --heun-check here and checking that
    they agree with it exactly. The final states come from that re-measurement (it includes the last step)."""
    shipped = json.loads((Path(series.path) / "clocks.json").read_text())
    same = {k: shipped[k] for k in ("n_samples", "n_steps", "seed")} == {
        "n_samples": args.n_samples, "n_steps": DEFAULT_N_STEPS, "seed": 0}
    if not same:
        raise SystemExit("clocks.json was measured with other settings; run with --heun-check all")
    check = sorted({*[int(s) for s in args.heun_check.split(",")], int(series.steps[-1])})
    ds = sp.clocks(series, n_samples=args.n_samples, seed=0, steps=check, progress=False,
                   out=str(Path(args.stores) / "heun.zarr"))
    table_ = {r["step"]: r for r in shipped["table"]}
    diff = max(abs(float(ds[k].sel(step=s)) - table_[s][k]) for s in check for k in ("rule_acc", "mem_ratio",
                                                                                       "novel_valid", "group_acc"))
    if diff != 0:
        raise SystemExit(f"the Heun re-measurement differs from clocks.json by {diff}; run with --heun-check all")
    a, steps = shipped["taus"], [r["step"] for r in shipped["table"]]
    curve = {k: [table_[s][k] for s in steps] for k in ("rule_acc", "mem_ratio", "novel_valid")}
    return {"label": "heun", "sampler": {"name": "heun"}, "sampler_fields": SAMPLERS["heun"],
            "n_samples": args.n_samples, "from": "checkpoints/parity-default/clocks.json",
            "rechecked_steps": check, "recheck_max_abs_diff": diff,
            **{k: a[k] for k in TAUS}, **{k + "_ci": a.get(k + "_ci") for k in TAUS},
            "window_open": a["window_open"], "window_log10_width": a["window_log10_width"],
            "window_log10_width_ci": a.get("window_log10_width_ci"), "under_resolved": a.get("under_resolved"),
            "peak_rule_acc": max(curve["rule_acc"]), "final_rule_acc": curve["rule_acc"][-1],
            "final_mem_ratio": curve["mem_ratio"][-1], "final_novel_valid": curve["novel_valid"][-1],
            "curves": {"step": steps, **curve},
            "final_state": ds["state"].isel(step=-1).values.astype(int).tolist()}


def _fmt_tau(v, ci):
    def one(x):
        return "not reached" if x is None or not np.isfinite(x) else f"{x:.0f}"
    return one(v) + (f" [{one(ci[0])}, {one(ci[1])}]" if ci else "")


MEMORIZED = STATE_CODES["valid_memorized"]


def paired(row, base):
    """(fraction of samples whose final state differs from Heun's, Δ final mem_ratio, its paired s.e.):
    the same initial noise, so the difference is taken sample by sample."""
    a, b = np.asarray(row["final_state"]), np.asarray(base["final_state"])                # (n,) each
    d = (a == MEMORIZED).astype(float) - (b == MEMORIZED)                                  # (n,)
    return float(np.mean(a != b)), float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d)))


def _label(fields):
    name = fields["name"]
    if name == "edm-stochastic":
        return f"EDM stochastic, S_churn {fields['s_churn']:g}, S_noise {fields.get('s_noise', 1.0):g}"
    return {"heun": "Heun PF-ODE (default)", "ddim": "DDIM η = 0 (= Euler PF-ODE)",
            "ancestral": "ancestral (DDIM η = 1)"}.get(name, name)


def table(rows):
    """The Markdown table of the README."""
    base = next((r for r in rows if r["label"] == "heun"), None)
    out = ["| sampler | τ_rule [95% CI] | τ_mem [95% CI] | window, log10 width | peak rule_acc | final rule_acc |"
           " final mem_ratio | Δ final mem_ratio vs Heun (paired s.e.) | final states changed vs Heun |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        width = f"{r['window_log10_width']:.2f}" if r["window_open"] else "closed"
        cells = [_label(r["sampler_fields"]), _fmt_tau(r["tau_rule"], r["tau_rule_ci"]),
                 _fmt_tau(r["tau_mem"], r["tau_mem_ci"]), width, f"{r['peak_rule_acc']:.3f}",
                 f"{r['final_rule_acc']:.3f}", f"{r['final_mem_ratio']:.3f}"]
        if base is None:
            cells += ["–", "–"]
        else:
            changed, delta, se = paired(r, base)
            cells += [f"{delta:+.3f} ({se:.3f})", f"{changed:.3f}"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def write(path, series, rows):
    """The JSON and the Markdown table of `rows` ({label: row}) at path (.json) and path (.md)."""
    ordered = [rows[k] for k in SAMPLERS if k in rows]
    here = Path.cwd().resolve()
    shown = Path(series.path).resolve()
    meta = {"series": str(shown.relative_to(here) if shown.is_relative_to(here) else shown), "seed": 0, "n_steps": DEFAULT_N_STEPS, "steps": ordered[0]["curves"]["step"]}
    atomic_write_text(path, json.dumps({**meta, "rows": ordered}, indent=1, default=float) + "\n")
    atomic_write_text(path.with_suffix(".md"), table(ordered) + "\n")
    return table(ordered)


def _rows(path):
    return {r["label"]: r for r in json.loads(Path(path).read_text())["rows"]} if Path(path).exists() else {}


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    torch.set_num_threads(args.threads)
    series = sp.load_series(args.series) if args.series else sp.load_series()
    steps = None if args.steps == "all" else [int(s) for s in args.steps.split(",")]
    labels = list(SAMPLERS) if args.only is None else [s.strip() for s in args.only.split(",")]
    Path(args.results).mkdir(parents=True, exist_ok=True)
    path = Path(args.results) / f"{args.name}.json"
    rows = _rows(path)
    if args.combine:
        for other in args.combine.split(","):
            rows.update(_rows(other))
        print(write(path, series, rows))
        return
    for label in labels:
        if label == "heun" and args.heun_check != "all":
            rows[label] = shipped_heun(series, args)
        else:
            rows[label] = measure(series, label, SAMPLERS[label], args, steps)
        text = write(path, series, rows)
    print(text)


if __name__ == "__main__":
    main()
