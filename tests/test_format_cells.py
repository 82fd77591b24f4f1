"""The table cells of scoreprobe.studies.format: an undefined end of an interval stays undefined ('—', or 'no
interval' when both are), never the words of a bound ('not reached', 'unbounded'), which belong to infinite ends."""
import math

from scoreprobe.studies.format import ci_text, pooled_cell


def test_an_undefined_interval_is_not_worded_as_a_bound():
    assert ci_text([math.nan, math.nan]) == "(no interval)"
    assert ci_text([math.nan, math.nan], open_end="unbounded") == "(no interval)"
    assert ci_text([100.0, math.nan]) == "[100, —]"
    assert "not reached" not in ci_text([math.nan, 5.0])


def test_infinite_ends_keep_their_words():
    assert ci_text([100.0, math.inf]) == "[100, not reached]"
    assert ci_text([math.inf, math.inf]) == "[not reached]"
    assert ci_text([-math.inf, 2.0], 2, open_end="unbounded") == "[unbounded, 2.00]"
    assert ci_text([1.5, 2.5], 1) == "[1.5, 2.5]"


def test_one_seed_pools_to_a_value_without_an_interval():
    cell = pooled_cell({"per_seed": [8375.0], "pooled": 8375.0, "ci": [math.nan, math.nan], "lower_bound": False,
                        "n_seeds": 1})
    assert cell == "8375 (no interval) (8375)"
