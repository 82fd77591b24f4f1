"""analyses/features --smoke: the study's pipeline end to end on the shipped series at toy size (2 checkpoints,
one site, short SAEs): every row scored, the appearance step read, the last checkpoint's seeds, bootstrap and best
latents, the page written from the json; the last checkpoint's bootstrap on a planted parity."""
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
    last = report["last"]                              # the last checkpoint: 2 SAE seeds, a row bootstrap, best latents
    assert last["step"] == 36000 and last["seed0_equals_table"] is True
    rec = last["sites"]["blocks.3.hook_resid_post"]
    assert sorted(rec["seeds"]) == ["0", "1"] and (tmp_path / rec["png"]).stat().st_size > 0
    for r in rec["seeds"].values():
        assert 0 <= r["boot"]["coverage"]["lo"] <= r["boot"]["coverage"]["hi"] <= 18 and r["boot"]["mcc"]["n"] == 5
    assert len(rec["seeds"]["0"]["best_latents"]) == 2
    md = (tmp_path / "features_smoke.md").read_text()
    assert f"![blocks.3.hook_resid_post: top-activating inputs]({rec['png']})" in md
    run.main(["--smoke", "--out", str(tmp_path), "--from-results"])
    assert (tmp_path / "features_smoke.md").read_text() == md
    sweep = report["sweep"]                            # SAE settings x σ: its σ 0.7, (64, 4) cell is the table's
    assert sweep["equals_table"] is True and len(sweep["rows"]) == 2 * 2
    assert {r["sigma"] for r in sweep["rows"]} == {0.35, 0.7} and all(0 <= r["odd_share"] <= 1 for r in sweep["rows"])
    run.main(["--smoke", "--out", str(tmp_path), "--seeds", "checkpoints/parity-default"])
    seeds = json.loads((tmp_path / "features_smoke.json").read_text())["training_seeds"]
    assert seeds["checkpoints/parity-default"]["rows"] == report["rows"]   # the same series measured again: equal


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


def _last():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from analyses.features import last
    return last


def test_the_last_checkpoints_bootstrap_reproduces_the_point_readings_and_brackets_a_planted_parity():
    """On the planted parity activations of test_features (3 groups, each an orthonormal direction of norm 2 when
    odd), an SAE built by hand whose latent j reads group j's mean-difference direction (threshold 1; latent 3
    dead): the identity resample gives exactly sae_scores' best group F1, coverage and MCC; real resamples keep
    all 3 groups covered (lo of coverage 3, of best F1 >= 0.9): the interval that would show groups found."""
    import numpy as np
    import torch
    import scoreprobe as sp
    from scoreprobe.features.rows import site_rows
    from scoreprobe.features.sae import SAE
    from tests.test_features import _parity_acts
    L = _last()
    rule, bits, acts = _parity_acts(n=512)
    truth = sp.rule_features(rule, bits)
    odd = [f"group{j}=odd" for j in range(3)]
    X = site_rows(acts)
    dirs = sp.probe_directions(X, truth).mean_difference.sel(feature=odd)
    sae = SAE(12, 4, "standard")
    with torch.no_grad():
        sae.W_enc[:, :3] = torch.as_tensor(dirs.values.T, dtype=torch.float32)
        sae.W_dec[:3] = torch.as_tensor(dirs.values, dtype=torch.float32)
        sae.b_enc.copy_(torch.tensor([-1.0, -1.0, -1.0, -100.0]))
    s = sp.sae_scores(sae, acts, truth, dirs)
    g = truth.sel(feature=[f for f in truth.feature.values if f.startswith("group")])
    point = L._bootstrap(sae, X, g, [dirs.values], [np.arange(512)], 3)
    gb = L.group_best(s.best_f1, 3)
    assert point["best_f1"]["lo"] == point["best_f1"]["hi"] == np.nanmax(gb)
    assert point["coverage"]["lo"] == int(np.sum(gb >= 0.8)) == 3
    assert point["mcc"]["lo"] == float(s.mcc) > 0.99
    idx = L._resamples(512, dict(boot_seed=0, n_boot=20))
    boot = L._bootstrap(sae, X, g, [sp.probe_directions(X.isel(row=i), truth).mean_difference.sel(feature=odd).values
                                    for i in idx], idx, 3)
    assert boot["coverage"]["lo"] == 3 and boot["best_f1"]["lo"] >= 0.9 and boot["coverage"]["n"] == 20
    tops, best = L.best_latents(sae, acts, None, s, dict(n_best=2, k_top=4))
    f1 = s.f1.sel(feature=g.feature.values).values
    assert [b["latent"] for b in best] == np.argsort(-np.nanmax(f1, 1), kind="stable")[:2].tolist()
    assert best[0]["group_f1"] == np.nanmax(f1) and tops.row.shape == (2, 4)


def test_an_interval_counts_only_defined_replicates():
    import numpy as np
    L = _last()
    assert L._interval([1.0, np.nan, 3.0]) == dict(lo=1.05, hi=2.95, n=2)
    iv = L._interval([np.nan, np.nan])
    assert iv["n"] == 0 and np.isnan(iv["lo"]) and np.isnan(iv["hi"]) and L._iv(iv, 2) == "[undefined]"


def test_training_seeds_reuse_a_stored_run_only_when_run_and_settings_are_unchanged(tmp_path):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from analyses.features.seeds import _identity, seed_tables
    d = str(ROOT / "checkpoints" / "parity-default")
    calls = []

    def measure(run_dir):
        calls.append(run_dir)
        return dict(config={"k": 8}, tau_rule=1.0, tau_mem=2.0, rows=[], appear={}, seconds=0.0)
    report = {"config": {"k": 8}}
    report["training_seeds"] = seed_tables(report, [d], measure)
    assert calls == [d] and report["training_seeds"][d]["identity"] == _identity(d)
    seed_tables(report, [d], measure)                  # unchanged: kept
    assert calls == [d]
    seed_tables({**report, "config": {"k": 4}}, [d], measure)     # other study settings: measured again
    assert calls == [d, d]
    report["training_seeds"][d]["identity"]["checkpoints"] = []   # other checkpoint files: measured again
    seed_tables(report, [d], measure)
    assert calls == [d, d, d]


def test_features_cli_refuses_a_seed_run_without_clocks_before_any_work(tmp_path, capsys):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from analyses.features import run
    (tmp_path / "features_smoke.json").write_text("{}")
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "run.json").write_text("{}")
    with pytest.raises(SystemExit) as e:
        run.main(["--smoke", "--out", str(tmp_path), "--seeds", str(run_dir)])
    assert e.value.code == 2 and "has no clocks.json" in capsys.readouterr().err
    assert (tmp_path / "features_smoke.json").read_text() == "{}"
