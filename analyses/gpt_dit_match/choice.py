"""The learning-rate choice of the GPT–DiT match, from the tuning split only.

Criterion (stated before any run): per model, the rate whose run on the tuning split reaches rule accuracy
TUNE_THRESHOLD first (τ_rule at that threshold, reliably exceeds, definitions version 6); a rate whose run
never reaches it ranks after every rate that does, by its peak rule accuracy (higher first); an exact tie
goes to the smaller rate. TUNE_THRESHOLD is 0.8, not the paper's 0.9: the DiT at G = 2, N = 120 peaks at
0.89–0.96 over seeds (analyses/results/scaling_cpu.md), so 0.9 would leave its sweep to the tie rule.

`choose` refuses an export from any other data seed than the tuning split's: the evaluation split's
runs cannot enter the choice (tests/test_gpt_dit_match.py checks that the choice reads nothing else).
"""
import math

from analyses.gpt_dit_match import grid as grid_mod
from scoreprobe.stats.curves import RULE_THRESHOLDS, run_curves
from scoreprobe.studies.export import load_exports

TUNE_THRESHOLD = 0.8


def criterion(info):
    """(τ_rule at TUNE_THRESHOLD (inf: not reached), peak rule accuracy) of one tuning run's export."""
    j = [round(t, 9) for t in RULE_THRESHOLDS].index(TUNE_THRESHOLD)
    tau = float(run_curves(info["ds"])["tau_rule"][j])
    return tau, float(info["ds"].rule_acc.max())


def rank_key(lr, tau, peak):
    """Smaller is better: reached before not reached, then τ, then the higher peak, then the smaller rate."""
    return (0 if math.isfinite(tau) else 1, tau if math.isfinite(tau) else -peak, lr)


def choose(candidates, tune_data_seed):
    """The chosen rate of one model and the sweep's table.

    candidates : {lr: export info (scoreprobe.studies.export.read_export)} of the model's tuning runs.
    Returns (lr, rows [{lr, tau, peak, chosen}] in rate order); ValueError when an export is not of the
    tuning split (its config's data_seed differs) or when there is none.
    """
    if not candidates:
        raise ValueError("no tuning run exported: nothing to choose from")
    rows = []
    for lr, info in sorted(candidates.items()):
        seed = info["config"].get("data_seed")
        if seed != tune_data_seed:
            raise ValueError(f"the run at lr {lr:g} is from data seed {seed}, not the tuning split's {tune_data_seed}")
        tau, peak = criterion(info)
        rows.append({"lr": lr, "tau": tau, "peak": peak})
    best = min(rows, key=lambda r: rank_key(r["lr"], r["tau"], r["peak"]))
    for r in rows:
        r["chosen"] = r is best
    return best["lr"], rows


def choices(results, preset):
    """{model: (lr, sweep rows)} of every model whose whole sweep is exported under `results`, read from the
    tuning runs' exports only (`choose` refuses any other data seed)."""
    p = grid_mod.PRESETS[preset]
    out = {}
    for m in p["models"]:
        runs = [r for r in grid_mod.tuning_runs(preset) if r.meta["match_model"] == m]
        found = {r.meta["lr"]: load_exports([r], grid_mod.export_folder(results, preset, r))[0].get(r.name) for r in runs}
        if all(v is not None for v in found.values()):
            out[m] = choose(found, p["tune_data_seed"])
    return out
