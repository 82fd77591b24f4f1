"""analyses/atp_agreement: the .md is regenerated from the .json byte for byte; its Spearman summary is that of
the stored per-site numerators (recomputed here by hand for one cell), and an unrankable side stays undefined."""
import json
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from analyses.atp_agreement.run import _fmt, markdown
from analyses.atp_agreement.attribution_agreement import agreement, attribution_sums, spearman

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "analyses" / "results"


def test_from_results_is_byte_identical():
    doc = json.loads((RESULTS / "atp_agreement.json").read_text())
    assert markdown(doc) == (RESULTS / "atp_agreement.md").read_text()
    assert len(doc["rows"]) == len(doc["steps"]) * 2 * len(doc["sigmas"]) * doc["draws"] and doc["draws"] >= 5


def test_one_cell_by_hand():
    doc = json.loads((RESULTS / "atp_agreement.json").read_text())
    n = len(doc["grid"])
    rows = [r for r in doc["rows"] if (r["step"], r["kind"], r["sigma"]) == (doc["steps"][-1], "copy", 0.3)]
    by_hand = [spearmanr(r["atp_star"][n:], r["exact"][n:]).statistic for r in rows]
    got = agreement(doc)[(doc["steps"][-1], "copy", 0.3, "q/k")]["AtP*"]
    np.testing.assert_allclose(got, by_hand, rtol=1e-12)
    assert _fmt(got) == f"{min(by_hand):.2f} / {np.median(by_hand):.2f} / {max(by_hand):.2f}"


def test_a_constant_side_has_no_ranking():
    assert np.isnan(spearman([0.0, 0.0, 0.0], [1.0, 2.0, 3.0]))
    assert _fmt([0.5, float("nan")]) == "undefined in 1 of 2"


def test_attribution_sums_are_the_patching_numerators():
    import scoreprobe as sp
    from scoreprobe.probes.circuits import copy_pairs
    series = sp.load_series()
    D = series.denoiser(series.steps[-1])
    clean, corrupt = copy_pairs(series.dataset, 3)
    sites = ["blocks.0", "blocks.1.attn.hook_z[head=0]"]
    row = attribution_sums(D, clean, corrupt, 0.7, sites, seed=1)
    ds = sp.patch(D, clean, corrupt, 0.7, sites=sites, seed=1)
    np.testing.assert_allclose(row["exact"], ds.effect_numerator.sum("sample").values, atol=1e-6)
    assert len(row["atp"]) == len(row["atp_star"]) == len(row["graddrop"]) == 2 and len(row["contrast"]) == 3
