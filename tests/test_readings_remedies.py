"""Issue 54, part B (remedies, G = 3): every Holm of remedies_g3.md is computed in a named family of stated
size, "survives Holm" is said only where the adjusted p is below 0.05 in that family, and a censored comparison's
bound is taken against the other arm's CI end. Planted p-values against Holm written out by hand; the shipped
json and md against an independent Holm."""
import importlib
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest


RESULTS = Path(__file__).resolve().parents[1] / "analyses" / "results"


def _holm(p):
    """Holm-Bonferroni step-down written out: adjusted p_(i) = max_{j <= i} min(1, (m − j + 1) p_(j))."""
    p = np.asarray(p, float)
    m, order = len(p), np.argsort(p, kind="stable")
    out, running = np.empty(m), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def test_holm_in_a_family_counts_members_without_a_p_as_one():
    H = importlib.import_module("analyses.remedies.holm_families")
    p = [0.01, math.nan, 0.04, 0.03]
    readable = H.holm_in_family(p)                                  # the 3 with a p
    assert readable[1] != readable[1]                                # NaN stays NaN
    assert readable[[0, 2, 3]] == pytest.approx([0.03, 0.06, 0.06])  # 3·0.01, max(2·0.03, ·), 1·0.04 → 0.06
    planned = H.holm_in_family(p, size=6)                            # + 3 members counted with p = 1
    assert planned[[0, 2, 3]] == pytest.approx([0.06, 0.16, 0.15])   # 6·0.01; 5·0.03; max(4·0.04, 0.15)
    with pytest.raises(ValueError, match="cannot hold"):
        H.holm_in_family(p, size=2)


def test_holm_in_a_family_matches_holm_written_out():
    H = importlib.import_module("analyses.remedies.holm_families")
    rng = np.random.default_rng(0)
    for _ in range(50):
        p = rng.uniform(0, 0.2, size=rng.integers(1, 8))
        size = len(p) + int(rng.integers(0, 4))
        assert H.holm_in_family(p, size) == pytest.approx(_holm(np.r_[p, np.ones(size - len(p))])[:len(p)])


def test_the_families_on_planted_cells():
    """Two clocks' thresholds and one endpoint: readable (per threshold), planned (fixed size), every τ test, all."""
    H = importlib.import_module("analyses.remedies.holm_families")
    cell = lambda p: {"p": p}                                        # noqa: E731
    fam = {"tau_rule": {("a", "b"): [cell(0.01), cell(0.2)], ("c", "b"): [cell(0.02), cell(math.nan)]},
           "tau_mem": {("a", "b"): [cell(0.004)], ("c", "b"): [cell(math.nan)]}}
    ends = {"final_mem": {("a", "b"): cell(0.03), ("c", "b"): cell(0.5)}}
    sizes = H.assign(fam, ends, n_planned=3)
    assert sizes == {"planned": 3, "tau_tests": 4, "all_tests": 6, "endpoint": {"final_mem": 2}}
    glu = fam["tau_mem"][("a", "b")][0]["holm"]
    assert (glu["readable"]["size"], glu["readable"]["p"]) == (1, pytest.approx(0.004))
    assert (glu["planned"]["size"], glu["planned"]["p"]) == (3, pytest.approx(0.012))
    taus = [0.01, 0.2, 0.02, 0.004]
    assert glu["tau_tests"]["p"] == pytest.approx(_holm(taus)[3])
    assert glu["all_tests"]["p"] == pytest.approx(_holm(taus + [0.03, 0.5])[3])
    assert "tau_tests" not in ends["final_mem"][("a", "b")]["holm"]    # an endpoint is not a τ test
    text = H.family_text(fam["tau_mem"][("a", "b")][0], "planned")
    assert text.startswith("0.012 over the 3 comparisons at this clock and threshold") and text.endswith(": survives")


def test_a_censored_bound_is_against_the_other_arms_ci_end():
    S = importlib.import_module("analyses.remedies.variant_ratios")
    import scipy.stats
    a, b = np.array([1000.0, 1300.0, 900.0]), np.array([2000.0, math.inf, 2500.0])
    out = S.censored_bound(a, b, np.full(3, 30000.0), np.full(3, 30000.0))
    la = np.log(a)
    upper_a = math.exp(la.mean() + scipy.stats.t.ppf(0.975, 2) * la.std(ddof=1) / math.sqrt(3))
    gm_b = math.exp(np.mean(np.log([2000.0, 30000.0, 2500.0])))
    assert out["kind"] == ">" and out["value"] == pytest.approx(gm_b / math.exp(la.mean()))
    assert out["value_ci_end"] == pytest.approx(gm_b / upper_a) and out["value_ci_end"] < out["value"]
    up = S.censored_bound(b, a, np.full(3, 30000.0), np.full(3, 30000.0))     # the reference censored: '<'
    assert up["kind"] == "<" and up["value_ci_end"] == pytest.approx(upper_a / gm_b)


def _shipped():
    rep = json.loads((RESULTS / "remedies_g3.json").read_text())
    return rep, (RESULTS / "remedies_g3.md").read_text()


def test_the_shipped_families_are_holm_over_the_stated_tests():
    rep, md = _shipped()
    sizes = rep["holm_families"]
    tau = [c for comps in rep["comparisons"].values() for rows in comps.values() for c in rows]
    ends = [c for comps in rep["endpoints"].values() for c in comps.values()]
    finite = lambda cs: [c for c in cs if c["p"] is not None]        # noqa: E731
    assert sizes["tau_tests"] == len(finite(tau)) and sizes["all_tests"] == len(finite(tau + ends))
    assert sizes["planned"] == len(rep["comparisons"]["tau_rule"])
    every = _holm([c["p"] for c in finite(tau)])
    assert [c["holm"]["tau_tests"]["p"] for c in finite(tau)] == pytest.approx(every.tolist())
    for comps in rep["comparisons"].values():                        # planned: per threshold, the missing as 1
        for j in range(len(next(iter(comps.values())))):
            ps = [rows[j]["p"] for rows in comps.values()]
            have = [p for p in ps if p is not None]
            want = _holm(have + [1.0] * (sizes["planned"] - len(have)))[:len(have)]
            got = [rows[j]["holm"]["planned"]["p"] for rows in comps.values() if rows[j]["p"] is not None]
            assert got == pytest.approx(want.tolist())
    assert f"the {sizes['tau_tests']} readable τ-ratio tests of this study" in md


def test_survives_holm_is_said_only_in_the_family_it_survives_in():
    """The GLU's copying effect (τ_mem at 0.01): each family's words in the md against the json's adjusted p."""
    rep, md = _shipped()
    glu = rep["comparisons"]["tau_mem"]["multiplicative/baseline"][0]
    line = next(t for t in md.splitlines() if t.startswith("- Copying, multiplicative (GLU) / baseline, τ_mem"))
    said = {int(m.group(2)): (float(m.group(1)), m.group(3)) for m in
            re.finditer(r"([\d.]+) over (?:the |all )(\d+) [^;]*?: (survives|does not survive)", line)}
    assert len(said) == len(glu["holm"]) == 4
    for h in glu["holm"].values():
        value, words = said[h["size"]]
        assert value == pytest.approx(h["p"], rel=0.01) and words == ("survives" if h["p"] < 0.05 else "does not survive")
    assert glu["holm"]["readable"]["size"] == 2 and glu["holm"]["planned"]["size"] == 6
    assert glu["holm"]["planned"]["p"] == pytest.approx(6 * glu["p"])     # the smallest of six: 6 p
    assert "p_H6 0.080" in md and "0.72 [0.60, 0.86] p_H6 0.080 *" not in md
