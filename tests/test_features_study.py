"""analyses/features --smoke: the study's pipeline end to end on the shipped series at toy size (2 checkpoints,
one site, short SAEs): every row scored, the appearance step read, the page written from the json."""
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_features_smoke(tmp_path):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from analyses.features import run
    run.main(["--smoke", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "features_smoke.json").read_text())
    assert [(r["step"], r["site"]) for r in report["rows"]] == [(500, "blocks.3.hook_resid_post"),
                                                                (36000, "blocks.3.hook_resid_post")]
    for r in report["rows"]:
        assert 0 <= r["group_coverage"] <= r["n_groups"] == 18 and r["n_pixels"] == 36
        assert 0 <= r["mcc"] <= 1 and len(r["group_best_f1"]) == 18
    assert report["tau_rule"] == pytest.approx(1977.2, abs=0.1)
    md = (tmp_path / "features_smoke.md").read_text()
    run.main(["--smoke", "--out", str(tmp_path), "--from-results"])
    assert (tmp_path / "features_smoke.md").read_text() == md


def test_appearance_is_the_first_step_from_which_coverage_stays_above_half():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from analyses.features.run import appearance
    rows = [dict(step=s, site="a", group_coverage=c) for s, c in ((1, 2), (2, 10), (3, 4), (4, 9), (5, 18))]
    assert appearance(rows, "a", 18) == 4
    assert appearance([dict(step=1, site="a", group_coverage=3)], "a", 18) is None
