"""The battery on several trained models of one series, from their exports
(studies.battery_export): the models' clocks, the per-step curves of each quantity (models and units crossed),
the half-change steps with their ratio to each model's τ over thresholds, the DSM tests with models and pairs as
units, and the capture geometry (the statistics: scoreprobe.stats.models_units)."""
import math
import warnings

import numpy as np

from scoreprobe.stats import models_units as S
from scoreprobe.stats.dsm_stats import first_significant_step, significant_sets
from scoreprobe.stats.pvalues import adjust_family
from scoreprobe.stats.taus import tau_summary, window_status

LOCAL = ["symmetric", "train_heldout", "random_valid"]
N_BOOT_TAU = 1000   # sample-level resamples of each model's τ (taus()' default)
# name -> (kinds, extent, quantity) of the plane quantities: curves and half-changes
BASINS = {"off-vertex (local planes)": (LOCAL, "local", "off_vertex"),
          "off-vertex (reach planes)": (["symmetric"], "reach", "off_vertex"),
          "valid basin": (LOCAL, "local", "valid"),
          "violating basin": (LOCAL, "local", "violating"),
          "held-out basin": (LOCAL, "local", "heldout"),
          "training basin": (LOCAL, "local", "training"),
          "t − h basin (symmetric planes)": (["symmetric"], "local", "asymmetry")}
KIND_QUANTITIES = ("training", "heldout", "novel", "violating", "off_vertex")
CAPTURED = "held-out captured (σ 1)"
DSM_GAP = f"DSM gap, σ in {list(S.DSM_BAND)}"


def model_rows(models):
    """Per model: training and data seed, τ_rule / τ_mem with their sample-level CIs, window, seconds."""
    out = []
    for m in models:
        ds = m["clocks"]
        t = tau_summary(ds, n_boot=N_BOOT_TAU, warn=False)
        out.append({"name": m["meta"]["name"], "training_seed": m["meta"]["training_seed"],
                    "data_seed": m["meta"]["data_seed"], "steps": int(ds.step.values[-1]),
                    "checkpoints": len(m["meta"]["checkpoint_schedule"]), "measured": m["steps"].tolist(),
                    "window_status": window_status(ds, t), "peak_rule_acc": float(ds.rule_acc.max()),
                    "final_mem_ratio": float(ds.mem_ratio[-1]), "seconds": m["meta"]["seconds"],
                    "resumed": bool(m["meta"].get("resumed", False)),
                    "mem_ratio_by_step": {str(int(st)): float(v) for st, v in zip(ds.step.values, ds.mem_ratio.values)
                                          if int(st) in set(int(x) for x in m["steps"])},
                    **{k: t[k] for k in ("tau_rule", "tau_rule_ci", "tau_mem", "tau_mem_ci", "window_open",
                                         "window_intervals")}})
    return out


def basin_tables(models, settings):
    """{name: (Y (M, units, S), n planes)} of BASINS at the first σ_start (local) / reach σ."""
    probes = settings["probes"]
    out = {}
    for name, (kinds, extent, q) in BASINS.items():
        sigma = probes["sigma_starts"][0] if extent == "local" else probes["reach_sigmas"][0]
        Y, n = S.basin_table(models, kinds, extent, sigma, q)
        if Y is not None and Y.shape[1] >= 2:
            out[name] = (Y, n)
    return out


def curves(models, settings, n_boot):
    """{name: per-step curve} of the basin quantities, retention, capture and the DSM band gap, and
    {name: Y} of those with a half-change (the half-change quantities)."""
    out, halves = {}, {}
    for name, (Y, n) in basin_tables(models, settings).items():
        out[name] = {**S.curve(Y), "n_planes": n}
        halves[name] = Y
    for sigma in settings["probes"]["ret_sigmas"]:
        tr, ho = (S.retention_table(models, sp, sigma, "retained") for sp in ("train", "heldout"))
        if tr is not None and ho is not None:
            out[f"retained, training − held-out (σ {sigma:g})"] = S.difference_curve(tr, ho, n_boot, 1)
        cap, near = (S.retention_table(models, "heldout", sigma, k) for k in ("captured", "captured_nearer_own"))
        if cap is not None:
            out[f"held-out captured (σ {sigma:g})"] = S.curve(cap)
            if sigma == 1.0:
                halves[CAPTURED] = cap
        if cap is not None and near is not None:
            out[f"nearer own, share of captured (σ {sigma:g})"] = S.sum_ratio_curve(near, cap, n_boot, 2)
    dsm = S.dsm_table(models)
    if dsm is not None:
        Y, sig, band = dsm
        halves[DSM_GAP] = Y[..., band].mean(axis=-1)
        out[DSM_GAP] = S.curve(halves[DSM_GAP])
    return out, halves


def kind_curves(models, settings):
    """{kind: {quantity: curve}} on the local grid at the first σ_start, each plane kind alone."""
    sigma = settings["probes"]["sigma_starts"][0]
    out = {}
    for kind in LOCAL:
        for q in KIND_QUANTITIES:
            Y, n = S.basin_table(models, [kind], "local", sigma, q)
            if Y is not None and Y.shape[1] >= 2:
                out.setdefault(kind, {})[q] = {**S.curve(Y), "n_planes": n}
    return out


def half_changes(models, halves, steps, n_boot):
    """{name: half_change dict + "ratio": {"tau_rule": rows, "tau_mem": rows}}."""
    taus = {k: S.tau_curves(models, k) for k in ("tau_rule", "tau_mem")}
    out = {}
    for i, (name, Y) in enumerate(halves.items()):
        hc = S.half_change(Y, steps, n_boot, seed=10 + i)
        hc["ratio"] = {k: S.tau_ratio(hc, taus[k], k) for k in taus}
        out[name] = hc
    return out


def dsm_tests(models, steps):
    """The held-out > training DSM gap per (step, σ): with models and pairs as units (crossed, one-sided p,
    Holm over all steps × σ) and within each model over its pairs (as the one-model study: Holm over its
    steps × σ), with the significant σ as sets and the first significant step."""
    dsm = S.dsm_table(models)
    if dsm is None:
        return None
    Y, sig, _ = dsm
    r = S.crossed_mean(np.moveaxis(Y, (0, 1), (-2, -1)))                        # (S, σ)
    adj = adjust_family(r["p_above"], "holm")
    out = {"sigma": sig.tolist(), "n_pairs": int(Y.shape[1]), "gap": r["mean"].tolist(),
           "p_above": r["p_above"].tolist(), "holm": adj.tolist(), "significant_sigma": significant_sets(adj, sig),
           "first_significant_step": first_significant_step(adj, steps), "per_model": []}
    for y in Y:
        a = adjust_family(S.paired_p(y), "holm")
        out["per_model"].append({"significant_sigma": significant_sets(a, sig),
                                 "first_significant_step": first_significant_step(a, steps)})
    return out


def distance_ratio_medians(models, sigma):
    """Per model and step, the median over its items with a capture of d(start, own) / d(start, capturer)."""
    Y = [m["retention"].get(("heldout", float(sigma))) for m in models]
    if any(y is None or "capture_distance_ratio" not in y["values"] for y in Y):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)            # all-NaN columns: no capture yet
        return [np.nanmedian(y["values"]["capture_distance_ratio"], axis=0).tolist() for y in Y]


def series_report(models, settings, n_boot):
    """The JSON-able report of one series (its models sorted by training seed)."""
    models = sorted(models, key=lambda m: m["meta"]["training_seed"])
    steps = models[0]["steps"]
    if any(not np.array_equal(m["steps"], steps) for m in models):
        raise ValueError("the models of a series were measured at different steps")
    rows = model_rows(models)
    curve, halves = curves(models, settings, n_boot)
    half = half_changes(models, halves, steps, n_boot) if len(models) >= 2 else {}
    for h in half.values():
        h.pop("units_replicates"), h.pop("ln")
    tau_mem = [r["tau_mem"] for r in rows]
    return {"models": rows, "steps": steps.tolist(), "n_models": len(models),
            "extra": models[0]["config"]["extra_checkpoints"], "first_grid_step": models[0]["config"]["first_checkpoint"],
            "tau_mem_geomean": math.exp(np.mean(np.log(tau_mem))) if all(map(math.isfinite, tau_mem)) else None,
            "curves": curve, "kinds": kind_curves(models, settings), "half_change": half,
            "dsm": dsm_tests(models, steps),
            "distance_ratio_median": {f"{s:g}": distance_ratio_medians(models, s) for s in (1.0, 2.0)
                                      if s in settings["probes"]["ret_sigmas"]}}
