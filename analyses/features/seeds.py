"""The over-training table on other training seeds of the shipped recipe: does the reading rest on one model?

    python analyses/features --seeds runs/shipped/s1 runs/shipped/s2   # adds "training_seeds" to the json

Each run directory (the shipped recipe trained at another seed: `scoreprobe train ... --seed s`, its clocks in
clocks.json by checkpoints/measure.py) is measured exactly as the shipped series (run.run: the same steps, sites,
rows, σ and SAE settings), its appearance step read against its own τ_rule. A run already in the json with the
same configuration and checkpoints is kept, not measured again.
"""
import json
from pathlib import Path

import numpy as np

from analyses.features.last import best_of


def check_seed_dirs(dirs, error):
    """error(message) unless every directory is a run with a clocks.json."""
    for d in dirs:
        if not (Path(d) / "run.json").is_file():
            error(f"--seeds: {d} is not a run directory (no run.json)")
        if not (Path(d) / "clocks.json").is_file():
            error(f"--seeds: {d} has no clocks.json (python checkpoints/measure.py {d})")


def _identity(d):
    """What must match for a stored measurement of run `d` to be reused: its config and its checkpoint files."""
    cfg = json.loads((Path(d) / "run.json").read_text())["config"]
    return dict(config=cfg, checkpoints=sorted(p.name for p in (Path(d) / "ckpt").glob("step_*.pt")))


def seed_tables(report, dirs, measure):
    """{dir: measurement} for every run in `dirs` (measure(dir) -> run.run's dict), reusing report's stored ones
    whose run identity and study configuration are unchanged."""
    old = report.get("training_seeds", {})
    out = {}
    for d in dirs:
        ident = _identity(d)
        kept = old.get(d)
        if kept and kept.get("identity") == ident and kept.get("config") == report["config"]:
            out[d] = kept
            continue
        res = measure(d)
        out[d] = dict(identity=ident, config=res["config"], training_seed=ident["config"]["seed"],
                      data_seed=ident["config"].get("data_seed"), tau_rule=res["tau_rule"], tau_mem=res["tau_mem"],
                      rows=res["rows"], appear=res["appear"], seconds=res["seconds"])
    return out


def _cell(rows, step, site):
    r = next(r for r in rows if r["step"] == step and r["site"] == site)
    return f"{r['group_coverage']} / {r['mcc']:.2f}"


def seeds_md(report):
    """The .md section: per training seed (the shipped series first) and site, the last step's coverage / MCC, the
    highest coverage and best group F1 over the measured steps, and the appearance step against τ_rule."""
    runs = {report["series"]: dict(training_seed=0, data_seed=0, tau_rule=report["tau_rule"], rows=report["rows"],
                                   appear=report["appear"]), **report["training_seeds"]}
    last = max(r["step"] for r in report["rows"])
    lines = ["## Training seeds of the recipe", "",
             "The over-training table repeated on the shipped recipe at other training seeds (same data seed, same "
             f"study settings). Per site: group coverage / MCC at step {last}; the highest coverage and the best group "
             "F1 over the measured steps; 'appear' as above, against the run's own τ_rule.", "",
             "| run | training seed | τ_rule | site | coverage / MCC at last | highest coverage | best group F1 | appear |",
             "|---|---:|---:|---|---:|---:|---:|---:|"]
    for d, rec in runs.items():
        for site in report["sites"]:
            mine = [r for r in rec["rows"] if r["site"] == site]
            top = max(r["group_coverage"] for r in mine)
            f1 = best_of([best_of(r["group_best_f1"]) for r in mine])
            app = rec["appear"][site]
            tau = "not reached" if rec["tau_rule"] is None else f"{rec['tau_rule']:.0f}"
            lines.append(f"| `{d}` | {rec['training_seed']} | {tau} | {site} | {_cell(rec['rows'], last, site)} | "
                         f"{top}/{mine[0]['n_groups']} | {'undefined' if np.isnan(f1) else f'{f1:.2f}'} | "
                         f"{'never' if app is None else app} |")
    lines.append("")
    return lines
