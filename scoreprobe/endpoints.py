"""Classification of PF-ODE endpoints into the endpoint states (docs/definitions.md, "Endpoint states"),
and their match to dataset items and plane anchors. Also importable from scoreprobe.slices.
"""
import numpy as np
import torch

from scoreprobe.data.datasets import STATE_CODES, to_bits
from scoreprobe.errors import DataError


def classify_endpoints(x, dataset, rule=None, tol=0.5):
    """Classify signed PF-ODE endpoints into STATES (docs/definitions.md, "Endpoint states").

    `invalid` means non-finite (NaN/inf anywhere in the row); every other endpoint is judged by
    its thresholded bits (to_bits), wherever it sits. `off_vertex` (some |x_i| farther than tol
    from ±1) is a separate flag, not a state: an endpoint that rounds to a valid vertex is valid.

    Parameters
    ----------
    x : (N, D) float signed endpoints (numpy or torch)
    dataset : Dataset (its cached BitIndex objects are used)
    rule : Rule, default dataset.rule
    tol : off_vertex tolerance

    Returns
    -------
    dict of numpy arrays: state int8 (N,) (codes STATE_CODES); off_vertex bool (N,) (False for
    invalid rows); train_index, heldout_index int64 (N,) (-1 = no equal item, and always -1 for
    invalid endpoints); nearest_train_index, nearest_train_hamming int64 (N,) (of the thresholded
    bits; -1 for invalid endpoints or an empty train set); bits uint8 (N, D) (= to_bits(x); rows
    of invalid endpoints are meaningless).
    """
    rule = dataset.rule if rule is None else rule
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().double().numpy()
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != rule.n_bits:
        raise DataError(f"endpoints must have shape (N, {rule.n_bits}), got {x.shape}")
    finite = np.isfinite(x).all(axis=1)                                         # (N,)
    with np.errstate(invalid="ignore"):
        off = finite & ~(np.abs(np.abs(x) - 1.0) <= tol).all(axis=1)            # (N,)
    bits = to_bits(x)  # (N, D)
    train_i = np.where(finite, dataset.train_index.lookup(bits), -1)
    held_i = np.where(finite, dataset.heldout_index.lookup(bits), -1)
    near_i, near_d = dataset.train_index.nearest(bits)
    near_i, near_d = np.where(finite, near_i, -1), np.where(finite, near_d, -1)
    valid = rule.is_valid(bits)
    state = np.select([~finite, ~valid, train_i >= 0, held_i >= 0],
                      [STATE_CODES["invalid"], STATE_CODES["rule_violating"], STATE_CODES["valid_memorized"],
                       STATE_CODES["valid_heldout"]], STATE_CODES["valid_novel"]).astype(np.int8)
    return {"state": state, "off_vertex": off, "train_index": train_i.astype(np.int64),
            "heldout_index": held_i.astype(np.int64), "nearest_train_hamming": near_d.astype(np.int64),
            "nearest_train_index": near_i.astype(np.int64), "bits": bits}


def classify(x_end, dataset, rule, anchors=None, tol=0.5):
    """Classify ODE endpoints into the five states and match them to items and anchors.

    Parameters
    ----------
    x_end : (N, D) float, signed endpoints (numpy or torch).
    dataset, rule : the data the endpoints are judged against.
    anchors : (A, D) signed points (e.g. `plane.anchors`), optional.

    Returns
    -------
    dict of numpy arrays, those of `classify_endpoints` (state int8, train_index,
    heldout_index, nearest_train_hamming, nearest_train_index, bits) plus `index` (the
    training item reached for valid_memorized, the held-out item for valid_heldout, else -1),
    `anchor` (index of the anchor the endpoint equals, -1 none; invalid and off-vertex endpoints
    get -1: an endpoint reaches an anchor only when it sits on it),
    `nearest_anchor` and `nearest_anchor_hamming`.
    """
    out = classify_endpoints(x_end, dataset, rule, tol=tol)
    state = out["state"]
    mem, ho = state == STATE_CODES["valid_memorized"], state == STATE_CODES["valid_heldout"]
    out["index"] = np.where(mem, out["train_index"], np.where(ho, out["heldout_index"], -1)).astype(np.int64)
    n = len(state)
    out["anchor"] = np.full(n, -1, dtype=np.int8)
    out["nearest_anchor"] = np.full(n, -1, dtype=np.int8)
    out["nearest_anchor_hamming"] = np.full(n, -1, dtype=np.int64)
    if anchors is not None and n:
        abits = (np.asarray(anchors) > 0).astype(np.uint8)                   # (A, D)
        ham = (out["bits"][:, None, :] != abits[None, :, :]).sum(-1)         # (N, A)
        near = ham.argmin(axis=1)
        out["nearest_anchor"] = near.astype(np.int8)
        out["nearest_anchor_hamming"] = ham[np.arange(n), near].astype(np.int64)
        hit = (ham[np.arange(n), near] == 0) & (state != STATE_CODES["invalid"]) & ~out["off_vertex"]
        out["anchor"] = np.where(hit, near, -1).astype(np.int8)
    return out
