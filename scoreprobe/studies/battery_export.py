"""The compact result of the battery (scoreprobe.studies.battery) on one trained model, one .npz (e.g.
<results>/<study>[_<preset>]/<model>.npz): everything its tables are computed from (no
run directory or store needed).

One file holds: the model's TrainConfig and the study's settings (JSON), the measured steps (S,), its
clocks as scoreprobe.studies.export writes them (checkpoint steps, per-sample endpoint states int8, novel_oracle:
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

from scoreprobe.errors import DataError
from scoreprobe.loading.npz import check_clocks, field, read_npz
from scoreprobe.store import normalize_config
from scoreprobe.studies.battery import dsm_pairs, item_table, plane_cluster, plane_key, plane_shares
from scoreprobe.studies.export import clocks_dataset, load_matching, save_npz

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
    (the layouts of export_model; basins get "shares" {quantity: (P, S)} as well). Every field is checked before
    it is trusted (scoreprobe.loading.npz); a field the manifest names but the file lacks, or a manifest of
    another shape, is one DataError naming the file."""
    z = read_npz(path)
    if str(field(path, z, "format", "text")) != FORMAT:
        raise DataError(f"{path}: not a {FORMAT} file")
    step, state, oracle = check_clocks(path, z, "clock_step", "clock_state", "clock_novel_oracle")
    try:
        meta = json.loads(str(field(path, z, "meta", "text")))
        man = meta.pop("manifest")
        out = {"config": json.loads(str(field(path, z, "config", "text"))), "meta": meta,
               "steps": field(path, z, "steps", "int", 1).astype(np.int64),
               "clocks": clocks_dataset(step, state, oracle), "basins": {}, "retention": {}, "dsm": None}
        _manifest(path, z, man, out)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
        if isinstance(e, DataError):
            raise
        raise DataError(f"{path}: the manifest does not match the arrays ({type(e).__name__}: {e})") from None
    return out


def _manifest(path, z, man, out):
    for i, b in enumerate(man["basins"]):
        counts = field(path, z, f"b{i}", "int").astype(np.float64)
        out["basins"][b["set"]] = {**b, "shares": {q: counts[j] / b["n_pixels"] for j, q in enumerate(BASIN_Q)}}
    for i, r in enumerate(man["retention"]):
        vals = field(path, z, f"r{i}", "real").astype(np.float64)
        out["retention"][(r["split"], r["sigma"])] = {"keys": r["keys"],
                                                      "values": {o: vals[j] for j, o in enumerate(r["outcomes"])}}
    if man["dsm"] is not None:
        out["dsm"] = {"keys": man["dsm"]["keys"], "gap": field(path, z, "dsm_gap", "real").astype(np.float64),
                      "sigma": field(path, z, "dsm_sigma", "real"),
                      "train_loss": field(path, z, "dsm_train_loss", "real").astype(np.float64)}


def load_exports(models, folder, settings):
    """{name: read_export(...)} of the planned `models` whose export exists with the same TrainConfig and
    study `settings`; {name: why} for the others."""
    return load_matching(models, folder, read_export, lambda m, info: (
        info["config"] == json.loads(_json(m.cfg.to_dict()))
        and info["meta"]["settings"] == json.loads(_json(settings))))


# ---------------------------------------------------------------------------------------------
# The per-unit arrays of one model, from its stores (battery.collect)
# ---------------------------------------------------------------------------------------------

def basin_arrays(args, col):
    """{"kind/extent@σ": {"counts" (Q, P, S), "n_pixels", "keys", "clusters"}} of every plane set of `col`."""
    out = {}
    for (kind, extent), (ds, planes) in col["basins"].items():
        n_pix = int(ds.sizes["v"] * ds.sizes["u"])
        for sigma in (args.sigma_starts if extent == "local" else args.reach_sigmas):
            shares = plane_shares(ds, sigma)
            out[f"{kind}/{extent}@{sigma:g}"] = {
                "counts": np.rint(np.stack([shares[q] * n_pix for q in BASIN_Q])).astype(np.uint16),
                "n_pixels": n_pix, "keys": ["|".join(plane_key(p)) for p in planes],
                "clusters": ["|".join(plane_cluster(kind, p)) for p in planes]}
    return out


def retention_arrays(args, col):
    """{(split, σ): {"values" (O, I, S), "outcomes", "keys"}}: each distinct item once (battery.item_table)."""
    out = {}
    for split in ("train", "heldout"):
        for sigma in args.ret_sigmas:
            keys, res, _ = item_table(col, split, sigma)
            if keys is not None:
                names = [o for o in RET_Q if o in res]
                out[(split, sigma)] = {"values": np.stack([res[o] for o in names]), "outcomes": names, "keys": keys}
    return out


def dsm_arrays(col):
    """{"gap" (P, S, σ) held-out − training loss per pair, "sigma", "train_loss" (S, σ), "keys"} (battery.dsm_pairs)."""
    if not col["dsm"]:
        return None
    loss, d0, ti, hi, common = dsm_pairs(col)                                     # loss (S, σ, samples)
    gap = np.moveaxis(loss[..., hi] - loss[..., ti], -1, 0)                     # (P, S, σ)
    return {"gap": gap, "sigma": d0.sigma.values, "train_loss": loss[..., ti].mean(axis=-1), "keys": common.tolist()}
