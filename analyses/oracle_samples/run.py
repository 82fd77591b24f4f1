"""Network and oracle samples from the same noise (issue 55 item 3), over the trained models of the shipped recipe.

`sp.oracle_samples` on checkpoints/parity-default (training seed 0) and runs/shipped/s1, s2 (seeds 1, 2; the
command of checkpoints/README.md with `--seed`; models missing here are left out and named) at four checkpoints:
per oracle, the share of samples whose vertex equals the oracle's own sample from the same initial noise
(`agree`), the mean Hamming distance / D, border against interior pixels; beside them the network's own share of
training items and valid images. Means over models with a t interval (models as units; one model: its Wilson
interval over samples; every interval clipped to [0, 1], where shares and distances / D live).
docs/oracle_samples.md defines every quantity.

    python analyses/oracle_samples                  # ≈ 2 min on one core: analyses/results/oracle_samples.{json,md}
    python analyses/oracle_samples --from-results   # rewrite the .md from the .json (byte-identical)
"""
import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

from scoreprobe.probes.oracle_samples import oracle_samples_json
from scoreprobe.reports.clock_tables import tau_text
from scoreprobe.stats.unit_intervals import clipped_summary as _mean_ci
from scoreprobe.studies.trained_models import SHIPPED_RUNS, clock_taus, existing_series

ROOT = Path(__file__).resolve().parents[2]
MODELS = dict(zip(("seed0", "seed1", "seed2"), SHIPPED_RUNS))
STEPS = (0, 1950, 9233, 36000)
N_SAMPLES = 256


def measure(results):
    import torch

    import scoreprobe as sp
    torch.set_num_threads(1)
    out = {"steps": list(STEPS), "n_samples": N_SAMPLES, "models": {}}
    for name, series in existing_series(ROOT, MODELS, STEPS).items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds = sp.oracle_samples(series, n_samples=N_SAMPLES, seed=0, steps=list(STEPS), progress=False)
        out["oracle"] = [str(o) for o in ds.oracle.values]
        out["models"][name] = {"dir": MODELS[name], "taus": clock_taus(ROOT / MODELS[name]), **oracle_samples_json(ds)}
    return out


def _model_words(name, m):
    """'seed1 (runs/shipped/s1; τ_rule 2043, τ_mem 10739)': which model was read (its clocks.json when measured)."""
    t = m.get("taus") or {}
    clocks = f"; τ_rule {tau_text(t.get('tau_rule'), None)}, τ_mem {tau_text(t.get('tau_mem'), None)}" if t else ""
    return f"{name} ({m['dir']}{clocks})"


def _cell(m, lo, hi):
    return f"{m:.3f}" if not np.isfinite(lo) else f"{m:.3f} [{lo:.3f}, {hi:.3f}]"


def markdown(res):
    names, oracles = list(res["models"]), res["oracle"]
    mods = [res["models"][n] for n in names]
    L = ["# Network and oracle samples from the same noise", "",
         f"Made by `python analyses/oracle_samples` (issue 55 item 3). Models: "
         f"{', '.join(_model_words(n, m) for n, m in zip(names, mods))} (clocks from each run's clocks.json when "
         f"measured: a run retrained on another machine is another draw of the recipe); {res['n_samples']} samples per checkpoint, "
         "seed 0, Heun 32, float32. Definitions: docs/oracle_samples.md. "
         + (f"Mean over the {len(mods)} models with a 95% t interval ({len(mods) - 1} df)." if len(mods) > 1 else
            "One model: no interval over models (see its Wilson intervals in the json)."), ""]
    for var, title in (("agree", "share of samples on the oracle's own vertex"), ("hamming", "Hamming distance / D")):
        m, lo, hi = _mean_ci([x[var] for x in mods])
        L += [f"## {title}", "", "| step | " + " | ".join(oracles) + " |", "|---|" + "---|" * len(oracles)]
        L += [f"| {st} | " + " | ".join(_cell(m[i, k], lo[i, k], hi[i, k]) for k in range(len(oracles))) + " |"
              for i, st in enumerate(res["steps"])] + [""]
    L += ["## The network's own samples and the pixel classes", "",
          "| step | training items | valid | memorizer agree, border / interior | rule agree, border / interior |",
          "|---|---|---|---|---|"]
    tr, va = _mean_ci([x["net_train_item"] for x in mods]), _mean_ci([x["net_valid"] for x in mods])
    bo, it = _mean_ci([x["border"] for x in mods])[0], _mean_ci([x["interior"] for x in mods])[0]
    km, kr = oracles.index("memorizer"), oracles.index("rule")
    for i, st in enumerate(res["steps"]):
        L.append(f"| {st} | {_cell(tr[0][i], tr[1][i], tr[2][i])} | {_cell(va[0][i], va[1][i], va[2][i])} | "
                 f"{bo[i, km]:.3f} / {it[i, km]:.3f} | {bo[i, kr]:.3f} / {it[i, kr]:.3f} |")
    return "\n".join(L + [""])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from-results", action="store_true")
    ap.add_argument("--results", default=str(ROOT / "analyses" / "results"))
    args = ap.parse_args(argv)
    out = Path(args.results)
    js = out / "oracle_samples.json"
    from scoreprobe.atomic import atomic_write_text
    if args.from_results:
        res = json.loads(js.read_text())
    else:
        res = measure(out)
        atomic_write_text(js, json.dumps(res, indent=1))
    atomic_write_text(out / "oracle_samples.md", markdown(res))
    print(f"wrote {js} and {out / 'oracle_samples.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
