"""The remedies where the baseline learns (analyses/remedies --preset g3, issue 36 item 6): the baseline is the
scaling run itself (its shipped exports load), each variant differs from it in its one switch, the curriculum's
control draws the curriculum's images in the curriculum's proportion with no order, the ratios over thresholds
and their Holm adjustment are checked on planted values, and the smoke preset regenerates from its exports."""
import importlib
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from scoreprobe.errors import ConfigError
from scoreprobe.stats.pvalues import adjust_pvalues
from scoreprobe.training.config import TrainConfig
from tests.test_analyses import _analysis

RESULTS = Path(__file__).resolve().parents[1] / "analyses" / "results"
G3 = {"name": "parity", "G": 3, "shape": [6, 6], "layout": "offset", "seed": 0}


def test_the_baseline_is_the_shipped_scaling_run_and_each_variant_one_switch():
    grid = _analysis("remedies.g3_grid")
    plan = grid.plan("g3")
    scaling = {r.name: r for r in _analysis("scaling.grid").plan("cpu", ("G",))}
    base = {r.seed: r for r in plan if r.meta["variant"] == "baseline"}
    assert sorted(base) == [0, 1, 2] and all(r.cfg == scaling[r.name].cfg for r in base.values())
    done, _ = importlib.import_module("scoreprobe.studies.export").load_exports(list(base.values()), RESULTS / "scaling_cpu")
    assert sorted(done) == ["g3-n240", "g3-n240-s1", "g3-n240-s2"]        # reused, never trained again
    expected = {"global_token": {"global_token": True}, "multiplicative": {"multiplicative": True},
                "curriculum": {"curriculum": "2:3:7500"}, "curriculum_mixed": {"curriculum": "2:3:7500:mixed"}}
    for r in plan:
        if r.meta["variant"] != "baseline":
            b = base[r.seed].cfg
            diff = {f.name: getattr(r.cfg, f.name) for f in dataclasses.fields(b) if getattr(r.cfg, f.name) != getattr(b, f.name)}
            assert diff == expected[r.meta["variant"]] and r.steps == 30000
    assert len(plan) == 15 and len({r.name for r in plan}) == 15


@pytest.mark.parametrize("spec, ok", [("2:3:5:mixed", True), ("2:3:5", True), ("2:3:5:ordered", False), ("2:3:5:mixed:x", False)])
def test_the_mixed_curriculum_spelling(spec, ok):
    cfg = TrainConfig(rule=G3, n_train=8, n_heldout=16, total_steps=20, curriculum=spec)
    if not ok:
        with pytest.raises(ConfigError, match="G_START:G_END:STEPS"):
            cfg.validate()
        return
    cfg.validate()
    assert cfg.curriculum_plan() == (2, 5) and cfg.curriculum_mix() == (0.25 if spec.endswith("mixed") else 0.0)


def test_the_control_draws_the_curriculum_images_in_its_proportion_without_order(tmp_path):
    from scoreprobe.training.train import draw_bits, open_run
    kw = dict(rule=G3, n_train=16, n_heldout=32, total_steps=40, batch_size=64, hidden_size=16, depth=1, num_heads=4)
    ordered = open_run(TrainConfig(curriculum="2:3:10", **kw), tmp_path / "ordered", "cpu")
    mixed = open_run(TrainConfig(curriculum="2:3:10:mixed", **kw), tmp_path / "mixed", "cpu")
    try:
        assert np.array_equal(ordered.first_bits, mixed.first_bits)        # the same extra images
        extra, own = ({r.tobytes() for r in b} for b in (mixed.first_bits, mixed.train_bits))
        assert not extra & own
        shares = []
        for step in (0, 5, 20, 39):                                         # no phase: the same mixture early and late
            mixed.st.step = step
            rows = np.concatenate([mixed.draw_batch() for _ in range(40)])
            kinds = np.array([r.tobytes() in extra for r in rows])
            assert all(r.tobytes() in extra | own for r in rows)
            shares.append(kinds.mean())
        assert all(abs(s - 0.25) < 0.05 for s in shares)                   # 2560 items each: sd 0.009
        ordered.st.step = 0
        gen_state = ordered.st.gen.get_state()
        batch = ordered.draw_batch()                                        # an ordered run draws as before
        ordered.st.gen.set_state(gen_state)
        assert np.array_equal(batch, draw_bits(ordered.cfg, ordered.first_bits, ordered.st.gen))
    finally:
        ordered.close()
        mixed.close()


def _rows(values, steps=30000):
    """Rows and curves of planted τ: {variant: [τ per seed]} (the same τ at every threshold; inf: not reached)."""
    rows_by, curves = {}, {}
    for v, taus in values.items():
        for s, t in enumerate(taus):
            name = f"{v}-s{s}"
            rows_by.setdefault(v, []).append({"run": name, "seed": s, "steps": steps, "meta": {"variant": v}})
            curves[name] = {"tau_rule": np.full(10, float(t)), "tau_mem": np.full(6, float(t) * 3)}
    return rows_by, curves


def _stats():
    """The remedies' statistics (analyses.remedies.variant_ratios, piece_clocks, studies.curriculum_rows) with the
    study's COMPARISONS (g3_grid) bound, as one namespace."""
    import types
    from functools import partial
    from scoreprobe.data.curriculum import beyond_state
    from analyses.remedies import piece_clocks, variant_ratios
    from analyses.remedies import curriculum_rows
    comparisons = _analysis("remedies.g3_grid").COMPARISONS
    return types.SimpleNamespace(family=partial(variant_ratios.family, comparisons=comparisons),
                                 endpoint_family=partial(variant_ratios.endpoint_family, comparisons=comparisons),
                                 verdict=variant_ratios.verdict, since_switch=variant_ratios.since_switch,
                                 beyond_info=curriculum_rows.beyond_info, among_breaking=piece_clocks.among_breaking,
                                 breaking_taus=piece_clocks.breaking_taus, beyond_state=beyond_state)


def test_ratios_welch_p_and_holm_on_planted_values():
    S = _stats()
    base = [1000.0, 1300.0, 900.0]
    planted = {"baseline": base, "global_token": [b * 0.5 * f for b, f in zip(base, (1.1, 0.9, 1.0))],
               "multiplicative": [1100.0, 1000.0, 1200.0], "curriculum": [400.0, 500.0, 450.0],
               "curriculum_mixed": [800.0, 1000.0, 900.0]}
    rows_by, curves = _rows(planted)
    fam = S.family(rows_by, curves)
    gt = fam["tau_rule"][("global_token", "baseline")][0]
    truth = math.exp(np.mean(np.log(planted["global_token"])) - np.mean(np.log(base)))
    assert math.isclose(gt["value"], truth, rel_tol=1e-12)
    assert math.isclose(gt["p"], scipy.stats.ttest_ind(np.log(planted["global_token"]), np.log(base), equal_var=False).pvalue)
    ps = np.array([c[3]["p"] for c in fam["tau_rule"].values()])
    holm = adjust_pvalues(ps[None], "holm")[0]
    assert [c[3]["p_holm"] for c in fam["tau_rule"].values()] == pytest.approx(holm.tolist())
    assert len(fam["tau_rule"]) == 5 and all(c[0]["ci"][0] < c[0]["value"] < c[0]["ci"][1] for c in fam["tau_rule"].values())
    cc = fam["tau_rule"][("curriculum", "curriculum_mixed")][0]
    assert cc["value"] < 1 and cc["ci"][1] < 1                               # the order helps, planted
    assert "earlier than the reference" in S.verdict(fam["tau_rule"][("curriculum", "curriculum_mixed")])


def test_a_censored_side_gives_a_bound_with_its_budget_not_a_ratio():
    S = _stats()
    rows_by, curves = _rows({"baseline": [1000.0, 1200.0, 1100.0], "global_token": [math.inf, 20000.0, 25000.0],
                             "curriculum": [500.0, 600.0, 550.0], "curriculum_mixed": [math.inf, math.inf, 900.0]})
    fam = S.family(rows_by, curves)
    row = fam["tau_rule"][("global_token", "baseline")][0]
    assert row["censored"] and math.isnan(row["value"]) and math.isnan(row["p"])
    b = row["bound"]
    assert b["kind"] == ">" and b["budget"] == 30000 and b["n_censored"] == 1
    assert math.isclose(b["value"], math.exp(np.mean(np.log([30000, 20000, 25000])) - np.mean(np.log([1000, 1200, 1100]))))
    up = fam["tau_rule"][("curriculum", "curriculum_mixed")][0]["bound"]    # the reference censored: an upper bound
    assert up["kind"] == "<" and up["n_censored"] == 2
    assert math.isfinite(fam["tau_rule"][("curriculum", "baseline")][0]["p_holm"])


def test_the_curriculum_from_its_switch_is_its_tau_less_the_first_phase():
    """Planted: the curriculum's rule comes exactly as long after its switch as the baseline's after step 0 (ratio
    1, CI around it, in the Holm family of six); a crossing before its first checkpoint after the switch is
    unreadable, not a ratio; a seed that never gets there is a bound at the budget after the switch."""
    S = _stats()
    base, switch = [1500.0, 2500.0, 2000.0], 7500
    rows_by, curves = _rows({"baseline": base, "curriculum": [t + switch for t in base]})
    for r in rows_by["curriculum"]:
        r["curve"] = {"step": [0, 1000, 7000, 8000, 12000, 30000]}
    rows_by["curriculum_since_switch"], shifted = S.since_switch(rows_by["curriculum"], curves, switch)
    assert set(curves) < set(shifted) and curves["curriculum-s0"]["tau_rule"][0] == 9000    # the input is kept
    assert [r["steps"] for r in rows_by["curriculum_since_switch"]] == [22500] * 3
    assert shifted["curriculum-s1@switch"]["resolved_from"] == [500.0]
    row = S.family(rows_by, shifted)["tau_rule"][("curriculum_since_switch", "baseline")][0]
    assert math.isclose(row["value"], 1.0, rel_tol=1e-12) and row["ci"][0] < 1 < row["ci"][1]
    assert math.isfinite(row["p_holm"]) and not row["significant"]

    early = {**curves, "curriculum-s1": {**curves["curriculum-s1"], "tau_rule": np.full(10, 7800.0)}}
    _, sh = S.since_switch(rows_by["curriculum"], early, switch)     # 300 steps after it, before the 8000 checkpoint
    row = S.family(rows_by, sh)["tau_rule"][("curriculum_since_switch", "baseline")][0]
    assert math.isnan(row["value"]) and row["under_resolved"] == 500.0 and row["bound"] is None

    never = {**curves, "curriculum-s2": {**curves["curriculum-s2"], "tau_rule": np.full(10, math.inf)}}
    _, sh = S.since_switch(rows_by["curriculum"], never, switch)
    b = S.family(rows_by, sh)["tau_rule"][("curriculum_since_switch", "baseline")][0]["bound"]
    assert b["kind"] == ">" and math.isclose(b["value"], math.exp(np.mean(np.log([1500, 2500, 22500])) - np.mean(np.log(base))))


def test_endpoints_differences_of_seed_means_holm_over_the_comparisons():
    """Peak rule accuracy (among the piece-breaking samples where a run has them) and the last memorized share:
    b − a of seed means, Welch p, Holm over the comparisons of each endpoint; the since-switch rows left out."""
    S = _stats()
    final = {"baseline": [0.03, 0.04, 0.02], "multiplicative": [0.09, 0.11, 0.10], "curriculum": [0.02, 0.01, 0.02]}
    rows_by = {v: [{"run": f"{v}-s{i}", "final_mem_ratio": m, "curve": {"rule_acc": [0.1, 0.8 + m, 0.5]}}
                   for i, m in enumerate(ms)] for v, ms in final.items()}
    for i, r in enumerate(rows_by["curriculum"]):
        r["curve"]["rule_acc_breaking"] = [0.0, 0.2, 0.95 - i / 100]         # beats the plain reading's ≤ 0.82
    rows_by["curriculum_since_switch"] = rows_by["curriculum"]
    fam = S.endpoint_family(rows_by)
    assert list(fam["final_mem"]) == [("multiplicative", "baseline"), ("curriculum", "baseline")]
    m = fam["final_mem"][("multiplicative", "baseline")]
    assert math.isclose(m["value"], 0.07, rel_tol=1e-9) and m["ci"][0] > 0
    p = [scipy.stats.ttest_ind(final[v], final["baseline"], equal_var=False).pvalue for v in ("multiplicative", "curriculum")]
    assert m["p"] == pytest.approx(p[0]) and [c["p_holm"] for c in fam["final_mem"].values()] == pytest.approx(
        adjust_pvalues(np.array([p]), "holm")[0].tolist())
    peak = fam["peak_rule"][("curriculum", "baseline")]
    assert math.isclose(peak["value"], 0.94 - np.mean([0.83, 0.84, 0.82]), rel_tol=1e-9)


def test_beyond_the_pieces_recodes_valid_samples_on_the_pieces():
    S = _stats()
    export = importlib.import_module("scoreprobe.studies.export")
    from scoreprobe.data.datasets import STATE_CODES
    c = STATE_CODES
    state = np.array([[c["valid_novel"], c["valid_memorized"], c["valid_heldout"], c["rule_violating"]]] * 2, np.int8)
    piece = np.array([[True, True, False, False], [False, False, False, True]])
    info = {"ds": export.clocks_dataset([0, 10], state, 0.5), "piece_valid": piece}
    out = S.beyond_info(info)
    assert out["ds"].rule_acc.values.tolist() == [0.5, 0.75] and out["piece_share"] == [0.5, 0.25]
    assert S.beyond_info({**info, "piece_valid": None})["ds"] is info["ds"]


def test_the_rule_clock_among_piece_breaking_samples():
    """At a constant count it is the standard τ (the shipped baseline run, every threshold); a control that
    keeps drawing pieces (a quarter of its samples) and gets every other sample right reads 1.0 among the
    piece-breaking samples and reaches 0.9, where counting its pieces as failures caps it at 0.75."""
    S, C, export = _stats(), importlib.import_module("scoreprobe.stats.curves"), importlib.import_module("scoreprobe.studies.export")
    from scoreprobe.data.datasets import STATE_CODES
    info = export.read_export(RESULTS / "scaling_cpu" / "g3-n240.npz")
    ds = info["ds"]
    acc, count = S.among_breaking(ds["state"].values, np.zeros(ds["state"].shape, bool))
    assert np.array_equal(acc, ds.rule_acc.values) and set(count) == {ds["state"].shape[1]}
    taus = S.breaking_taus(ds.step.values, acc, count, C.thresholds_of("tau_rule"))
    assert np.allclose(taus, C.run_curves(ds)["tau_rule"]) and np.isfinite(taus[:4]).all()

    steps, n = np.array([0, 100, 200, 400, 800, 1600]), 400
    state = np.full((len(steps), n), STATE_CODES["valid_novel"], np.int8)
    state[:2] = STATE_CODES["rule_violating"]                       # learned between steps 100 and 200
    piece = np.zeros(state.shape, bool)
    piece[:, : n // 4] = True                                        # a quarter of every checkpoint's samples
    acc, count = S.among_breaking(state, piece)
    assert acc.tolist() == [0, 0, 1, 1, 1, 1] and set(count) == {300}
    tau = S.breaking_taus(steps, acc, count, [0.9])[0]
    assert 100 < tau < 200
    beyond = export.clocks_dataset(steps, S.beyond_state(state, piece)[0], 0.5)
    assert np.allclose(beyond.rule_acc.values[2:], 0.75) and np.isinf(C.run_curves(beyond)["tau_rule"][-2])
    few = np.ones(state.shape, bool)
    few[:, :2] = False                                               # 2 breaking samples, both valid: not confident
    assert np.isinf(S.breaking_taus(steps, *S.among_breaking(state, few), [0.5])[0])


@pytest.mark.slow   # trains the study's smoke variants end to end: the study's own unit tests stay in the default suite
def test_smoke_then_from_results(tmp_path):
    run = _analysis("remedies")
    run.main(["--preset", "g3-smoke", "--out", str(tmp_path)])
    md, js = (tmp_path / "remedies_g3-smoke.md").read_text(), (tmp_path / "remedies_g3-smoke.json").read_text()
    plan = _analysis("remedies.g3_grid").plan("g3-smoke")
    ours = sorted(p.stem for p in (tmp_path / "remedies_g3-smoke").glob("*.npz"))
    assert ours == sorted(r.name for r in plan if r.meta["variant"] != "baseline")
    assert sorted(p.stem for p in (tmp_path / "scaling_smoke").glob("*.npz")) == ["g3-n8", "g3-n8-s1"]
    with np.load(tmp_path / "remedies_g3-smoke" / "g3-n8-curriculum-mixed-s0.npz") as z:
        assert z["piece_valid"].shape[0] == z["state"].shape[0]              # the control keeps its piece mask
    with np.load(tmp_path / "remedies_g3-smoke" / "g3-n8-global-token-s0.npz") as z:
        assert "piece_valid" not in z
    rep = json.loads(js)
    assert f"{len(plan)} of {len(plan)} planned runs done" in md and set(rep["comparisons"]["tau_rule"]) == {
        "global_token/baseline", "multiplicative/baseline", "curriculum/baseline", "curriculum_mixed/baseline",
        "curriculum/curriculum_mixed", "curriculum_since_switch/baseline"}
    assert set(rep["endpoints"]["final_mem"]) == set(rep["comparisons"]["tau_rule"]) - {"curriculum_since_switch/baseline"}
    run.main(["--preset", "g3", "--smoke", "--out", str(tmp_path), "--from-results"])
    assert (tmp_path / "remedies_g3-smoke.md").read_text() == md and (tmp_path / "remedies_g3-smoke.json").read_text() == js
