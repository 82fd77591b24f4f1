"""Issue 54, part B (Sudoku rows vs columns): the verdict words of sudoku_transpose_cpu.md are
`scoreprobe.stats.verdict`'s on the json's numbers (the paper's 0.9 first), the data part is read by draw and by
the draw-level test, not by its pooled CI, and the variance-component Holm is computed in its stated families."""
import importlib
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from scoreprobe.stats.verdict import verdict
from tests.test_analyses import _analysis
from tests.test_readings_remedies import _holm

RESULTS = Path(__file__).resolve().parents[1] / "analyses" / "results"
T = [0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]


def _curve(values, lo, hi, censored=()):
    return [{"threshold": t, "value": math.nan if t in censored else v, "censored": t in censored,
             "ci": [math.nan, math.nan] if t in censored else [v * lo, v * hi]} for t, v in zip(T, values)]


@pytest.mark.parametrize("values, lo, hi, censored, word", [
    ([0.5] * 10, 0.8, 1.2, (), "supported"),                     # below 1 everywhere, 0.9 read
    ([0.5] * 10, 0.8, 1.2, (0.9, 0.95), "undefined"),            # below 1 elsewhere, but 0.9 not reached
    ([1.0] * 10, 0.8, 1.2, (), "undecided"),
    ([0.5] * 8 + [1.5, 1.5], 0.9, 1.1, (), "threshold-dependent"),   # contradicted at 0.9, supported below
])
def test_the_verdict_word_reads_the_papers_threshold_first(values, lo, hi, censored, word):
    R = importlib.import_module("analyses.sudoku_transpose.transpose_split_md")
    assert R.curve_verdict(_curve(values, lo, hi, censored)).word == word


def _shipped():
    return json.loads((RESULTS / "sudoku_transpose_cpu.json").read_text()), \
        (RESULTS / "sudoku_transpose_cpu.md").read_text()


def _word(curve):
    """verdict of "the ratio lies below 1" straight from the json's numbers, not through the study's code."""
    v = [(math.nan, math.nan, math.nan) if r["value"] is None or r.get("censored") or r.get("under_resolved")
         else (r["value"], r["ci"][0], r["ci"][1]) for r in curve]
    return verdict([r["threshold"] for r in curve], *zip(*v), region=(0.0, 1.0), paper_threshold=0.9).word


def test_the_decision_tables_words_are_verdicts_on_the_json():
    rep, md = _shipped()
    labels = _analysis("sudoku_transpose.grid").ARCH_LABELS
    for arch, a in rep["archs"].items():
        words = [_word(a[k]) for k in ("ratio_original", "architecture_part", "data_part")]
        row = next(line for line in md.splitlines() if line.startswith(f"| {labels[arch]} |"))
        assert row.rstrip(" |").endswith(" / ".join(f"**{w}**" for w in words)), (arch, row)
    assert [_word(rep["archs"][a]["ratio_original"]) for a in ("dit", "dit-rows")] == ["undefined"] * 2


def test_the_data_part_is_read_by_draw_and_by_its_draw_level_test():
    rep, md = _shipped()
    dit = rep["archs"]["dit"]
    section = md.split("## DiT 2×2 patches")[1].split("## DiT 1×4")[0]
    assert "1 by symmetry" in section
    p = [r["p_data"] for r in dit["data_part"] if r.get("p_data") is not None]
    i = int(np.argmin(p))
    assert f"smallest p {p[i]:.2g}" in section and f"Holm {_holm(p)[i]:.2g} over its {len(p)} readable" in section
    below = [r["threshold"] for r in dit["data_part_by_seed"]["0"]
             if r["value"] is not None and r["ci"][1] is not None and r["ci"][1] < 1]
    assert below and re.search(r"data seed 0: its grids' rows first at 0\.3–0\.5, 0\.8", section)


def test_the_training_seed_component_is_holm_adjusted_in_named_families():
    rep, md = _shipped()
    tests = [(a, part, comp, r[comp]) for a, x in rep["archs"].items() for part in ("architecture_part", "data_part")
             for r in x[part] for comp in ("p_init", "p_data") if r.get(comp) is not None]
    assert f"all {len(tests)} component tests of this study" in md
    p = [t[3] for t in tests if t[:3] == ("dit", "architecture_part", "p_init")]
    own = _holm(p)[int(np.argmin(p))]
    study = _holm([t[3] for t in tests])[[t[3] for t in tests].index(min(p))]
    assert own < 0.05 <= study
    line = next(l for l in md.splitlines() if l.startswith("- The training seed sets the order in the kept"))
    assert f"Holm {own:.2g} over its {len(p)} readable thresholds" in line and f"study {study:.2g}" in line
