"""analyses/gpt_dit_match (issue 36 item 7): the sweep runs on the tuning split and the seeds on the evaluation
split, reusing the scaling and data_draws runs whose TrainConfig they equal; the rate is chosen from the tuning
split alone (the evaluation exports are never read, and a planted tuning export moves the choice); the per-FLOP
ratios are the per-step ones times the models' FLOPs per step; the smoke preset regenerates from its exports."""
import importlib
import dataclasses
import json
import math

import numpy as np
import pytest

from tests.test_analyses import _analysis


def test_the_sweep_and_the_seeds_use_their_own_splits_and_reuse_equal_runs():
    grid = _analysis("gpt_dit_match.grid")
    tuning, evals = grid.tuning_runs("cpu"), grid.eval_runs("cpu", {})
    assert {(r.cfg.data_seed, r.seed) for r in tuning} == {(1, 0)} and {r.cfg.data_seed for r in evals} == {0}
    assert len(tuning) == 12 and len(evals) == 12 and len({r.name for r in tuning + evals}) == 24
    assert sorted({r.cfg.lr for r in tuning if r.cfg.model == "dit"}) == [1e-3, 2e-3, 4e-3]
    assert sorted({r.cfg.lr for r in tuning if r.meta["match_model"] == "gpt-random"}) == [5e-4, 1e-3, 2e-3]
    scaling = {r.name: r for r in _analysis("scaling.grid").plan("cpu", ("gpt", "N"))}
    reused = {r.name: r for r in evals if r.folder in ("two_clocks", "scaling")}
    assert sorted(reused) == sorted(["g2-n120", "g2-n120-s1", "g2-n120-s2"] + [f"gpt-{o}-g2-n120" + f"-s{s}" for o in
                                                                               ("patch", "raster") for s in range(3)])
    assert all(r.cfg == scaling[n].cfg for n, r in reused.items())
    draws = {r.name: r for r in _analysis("data_draws.grid").plan("cpu")}
    dit_tune = [r for r in tuning if r.folder == "data_draws"]
    assert [r.name for r in dit_tune] == ["g2-n120-d1-s0"] and dit_tune[0].cfg == draws["g2-n120-d1-s0"].cfg
    chosen = {m: 1e-3 for m in grid.MODELS}
    dense, by_name = grid.dense_runs("cpu", chosen), {(r.meta["match_model"], r.seed): r for r in grid.eval_runs("cpu", chosen)}
    assert len(dense) == 12 and {r.meta["split"] for r in dense} == {"dense"} and all("-c48-" in r.name for r in dense)
    assert not {r.name for r in dense} & {r.name for r in tuning + evals}
    for r in dense:   # the evaluation run's TrainConfig but for the checkpoints
        e = by_name[(r.meta["match_model"], r.seed)]
        assert r.cfg.n_checkpoints == 48 != e.cfg.n_checkpoints and r.cfg == dataclasses.replace(e.cfg, n_checkpoints=48)
    assert grid.dense_runs("gpu", chosen) == [] and {r.meta["match_model"] for r in grid.dense_runs("cpu", {"gpt-raster": 1e-3})} == {"gpt-raster"}
    other = grid.eval_runs("cpu", {"dit": 4e-3})
    assert {r.cfg.lr for r in other if r.cfg.model == "dit"} == {4e-3} and all(r.folder == "gpt_dit_match" for r in other
                                                                               if r.cfg.model == "dit")


def _info(rule_acc, data_seed=1, n=100):
    """A planted export: rule accuracy per checkpoint (valid novel samples), no copies."""
    export = importlib.import_module("scoreprobe.studies.export")
    from scoreprobe.data.datasets import STATE_CODES
    steps = np.array([0, 50, 100, 200, 400, 800, 1600, 3000])
    state = np.full((len(steps), n), STATE_CODES["rule_violating"], np.int8)
    for i, a in enumerate(rule_acc):
        state[i, :round(a * n)] = STATE_CODES["valid_novel"]
    return {"config": {"data_seed": data_seed}, "ds": export.clocks_dataset(steps, state, 0.5)}


def test_the_choice_takes_the_earliest_rate_to_the_criterion_and_refuses_other_splits():
    choice = importlib.import_module("analyses.gpt_dit_match.lr_choice")
    slow = _info([0, 0, 0.1, 0.3, 0.6, 0.85, 0.95, 0.95])
    fast = _info([0, 0.1, 0.5, 0.85, 0.9, 0.95, 0.95, 0.9])
    never = _info([0, 0, 0.2, 0.5, 0.7, 0.75, 0.75, 0.7])
    lower = _info([0, 0, 0.1, 0.3, 0.5, 0.6, 0.65, 0.65])
    lr, rows = choice.choose({5e-4: slow, 1e-3: fast, 2e-3: never}, 1, 0.8)
    assert lr == 1e-3 and [r["chosen"] for r in rows] == [False, True, False]
    assert rows[1]["tau"] < rows[0]["tau"] and math.isinf(rows[2]["tau"])
    assert choice.choose({5e-4: lower, 1e-3: never}, 1, 0.8)[0] == 1e-3            # none reaches it: the higher peak
    assert choice.choose({5e-4: fast, 1e-3: fast}, 1, 0.8)[0] == 5e-4                # a tie: the smaller rate
    with pytest.raises(ValueError, match="data seed 0, not the tuning split's 1"):
        choice.choose({5e-4: slow, 1e-3: _info([0, 0.9, 1, 1, 1, 1, 1, 1], data_seed=0)}, 1, 0.8)


def test_the_abruptness_comes_from_the_dense_runs_once_every_seed_is_done(monkeypatch):
    S = importlib.import_module("analyses.gpt_dit_match.model_match")

    def rows(values, flops=1.0):
        return [{"abrupt_common": {"abruptness": v}, "step_flops": flops, "seed": i} for i, v in enumerate(values)]
    dit, sparse, dense = rows([10.0, 11.0, 12.0]), rows([15.0, math.nan, 20.0], 6.0), rows([30.0, 32.0, 34.0], 6.0)
    curves = {}
    monkeypatch.setattr(S.C, "ratio_curve", lambda *a: [])            # the τ curves are not under test here
    full = S.versus_dit({"dit": dit, "gpt-patch": sparse}, curves, {"gpt-patch": dense})["gpt-patch"]
    assert full["abruptness_from"] == "dense" and full["abruptness"]["value"] == pytest.approx(21.0)
    part = S.versus_dit({"dit": dit, "gpt-patch": sparse}, curves, {"gpt-patch": dense[:2]})["gpt-patch"]
    assert part["abruptness_from"] == "evaluation" and part["abruptness"]["censored"]
    dit_dense = rows([4.0, 5.0, 6.0])                                 # the DiT's own dense runs, once all are in
    both = S.versus_dit({"dit": dit, "gpt-patch": sparse}, curves, {"gpt-patch": dense, "dit": dit_dense})["gpt-patch"]
    assert both["dit_abruptness_from"] == "dense" and both["abruptness"]["value"] == pytest.approx(27.0)
    half = S.versus_dit({"dit": dit, "gpt-patch": sparse}, curves, {"gpt-patch": dense, "dit": dit_dense[:2]})["gpt-patch"]
    assert half["dit_abruptness_from"] == "evaluation" and half["abruptness"]["value"] == pytest.approx(21.0)


def test_per_flop_is_per_step_times_the_flops_per_step():
    S = importlib.import_module("analyses.gpt_dit_match.model_match")
    curve = [{"threshold": 0.5, "value": 0.1, "ci": [0.05, 0.2], "censored": False},
             {"threshold": 0.9, "value": math.nan, "ci": [math.nan, math.nan], "censored": True}]
    out = S.per_flop(curve, 6.0)
    assert out[0]["value"] == pytest.approx(0.6) and out[0]["ci"] == pytest.approx([0.3, 1.2]) and out[1]["censored"]
    assert curve[0]["value"] == 0.1                                                # the step curve is left as it was


@pytest.mark.slow   # trains the study's 18 smoke runs (3 models × 3 splits × seeds) end to end: the study's own unit tests stay in the default suite
def test_smoke_then_from_results_and_the_choice_reads_the_tuning_split_only(tmp_path, monkeypatch):
    run, export = _analysis("gpt_dit_match"), importlib.import_module("scoreprobe.studies.export")
    grid = choice = _analysis("gpt_dit_match.grid")
    run.main(["--smoke", "--out", str(tmp_path)])
    md, js = (tmp_path / "gpt_dit_match_smoke.md").read_text(), (tmp_path / "gpt_dit_match_smoke.json").read_text()
    rep = json.loads(js)
    assert set(rep["sweep"]) == {"dit", "gpt-patch", "gpt-random"} and "Not done: none." in md
    assert all(math.isclose(f["forward_flops"], f["counted"]) for f in rep["flops"].values())
    assert {r["split"] for r in rep["runs"]} == {"tuning", "evaluation", "dense"} and len(rep["runs"]) == 18
    assert set(rep["dense"]) == {"dit", "gpt-patch", "gpt-random"} and "## Abruptness with dense checkpoints" in md
    run.main(["--smoke", "--out", str(tmp_path), "--from-results"])
    assert (tmp_path / "gpt_dit_match_smoke.md").read_text() == md and (tmp_path / "gpt_dit_match_smoke.json").read_text() == js

    before = choice.choices(tmp_path, "smoke")
    read, real = [], export.read_export
    monkeypatch.setattr(export, "read_export", lambda path: read.append(path) or real(path))
    for r in grid.eval_runs("smoke", {m: lr for m, (lr, _) in before.items()}):   # every evaluation export unreadable
        (grid.export_folder(tmp_path, "smoke", r) / f"{r.name}.npz").write_bytes(b"not an export")
    assert choice.choices(tmp_path, "smoke") == before
    assert len(read) == 6 and all(real(p)["config"]["data_seed"] == 1 for p in read)
    # a planted tuning export that reaches the criterion first moves the choice: the tuning runs decide it
    from scoreprobe.data.datasets import STATE_CODES
    m = "gpt-random"
    loser = next(r for r in grid.tuning_runs("smoke") if r.meta["match_model"] == m and r.meta["lr"] != before[m][0])
    path = grid.export_folder(tmp_path, "smoke", loser) / f"{loser.name}.npz"
    with np.load(path) as z:
        arrays = dict(z)
    arrays["state"][1:] = STATE_CODES["valid_novel"]
    np.savez_compressed(path, **arrays)
    assert choice.choices(tmp_path, "smoke")[m][0] == loser.meta["lr"]
