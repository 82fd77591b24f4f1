"""A series' clocks as shipped (<series>/clocks.json, written by checkpoints/measure.py with `sp.clocks` on every
checkpoint) and as measured now, as plain rows (for a study that re-measures a shipped series): the curves over steps, the
τ with their CIs, the window, and a recheck of the shipped file at some steps."""
import json
import time
from pathlib import Path

import scoreprobe as sp

TAUS = ("tau_rule", "tau_novel", "tau_mem")
MODEL_KEYS = TAUS + ("window_intervals", "window_log10_width", "under_resolved")


def shipped(series, keys=("step", "rule_acc", "mem_ratio")):
    """({key: [value per checkpoint]} of `keys`, the τ attrs) from the series' clocks.json."""
    measured = json.loads((Path(series.path) / "clocks.json").read_text())
    return {k: [r[k] for r in measured["table"]] for k in keys}, measured["taus"]


def measured(series, n_samples, out, log=None, keys=("step", "rule_acc", "mem_ratio"), **kw):
    """The same measured now: `sp.clocks` (seed 0, store `out`, `kw` e.g. steps, sampler) -> ({key: list}, attrs,
    the Dataset); log(message) with the time it took."""
    t0 = time.time()
    ds = sp.clocks(series, n_samples=n_samples, seed=0, out=str(out), progress=False, **kw)
    if log:
        log(f"clocks of {series.path}: {time.time() - t0:.0f} s")
    return {k: ds[k].values.tolist() for k in keys}, dict(ds.attrs), ds


def recheck(series, check, n_samples, out, keys=("rule_acc", "mem_ratio", "novel_valid", "group_acc")):
    """The shipped clocks.json re-measured at the steps `check` (default sampler, seed 0): (its dict, the
    Dataset measured now, the largest absolute difference over `keys` at those steps)."""
    shipped_ = json.loads((Path(series.path) / "clocks.json").read_text())
    ds = sp.clocks(series, n_samples=n_samples, seed=0, steps=check, progress=False, out=str(out))
    table = {r["step"]: r for r in shipped_["table"]}
    diff = max(abs(float(ds[k].sel(step=s)) - table[s][k]) for s in check for k in keys)
    return shipped_, ds, diff


def clocks_row(a, steps, curve, ds):
    """A row of τ (TAUS with "<key>_ci"), the window, the accuracies, the curves ({step, **curve}) and the final
    states (of `ds`'s last step): a the clocks attrs, curve {"rule_acc", "mem_ratio", "novel_valid": lists}."""
    return {**{k: a[k] for k in TAUS}, **{k + "_ci": a.get(k + "_ci") for k in TAUS},
            "window_open": a["window_open"], "window_log10_width": a["window_log10_width"],
            "window_log10_width_ci": a.get("window_log10_width_ci"), "under_resolved": a.get("under_resolved"),
            "peak_rule_acc": max(curve["rule_acc"]), "final_rule_acc": curve["rule_acc"][-1],
            "final_mem_ratio": curve["mem_ratio"][-1], "final_novel_valid": curve["novel_valid"][-1],
            "curves": {"step": steps, **curve}, "final_state": ds["state"].isel(step=-1).values.astype(int).tolist()}


def n_params(series):
    """The parameter count of a series' last checkpoint (its EMA weights)."""
    import torch
    from scoreprobe.training.train import ckpt_path
    ckpt = torch.load(ckpt_path(series.path, series.steps[-1]), map_location="cpu", weights_only=True)
    return int(sum(v.numel() for v in ckpt["ema"].values()))


def model_row(name, series, curves, attrs):
    """One model's row (scoreprobe.reports.clock_tables.models_table): parameters, steps, views per step, the τ
    with CIs, the window, the peak rule accuracy and the final memorized share."""
    cfg = series.config
    return {"model": name, "params": n_params(series), "steps": int(max(curves["step"])),
            "views_per_step": cfg["batch_size"] / cfg["n_train"], **{k: attrs[k] for k in MODEL_KEYS},
            **{k + "_ci": attrs.get(k + "_ci") for k in TAUS}, "peak_rule_acc": float(max(curves["rule_acc"])),
            "final_mem_ratio": float(curves["mem_ratio"][-1])}
