"""Planes through three hypercube points, grids on them, and the ways of choosing them.

A `Plane` is the affine 2-D plane through three signed points a, b, c of R^D. Its origin is
the anchors' centroid, its first basis vector points from a to b, its second is c's direction
made orthogonal to the first (Gram-Schmidt). Plane coordinates (u, v) of a point x are
((x - origin)·e_u, (x - origin)·e_v). With this choice a symmetry of the hypercube that swaps
a and b and fixes c acts on the plane as the reflection u -> -u.

The classification of ODE endpoints (classify, classify_endpoints) lives in scoreprobe.endpoints
and is re-exported here.
"""
import logging
from dataclasses import dataclass

import numpy as np

from scoreprobe.endpoints import classify, classify_endpoints  # noqa: F401 (re-exported)
from scoreprobe.errors import ConfigError, DataError
from scoreprobe.limits import check_grid, check_seed

logger = logging.getLogger(__name__)

PLANE_KINDS = ("train", "heldout", "violating")


# ---------------------------------------------------------------------------------------------
# Plane
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Plane:
    """The plane through three anchor points (use `Plane.through`).

    Attributes
    ----------
    anchors : (3, D) float64, the anchor points (signed; vertices have entries ±1).
    origin : (D,) float64, the anchors' centroid.
    basis : (2, D) float64, orthonormal rows e_u, e_v.
    labels : tuple of 3 str, names of the anchors (e.g. "train:12").
    """
    anchors: np.ndarray
    origin: np.ndarray
    basis: np.ndarray
    labels: tuple

    @classmethod
    def through(cls, a, b, c, labels=None):
        """Plane through the signed points a, b, c (each (D,), numpy or torch).

        e_u = (b - a)/|b - a|; e_v = Gram-Schmidt of (c - a) against e_u. Raises ConfigError
        when the three points are (numerically) collinear.
        """
        points = [_as_vector(p, name) for p, name in zip((a, b, c), "abc")]
        if len({p.shape for p in points}) != 1 or points[0].size == 0:
            raise DataError(f"plane anchors must be non-empty points of one length, got lengths "
                            f"{[p.size for p in points]}")
        anchors = np.stack(points)                                           # (3, D)
        origin = anchors.mean(axis=0)                                        # (D,)
        e_u = anchors[1] - anchors[0]
        n_u = np.linalg.norm(e_u)
        if n_u < 1e-9:
            raise ConfigError("plane anchors a and b coincide; pick two different points")
        e_u = e_u / n_u
        e_v = anchors[2] - anchors[0]
        for _ in range(2):                                                   # twice for accuracy
            e_v = e_v - (e_v @ e_u) * e_u
        n_v = np.linalg.norm(e_v)
        if n_v < 1e-9 * max(1.0, np.linalg.norm(anchors[2] - anchors[0])):
            raise ConfigError("plane anchors are collinear; pick a third point off the line a-b")
        labels = tuple(labels) if labels is not None else ("a", "b", "c")
        if len(labels) != 3:
            raise ConfigError(f"a plane needs 3 labels, got {len(labels)}")
        return cls(anchors=anchors, origin=origin, basis=np.stack([e_u, e_v / n_v]), labels=labels)

    @property
    def dim(self):
        """Ambient dimension D."""
        return self.anchors.shape[1]

    @property
    def anchor_uv(self):
        """(3, 2) plane coordinates of the anchors."""
        return self.coords(self.anchors)

    def coords(self, x):
        """Plane coordinates of points x: (N, D) -> (N, 2) float64 (orthogonal projection)."""
        x = np.asarray(x, dtype=np.float64)
        return (x - self.origin) @ self.basis.T

    def lift(self, u, v):
        """Points origin + u e_u + v e_v for broadcastable u, v; returns (..., D) float64."""
        u = np.asarray(u, dtype=np.float64)[..., None]
        v = np.asarray(v, dtype=np.float64)[..., None]
        return self.origin + u * self.basis[0] + v * self.basis[1]

    def extent(self, margin=0.5):
        """Grid bounds (u_lo, u_hi, v_lo, v_hi): the anchors' box widened on each side by
        `margin` times its larger side."""
        if margin < 0:
            raise ConfigError(f"margin must be >= 0, got {margin}")
        uv = self.anchor_uv
        lo, hi = uv.min(axis=0), uv.max(axis=0)
        pad = margin * float(np.max(hi - lo))
        return lo[0] - pad, hi[0] + pad, lo[1] - pad, hi[1] + pad

    def grid(self, res, margin=0.5):
        """A res x res grid on the plane (ConfigError beyond limits.MAX_GRID_RES or MAX_GRID_BYTES).

        Returns
        -------
        points : (res*res, D) float64, row-major over (v, u): point k has v = v[k // res], u = u[k % res].
        u : (res,) float64 coordinates along e_u.
        v : (res,) float64 coordinates along e_v.
        """
        res = check_grid(res, self.dim)   # limits.MAX_GRID_RES and MAX_GRID_BYTES
        u_lo, u_hi, v_lo, v_hi = self.extent(margin)
        u = _symmetric_linspace(u_lo, u_hi, res)
        v = _symmetric_linspace(v_lo, v_hi, res)
        vv, uu = np.meshgrid(v, u, indexing="ij")                            # (res, res) each
        return self.lift(uu, vv).reshape(res * res, self.dim), u, v

    def spec(self):
        """JSON-able description: labels and anchor bits as 0/1 strings (for attrs)."""
        return {"labels": list(self.labels),
                "anchors": ["".join("1" if x > 0 else "0" for x in a) for a in self.anchors]}


def _symmetric_linspace(lo, hi, n):
    """n points from lo to hi; exactly mirror-symmetric around the midpoint."""
    mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
    k = np.arange(n, dtype=np.float64)
    return mid + half * (2 * k - (n - 1)) / (n - 1)


def _as_vector(p, name):
    if hasattr(p, "detach"):
        p = p.detach().cpu().numpy()
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1:
        raise DataError(f"plane anchor {name} must be a 1-D point (D,), got shape {p.shape}")
    if not np.all(np.isfinite(p)):
        raise DataError(f"plane anchor {name} has non-finite entries")
    return p


# ---------------------------------------------------------------------------------------------
# Choosing a plane
# ---------------------------------------------------------------------------------------------

def auto_plane(dataset, rule, seed=0):
    """A plane through a training item, a nearby held-out item and a rule-violating vertex.

    The held-out item is one at the smallest Hamming distance from any training item (2 flips
    when such a pair exists; ties broken with `seed`); the third anchor is the training item
    with one bit flipped so that it violates the rule, preferring a bit where the two items agree.
    """
    if len(dataset.heldout) == 0 or len(dataset.train) == 0:
        raise ConfigError("auto_plane needs a dataset with training and held-out items")
    rng = np.random.default_rng(check_seed(seed))
    near_i, dist = dataset.train_index.nearest(dataset.heldout)   # (M,), (M,)
    target = 2 if np.any(dist == 2) else int(dist[dist > 0].min())
    j = int(rng.choice(np.flatnonzero(dist == target)))
    i = int(near_i[j])
    k = _violating_bit(dataset.train[i], dataset.heldout[j], rule, rng)
    return plane_from_spec(f"train:{i},heldout:{j},violating:{k}", dataset, rule)


PLANE_SPEC_HELP = ("auto, or three points: train:I, heldout:J, violating:K (bit K of the spec's first train item "
                   "flipped) or a bit string of 0s and 1s, e.g. train:5,train:17,heldout:300")


def plane_from_spec(spec, dataset, rule, seed=0):
    """Plane from a CLI-style spec: "auto", or three comma-separated points, in the order a, b, c of
    `Plane.through`: `train:I` (training item I), `heldout:J` (held-out item J), `violating:K` (the
    spec's first train item with bit K flipped; it must break the rule), or an explicit bit string
    (`bits:0110...` or just `0110...`, one 0/1 per bit). "train:I,heldout:J,violating:K" in any order
    is the plane through those three in that order (as before). ConfigError for anything else.
    """
    spec = (spec or "auto").strip()
    if spec == "auto":
        return auto_plane(dataset, rule, seed)
    items = [item.strip() for item in spec.split(",")]
    if len(items) != 3:
        raise ConfigError(f"plane spec {spec[:80]!r} names {len(items)} points; a plane needs three ({PLANE_SPEC_HELP})")
    parsed = [_spec_point(item, spec, rule.n_bits) for item in items]
    if sorted(kind for kind, _ in parsed) == sorted(PLANE_KINDS):      # the classic spec: train, heldout, violating
        parsed.sort(key=lambda p: PLANE_KINDS.index(p[0]))
    trains = [v for kind, v in parsed if kind == "train"]
    points, labels = [], []
    for kind, value in parsed:
        bits, label = _spec_bits(kind, value, dataset, rule, trains)
        points.append(bits)
        labels.append(label)
    from scoreprobe.data.datasets import to_signed
    return Plane.through(*(to_signed(b.astype(np.uint8)) for b in points), labels=labels)


def _spec_point(item, spec, n_bits):
    """(kind, value) of one point of a plane spec: ('train'|'heldout'|'violating', int) or ('bits', str)."""
    kind, sep, num = item.partition(":")
    kind, num = kind.strip(), num.strip()
    if not sep and kind and set(kind) <= {"0", "1"}:
        kind, num = "bits", kind
    if kind == "bits":
        if len(num) != n_bits or not set(num) <= {"0", "1"}:
            raise ConfigError(f"plane point {item[:60]!r}: a bit string needs {n_bits} characters 0 or 1, "
                              f"got {len(num)}")
        return kind, num
    if kind not in PLANE_KINDS or not (num.isascii() and num.isdigit()) or len(num) > 18:
        raise ConfigError(f"bad plane spec {spec[:80]!r}: use {PLANE_SPEC_HELP}")
    return kind, int(num)


def _spec_bits(kind, value, dataset, rule, trains):
    """(bits (D,) uint8, label) of one parsed point; ConfigError for an index out of range."""
    if kind == "bits":
        label = f"bits:{value}" if len(value) <= 16 else f"bits:{value[:8]}…{value[-4:]}"
        return np.frombuffer(value.encode(), np.uint8) - ord("0"), label
    n = {"train": len(dataset.train), "heldout": len(dataset.heldout), "violating": rule.n_bits}[kind]
    if not 0 <= value < n:
        raise ConfigError(f"plane {kind}:{value} out of range [0, {n})")
    if kind != "violating":
        return (dataset.train if kind == "train" else dataset.heldout)[value], f"{kind}:{value}"
    if not trains:
        raise ConfigError(f"plane violating:{value} flips a bit of the spec's first train item: name one "
                          "(train:I), or give the violating vertex as a bit string")
    c = dataset.train[trains[0]].copy()
    c[value] ^= 1
    if rule.is_valid(c[None])[0]:
        raise ConfigError(f"flipping bit {value} of training item {trains[0]} gives a valid vertex; "
                          "pick another bit for violating:K")
    return c, f"violating:{value}"


def _violating_bit(a_bits, b_bits, rule, rng):
    d = a_bits.shape[0]
    flips = np.repeat(a_bits[None], d, axis=0)                               # (D, D)
    flips[np.arange(d), np.arange(d)] ^= 1
    ok = ~rule.is_valid(flips)                                               # (D,)
    agree = a_bits == b_bits
    for cand in (np.flatnonzero(ok & agree), np.flatnonzero(ok)):
        if len(cand):
            return int(rng.choice(cand))
    raise ConfigError("no single bit flip of the training item violates the rule; pass --plane explicitly")


# ---------------------------------------------------------------------------------------------
# Plane kinds of the mechanism study (docs/definitions.md, "Plane protocol")
# ---------------------------------------------------------------------------------------------

PLANE_PROTOCOL_KINDS = ("symmetric", "train_heldout", "random_valid")


def symmetric_planes(dataset, rule, n, seed=0, max_hamming=2):
    """Up to `n` planes through (t, h, w): a training item t, a held-out item h, w violating, with
    Hamming(t, h) = 2k <= max_hamming and w = t with k of the 2k differing bits flipped (so w is k
    flips from both). All pairs at distance 2 come before any at 4, and so on; within a distance the
    order is drawn with `seed`. When the rule has `groups` (parity), w takes half of the differing bits
    of every group, so the signed permutation swapping t and h and fixing w keeps the rule; a pair with
    no violating such w is skipped. Fewer than `n` pairs: all there are (a SettingWarning says so).

    Returns a list of Plane, labels ("train:I", "heldout:J", "violating:t^B1,B2": t with bits B1, B2 flipped).
    """
    rng = np.random.default_rng(seed)
    ham = hamming_matrix(dataset.train, dataset.heldout)                           # (N, M)
    planes = []
    for dist in range(2, int(max_hamming) + 1, 2):
        pairs = np.argwhere(ham == dist)                                            # (P, 2)
        for i, j in pairs[rng.permutation(len(pairs))]:
            w = None if len(planes) >= n else _equidistant_violating(dataset.train[i], dataset.heldout[j], rule, rng)
            if w is not None:
                flips = ",".join(str(b) for b in np.flatnonzero(w != dataset.train[i]))
                planes.append(_plane_of_bits(dataset.train[i], dataset.heldout[j], w,
                                             (f"train:{i}", f"heldout:{j}", f"violating:t^{flips}")))
    _warn_short(len(planes), n, f"symmetric planes (training/held-out pairs at Hamming distance <= {max_hamming})")
    return planes


def train_heldout_planes(dataset, n, seed=0):
    """`n` planes through a training item t (drawn with `seed`, distinct while they last) and the two
    held-out items Hamming-nearest to t (ties broken with `seed`)."""
    if len(dataset.heldout) < 2 or len(dataset.train) == 0:
        raise ConfigError("train_heldout planes need a training item and two held-out items")
    rng = np.random.default_rng(seed)
    ham = hamming_matrix(dataset.train, dataset.heldout)                           # (N, M)
    planes = []
    for i in _draws(rng, len(dataset.train), n):
        j = np.lexsort((rng.random(ham.shape[1]), ham[i]))[:2]                      # nearest two, random ties
        planes.append(_plane_of_bits(dataset.train[i], dataset.heldout[j[0]], dataset.heldout[j[1]],
                                     (f"train:{i}", f"heldout:{j[0]}", f"heldout:{j[1]}")))
    return planes


def random_valid_planes(dataset, rule, n, seed=0):
    """`n` planes through three valid vertices drawn uniformly (`rule.sample`, seeded), labelled by
    what they are ("train:I", "heldout:J" or "valid:<bits>")."""
    planes, v = [], rule.sample(3 * int(n), seed)
    for k in range(int(n)):
        tri = v[3 * k:3 * k + 3]
        if len({_bitstr(b) for b in tri}) < 3:   # (vanishingly rare) a repeated vertex: no plane
            continue
        planes.append(_plane_of_bits(*tri, tuple(_label_of(b, dataset) for b in tri)))
    _warn_short(len(planes), n, "random-valid planes")
    return planes


def noise_reach_margin(plane, sigma):
    """The `margin` of Plane.grid that pads the anchors' box by sigma·sqrt(D) on each side: the
    distance a sample noised at `sigma` lies from its vertex (docs/definitions.md, "Plane protocol")."""
    lo, hi = plane.anchor_uv.min(axis=0), plane.anchor_uv.max(axis=0)
    return float(sigma) * np.sqrt(plane.dim) / float(np.max(hi - lo))


def hamming_matrix(a, b):
    """Hamming distances of bit rows a (N, D) and b (M, D): int64 (N, M)."""
    sa, sb = (2.0 * np.asarray(x, np.float64) - 1 for x in (a, b))
    return np.rint((sa.shape[1] - sa @ sb.T) / 2).astype(np.int64)


def _equidistant_violating(t, h, rule, rng):
    """A violating vertex (bits) k flips from t and from h (Hamming(t, h) = 2k), or None; with
    rule.groups, one that takes half of the differing bits of every group."""
    import itertools
    diff = np.flatnonzero(t != h)
    groups = getattr(rule, "groups", None)
    cands = []
    for a in itertools.combinations(diff, len(diff) // 2):
        if groups is not None and any(2 * np.isin(g, a).sum() != np.isin(g, diff).sum() for g in groups):
            continue
        w = t.copy()
        w[list(a)] ^= 1
        if not rule.is_valid(w[None])[0]:
            cands.append(w)
    return cands[int(rng.integers(len(cands)))] if cands else None


def _plane_of_bits(a, b, c, labels):
    from scoreprobe.data.datasets import to_signed
    return Plane.through(*(to_signed(np.asarray(x, np.uint8)) for x in (a, b, c)), labels=labels)


def _draws(rng, n_items, n):
    """n indices of range(n_items): a permutation, repeated (reshuffled) when n > n_items."""
    reps = -(-int(n) // n_items)
    return np.concatenate([rng.permutation(n_items) for _ in range(reps)])[:int(n)]


def _label_of(bits, dataset):
    i = int(dataset.train_index.lookup(bits[None])[0])
    j = int(dataset.heldout_index.lookup(bits[None])[0])
    return f"train:{i}" if i >= 0 else f"heldout:{j}" if j >= 0 else "valid:" + _bitstr(bits)


def _bitstr(bits):
    return "".join("1" if b else "0" for b in np.asarray(bits).ravel())


def _warn_short(got, wanted, what):
    if got < wanted:
        import warnings
        from scoreprobe.errors import SettingWarning
        warnings.warn(f"only {got} {what} exist in this dataset, fewer than the {wanted} asked for; using "
                      f"{got}", SettingWarning, stacklevel=3)
