"""analyses/data_draws: the data seed × training seed grid reuses the scaling runs at data seed 0, splits the
variance of ln τ into its data and initialisation parts (checked on planted values), and regenerates its
tables from the exports alone."""
import pytest
import json
import math

import numpy as np

from tests.test_analyses import _analysis

THRESHOLDS = 10   # rule thresholds of scoreprobe.stats.curves


def _rows(values, steps=30000):
    """Rows and curves of planted τ: values {(d, s): τ} (the same τ at every rule threshold)."""
    rows, curves = [], {}
    for (d, s), v in values.items():
        name = f"g2-n240-d{d}-s{s}"
        rows.append({"run": name, "seed": s, "steps": steps, "meta": {"data_seed": d, "G": 2, "N": 240}})
        curves[name] = {"tau_rule": np.full(THRESHOLDS, float(v))}
    return rows, curves


def test_data_seed_zero_is_the_scaling_run_itself():
    plan = _analysis("data_draws.grid").plan("cpu")
    scaling = {r.name: r for r in _analysis("scaling.grid").plan("cpu", ("N", "G"))}
    zero = [r for r in plan if r.meta["data_seed"] == 0 and r.meta["scaling_run"]]
    large = [r for r in plan if r.meta["data_seed"] == 0 and not r.meta["scaling_run"]]   # G = 3, N = 480 and 960
    draws = [r for r in plan if r.meta["N"] == 480 and r.meta["data_seed"]]   # N = 480 at data seeds 1, 2
    assert len(plan) == 35 and len(zero) == 9 and plan[-8:] == large[:3] + draws + large[3:]
    assert {(r.meta["G"], r.meta["N"], r.seed) for r in large} == {(3, N, s) for N in (480, 960) for s in range(3)}
    assert [(r.meta["G"], r.cfg.data_seed, r.seed, r.folder) for r in draws] == [(3, d, 0, "data_draws") for d in (1, 2)]
    assert all(r.name not in scaling for r in large + draws)
    for r in zero:
        assert r.cfg == scaling[r.name].cfg and r.folder == "two_clocks"
    others = [r for r in plan if r.meta["data_seed"]]
    assert {r.cfg.data_seed for r in others} == {1, 2} and len({r.name for r in plan}) == 35
    assert all(r.cfg.seed == r.seed for r in plan)


def test_two_level_split_recovers_planted_data_and_init_effects():
    from scoreprobe.stats import seed_grid as S
    a, b = np.array([-0.6, 0.1, 0.5]), np.array([0.0, 0.05, -0.05])   # data and init effects on ln τ
    rows, curves = _rows({(d, s): math.exp(8 + a[d] + b[s]) for d in range(3) for s in range(3)})
    ds, ss, block = S.complete_grid(rows)
    assert (ds, ss) == ([0, 1, 2], [0, 1, 2])
    row = S.two_level_curve(block, curves, "tau_rule")[0]
    assert math.isclose(row["var_data"], np.var(a, ddof=1), rel_tol=1e-9)
    assert math.isclose(row["var_init"], np.var(b, ddof=1), rel_tol=1e-9) and row["var_residual"] < 1e-20
    assert math.isclose(row["pooled"], math.exp(8 + a.mean() + b.mean()), rel_tol=1e-9)
    assert S.data_share(row) > 0.95
    assert row["p_data"] == 0.0 or row["p_data"] < 1e-12                        # no residual: F is infinite
    noisy = {(d, s): math.exp(8 + a[d] + b[s] + 0.01 * (-1) ** (d + s) * (d + 1)) for d in range(3) for s in range(3)}
    rows, curves = _rows(noisy)
    curve = S.two_level_curve(S.complete_grid(rows)[2], curves, "tau_rule")
    verdicts = S.component_verdicts(curve)
    assert curve[0]["p_data"] < 0.001 < 0.05 < curve[0]["p_init"]
    assert verdicts[0].endswith("at 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95; smallest unadjusted p "
                                f"{curve[0]['p_data']:.3f}") and " at none;" in verdicts[1]


def test_complete_grid_takes_the_largest_full_block():
    from scoreprobe.stats import seed_grid as S
    rows, _ = _rows({(0, 0): 1, (0, 1): 1, (1, 0): 1, (1, 1): 1, (2, 0): 1, (0, 2): 1})
    ds, ss, block = S.complete_grid(rows)
    assert (ds, ss) == ([0, 1], [0, 1]) and [[r["run"] for r in row] for row in block][1] == ["g2-n240-d1-s0",
                                                                                               "g2-n240-d1-s1"]
    assert S.complete_grid(_rows({(0, 0): 1, (1, 0): 1, (0, 1): 1})[0]) is None


def test_factor_with_data_seeds_as_units_is_wider_and_needs_two_data_seeds():
    from scoreprobe.stats import seed_grid as S
    rng = np.random.default_rng(0)
    a2, a3 = rng.normal(0, 0.3, 3), rng.normal(0, 0.3, 3)
    g2, c2 = _rows({(d, s): math.exp(7 + a2[d] + 0.02 * s) for d in range(3) for s in range(3)})
    g3, c3 = _rows({(d, s): math.exp(8.5 + a3[d] - 0.02 * s) for d in range(3) for s in range(3)})
    for r in g3:
        r["run"] = r["run"].replace("g2", "g3")
    curves = {**c2, **{k.replace("g2", "g3"): v for k, v in c3.items()}}
    by_run, by_data = S.factor_curves(g2, g3, curves)
    truth = math.exp(8.5 - 7 + a3.mean() - a2.mean() - 0.02 - 0.02)   # the init terms average 0.02 and -0.02
    assert math.isclose(by_run[0]["value"], truth, rel_tol=1e-9) and math.isclose(by_data[0]["value"], truth, rel_tol=1e-9)
    w = lambda row: math.log(row["ci"][1] / row["ci"][0])   # noqa: E731
    assert w(by_data[0]) > w(by_run[0])
    ragged = [r for r in g2 if r["meta"]["data_seed"] == 0 or r["seed"] == 0]   # d0 × 3 seeds, d1 and d2 × seed 0
    means = S.data_means(ragged, curves, "tau_rule")[:, 0]
    assert np.allclose(means, [7 + a2[0] + 0.02, 7 + a2[1], 7 + a2[2]])
    one = S.factor_curves(g2[:1], g3[:1], curves)[1][0]
    assert math.isnan(one["value"]) and "one data seed" in one["note"]


@pytest.mark.slow   # trains the study's smoke runs (data seeds × training seeds) end to end: the study's own unit tests stay in the default suite
def test_smoke_then_from_results(tmp_path):
    run = _analysis("data_draws.run")
    run.main(["--smoke", "--out", str(tmp_path)])
    md, js = (tmp_path / "data_draws_smoke.md").read_text(), (tmp_path / "data_draws_smoke.json").read_text()
    plan = _analysis("data_draws.grid").plan("smoke")
    assert sorted(p.stem for p in (tmp_path / "data_draws_smoke").glob("*.npz")) == \
        sorted(r.name for r in plan if not r.meta["scaling_run"])
    assert sorted(p.stem for p in (tmp_path / "scaling_smoke").glob("*.npz")) == \
        sorted(r.name for r in plan if r.meta["scaling_run"])
    assert f"{len(plan)} of {len(plan)} planned runs done" in md and "| d1 |" in md and "| 16 | 2 |" in md
    assert json.loads(js)["configs"]["g2-n8"]["data_seeds"] == [0, 1]
    run.main(["--smoke", "--out", str(tmp_path), "--from-results"])
    assert (tmp_path / "data_draws_smoke.md").read_text() == md and (tmp_path / "data_draws_smoke.json").read_text() == js
