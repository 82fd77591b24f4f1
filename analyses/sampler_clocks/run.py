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
from pathlib import Path

import torch

import scoreprobe as sp
from scoreprobe.defaults import DEFAULT_N_STEPS
from scoreprobe.reports.clock_tables import read_rows, sampler_table, write_rows
from scoreprobe.studies import shipped_clocks as C

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
CURVE = ("rule_acc", "mem_ratio", "novel_valid")


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
    spec = sp.Sampler(**fields)
    curve, a, ds = C.measured(series, args.n_samples, Path(args.stores) / f"{_slug(label)}.zarr",
                              lambda m: logger.info("%s: %s", label, m), CURVE, steps=steps, sampler=spec)
    return {"label": label, "sampler": spec.config(), "sampler_fields": fields, "n_samples": args.n_samples,
            **C.clocks_row(a, ds.step.values.tolist(), curve, ds), "window_open": bool(a["window_open"])}


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
    shipped, ds, diff = C.recheck(series, check, args.n_samples, Path(args.stores) / "heun.zarr")
    if diff != 0:
        raise SystemExit(f"the Heun re-measurement differs from clocks.json by {diff}; run with --heun-check all")
    curve, _ = C.shipped(series, CURVE)
    steps = [r["step"] for r in shipped["table"]]
    return {"label": "heun", "sampler": {"name": "heun"}, "sampler_fields": SAMPLERS["heun"],
            "n_samples": args.n_samples, "from": "checkpoints/parity-default/clocks.json",
            "rechecked_steps": check, "recheck_max_abs_diff": diff, **C.clocks_row(shipped["taus"], steps, curve, ds)}


def _label(fields):
    name = fields["name"]
    if name == "edm-stochastic":
        return f"EDM stochastic, S_churn {fields['s_churn']:g}, S_noise {fields.get('s_noise', 1.0):g}"
    return {"heun": "Heun PF-ODE (default)", "ddim": "DDIM η = 0 (= Euler PF-ODE)",
            "ancestral": "ancestral (DDIM η = 1)"}.get(name, name)


def write(path, series, rows):
    """The JSON and the Markdown table of `rows` ({label: row}, in SAMPLERS order) at path (.json) and path (.md)."""
    here, shown = Path.cwd().resolve(), Path(series.path).resolve()
    ordered = [rows[k] for k in SAMPLERS if k in rows]
    meta = {"series": str(shown.relative_to(here) if shown.is_relative_to(here) else shown), "seed": 0,
            "n_steps": DEFAULT_N_STEPS, "steps": ordered[0]["curves"]["step"]}
    return write_rows(path, meta, ordered, sampler_table(ordered, _label))   # the README's table


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    torch.set_num_threads(args.threads)
    series = sp.load_series(args.series) if args.series else sp.load_series()
    steps = None if args.steps == "all" else [int(s) for s in args.steps.split(",")]
    labels = list(SAMPLERS) if args.only is None else [s.strip() for s in args.only.split(",")]
    Path(args.results).mkdir(parents=True, exist_ok=True)
    path = Path(args.results) / f"{args.name}.json"
    rows = read_rows(path)
    if args.combine:
        for other in args.combine.split(","):
            rows.update(read_rows(other))
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
