"""Multiplicity over named families (analyses/remedies' G = 3 preset: analyses.remedies.variant_ratios, its tables
analyses.remedies.holm_md): every Welch p of a study under each family it can be counted in, the family named
with its size, so that "survives Holm" is said only of the family it survives in.

Families (FAMILIES), from the narrowest to the widest:

    readable   the comparisons with a p at the same clock and threshold (a censored or under-resolved
               comparison has no p and is left out: the family shrinks where the runs do not reach)
    planned    the study's planned comparisons at the same clock and threshold (the remedies: six, five
               planned and the curriculum from its switch added after the first seed was read), whether or
               not they are readable there: one without a p is counted with p = 1 (it takes a rank and never rejects), so the
               family is the one fixed before the runs, not one that depends on which runs reached
    tau_tests  every τ-ratio test of the study with a p (both clocks, every threshold)
    all_tests  every test of the study with a p (the τ ratios and the two endpoints)

The endpoints (peak rule accuracy, the last memorized share) are families of their own per endpoint (its
comparisons, all readable: readable = planned there) and enter all_tests.
"""
import math

import numpy as np

from scoreprobe.stats.pvalues import adjust_pvalues

ALPHA = 0.05
FAMILIES = ("readable", "planned", "tau_tests", "all_tests")
WORDS = {"readable": "the {k} readable comparisons at this clock and threshold",
         "planned": "the {k} comparisons at this clock and threshold (one without a p counted with p = 1)",
         "tau_tests": "the {k} readable τ-ratio tests of this study",
         "all_tests": "all {k} readable tests of this study (τ ratios and endpoints)"}


def holm_in_family(p, size=None):
    """Holm-adjusted p (n,) of the finite entries of `p` (n,) within a family of `size` tests (default: the
    number of finite entries); the size − finite members without a p are counted with p = 1 (they take a rank,
    never reject). NaN entries stay NaN. Raises ValueError when size is below the number of finite entries."""
    p = np.asarray(p, dtype=np.float64).reshape(-1)
    ok = np.isfinite(p)
    k = int(ok.sum())
    size = k if size is None else int(size)
    if size < k:
        raise ValueError(f"a family of {size} tests cannot hold {k} p-values")
    out = np.full(p.shape, np.nan)
    if k:
        padded = np.concatenate([p[ok], np.ones(size - k)])
        out[ok] = adjust_pvalues(padded[None], "holm")[0][:k]
    return out


def _set(cells, family, size=None):
    """Holm over `cells` (dicts with "p") as `family`: cell["holm"][family] = {"p", "size", "significant"}."""
    adj = holm_in_family([p_of(c) for c in cells], size)
    k = size if size is not None else sum(math.isfinite(p_of(c)) for c in cells)
    for c, a in zip(cells, adj):
        c.setdefault("holm", {})[family] = {"p": float(a), "size": int(k),
                                            "significant": bool(math.isfinite(a) and a < ALPHA)}


def p_of(cell):
    p = cell.get("p")
    return math.nan if p is None else float(p)


def assign(fam, ends, n_planned):
    """Set cell["holm"] = {family: {"p", "size", "significant"}} on every τ-ratio cell of `fam` ({key:
    {(variant, reference): [row per threshold]}}, variant_ratios.family) and every endpoint cell of `ends` ({name:
    {(variant, reference): row}}, variant_ratios.endpoint_family); `n_planned`: the size of the planned family at a
    threshold. Returns the family sizes {"planned", "tau_tests", "all_tests", "endpoint": {name: size}}."""
    tau_cells = []
    for curves in fam.values():
        rows = list(curves.values())
        for j in range(len(rows[0]) if rows else 0):
            cells = [r[j] for r in rows]
            _set(cells, "readable")
            _set(cells, "planned", n_planned)
            tau_cells += cells
    end_cells = []
    for comps in ends.values():
        cells = list(comps.values())
        _set(cells, "readable")
        _set(cells, "planned")
        end_cells += cells
    _set(tau_cells, "tau_tests")
    _set(tau_cells + end_cells, "all_tests")
    for c in end_cells:                       # an endpoint is not a τ test: no tau_tests entry
        c["holm"].pop("tau_tests", None)
    finite = [c for c in tau_cells + end_cells if math.isfinite(p_of(c))]
    return {"planned": n_planned, "tau_tests": sum(math.isfinite(p_of(c)) for c in tau_cells),
            "all_tests": len(finite), "endpoint": {n: len(c) for n, c in ends.items()}}


def survives(cell, family):
    """'survives' / 'does not survive' Holm in `family` (a cell with a p)."""
    return "survives" if cell["holm"][family]["significant"] else "does not survive"


def p_text(p):
    """A p-value with two significant digits, trailing zeros kept ('0.080', '1.0'); '—' without one."""
    return f"{p:#.2g}" if math.isfinite(p) else "—"


def family_text(cell, family, endpoint=False):
    """'0.080 over the 6 comparisons at this clock and threshold (…): does not survive' (`endpoint`: the cell is
    an endpoint comparison, whose narrow families are the comparisons at that endpoint)."""
    h = cell["holm"][family]
    words = WORDS[family].format(k=h["size"])
    if endpoint and family in ("readable", "planned"):
        words = f"the {h['size']} comparisons at this endpoint"
    return f"{p_text(h['p'])} over {words}: {survives(cell, family)}"
