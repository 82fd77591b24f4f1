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


@pytest.mark.slow   # trains an SAE and samples 3 arms of 16 from the shipped checkpoint (~25 s)
def test_causal_smoke_pairs_the_arms_and_ranks_the_matched_set(tmp_path):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from analyses.features import run
    run.main(["--smoke", "--causal", "--out", str(tmp_path)])
    c = json.loads((tmp_path / "features_causal_smoke.json").read_text())
    matched, *randoms = c["arms"]
    assert matched["kind"] == "matched" and len(randoms) == 2
    assert all(len(r["latents"]) == len(matched["latents"]) and not set(r["latents"]) & set(matched["latents"])
               for r in randoms)
    for a in c["arms"]:
        assert a["d_rule_accuracy"] == pytest.approx(a["rule_accuracy"] - c["base"]["rule_accuracy"])
    bigger = sum(abs(r["d_rule_accuracy"]) >= abs(matched["d_rule_accuracy"]) for r in randoms)
    assert c["p_rank"] == pytest.approx((1 + bigger) / 3) and c["p_min"] == pytest.approx(1 / 3)
    md = (tmp_path / "features_causal_smoke.md").read_text()
    run.main(["--smoke", "--causal", "--out", str(tmp_path), "--from-results"])
    assert (tmp_path / "features_causal_smoke.md").read_text() == md


def test_the_matched_latents_are_each_groups_best_f1_latent_once():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import numpy as np
    import xarray as xr
    from analyses.features.causal import matched_latents
    feats = ["group0=odd", "group1=odd", "group2=odd", "group0=even"]
    s = xr.Dataset({"best_latent": ("feature", [5, 5, 2, 9]), "best_f1": ("feature", [0.3, 0.2, np.nan, 0.9])},
                   coords={"feature": feats})
    latents, f1 = matched_latents(s, 3)
    assert latents == [5] and f1[:2] == [0.3, 0.2] and np.isnan(f1[2])
