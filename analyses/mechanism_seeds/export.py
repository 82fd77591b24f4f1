"""The compact result of one model of analyses/mechanism_seeds, <results>/mechanism_seeds[_<preset>]/<model>.npz:
everything the tables are computed from (no run directory or store needed).

One file holds: the model's TrainConfig and the study's settings (JSON), the measured steps (S,), its
clocks as analyses/scaling exports them (checkpoint steps, per-sample endpoint states int8, novel_oracle:
every τ and threshold curve is recomputed from them), and per unit:
- basins: per plane set (kind/extent at σ_start) the pixel counts (Q, P, S) uint16 of the quantities
  BASIN_Q (shares = counts / pixels, exact), with each plane's key (its three anchors as bit strings) and
  cluster (the training/held-out pair of a symmetric plane, else the plane);
- retention: per (split, σ) the outcomes RET_Q (O, I, S) float32 of each distinct item (its restarts
  over the probe seeds that drew it), with the item's index in its split;
- DSM: the paired gap held-out − training loss (pairs, S, σ) float32 (each pair's loss averaged over the
  noise banks), the σ grid, the pairs' mean training loss (S, σ) and the pair indices.
The seconds spent (training, clocks, probes) are recorded as measured by the invocation that exported it;
meta["resumed"] says an earlier, interrupted invocation did part of the work (its time is not known). About 0.1–0.3 MB per model.
"""
import json

import numpy as np

from analyses.scaling.export import clocks_dataset, load_matching, save_npz
from scoreprobe.store import normalize_config

FORMAT = "scoreprobe-mechanism-seeds-model/1"
BASIN_Q = ("training", "heldout", "novel", "violating", "invalid", "off_vertex", "anchor0", "anchor1", "anchor2")
RET_Q = ("retained", "captured", "captured_nearer_own", "capture_distance_ratio", "valid", "violating",
         "other_valid")


def _json(obj):
    return json.dumps(normalize_config(obj), sort_keys=True)


def export_model(path, cfg, meta, steps, clocks, basins, retention, dsm):
    """Write one model's export atomically. clocks: a clocks Dataset (state, novel_oracle); basins:
    {set name: {"counts" (Q, P, S), "n_pixels", "keys", "clusters"}}; retention: {(split, σ): {"values"
    (O, I, S), "outcomes", "keys"}}; dsm: {"gap" (P, S, σ), "sigma", "train_loss" (S, σ), "keys"}."""
    arrays = {"format": FORMAT, "config": _json(cfg.to_dict()), "steps": np.asarray(steps, np.int64),
              "clock_step": clocks["step"].values.astype(np.int64), "clock_state": clocks["state"].values.astype(np.int8),
              "clock_novel_oracle": np.float64(clocks.attrs["novel_oracle"])}
    manifest = {"basins": [], "retention": [], "dsm": None}
    for i, (name, b) in enumerate(sorted(basins.items())):
        arrays[f"b{i}"] = np.asarray(b["counts"], np.uint16)
        manifest["basins"].append({"set": name, "n_pixels": int(b["n_pixels"]), "keys": b["keys"],
                                   "clusters": b["clusters"]})
    for i, ((split, sigma), r) in enumerate(sorted(retention.items())):
        arrays[f"r{i}"] = np.asarray(r["values"], np.float32)
        manifest["retention"].append({"split": split, "sigma": float(sigma), "outcomes": list(r["outcomes"]),
                                      "keys": [int(k) for k in r["keys"]]})
    if dsm is not None:
        arrays.update(dsm_gap=np.asarray(dsm["gap"], np.float32), dsm_sigma=np.asarray(dsm["sigma"], np.float64),
                      dsm_train_loss=np.asarray(dsm["train_loss"], np.float32))
        manifest["dsm"] = {"keys": [int(k) for k in dsm["keys"]]}
    arrays["meta"] = _json({**meta, "manifest": manifest})
    save_npz(path, arrays)


def read_export(path):
    """{"config", "meta" (dicts), "steps" (S,), "clocks" (Dataset), "basins", "retention", "dsm"} of an export
    (the layouts of export_model; basins get "shares" {quantity: (P, S)} as well)."""
    with np.load(path, allow_pickle=False) as z:
        if str(z["format"]) != FORMAT:
            raise ValueError(f"{path}: not a {FORMAT} file")
        meta = json.loads(str(z["meta"]))
        man = meta.pop("manifest")
        out = {"config": json.loads(str(z["config"])), "meta": meta, "steps": z["steps"].astype(np.int64),
               "clocks": clocks_dataset(z["clock_step"], z["clock_state"], float(z["clock_novel_oracle"])),
               "basins": {}, "retention": {}, "dsm": None}
        for i, b in enumerate(man["basins"]):
            counts = z[f"b{i}"].astype(np.float64)
            out["basins"][b["set"]] = {**b, "shares": {q: counts[j] / b["n_pixels"] for j, q in enumerate(BASIN_Q)}}
        for i, r in enumerate(man["retention"]):
            vals = z[f"r{i}"].astype(np.float64)
            out["retention"][(r["split"], r["sigma"])] = {"keys": r["keys"],
                                                          "values": {o: vals[j] for j, o in enumerate(r["outcomes"])}}
        if man["dsm"] is not None:
            out["dsm"] = {"keys": man["dsm"]["keys"], "gap": z["dsm_gap"].astype(np.float64),
                          "sigma": z["dsm_sigma"], "train_loss": z["dsm_train_loss"].astype(np.float64)}
    return out


def load_exports(models, folder, settings):
    """{name: read_export(...)} of the planned `models` whose export exists with the same TrainConfig and
    study `settings`; {name: why} for the others."""
    return load_matching(models, folder, read_export, lambda m, info: (
        info["config"] == json.loads(_json(m.cfg.to_dict()))
        and info["meta"]["settings"] == json.loads(_json(settings))))
