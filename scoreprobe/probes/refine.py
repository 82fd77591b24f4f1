"""Boundary refinement of basin maps: integrate where labels change, fill and audit the rest.

A basin map's labels are constant over large regions and change only across boundaries, so
`basins(refine=...)` integrates (border filling, as in Mariani–Silver / "solid guessing"):

1. a coarse lattice (every `stride`-th row and column, and the last);
2. level by level, every cell whose integrated pixels (corners, and whatever of its border or
   interior is already integrated) do not all end at the same vertex is **disagreeing**; every
   cell, and every filled cell, within one cell's size of a disagreeing one is split in two or four
   and the corners of its children integrated (the boundary band, dilated by one cell); the other
   cells are **filled** with their corners' label;
3. the **audit**: every filled pixel is integrated with probability `audit` (seeded, independently).
   A disagreement re-opens its cell (step 2 again) and a second audit with fresh points follows; a
   second failure integrates every pixel (`outcome` dense_audit). With no disagreement, the number W
   of filled pixels that would end elsewhere satisfies P(no failure) = (1 - a)^W, so W <= ln 20 /
   -ln(1 - a) at 95% (`audit_bound` is W over the filled pixels the audit drew from, a one-sided 95%
   upper bound; NaN when nothing is filled; the pixels it integrated are then no longer filled);
4. the **fractal test** (`probes.fractal`), before each audit, on the map as it would be filled: where the
   boundary's box-counting dimension D, from its uncertainty exponent (the share of points within ε of a
   label change ∼ ε^(2 − D) over ε = 1, 2, 4, …, res/8; from res 64 on, NaN below), exceeds `max_dimension`
   (1.4; smooth boundaries give 1, thin stripes between several basins up to ≈ 1.3, planted fractal ones 1.43–2),
   the boundary looks fractal, filling is unsafe, and every pixel is integrated (`outcome` dense_fractal).
   The boundary basin entropy S_bb (Daza et al. 2016) is recorded as a reading; with `max_entropy` set, S_bb
   above it also integrates every pixel (`outcome` dense_entropy: with ln 2, the default criterion of the
   maps written before the fractal test, which fired on smooth maps where three basins meet along thin stripes).

A label is the endpoint's vertex (its thresholded bits) and its off-vertex flag, for a successful
row; a non-finite or max_steps endpoint has no label and never agrees with anything, so it is never
the source of a fill. Pixels are flat indices i·res + j (row i = v, column j = u).
The method can miss a feature that touches no integrated pixel: one narrower than the stride
that no lattice line crosses and that the audit's sample does not hit (tests/test_refine.py plants
one; docs/definitions.md, "Basin maps").
"""
import math
from dataclasses import asdict, dataclass

import numpy as np

from scoreprobe.errors import ConfigError
from scoreprobe.probes.fractal import MAX_DIMENSION, boundary_dimension, boundary_entropy, fractal_outcome   # noqa: F401

OUTCOMES = ("refined", "dense_audit", "dense_entropy", "dense_fractal")   # codes 0..3 of `refine_outcome`
NO_LABEL = -1
AUTO_RES = 32                                             # refine=None refines from this res on


@dataclass(frozen=True)
class RefineSettings:
    """stride: the coarse lattice's spacing (0: 8 from res 64 on, else 4); audit: probability with which
    each filled pixel is integrated to audit the fill; seed: of the audit's sample;
    box: side of the boxes of the boundary basin entropy S_bb; max_dimension: the boundary's box-counting
    dimension (`probes.fractal`) above it integrates densely (None: never); max_entropy: S_bb above it integrates
    densely too (None, the default: S_bb only recorded; math.log(2): the criterion of maps written before
    max_dimension existed);
    warm_start: over the checkpoints of a series, start each map from the previous checkpoint's finished map
    (`probes.warm`; False: every map refined on its own, as before the option existed)."""
    stride: int = 0
    audit: float = 0.05
    seed: int = 0
    box: int = 4
    max_dimension: float | None = MAX_DIMENSION
    max_entropy: float | None = None
    warm_start: bool = True

    def __post_init__(self):
        if int(self.stride) != self.stride or self.stride < 0 or self.stride == 1:
            raise ConfigError(f"refine stride must be 0 (auto) or an integer >= 2, got {self.stride!r}")
        if not 0 < float(self.audit) <= 1:
            raise ConfigError(f"refine audit must be a share in (0, 1], got {self.audit!r}")
        if int(self.box) != self.box or self.box < 2:
            raise ConfigError(f"refine box must be an integer >= 2, got {self.box!r}")
        if self.max_dimension is not None and not 1 <= _number(self.max_dimension) <= 2:
            raise ConfigError(f"refine max_dimension must be None or in [1, 2], got {self.max_dimension!r}")
        if self.max_entropy is not None and not _number(self.max_entropy) > 0:
            raise ConfigError(f"refine max_entropy must be None or > 0, got {self.max_entropy!r}")
        if not isinstance(self.warm_start, (bool, np.bool_)):
            raise ConfigError(f"refine warm_start must be True or False, got {self.warm_start!r}")

    def stride_for(self, res):
        return int(self.stride) or (8 if res >= 64 else 4)

    def spec(self):
        """The store config's record; warm_start=False (the maps of before the option) is left out."""
        d = asdict(self)
        if not d["warm_start"]:
            del d["warm_start"]
        return d


def _number(x):
    """x as a float, NaN for what is not a real number (so every range check refuses it)."""
    return float(x) if isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) else math.nan


def resolve_refine(refine, res):
    """basins' `refine` argument -> RefineSettings or None (dense). None: on from res AUTO_RES."""
    if refine is None:
        return RefineSettings() if res >= AUTO_RES else None
    if refine is False:
        return None
    if refine is True:
        return RefineSettings()
    if isinstance(refine, RefineSettings):
        return refine
    if isinstance(refine, dict):
        return RefineSettings(**refine)
    raise TypeError(f"refine must be None, True, False, a RefineSettings or a dict of its fields, got {refine!r}")


class MapState:
    """One model's map under refinement: which pixels are integrated, their rows, their labels."""

    def __init__(self, res):
        self.res = res
        self.known = np.zeros(res * res, dtype=bool)
        self.label = np.full(res * res, NO_LABEL, dtype=np.int64)
        self.basin = np.full(res * res, NO_LABEL, dtype=np.int64)            # the vertex alone (S_bb's basins)
        self.vertex = {}                                                      # packed bits (+ flag) -> id
        self.rows = {}                                                        # key -> (res*res, ...) array

    def put(self, idx, rows, usable):
        """Record integrated pixels idx (n,) with their rows (dict of (n, ...) arrays) and `usable` (n,) bool."""
        for key, v in rows.items():
            if key not in self.rows:
                self.rows[key] = np.zeros((self.res * self.res,) + v.shape[1:], dtype=v.dtype)
            self.rows[key][idx] = v
        self.basin[idx], self.label[idx] = self.ids(rows, usable)
        self.known[idx] = True

    def ids(self, rows, usable):
        """(n,) basin ids (the vertex) and (n,) label ids (vertex and off-vertex flag; NO_LABEL where not
        `usable`) of rows (dict of (n, ...) arrays), numbered as this map numbers them."""
        packed = np.packbits(rows["bits"], axis=1)                            # (n, B)
        basin = [self.vertex.setdefault(p.tobytes(), len(self.vertex)) for p in packed]
        flagged = np.concatenate([packed, rows["off_vertex"].astype(np.uint8)[:, None]], axis=1)   # (n, B + 1)
        ids = np.array([self.vertex.setdefault(p.tobytes(), len(self.vertex)) for p in flagged], dtype=np.int64)
        return np.asarray(basin, dtype=np.int64), np.where(usable, ids, NO_LABEL)

    def grid(self, a):
        return a.reshape(self.res, self.res)


def _lattice(res, stride):
    return np.unique(np.r_[np.arange(0, res, stride), res - 1])


def _cells(lat):
    """Closed rectangles (n, 4) [i0, i1, j0, j1] between consecutive lattice lines."""
    a, b = lat[:-1], lat[1:]
    i0, j0 = np.meshgrid(a, a, indexing="ij")
    i1, j1 = np.meshgrid(b, b, indexing="ij")
    return np.stack([i0.ravel(), i1.ravel(), j0.ravel(), j1.ravel()], axis=1)


def _rect(c):
    return slice(c[0], c[1] + 1), slice(c[2], c[3] + 1)


def _agrees(st, c):
    """The cell's integrated pixels all carry one usable label: that label, else NO_LABEL."""
    known, label = st.grid(st.known)[_rect(c)], st.grid(st.label)[_rect(c)]
    seen = label[known]
    return int(seen[0]) if len(seen) and seen[0] != NO_LABEL and (seen == seen[0]).all() else NO_LABEL


def _split(c):
    """Children of a closed rectangle (none when it has no interior pixel)."""
    i0, i1, j0, j1 = (int(x) for x in c)
    iv = [(i0, (i0 + i1) // 2), ((i0 + i1) // 2, i1)] if i1 - i0 >= 2 else [(i0, i1)]
    jv = [(j0, (j0 + j1) // 2), ((j0 + j1) // 2, j1)] if j1 - j0 >= 2 else [(j0, j1)]
    return [] if len(iv) == len(jv) == 1 else [(a, b, p, q) for a, b in iv for p, q in jv]


def _corners(cells, res):
    if not len(cells):
        return np.zeros(0, dtype=np.int64)
    c = np.asarray(cells)
    i, j = np.r_[c[:, 0], c[:, 0], c[:, 1], c[:, 1]], np.r_[c[:, 2], c[:, 3], c[:, 2], c[:, 3]]
    return np.unique(i * res + j)


def _near(cells, bad, res):
    """(n,) bool: which cells lie within one cell's size of a disagreeing cell `bad` (m, 4)."""
    mask = np.zeros((res + 1, res + 1), dtype=np.int64)                       # 2-D difference array
    for i0, i1, j0, j1 in bad:
        di, dj = max(i1 - i0, 1), max(j1 - j0, 1)
        a, b, p, q = max(i0 - di, 0), min(i1 + di, res - 1) + 1, max(j0 - dj, 0), min(j1 + dj, res - 1) + 1
        mask[a, p] += 1; mask[a, q] -= 1; mask[b, p] -= 1; mask[b, q] += 1
    cover = np.cumsum(np.cumsum(mask, 0), 1)[:res, :res] > 0                  # (res, res)
    sat = np.pad(np.cumsum(np.cumsum(cover, 0), 1), ((1, 0), (1, 0)))          # summed-area table
    c = np.asarray(cells).reshape(-1, 4)
    hits = sat[c[:, 1] + 1, c[:, 3] + 1] - sat[c[:, 0], c[:, 3] + 1] - sat[c[:, 1] + 1, c[:, 2]] + sat[c[:, 0], c[:, 2]]
    return hits > 0


def _refine(st, active, filled, dilate=True):
    """Generator: split the boundary band level by level; yields pixels to integrate; fills `filled`
    ({cell: label}) with the cells it leaves alone. At the first level every cell (and filled cell)
    within one cell's size of a disagreeing one is split too; at every level a filled cell whose
    integrated pixels (its border, reached by a neighbour's split) no longer agree with it is re-opened."""
    while active:
        lab = [_agrees(st, c) for c in active]
        bad = [c for c, x in zip(active, lab) if x == NO_LABEL]
        split = _near(active, bad, st.res) if dilate and bad else np.array([x == NO_LABEL for x in lab])
        reopen = [c for c, hit in zip(list(filled), _near(list(filled), bad, st.res)) if hit] \
            if dilate and bad and filled else []
        reopen += [c for c, x in filled.items() if c not in reopen and _agrees(st, c) != x]
        for c in reopen:
            del filled[c]
        for c, x, hit in zip(active, lab, split):
            if not hit:
                filled[tuple(int(v) for v in c)] = x
        active = [ch for c, hit in zip(active, split) if hit for ch in _split(c)] + [ch for c in reopen for ch in _split(c)]
        dilate = False
        need = _corners(active, st.res)
        yield need[~st.known[need]]


def _owners(st, filled):
    """(res*res,) int: the filled cell (index into list(filled)) each unintegrated pixel takes its label
    from, -1 for integrated pixels."""
    owner = np.full((st.res, st.res), -1, dtype=np.int64)
    known = st.grid(st.known)
    for n, c in enumerate(filled):
        r = owner[_rect(c)]
        r[(r < 0) & ~known[_rect(c)]] = n
    return owner.ravel()


def _audit_sample(owner, share, rng):
    """Each filled pixel (owner >= 0) drawn independently with probability `share`: flat indices."""
    filled = np.flatnonzero(owner >= 0)
    return filled[rng.random(len(filled)) < share]


def audit_bound(share, n_filled):
    """One-sided 95% upper bound on the share of n_filled filled pixels that end elsewhere, after an audit
    drawing each with probability `share` found none: P(no failure) = (1 - share)^W <= 0.05 iff
    W >= ln 20 / -ln(1 - share). NaN when nothing is filled."""
    if not n_filled:
        return float("nan")
    w = math.log(20) / -math.log1p(-share) if share < 1 else 0.0
    return min(1.0, w / n_filled)


def reopen_cells(st, wrong, filled):
    """Drop the filled cells `wrong` (their audit found a disagreement) and refine their children (a generator of
    the pixels to integrate, as `_refine`)."""
    for c in wrong:
        del filled[c]
    yield from _refine(st, [ch for c in wrong for ch in _split(c)], filled)


def refine_steps(st, settings, sigma_index=0):
    """Generator driving one model's refinement: yields flat pixel indices to integrate (the caller
    records their rows with `st.put` before resuming it); returns the map's summary dict (outcome,
    integrated_fraction, audit_bound, audit_points, audit_failures, boundary_entropy, boundary_dimension, source)
    where source (res*res,) int64 is the pixel each pixel's rows come from (itself when integrated)."""
    res = st.res
    lat = _lattice(res, settings.stride_for(res))
    first = (lat[:, None] * res + lat[None, :]).ravel()
    yield first
    filled, failures, audit_points, bound = {}, 0, 0, float("nan")
    rng = np.random.default_rng([int(settings.seed), int(sigma_index)])
    yield from _refine(st, [tuple(int(v) for v in c) for c in _cells(lat)], filled)
    outcome = None
    while outcome is None:
        outcome = fractal_outcome(_filled_basins(st, filled), res, settings)
        if outcome is not None:
            break
        owner = _owners(st, filled)
        if not (owner >= 0).any():
            outcome = "refined"
            break
        sample = _audit_sample(owner, settings.audit, rng)
        yield sample
        audit_points += len(sample)
        wrong = [c for c in filled if _agrees(st, c) != filled[c]]
        if not wrong:
            bound = audit_bound(settings.audit, int((owner >= 0).sum()))   # over the filled pixels the audit drew from
            outcome = "refined"
            break
        failures += 1
        if failures == 2:
            outcome = "dense_audit"
            break
        yield from reopen_cells(st, wrong, filled)
    if outcome != "refined":
        yield np.flatnonzero(~st.known)
        filled, bound = {}, float("nan")
    return {"outcome": outcome, "integrated_fraction": float(st.known.mean()), "audit_bound": bound,
            "audit_points": audit_points, "audit_failures": failures, **readings(_filled_basins(st, filled), res, settings),
            "source": _sources(st, filled)}


def readings(basin, res, settings):
    """The finished map's boundary_entropy (S_bb) and boundary_dimension (`probes.fractal`); basin (res*res,) int."""
    return {"boundary_entropy": boundary_entropy(basin, res, settings.box),
            "boundary_dimension": boundary_dimension(basin, res)}


def _sources(st, filled):
    owner = _owners(st, filled)
    corner = np.array([c[0] * st.res + c[2] for c in filled] or [0], dtype=np.int64)
    return np.where(owner >= 0, corner[np.maximum(owner, 0)], np.arange(st.res * st.res))


def _filled_basins(st, filled):
    """(res*res,) endpoint vertices of the map as it would be filled now."""
    return st.basin[_sources(st, filled)]


def _usable(rows):
    """Finite endpoints of successful rows carry a label (vertex and off-vertex flag); the rest never agree."""
    from scoreprobe.data.datasets import STATE_CODES
    return (rows["status"] == 0) & (rows["state"] != STATE_CODES["invalid"])


def refined_maps(rows_of, res, k, settings, sigma_index=0):
    """Refined basin maps of K models at one σ_start.

    rows_of(idx) integrates flat grid indices idx (n,) for all K models and returns K dicts of (n, ...)
    arrays (state, ..., bits, decided_sigma, nfe, status: `probes.basins.basin_map`'s keys). Each model
    uses only the rows it asked for, so its map is the one it gets alone; the union is integrated once.

    Returns K dicts: each key as a (res, res, ...) array (filled pixels copy their cell's corner, with
    nfe 0, decided_sigma NaN and status success), integrated (res, res) bool, and the scalars outcome
    (code of OUTCOMES), integrated_fraction, audit_bound, audit_points, audit_failures, boundary_entropy,
    boundary_dimension.
    """
    states = [MapState(res) for _ in range(k)]
    return drive(rows_of, states, [refine_steps(st, settings, sigma_index) for st in states])


def drive(rows_of, states, gens, extra=None):
    """Run K refinement generators (`refine_steps` or `probes.warm.warm_steps`) on K MapStates, integrating the
    union of what they ask for at each round with rows_of; K assembled maps (`refined_maps`). extra: K row sets
    (or None) that the generators' sources index past res*res (a warm start's seed)."""
    k = len(states)
    extra = [None] * k if extra is None else extra
    need, summary = [next(g) for g in gens], [None] * k
    while any(n is not None for n in need):
        union = np.unique(np.concatenate([n for n in need if n is not None]))
        rows = rows_of(union) if len(union) else None
        for m, (st, g) in enumerate(zip(states, gens)):
            if need[m] is None:
                continue
            if len(need[m]):
                pos = np.searchsorted(union, need[m])
                mine = {key: v[pos] for key, v in rows[m].items()}
                st.put(need[m], mine, _usable(mine))
            try:
                need[m] = g.send(None)
            except StopIteration as stop:
                need[m], summary[m] = None, stop.value
    return [_assemble(st, s, x) for st, s, x in zip(states, summary, extra)]


def _assemble(st, summary, extra=None):
    """The map's (res, res, ...) arrays: row source[p] of the integrated rows, followed (source >= res*res)
    by `extra`'s flat rows when given (a warm start's seed map)."""
    res, src = st.res, summary.pop("source")
    filled = src != np.arange(res * res)
    out = {}
    for key, v in st.rows.items():
        if extra is not None:
            v = np.concatenate([v, extra[key].astype(v.dtype)])
        v = v[src].copy()
        if key == "nfe":
            v[filled] = 0
        elif key == "decided_sigma":
            v = v.astype(np.float64)
            v[filled] = np.nan
        elif key == "status":
            v[filled] = 0
        out[key] = v.reshape((res, res) + v.shape[1:])
    out["integrated"] = st.known.reshape(res, res).copy()
    out["outcome"] = np.int8(OUTCOMES.index(summary.pop("outcome")))
    return {**out, **summary}
