"""Does a basin map's boundary look fractal? The test behind boundary refinement's dense fallback (issue 75).

Filling a cell with its corners' label is safe where the boundary is a curve: the points within ε of it are then
a share f(ε) ∝ ε of the plane, and border filling follows it. A fractal boundary has structure at every scale, and
the share of points near it shrinks more slowly than ε.

**The statistic** (`boundary_dimension`): the box-counting dimension D of the boundary from its uncertainty
exponent α = 2 − D (Grebogi, McDonald, Ott, Yorke 1983, "Final state sensitivity"; McDonald, Grebogi, Ott, Yorke
1985, "Fractal basin boundaries": the share of ε-uncertain points f(ε) ∼ ε^α, α = 1 for a smooth boundary,
α < 1 for a fractal one). On the map, f(ε) is the share of pixels whose (2ε + 1) x (2ε + 1) window (clipped at
the map's edges) holds more than one basin: the points an error of ε can send elsewhere, i.e. the Minkowski
sausage of the label changes, or box counting averaged over every placement of the boxes (aligned boxes miss a
boundary that runs along their edges). α is the least-squares slope of ln f(ε) on ln ε over ε = 1, 2, 4, …, res/8
(the largest window about a quarter of the map). A straight boundary gives D = 1 exactly (f ∝ 2ε); a stripe w
points wide adds w to 2ε, so thin stripes read above 1 (over ε = 1..8 a lone 1-point stripe 1.16, a 2-point one
1.28); a random label field fills every window, D = 2. Undefined (NaN) below res MIN_RES (64: fewer than four
scales, and at 32² a smooth map of five basins and two stripes already reads 1.41) and on a map of one basin (no
boundary); a NaN never triggers the fallback, so below 64² the audit alone guards the filled points.

**The criterion**: D > `RefineSettings.max_dimension` (MAX_DIMENSION, 1.4). Measured (tests/test_fractal.py;
bench/RESULTS.md, issue 75): smooth planted maps of 2, 3 and 5 basins with triple junctions and 1–2-point
stripes 1.01–1.34 at 64², 1.01–1.26 at 128²; the 24 shipped checkpoints at 64² 0.94–1.28 (the highest, 11214,
made of 2-point stripes); basins of Newton's method for z³ − 1 (a fractal Wada boundary) 1.46 at 64² and 128²;
a Weierstrass graph y < W(x) with H 0.1 1.43 and 1.51, with H 0.2 1.39 (missed) and 1.46; random fields 2.00.
What it misses: a fractal boundary whose measured dimension stays below 1.4 at the map's resolution (a rougher
grid resolves less of it) reads as smooth, and its filled points are guarded by the audit alone; a map crowded
with stripes two points wide can read above 1.4 and is then integrated densely (slower, never wrong).

**The boundary basin entropy** S_bb (Daza, Wagemakers, Georgeot, Guéry-Odelin, Sanjuán 2016, "Basin entropy"):
the mean Gibbs entropy of the basins in the `box` x `box` boxes that hold more than one. Their sufficient
condition S_bb > ln 2 assumes that a box on a smooth boundary holds two basins (at most ln 2) save at isolated
junctions. On a pixel grid where three basins meet along stripes one or two points wide, many boxes hold three
and S_bb passes ln 2 on smooth maps (7 of the 24 shipped checkpoints); and a two-basin map never passes ln 2,
however fractal. S_bb stays a reading; `RefineSettings.max_entropy` (default None) adds it as a second criterion.
"""
import math

import numpy as np

MIN_RES = 64          # ε = 1, 2, 4, 8 at least (the largest window, 2 res/8 + 1, about a quarter of the map)
MAX_DIMENSION = 1.4   # RefineSettings.max_dimension's default


def scales(res):
    """The ε of `boundary_dimension` at this res: 1, 2, 4, … up to res // 8 (empty below MIN_RES)."""
    if res < MIN_RES:
        return []
    return [2 ** k for k in range(int(math.log2(res // 8)) + 1)]


def uncertain_fraction(basin, eps):
    """f(ε): share of the map's pixels whose (2ε+1)² window (clipped at the edges) holds more than one basin.
    basin (res, res) int."""
    hi, lo = basin.copy(), basin.copy()
    for axis in (0, 1):
        h, l = hi.copy(), lo.copy()
        for k in range(1, eps + 1):
            for dst, src in ((slice(k, None), slice(None, -k)), (slice(None, -k), slice(k, None))):
                d, s = (slice(None),) * axis + (dst,), (slice(None),) * axis + (src,)
                h[d] = np.maximum(h[d], hi[s])
                l[d] = np.minimum(l[d], lo[s])
        hi, lo = h, l
    return float((hi != lo).mean())


def boundary_dimension(basin, res):
    """D = 2 − α, α the slope of ln f(ε) on ln ε (see the module's docstring). basin (res*res,) int (the
    endpoint vertex of each pixel). NaN below MIN_RES or on a map of one basin."""
    eps = scales(res)
    grid = np.asarray(basin).reshape(res, res)
    if not eps or (grid == grid.flat[0]).all():
        return float("nan")
    f = np.array([uncertain_fraction(grid, e) for e in eps])              # (n,) all > 0: windows nest
    alpha = np.polyfit(np.log(eps), np.log(f), 1)[0]
    return float(2.0 - alpha)


def boundary_entropy(label, res, box):
    """S_bb: mean Gibbs entropy (nats) of the labels in the box x box boxes holding more than one label
    (NaN when none does). `label` (res*res,) int64: the endpoint vertex (the basin; the off-vertex flag of
    a saddle point is no basin of its own)."""
    n = res // box
    if n == 0:
        return float("nan")
    g = label.reshape(res, res)[:n * box, :n * box].reshape(n, box, n, box).transpose(0, 2, 1, 3).reshape(n * n, -1)
    ent = []
    for row in g:
        _, cnt = np.unique(row, return_counts=True)
        if len(cnt) > 1:
            p = cnt / cnt.sum()
            ent.append(float(-(p * np.log(p)).sum()))
    return float(np.mean(ent)) if ent else float("nan")


def fractal_outcome(basin, res, settings):
    """The dense fallback's verdict on a map: "dense_fractal" (D > settings.max_dimension), "dense_entropy"
    (S_bb > settings.max_entropy, when set) or None (fill). basin (res*res,) int."""
    if settings.max_dimension is not None and boundary_dimension(basin, res) > settings.max_dimension:
        return "dense_fractal"
    if settings.max_entropy is not None and boundary_entropy(basin, res, settings.box) > settings.max_entropy:
        return "dense_entropy"
    return None
