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
    from analyses.findings.verdict_table import Claim
    return Claim("x", "planted", "≈ 10×", region, "[8, 12.5]", "planted", "none", read)


def _reading(est, lo, hi, censored=None):
    from scoreprobe.stats.claim_readings import CurveReading
    t = [0.3, 0.5, 0.7, 0.9]
    return CurveReading(t, est, lo, hi, censored or [False] * 4, 0.9)


@pytest.mark.parametrize("est, lo, hi, censored, word", [
    ([9, 9, 9, 10], [8.5] * 4, [11] * 4, None, "supported"),
    ([5, 5, 5, 5], [4] * 4, [6] * 4, None, "contradicted"),
    ([9, 9, 9, 9], [6] * 4, [11] * 4, None, "undecided"),
    ([5, 5, 5, math.nan], [4, 4, 4, 8.04], [6, 6, 6, math.inf], [False] * 3 + [True], "budget-bound"),
    ([5, 5, 5, math.nan], [4, 4, 4, math.nan], [6, 6, 6, math.nan], [False] * 3 + [True], "undefined"),
    ([5, 5, 5, 10], [4, 4, 4, 9], [6, 6, 6, 11], None, "threshold-dependent"),
])
def test_planted_readings_give_each_word_read_at_the_paper_threshold_first(est, lo, hi, censored, word):
    from analyses.findings.verdict_table import judged, table
    r, v = judged(_claim(lambda results: _reading(est, lo, hi, censored)), None)
    assert v.word == word and v.paper.threshold == 0.9
    lines = table([(_claim(None), r, v)])
    assert f"**{word}**" in lines[-1]


def test_a_study_not_shipped_is_said(tmp_path):
    page = _analysis("findings.run")
    text, block = page.render(tmp_path)          # an empty results folder
    assert text.count("not shipped") >= 11 and "**" not in block.split("\n", 3)[3]
    assert "Not shipped: analyses/capacity_exponent has no results here." in text


def test_a_curve_reading_from_json_rows_with_a_bound_and_the_readme_block():
    """claim_readings: JSON nulls read back as NaN, a censored bound replaces the paper's threshold, one number is
    a one-threshold reading; verdict_table.with_summary replaces only what lies between its markers."""
    from analyses.findings.verdict_table import README_END, README_START, with_summary
    from scoreprobe.stats.claim_readings import from_curve, once, readable_range, with_bound
    rows = [{"threshold": 0.5, "value": 2.0, "ci": [1.5, 2.5]},
            {"threshold": 0.9, "value": None, "ci": [None, None], "censored": True}]
    r = from_curve(rows, paper_threshold=0.9)
    assert r.censored == [False, True] and math.isnan(r.estimate[1]) and math.isnan(r.lower[1])
    assert readable_range(r) == "2.00–2.00 (95% CI ends 1.50 to 2.50) at 1 of 2 thresholds"
    with_bound(r, lower=3.0)
    assert r.at_paper()[1:] == (3.0, math.inf, True)
    assert once(1.0, 0.5, 1.5).thresholds == [0.1]
    text = f"a {README_START} old {README_END} b"
    assert with_summary(text, "new") == "a new b" and with_summary("no markers", "new") == "no markers"


def test_the_training_start_line_says_what_the_numbers_say():
    L = _analysis("findings.literature")
    row = lambda b: {"b": b, "b_ci": [b - 0.1, b + 0.1], "n": 8, "n_censored": 0}   # noqa: E731
    up = {"training_start": {"192x4": {"min": 200, "max": 1300, "b": row(1.44), "b_from_start": row(1.54)},
                             "80x4": {"min": 200, "max": 200}}}
    (line,) = L._start_lines(up)
    assert "192x4 at steps 200–1300" in line and "80x4" not in line and "Late starts lower b" in line
    up["training_start"]["192x4"]["b_from_start"] = row(1.40)
    assert "not higher for every size" in L._start_lines(up)[0] and L._start_lines({}) == []


def test_the_larger_n_line_counts_seeds_and_states_the_holm_family_and_the_confound():
    """A planted large_N block: N = 240 none reached, N = 480 two of three reached and one still ≥ 0.9 at the end."""
    from analyses.findings.claims import larger_n_note

    def tau(n_reached, n, ci=None):
        return {"n_reached": n_reached, "n_seeds": n, "lower_bound": ci is None, "pooled": 1234.0 if ci else 30000.0,
                "ci": list(ci) if ci else [None, None]}
    late = lambda lasts, step, mem: [{"last": v, "last_step": step, "final_mem": m} for v, m in zip(lasts, mem)]  # noqa: E731
    large = {"240": {"tau_rule": tau(0, 3), "late": late([0.60, 0.70, 0.65], 30000, [0.01, 0.045, 0.02])},
             "480": {"tau_rule": tau(2, 3, (1000.0, 1500.5)), "late": late([0.95, 0.80, 0.85], 60000, [0.0, 0.007, 0.0])},
             "count_test": {"family": 1, "tests": [{"N": [240, 480], "reached": [0, 2], "n": [3, 3],
                                                    "p_same_data_seed": 0.2, "p_holm": 0.2}]}}
    text = larger_n_note(large)
    assert "N = 240: 0 of 3 seeds reliably exceed 0.9, last rule accuracy 0.600–0.700 at step 30,000 (0 of 3 still " \
           "≥ 0.9), at most 4.5% copies" in text
    assert "N = 480: 2 of 3 seeds reliably exceed 0.9 (τ_rule 1,234 [1,000, 1,500])" in text
    assert "(1 of 3 still ≥ 0.9), at most 0.7% copies" in text
    assert "one Holm family of 1): N = 480 2 of 3 vs 0 of 3: one-sided Fisher p 0.200, Holm 0.200" in text
    assert "N and training length are not separated" in text


def test_the_capacity_section_names_the_runs_left_out_of_every_fit():
    from analyses.findings.literature import _excluded_lines
    c = {"diverged": {"w192-n120-s2": "why"}, "runs": [{"run": "a", "train_start": 200}, {"run": "b", "train_start": None},
                                                       {"run": "c"}]}
    line = _excluded_lines(c)[0]
    assert "diverged: w192-n120-s2; training never started (no logged loss below 0.5): b." in line
    assert _excluded_lines({"diverged": {}, "runs": [{"run": "c"}]}) == []
