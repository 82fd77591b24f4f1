"""Warm start of boundary-refined basin maps across the checkpoints of a series (issue 75, item 2).

Consecutive checkpoints' maps differ mostly near their boundaries, so with `RefineSettings.warm_start` (on by
default) a map starts from the previous checkpoint's finished map, its **seed**:

1. integrate the coarse lattice, as the cold refinement does first (`probes.refine`);
2. every lattice cell with a lattice point whose label differs from the seed's there is **re-opened**: refined
   exactly as the cold refinement refines the lattice's cells (`refine._refine`: split level by level where its
   integrated pixels disagree, dilated by one cell, the rest filled with their corners' label); when more than
   WIDESPREAD of the cells are re-opened at once, all are (the cold refinement with another audit stream:
   `warm_start` widespread);
3. in the other cells, integrate the seed's boundary band: every pixel with a 4-neighbour of another label in the
   seed map (or without a label there), dilated by WARM_MARGIN pixels (0: the boundary pixels alone; 1 and 2
   cost more evaluations on the shipped series, bench/RESULTS.md);
4. **flood** the changes: while an integrated pixel whose label differs from the seed's has a 4-neighbour that
   would be filled from the seed, integrate that neighbour. A boundary that moved, however far, is followed
   pixel by pixel to where the labels agree with the seed again; the remaining pixels of the cells left to the
   seed take the seed's label and row (an endpoint's classification is a function of its vertex and off-vertex
   flag; nfe 0, decided sigma NaN, as every filled pixel);
5. the audit, exactly as the cold refinement's: every filled pixel (from the seed or from a cell's corner) is
   integrated with probability `audit`, from a stream of its own (the settings' seed, the σ_start index and the
   map's step: independent of the seed map's audit, so the bound holds for the fill it drew from); a
   disagreement re-opens its cell (a seed cell as in 2, then 4; a corner-filled cell as the cold refinement
   does) and a second audit follows; a second failure integrates every pixel (dense_audit). The bound is the
   same one-sided 95% bound over the filled pixels the last audit drew from;
6. the fractal test (`probes.fractal`, before each audit) as cold: every pixel integrated (dense_fractal, or
   dense_entropy with `max_entropy` set).

The seed is the finished map (filled pixels included) of the previous checkpoint in the same `basins` call, per
σ_start (with models_per_pass K, the K maps of a pass all start from the previous pass's last map). The first map,
a map whose step is unknown (a single denoiser) and every map of a run sent to other processes (dask) are refined
cold (`warm_start` cold, bit for bit the cold map); so is a resumed run's first new map. The stated limitation:
a change that touches no integrated pixel — an island appearing inside a cell left to the seed, off its lattice
points and the seed's boundary — is found only when the audit's sample hits it, within the audit's bound, as a
feature between lattice lines is for the cold refinement.
"""
from dataclasses import dataclass

import numpy as np

from scoreprobe.probes.refine import (NO_LABEL, MapState, _agrees, _audit_sample, _cells, _lattice, _owners, _refine,
                                      _usable, audit_bound, drive, fractal_outcome, readings, refine_steps, reopen_cells)
from scoreprobe.sweep.executor import PROBE_STEPS

WARM_MARGIN = 0      # the seed's boundary pixels dilated by this many pixels (0: the boundary pixels alone)
WIDESPREAD = 0.5     # more than this share of the lattice cells changed at once: every cell is re-opened
SEEDINGS = ("cold", "warm", "widespread")   # codes of `warm_start`
_COLD = {"warm_start": np.int8(0), "warm_seed_step": np.int64(-1), "warm_changed_points": np.nan,
         "warm_reopened_fraction": np.nan}


@dataclass(frozen=True)
class Seed:
    """A finished map that seeds the next: its step and its flat rows {key: (res*res, ...) array}."""
    step: int
    rows: dict


def seed_of(step, m):
    """Seed of the finished map `m` (a dict of (res, res, ...) arrays and scalars, as `refined_maps` gives)."""
    res = m["state"].shape[0]
    return Seed(int(step), {k: np.asarray(v).reshape((res * res,) + np.shape(v)[2:]) for k, v in m.items()
                            if k != "integrated" and np.ndim(v) >= 2})


class WarmChain:
    """The last finished map per σ_start index within one `basins` call, seeding the next pass's maps. The
    steps come from `sweep` (executor.PROBE_STEPS); a copy pickled to another process seeds nothing (dask runs
    steps in any order, on any worker)."""

    def __init__(self):
        self.last, self.enabled = {}, True

    def __getstate__(self):
        return {"last": {}, "enabled": False}

    def plan(self, sigma_index, k):
        """K pairs (seed or None, step or None) for `warm_maps`: the steps of this probe call, each with the last
        map kept at this σ_start; (None, None) outside a local sweep or in a copy sent elsewhere."""
        steps = PROBE_STEPS.get()
        if not self.enabled or steps is None or len(steps) != k:
            return [(None, None)] * k
        return [(self.last.get(sigma_index), s) for s in steps]

    def keep(self, sigma_index, plan, maps):
        if plan[-1][1] is not None:
            self.last[sigma_index] = seed_of(plan[-1][1], maps[-1])


def warm_maps(rows_of, res, k, settings, sigma_index, plan):
    """`refine.refined_maps` with a warm start: plan, K pairs (seed, step) (`WarmChain.plan`): a `Seed` (the map
    this one starts from) or None (refined cold, bit for bit `refined_maps`'s map), and the model's step.
    Returns K dicts as `refined_maps` (seed-filled pixels copy the seed map's pixel), with the warm_* scalars of
    `warm_summary` (a cold map: warm_start 0, warm_seed_step -1, the others NaN)."""
    states = [MapState(res) for _ in range(k)]
    gens, extra = warm_generators(states, settings, sigma_index, plan)
    return drive(rows_of, states, gens, extra)


def warm_generators(states, settings, sigma_index, plan):
    """K refinement generators (see `refine.refine_steps`) and the K extra row sets their sources index."""
    gens, extra = [], []
    for st, (seed, step) in zip(states, plan):
        if seed is None:
            gens.append(_cold(st, settings, sigma_index))
            extra.append(None)
        else:
            rng = np.random.default_rng([int(settings.seed), int(sigma_index), 1, int(step)])
            gens.append(warm_steps(st, settings, seed, rng))
            extra.append(seed.rows)
    return gens, extra


def _cold(st, settings, sigma_index):
    summary = yield from refine_steps(st, settings, sigma_index)
    return {**summary, **_COLD}


def band(label, res, margin=None):
    """(res*res,) bool: pixels within `margin` (Chebyshev; None: WARM_MARGIN) of one with a 4-neighbour of
    another label or without a label (label (res*res,) int, NO_LABEL)."""
    margin = WARM_MARGIN if margin is None else int(margin)
    lab = label.reshape(res, res)
    edge = lab == NO_LABEL
    dv, du = lab[1:] != lab[:-1], lab[:, 1:] != lab[:, :-1]
    edge[1:] |= dv
    edge[:-1] |= dv
    edge[:, 1:] |= du
    edge[:, :-1] |= du
    pad, out = np.pad(edge, margin), np.zeros_like(edge)
    for di in range(2 * margin + 1):
        for dj in range(2 * margin + 1):
            out |= pad[di:di + res, dj:dj + res]
    return out.ravel()


def _holding(cells, mask, res):
    """(n,) bool: which closed cells (n, 4) [i0, i1, j0, j1] hold a True pixel of mask (res*res,)."""
    sat = np.pad(np.cumsum(np.cumsum(mask.reshape(res, res), 0), 1), ((1, 0), (1, 0)))   # summed-area table
    c = np.asarray(cells, dtype=np.int64).reshape(-1, 4)
    i0, i1, j0, j1 = c[:, 0], c[:, 1] + 1, c[:, 2], c[:, 3] + 1
    return sat[i1, j1] - sat[i0, j1] - sat[i1, j0] + sat[i0, j0] > 0


class _Warm:
    """One map under warm refinement: the seed's labels in the map's numbering, the lattice cells still
    filled from the seed (`warm`), the corner-filled cells of re-opened regions (`filled`)."""

    def __init__(self, st, seed, stride):
        self.st, n = st, st.res * st.res
        self.basin, self.label = st.ids(seed.rows, _usable(seed.rows))          # (n,) each
        self.cells = [tuple(int(v) for v in c) for c in _cells(_lattice(st.res, stride))]
        self.warm, self.filled, self.reopened = set(self.cells), {}, set()
        self.n = n

    def stale(self, mask=None):
        """Seed cells holding a pixel of `mask` (n,) bool (None: integrated pixels whose label differs from the
        seed's)."""
        st = self.st
        mask = st.known & (st.label != self.label) if mask is None else mask
        cells = sorted(self.warm)
        return [c for c, hit in zip(cells, _holding(cells, mask, st.res)) if hit] if cells else []

    def settle(self):
        """Generator: integrate the seed-filled 4-neighbours of every changed integrated pixel (its label differs
        from the seed's), and theirs, until no changed pixel touches a pixel filled from the seed."""
        st, res = self.st, self.st.res
        while True:
            changed = (st.known & (st.label != self.label)).reshape(res, res)
            near = np.zeros_like(changed)
            near[1:] |= changed[:-1]
            near[:-1] |= changed[1:]
            near[:, 1:] |= changed[:, :-1]
            near[:, :-1] |= changed[:, 1:]
            need = np.flatnonzero(near.ravel() & (self.sources() >= self.n))
            if not len(need):
                return
            yield need

    def reopen(self, cells):
        """Generator: refine seed cells `cells` cold (`refine._refine`), then settle the changes they reach."""
        self.warm -= set(cells)
        self.reopened |= set(cells)
        yield from _refine(self.st, list(cells), self.filled)
        yield from self.settle()

    def sources(self):
        """(n,) int: the row each pixel takes: itself when integrated, its cell's corner when corner-filled,
        n + the pixel (the seed's row) when filled from the seed."""
        st, owner = self.st, _owners(self.st, self.filled)
        corner = np.array([c[0] * st.res + c[2] for c in self.filled] or [0], dtype=np.int64)
        idx = np.arange(self.n)
        return np.where(st.known, idx, np.where(owner >= 0, corner[np.maximum(owner, 0)], self.n + idx))

    def basins(self):
        return np.concatenate([self.st.basin, self.basin])[self.sources()]


def warm_steps(st, settings, seed, rng):
    """Generator driving one map's warm refinement from `seed` (see the module's docstring); yields flat pixel
    indices to integrate and returns `refine_steps`'s summary with the warm_* entries of `warm_summary`."""
    res = st.res
    w = _Warm(st, seed, settings.stride_for(res))
    lat = _lattice(res, settings.stride_for(res))
    yield (lat[:, None] * res + lat[None, :]).ravel()
    changed = w.stale()
    widespread = len(changed) > WIDESPREAD * len(w.cells)
    yield from w.reopen(list(w.cells) if widespread else changed)
    yield np.flatnonzero(band(w.label, res) & (w.sources() >= w.n))
    yield from w.settle()
    failures, audit_points, bound, outcome = 0, 0, float("nan"), None
    while outcome is None:
        outcome = fractal_outcome(w.basins(), res, settings)
        if outcome is not None:
            break
        fill, src = ~st.known, w.sources()
        if not fill.any():
            outcome = "refined"
            break
        sample = _audit_sample(np.where(fill, 0, -1), settings.audit, rng)
        yield sample
        audit_points += len(sample)
        missed = np.zeros(len(fill), dtype=bool)                    # audited pixels filled from the seed, elsewhere
        missed[sample] = (src[sample] >= len(fill)) & (st.label[sample] != w.label[sample])
        wrong = [c for c in w.filled if _agrees(st, c) != w.filled[c]]
        if not wrong and not missed.any():
            bound, outcome = audit_bound(settings.audit, int(fill.sum())), "refined"
            break
        failures += 1
        if failures == 2:
            outcome = "dense_audit"
            break
        yield from reopen_cells(st, wrong, w.filled)
        yield from w.reopen(w.stale(missed))
    if outcome != "refined":
        yield np.flatnonzero(~st.known)
        w.filled, w.warm, bound = {}, set(), float("nan")
    return {"outcome": outcome, "integrated_fraction": float(st.known.mean()), "audit_bound": bound,
            "audit_points": audit_points, "audit_failures": failures,
            **readings(w.basins(), res, settings), "source": w.sources(),
            **warm_summary(w, seed, widespread)}


def warm_summary(w, seed, widespread):
    """warm_start (code of SEEDINGS), warm_seed_step (the seed's step; -1 cold), warm_changed_points (integrated
    pixels whose label differs from the seed's; NaN cold), warm_reopened_fraction (share of the lattice cells
    re-opened; NaN cold)."""
    changed = w.st.known & (w.st.label != w.label)
    return {"warm_start": np.int8(SEEDINGS.index("widespread" if widespread else "warm")),
            "warm_seed_step": np.int64(seed.step), "warm_changed_points": float(changed.sum()),
            "warm_reopened_fraction": len(w.reopened) / len(w.cells)}
