"""Re-report of the mechanism study from its shipped json alone (issue 35), for when the measurement
stores (runs/mechanism, git-ignored) are not at hand: what the new statistics can derive exactly from
the shipped numbers, and what they cannot.

Exact from the json: the paired DSM tests under Holm / BH over the whole step × σ family (raw p-values
from the stored z and pair counts), the significant σ as sets, the first significant step, the DSM gap's
half-change as a fitted sigmoid (the stored per-σ paired gaps are means over the pairs of the
seed-averaged losses: one unit per pair); the unit counts (planes and items are drawn from the seeds
without any model). Point estimates only: fitted half-changes of the basin / retention curves (the
shipped means weight a plane drawn by two seeds twice). Not derivable: any CI over the deduplicated
units and the capture geometry (they need the per-plane / per-item stores).
"""
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from analyses.mechanism import measure as M
from scoreprobe.stats.dsm_stats import family_from_z, max_abs_error, paired_gap_stats
from scoreprobe.stats.timing import fitted_midpoint, sigmoid_half_change
from scoreprobe.studies.battery import KINDS, measure_dsm
from scoreprobe.studies.battery_summary import DSM_BAND, drawn_units, dsm_pair_gaps, dsm_pair_losses


def series_data(args, name):
    """An object with .dataset and .rule of series `name`, without a model: the shipped open series, or
    the closed one's dataset made from its training config (the trainer's make_dataset)."""
    if name == "open":
        from scoreprobe.loading.series import load_series
        return load_series(args.open_series)
    from scoreprobe.data.datasets import make_dataset
    from scoreprobe.data.rules import rule_from_spec
    cfg = M.closed_config(args)
    rule = rule_from_spec(cfg.rule)
    return SimpleNamespace(dataset=make_dataset(rule, cfg.n_train, cfg.n_heldout, cfg.data_seed), rule=rule)


def curves_of(r):
    """{quantity: (mean curve, {seed: curve}, units)} of the old half-change table, from the shipped json."""
    b, out = r["basins"], {}
    kinds = [f"{k}/local" for k in KINDS if f"{k}/local" in b]
    for q in ("valid", "violating", "training", "heldout"):
        per_kind = [b[k]["1.0"][q] for k in kinds]
        mean = np.mean([c["mean"] for c in per_kind], axis=0)
        by_seed = {s: np.mean([c["by_seed"][s] for c in per_kind], axis=0) for s in per_kind[0]["by_seed"]}
        out[f"{q} basin share (all planes, σ_start 1.0)"] = (mean, by_seed, "planes")
    sym = r["symmetry"]["basins"]
    out["training − held-out basin (symmetric planes)"] = (np.asarray(sym["mean"]), sym["by_seed"], "planes")
    cap = r["retention"]["heldout"]["1.0"]["captured"]
    out["held-out captured (σ 1)"] = (np.asarray(cap["mean"]), cap["by_seed"], "held-out items")
    d = r["dsm"]
    band = [i for i, s in enumerate(d["sigma"]) if DSM_BAND[0] <= s <= DSM_BAND[1]]
    gap = np.asarray(d["paired_gap"], dtype=float)[:, band].mean(axis=1)
    out[f"DSM paired gap, σ in {list(DSM_BAND)}"] = (gap, {}, "pairs")
    return out


def half_changes(r):
    """Fitted-sigmoid half-changes (point estimates) next to the shipped first-to-extreme ones."""
    out = {}
    for q, (mean, by_seed, unit) in curves_of(r).items():
        old = r["half_change"].get(q, {})
        out[q] = {**fitted_midpoint(r["steps"], mean), "units": unit,
                  "by_seed": {s: fitted_midpoint(r["steps"], c)["step"] for s, c in by_seed.items()},
                  "old_step": old.get("step"), "old_ci": old.get("ci"), "exact_mean_curve": unit == "pairs"}
    return out


def capture_note(r):
    """The old statistic: the share of held-out starts closer to a valid non-training vertex, min over
    steps and σ (1 means "captured although closer" = plain capture)."""
    ho = r["retention"]["heldout"]
    shares = [v for s, c in ho.items() if float(s) <= 2.0 for v in c["closer_nontrain"]["mean"]]
    return {"closer_nontrain_min_sigma_le_2": float(np.min(shares)),
            "captured_minus_captured_closer_max": float(np.max(np.abs(
                np.asarray(ho["1.0"]["captured"]["mean"]) - np.asarray(ho["1.0"]["captured_closer"]["mean"]))))}


def dsm_from_stores(args, name, steps):
    """{seed: DSM store at `steps`} when every seed's store of series `name` is under args.out with every
    step (the preset's settings), else None. The closed series only when it is trained under args.out."""
    from scoreprobe.studies.queue import finished
    from scoreprobe.loading.series import load_series
    if name == "open":
        series = load_series(args.open_series)
    elif finished(Path(args.out) / "closed", M.closed_config(args)):   # trained here: its DSM stores may be too
        series = load_series(Path(args.out) / "closed")
    else:
        return None
    out = {}
    for seed in args.seeds:
        ds = measure_dsm(args, name, series, steps, seed, run=False)
        if ds is None or not set(steps) <= set(int(v) for v in ds.step.values):
            return None
        out[seed] = ds.sel(step=steps)
    return out


def dsm_half_change_with_ci(args, r, stores):
    """The DSM gap's fitted half-change with its bootstrap CI over the pairs, from the stores, and how
    closely the stores reproduce the shipped per-σ paired gaps (max abs difference)."""
    col = {"dsm": stores, "steps": r["steps"]}
    h = sigmoid_half_change(r["steps"], dsm_pair_gaps(col), until="extreme", n_boot=args.n_boot)
    loss, d0 = dsm_pair_losses(col)
    split = np.array([str(v) for v in d0.split.values.tolist()])
    gap = paired_gap_stats(loss, split, d0.item_index.values, d0.sigma.values)["paired_gap"]
    h["reproduces_shipped_paired_gap_max_abs"] = max_abs_error(gap, r["dsm"]["paired_gap"])
    h["n_pairs"] = int(dsm_pair_gaps(col).shape[0])
    return h


def rereport(args, path):
    """The shipped json with a 're_report' section (the statistics above); returns the whole dict."""
    report = json.loads(Path(path).read_text())
    old = (report.pop("re_report", None) or {}).get("series", {})
    new = {}
    for name, r in report["series"].items():
        new[name] = {"units": drawn_units(args, series_data(args, name)), "dsm": family_from_z(r["dsm"], r["steps"]),
                     "half_change": half_changes(r), "capture": capture_note(r)}
        stores = dsm_from_stores(args, name, r["steps"])
        if stores is not None:   # remeasured: the DSM gap's half-change gets its CI over pairs
            new[name]["dsm_half_change_from_stores"] = dsm_half_change_with_ci(args, r, stores)
        elif "dsm_half_change_from_stores" in old.get(name, {}):   # stores gone (not shipped): keep what they gave
            new[name]["dsm_half_change_from_stores"] = old[name]["dsm_half_change_from_stores"]
    report["re_report"] = {"issue": 35, "series": new, "from": "the shipped json (stores not shipped)"}
    return report
