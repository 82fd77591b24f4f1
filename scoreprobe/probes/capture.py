"""Where a noisy restart starts and where it ends: the outcomes of `retention` (docs/definitions.md,
"Per-item basins"), the "captured although closer to a valid non-training vertex" test and the
capture geometry (for a captured restart, its start's distance to its own item vs to the capturer).

The Euclidean distance of a point x to a vertex v ∈ {±1}^D is ‖x‖² + D − 2 x·v, so the nearest vertex
of a set maximizes x·v. For parity the valid set factorizes over the groups, and the nearest valid
vertex is found exactly group by group: take the signs of x; in a group of odd parity flip the bit of
smallest |x_i| (any valid pattern of the group differs from the signs in an odd number of places, each
costing 2|x_i| of x·v, so one flip of the least-confident bit is the cheapest). ExactK (RowK): the k
largest coordinates (of each row) are the ones. Other rules: brute force over `rule.enumerate()` (small
rules only); beyond that there is no exact search and the test is NaN.
"""
import numpy as np

from scoreprobe.errors import ConfigError, DataError

MAX_BRUTE_FORCE = 1 << 16   # valid images a rule without groups may have for the brute-force search


def nearest_valid_vertex(x, rule):
    """Bits (N, D) uint8 of the Euclidean-nearest rule-valid vertex of each row of x (N, D) float
    (signed coordinates). Exact: per group for parity (rule.groups), top-k for ExactK / RowK, by
    enumeration for other rules with at most MAX_BRUTE_FORCE valid images (ConfigError beyond).
    DataError for a row with NaN/inf: such a point has no nearest vertex (a sign test would name one)."""
    x = np.asarray(x, dtype=np.float64)
    bad = ~np.isfinite(x).all(axis=-1) if x.ndim == 2 else None
    if bad is None or bad.any():
        what = f"shape {x.shape}" if bad is None else f"{int(bad.sum())} of {len(x)} rows with NaN/inf"
        raise DataError(f"nearest_valid_vertex needs finite points (N, D), got {what}")
    groups, name = getattr(rule, "groups", None), getattr(rule, "name", "")
    if name in ("exactk", "rowk"):
        rows = x.reshape(len(x), -1, rule.n_bits if name == "exactk" else rule.shape[1])   # (N, R, W)
        bits = np.zeros(rows.shape, np.uint8)
        top = np.argsort(-rows, axis=2, kind="stable")[..., :rule.k]                      # (N, R, k)
        np.put_along_axis(bits, top, 1, axis=2)
        return bits.reshape(x.shape)
    if name == "parity" and groups is not None:
        bits = (x > 0).astype(np.uint8)                                          # (N, D)
        g = np.asarray(groups)                                                   # (n_groups, G)
        odd = bits[:, g].sum(axis=2) % 2 == 1                                    # (N, n_groups)
        weakest = g[np.arange(g.shape[0]), np.abs(x[:, g]).argmin(axis=2)]      # (N, n_groups) bit index
        rows = np.nonzero(odd)
        bits[rows[0], weakest[rows]] ^= 1
        return bits
    if rule.n_valid > MAX_BRUTE_FORCE:
        raise ConfigError(f"no exact nearest-valid-vertex search for {rule!r} ({rule.n_valid} valid images, "
                          f"more than {MAX_BRUTE_FORCE} to enumerate)")
    valid = rule.enumerate()                                                     # (V, D)
    return valid[np.argmax(x @ (2.0 * valid.T - 1), axis=1)]


def closer_to_nontrain(x, dataset, rule):
    """bool (N,): the point x (N, D) is strictly nearer (Euclidean) to some rule-valid vertex that is
    not a training item than to every training item. Equivalent to: its nearest valid vertex is not a
    training item (training items are valid, so the nearest valid vertex is at least as near as any of
    them); ties have probability zero for noisy points and count as False. None when the rule has no
    exact nearest-valid search (see `nearest_valid_vertex`)."""
    x = np.asarray(x, dtype=np.float64)
    try:
        v = nearest_valid_vertex(x, rule)                                        # (N, D)
    except ConfigError:
        return None
    t = 2.0 * np.asarray(dataset.train, np.float64) - 1                          # (T, D)
    best_train = (x @ t.T).max(axis=1) if len(t) else np.full(len(x), -np.inf)   # max x·t  (N,)
    best_valid = np.einsum("nd,nd->n", x, 2.0 * v - 1)                           # x·v      (N,)
    return (dataset.train_index.lookup(v) < 0) & (best_valid > best_train)


def capture_distances(starts, own, capturer):
    """Euclidean distances of each start to its own item and to the training item that captured it.

    starts (N, D) float signed; own (N, D) bits of each restart's own item; capturer (N, D) bits of the
    capturing training item (any row where nothing captured: its distances are ignored by the caller).
    Returns (d_own, d_capturer), two (N,) float64 arrays."""
    x = np.asarray(starts, dtype=np.float64)
    d_own = np.linalg.norm(x - (2.0 * np.asarray(own, np.float64) - 1), axis=1)
    d_cap = np.linalg.norm(x - (2.0 * np.asarray(capturer, np.float64) - 1), axis=1)
    return d_own, d_cap


def _capture_geometry(captured, starts, own, train_index, train_bits):
    """(nearer_own (N,) bool, ratio (N,) float): for a captured restart, whether its start is strictly
    nearer its own item than the capturing training item, and d(start, own) / d(start, capturer); NaN
    ratio (and False) where the restart was not captured or no starts were given."""
    n = len(captured)
    if starts is None or train_bits is None:
        return np.zeros(n, bool), np.full(n, np.nan)
    idx = np.where(captured, np.asarray(train_index), 0)
    d_own, d_cap = capture_distances(starts, own, np.asarray(train_bits)[idx])
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(captured, d_own / d_cap, np.nan)
    return captured & (d_own < d_cap), ratio


def restart_outcomes(c, own, own_train, closer, starts=None, train_bits=None):
    """Outcome flags of M·R noisy restarts from `slices.classify` of their endpoints.

    c : classify() dict; own : (M·R, D) bits of each restart's own item; own_train : (M·R,) its
    training index (-1: not a training item); closer : (M·R,) bool from `closer_to_nontrain` of the
    starts, or None (then closer_nontrain and captured_closer are NaN); starts : (M·R, D) signed start
    points and train_bits : (T, D) the training items, for the capture geometry (`captured_nearer_own`,
    `capture_distance_ratio`; without them those two are False / NaN). Returns {name: (M·R,) bool or
    float} for the names of RETENTION_OUTCOMES and the count of non-finite endpoints under "invalid";
    retained + captured + other_valid + violating + invalid = 1.
    """
    from scoreprobe.data.datasets import STATE_CODES
    finite = c["state"] != STATE_CODES["invalid"]
    retained = finite & (c["bits"] == own).all(axis=1)
    on_train = c["state"] == STATE_CODES["valid_memorized"]
    valid = np.isin(c["state"], [STATE_CODES[k] for k in ("valid_novel", "valid_heldout", "valid_memorized")])
    captured = on_train & (c["train_index"] != own_train)
    nearer_own, ratio = _capture_geometry(captured, starts, own, c["train_index"], train_bits)
    return {"retained": retained, "captured": captured, "valid": valid,
            "captured_nearer_own": nearer_own, "capture_distance_ratio": ratio,
            "other_valid": valid & ~retained & ~on_train,
            "violating": c["state"] == STATE_CODES["rule_violating"],
            "closer_nontrain": np.full(len(retained), np.nan) if closer is None else np.asarray(closer, bool),
            "captured_closer": np.full(len(retained), np.nan) if closer is None else np.asarray(closer, bool) & on_train,
            "invalid": int(np.count_nonzero(~finite))}


RETENTION_OUTCOMES = {
    "retained": "fraction of noisy restarts that flow back to the item itself",
    "captured": "fraction of noisy restarts captured by another training item",
    "valid": "fraction of noisy restarts ending on a rule-valid vertex",
    "other_valid": "fraction of noisy restarts ending on a valid vertex that is neither the item nor a training item",
    "violating": "fraction of noisy restarts ending on a rule-violating vertex",
    "closer_nontrain": ("fraction of noisy restarts whose start is nearer (Euclidean) to a valid non-training "
                        "vertex than to every training item"),
    "captured_closer": ("fraction of noisy restarts whose start is nearer to a valid non-training vertex than to "
                        "every training item and whose endpoint is a training item (captured although closer)"),
    "captured_nearer_own": ("fraction of noisy restarts captured by another training item although the start is "
                            "nearer (Euclidean) to the restart's own item than to the capturing training item"),
    "capture_distance_ratio": ("mean over the captured restarts of d(start, own item) / d(start, capturing training "
                               "item); NaN when none of the item's restarts was captured"),
}
