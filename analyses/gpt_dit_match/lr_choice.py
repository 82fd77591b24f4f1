"""A learning rate chosen on a tuning split only (analyses/gpt_dit_match): per model, the rate whose run on the
tuning split reaches rule accuracy `threshold` first (τ_rule at that threshold, reliably exceeds, definitions
version 6); a rate whose run never reaches it ranks after every rate that does, by its peak rule accuracy
(higher first); an exact tie goes to the smaller rate.

`choose` refuses an export from any other data seed than the tuning split's: the evaluation split's runs cannot
enter the choice (tests/test_gpt_dit_match.py checks that the choice reads nothing else)."""
import math

from scoreprobe.stats.curves import RULE_THRESHOLDS, run_curves
from scoreprobe.studies.export import load_exports


def criterion(info, threshold):
    """(τ_rule at `threshold` (inf: not reached), peak rule accuracy) of one tuning run's export."""
    j = [round(t, 9) for t in RULE_THRESHOLDS].index(threshold)
    tau = float(run_curves(info["ds"])["tau_rule"][j])
    return tau, float(info["ds"].rule_acc.max())


def rank_key(lr, tau, peak):
    """Smaller is better: reached before not reached, then τ, then the higher peak, then the smaller rate."""
    return (0 if math.isfinite(tau) else 1, tau if math.isfinite(tau) else -peak, lr)


def choose(candidates, tune_data_seed, threshold):
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
        tau, peak = criterion(info, threshold)
        rows.append({"lr": lr, "tau": tau, "peak": peak})
    best = min(rows, key=lambda r: rank_key(r["lr"], r["tau"], r["peak"]))
    for r in rows:
        r["chosen"] = r is best
    return best["lr"], rows


def choices(runs_by_model, folder_of, tune_data_seed, threshold):
    """{model: (lr, sweep rows)} of every model whose whole sweep is exported, read from the tuning runs' exports
    only (`choose` refuses any other data seed). runs_by_model: {model: its tuning runs (meta "lr")};
    folder_of(run): the run's export folder."""
    out = {}
    for m, runs in runs_by_model.items():
        found = {r.meta["lr"]: load_exports([r], folder_of(r))[0].get(r.name) for r in runs}
        if all(v is not None for v in found.values()):
            out[m] = choose(found, tune_data_seed, threshold)
    return out
