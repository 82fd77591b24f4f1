"""docs/findings.md and the README's summary table (issue 54 items 1 and 5): regenerated from the shipped results
byte for byte, their verdict words those of `scoreprobe.stats.verdict` on the numbers they print (the paper's
threshold first), planted readings give each word, and a missing study is said, not guessed."""
import math
from pathlib import Path

import pytest

from tests.test_analyses import _analysis

ROOT = Path(__file__).resolve().parents[1]


def test_the_page_and_the_readme_table_regenerate_from_the_shipped_results(monkeypatch):
    monkeypatch.chdir(ROOT)
    page = _analysis("findings.run")
    text, block = page.render(ROOT / "analyses/results")
    assert text == (ROOT / "docs/findings.md").read_text()
    assert block in (ROOT / "README.md").read_text()
    assert "docs/findings.md" in (ROOT / "README.md").read_text()


def _claim(read, region=(8.0, 12.5)):
    from analyses.findings.claims import Claim
    return Claim("x", "planted", "≈ 10×", region, "[8, 12.5]", "planted", "none", read)


def _reading(est, lo, hi, censored=None):
    from analyses.findings.readings import Reading
    t = [0.3, 0.5, 0.7, 0.9]
    return Reading(t, est, lo, hi, censored or [False] * 4, 0.9)


@pytest.mark.parametrize("est, lo, hi, censored, word", [
    ([9, 9, 9, 10], [8.5] * 4, [11] * 4, None, "supported"),
    ([5, 5, 5, 5], [4] * 4, [6] * 4, None, "contradicted"),
    ([9, 9, 9, 9], [6] * 4, [11] * 4, None, "undecided"),
    ([5, 5, 5, math.nan], [4, 4, 4, 8.04], [6, 6, 6, math.inf], [False] * 3 + [True], "budget-bound"),
    ([5, 5, 5, math.nan], [4, 4, 4, math.nan], [6, 6, 6, math.nan], [False] * 3 + [True], "undefined"),
    ([5, 5, 5, 10], [4, 4, 4, 9], [6, 6, 6, 11], None, "threshold-dependent"),
])
def test_planted_readings_give_each_word_read_at_the_paper_threshold_first(est, lo, hi, censored, word):
    page = _analysis("findings.run")
    r, v = page.judged(_claim(lambda results: _reading(est, lo, hi, censored)), None)
    assert v.word == word and v.paper.threshold == 0.9
    lines = page.table([(_claim(None), r, v)])
    assert f"**{word}**" in lines[-1]


def test_a_study_not_shipped_is_said(tmp_path):
    page = _analysis("findings.run")
    text, block = page.render(tmp_path)          # an empty results folder
    assert text.count("not shipped") >= 11 and "**" not in block.split("\n", 3)[3]
    assert "Not shipped: analyses/capacity_exponent has no results here." in text
