"""The report's gallery: samples per checkpoint, the plane's anchors and the basin map's endpoints as
pixel grids (one-hot puzzles as symbols) with their states, as data for the page's script to draw.

What each image shows comes from `scoreprobe.viz.gallery` (the figures of `scoreprobe samples`):
`cell_codes` (pixels or symbols), `state_title` ("copy of #i", "held-out #j", "novel", ...),
`violated_groups`, `group_cells` and `border_segments` of `outline_ids` (the rule's groups).

    rule_drawing(rule)                       shape, outline segments, the cells of every group
    image_records(bits, rule, state, ...)    the images and their states (one record each)
    samples_payload(series, steps, n, ...)   the first n samples of `clocks` at each checkpoint
    anchors_payload(basins_ds, dataset, rule)
    endpoints_payload(basins_ds, dataset, rule, path)   distinct endpoints and each grid cell's record

Sizes are bounded: at most MAX_GALLERY samples per checkpoint (REPORT_SIZES["gallery"]), and at most
MAX_ENDPOINT_RECORDS distinct endpoint records (and MAX_ENDPOINT_CELL_BYTES of their cells) per page,
the most frequent kept; a cell whose record is left out shows its state alone.
"""
import json

import numpy as np

from scoreprobe.data.datasets import STATE_CODES, STATES
from scoreprobe.errors import StoreError
from scoreprobe.reports.payload import b64
from scoreprobe.reports.sizes import MAX_ENDPOINT_CELL_BYTES, MAX_ENDPOINT_RECORDS, MAX_GALLERY  # noqa: F401

ORDER = ("step", "sigma_start", "v", "u")   # the basin maps' order on the page (payload.basins_payload)


def rule_drawing(rule):
    """{shape [C, H, W], symbols (C > 1), outline [[x0, y0, x1, y1]] in cell-edge units, groups [[[r, c]]]}."""
    from scoreprobe.viz.gallery import border_segments, group_cells, outline_ids
    ids = outline_ids(rule)
    segments = [] if ids is None else [[x0, y0, x1, y1] for (x0, y0), (x1, y1) in border_segments(ids)]
    return {"shape": [int(x) for x in rule.image_shape], "symbols": bool(rule.image_shape[0] > 1),
            "outline": [[int(x) for x in s] for s in segments],
            "groups": [[[int(r), int(c)] for r, c in zip(rr, cc)] for rr, cc in group_cells(rule)]}


def image_records(bits, rule, state, train_index, heldout_index, has_image=None):
    """The records of n images: cells (base64 int8 (n, H, W), viz.gallery.cell_codes), state (code),
    label and colour (viz.gallery.state_title), train / heldout (item index or -1), violated (group
    indices), image (False: no image known, e.g. a non-finite endpoint; its cells are zeros)."""
    from scoreprobe.viz.gallery import cell_codes, state_title, violated_groups
    bits = np.asarray(bits, dtype=np.uint8).reshape(len(state), rule.n_bits)
    state = np.asarray(state, dtype=np.int64)
    has = (state != STATE_CODES["invalid"]) if has_image is None else np.asarray(has_image, bool)
    bits = np.where(has[:, None], bits, 0).astype(np.uint8)
    violated = violated_groups(bits, rule) & has[:, None]
    titles = [state_title(s, t, h) for s, t, h in zip(state, train_index, heldout_index)]
    return {"cells": b64(cell_codes(bits, rule.image_shape), "i1"), "state": state.tolist(),
            "label": [t for t, _ in titles], "color": [c for _, c in titles],
            "train": [int(x) for x in train_index], "heldout": [int(x) for x in heldout_index],
            "violated": [np.flatnonzero(v).tolist() for v in violated], "image": has.tolist()}


def samples_payload(series, steps, n, seed, n_steps, device="cpu"):
    """{steps, n, seed, records: one image_records per step}: the first n samples of `clocks` at each
    step (probes.clocks.gallery_samples: same seed, same per-sample noise as the clocks section)."""
    from scoreprobe.probes.clocks import gallery_samples
    records = []
    for step in steps:
        got = gallery_samples(series, int(step), n, seed=seed, n_steps=n_steps, device=device)
        records.append(image_records(got["bits"], series.rule, got["state"], got["train_index"],
                                     got["heldout_index"]))
    return {"steps": [int(s) for s in steps], "n": int(n), "seed": int(seed), "records": records}


def anchor_bits(ds, rule):
    """(3, D) uint8 anchor vertices of a basins store's plane (its config's plane.anchors), or None
    when the config holds none of the right form (a store from elsewhere)."""
    try:
        plane = json.loads(ds.attrs.get("scoreprobe_config") or "{}").get("plane") or {}
        rows = plane.get("anchors")
    except (TypeError, ValueError, AttributeError):
        return None
    if not (isinstance(rows, list) and len(rows) == 3 and all(
            isinstance(r, str) and len(r) == rule.n_bits and set(r) <= {"0", "1"} for r in rows)):
        return None
    return np.array([[c == "1" for c in r] for r in rows], dtype=np.uint8)


def anchors_payload(ds, dataset, rule):
    """The plane's three anchors as records, with their labels (basins store), or None."""
    from scoreprobe.endpoints import classify_endpoints
    bits = anchor_bits(ds, rule)
    if bits is None:
        return None
    c = classify_endpoints(2.0 * bits - 1.0, dataset, rule)
    labels = [str(x) for x in ds["anchor_label"].values] if "anchor_label" in ds else ["a", "b", "c"]
    return {"labels": labels, **image_records(bits, rule, c["state"], c["train_index"], c["heldout_index"])}


def _index(ds, name, n, path):
    """A basins index variable (flattened in ORDER), -1 where absent; StoreError outside [-1, n)."""
    if name not in ds:
        return None
    values = ds[name].transpose(*ORDER).values
    if values.dtype.kind not in "iu" or values.size and (values.min() < -1 or values.max() >= n):
        raise StoreError(f"store {path}: {name} holds values outside [-1, {n}) (the store was edited or damaged)")
    return values.reshape(-1).astype(np.int64)


def endpoint_cells(ds, dataset, rule, path="of basins"):
    """Per grid cell of a basins Dataset (in ORDER, flattened): bits (N, D) uint8, has_image (N,),
    state, train_index, heldout_index (N,). The bits are the stored endpoint_bits (basins(keep_bits=True));
    without them the image is known only where the endpoint is an item or an anchor."""
    state = ds["endpoint_state"].transpose(*ORDER).values.reshape(-1).astype(np.int64)
    if state.size and (state.min() < 0 or state.max() >= len(STATES)):
        raise StoreError(f"store {path}: endpoint_state holds codes outside 0..{len(STATES) - 1}")
    n = len(state)
    train = _index(ds, "endpoint_train_index", len(dataset.train), path)
    held = _index(ds, "endpoint_heldout_index", len(dataset.heldout), path)
    train = np.full(n, -1) if train is None else train
    held = np.full(n, -1) if held is None else held
    valid = state != STATE_CODES["invalid"]
    if "endpoint_bits" in ds:
        var = ds["endpoint_bits"]
        if set(var.dims) != set(ORDER + ("bit",)) or var.sizes["bit"] != rule.n_bits or var.dtype.kind not in "biu":
            raise StoreError(f"store {path}: endpoint_bits has dimensions {tuple(var.dims)} and dtype {var.dtype}, "
                             f"not (step, sigma_start, v, u, bit) of {rule.n_bits} integer bits")
        bits = (var.transpose(*ORDER, "bit").values.reshape(n, rule.n_bits) > 0).astype(np.uint8)
        return bits, valid, state, train, held
    bits, has = np.zeros((n, rule.n_bits), np.uint8), np.zeros(n, bool)
    anchors = anchor_bits(ds, rule)
    anchor = _index(ds, "endpoint_anchor", 3, path)
    for idx, table in ((anchor, anchors), (held, dataset.heldout), (train, dataset.train)):   # items win
        if idx is None or table is None:
            continue
        hit = valid & (idx >= 0)
        bits[hit], has[hit] = np.asarray(table, dtype=np.uint8)[idx[hit]], True
    return bits, has, state, train, held


def endpoints_payload(ds, dataset, rule, path="of basins"):
    """{index: base64 int16 (step, sigma_start, v, u) record of each grid cell (-1: left out), records:
    image_records of the distinct (image, state, items) of the cells, most frequent first, stored: the
    images are the stored endpoint bits (else only items and anchors have one), left_out: cells whose
    record is not on the page (past MAX_ENDPOINT_RECORDS / MAX_ENDPOINT_CELL_BYTES)}."""
    bits, has, state, train, held = endpoint_cells(ds, dataset, rule, path)
    packed = np.packbits(bits, axis=1)
    meta = np.stack([state, train, held, has.astype(np.int64)], axis=1)            # (N, 4)
    rows = np.ascontiguousarray(np.concatenate([packed, meta.view(np.uint8).reshape(len(meta), -1)], axis=1))
    keys = rows.view(np.dtype((np.void, rows.shape[1]))).ravel()
    _, first, inverse, counts = np.unique(keys, return_index=True, return_inverse=True, return_counts=True)
    order = np.lexsort((first, -counts))                                          # most frequent, then first seen
    keep = order[:min(MAX_ENDPOINT_RECORDS, max(1, MAX_ENDPOINT_CELL_BYTES // max(1, rule.n_bits)))]
    rank = np.full(len(counts), -1, dtype=np.int16)
    rank[keep] = np.arange(len(keep), dtype=np.int16)
    cell = rank[inverse.ravel()]                                                  # (N,)
    pick = first[keep]
    shape = tuple(ds.sizes[d] for d in ORDER)
    return {"index": b64(cell.reshape(shape), "i2"), "stored": "endpoint_bits" in ds,
            "left_out": int((cell < 0).sum()), "n_records": len(counts),
            "records": image_records(bits[pick], rule, state[pick], train[pick], held[pick], has[pick])}


def gallery_payload(series, datasets, plan, device="cpu", paths=None):
    """The gallery's data: rule drawing, states and colours, samples per checkpoint (plan.sizes
    "gallery" of them, 0: none), and with a basins Dataset its anchors and endpoints."""
    from scoreprobe.viz.common import STATE_COLORS
    z = plan.sizes
    n = min(int(z["gallery"]), int(z["n_samples"]))
    out = {"rule": rule_drawing(series.rule), "states": list(STATES), "colors": [STATE_COLORS[s] for s in STATES],
           "max_records": MAX_ENDPOINT_RECORDS}
    if n > 0:
        out["samples"] = samples_payload(series, plan.steps, n, z["seed"], z["n_steps"], device)
    ds = datasets.get("basins")
    if ds is not None:
        out["anchors"] = anchors_payload(ds, series.dataset, series.rule)
        out["endpoints"] = endpoints_payload(ds, series.dataset, series.rule, (paths or {}).get("basins", "of basins"))
    return out
