"""analyses/capacity_exponent (issue 54 item 6): the 0.51M DiT and the 1.27M DiT at N = 120 are the scaling runs
themselves (reused, never trained twice), b per size is the censored regression of every run's ln τ_mem on ln N
(checked on planted runs, a censored run kept), and the tables regenerate from the exports alone."""
import json
import math
from pathlib import Path

import numpy as np
import pytest

from tests.test_analyses import _analysis


def test_the_scaling_runs_are_reused_and_the_new_sizes_are_planned_in_order():
    plan = _analysis("capacity_exponent.grid").plan("cpu")
    scaling = {r.name: r for r in _analysis("scaling.grid").plan("cpu")}
    reused = [r for r in plan if r.name in scaling]
    diverged = _analysis("capacity_exponent.grid").DIVERGED["cpu"]   # the 2.83M DiT at N = 120, seed 2: not planned
    assert len(plan) == 36 - len(diverged) == 35 and len({r.name for r in plan}) == 35
    assert not set(diverged) & {r.name for r in plan} and "w192d4-g2-n120-s1" in {r.name for r in plan}
    assert {(r.meta["size"], r.meta["N"]) for r in reused} == \
        {("80x4", N) for N in (30, 60, 120, 240)} | {("128x4", 120)}
    assert all(r.cfg == scaling[r.name].cfg for r in reused)
    new = [r for r in plan if r.name not in scaling]
    assert [(r.meta["size"], r.meta["N"]) for r in new[:6]] == [("128x4", 30)] * 3 + [("128x4", 60)] * 3
    assert all(r.cfg.hidden_size == int(r.meta["size"].split("x")[0]) and r.cfg.data_seed == 0 for r in plan)
    folder = _analysis("capacity_exponent.grid").export_folder
    assert folder(_path(), "cpu", reused[0]).name == "scaling_cpu" and folder(_path(), "cpu", new[0]).name == \
        "capacity_exponent_cpu"
    # a shared run outside the recipe's own folder (the 128x4 DiT at N = 120) is the scaling study's where its
    # export with this TrainConfig is there (the shipped results), and ours where it is not (an empty folder)
    w128 = next(r for r in reused if r.meta["size"] == "128x4")
    shipped = Path(__file__).resolve().parents[1] / "analyses" / "results"
    assert folder(shipped, "cpu", w128).name == "scaling_cpu"
    assert folder(_path(), "cpu", w128).name == "capacity_exponent_cpu"


def _path():
    from pathlib import Path
    return Path("results")


def _rows(taus, steps):
    """Rows and curves of planted τ_mem (the same at every memorization threshold); inf: not reached."""
    rows, curves = [], {}
    for i, ((N, tau), last) in enumerate(zip(taus, steps)):
        name = f"r{i}"
        rows.append({"run": name, "steps": last, "meta": {"N": N}})
        curves[name] = {"tau_mem": np.full(6, tau), "resolved_from": np.array([1.0])}
    return rows, curves


def test_b_is_read_over_the_per_n_means_and_keeps_a_censored_run():
    T = _analysis("capacity_exponent.tables")
    from scoreprobe.stats.censored import censored_fit
    Ns = [30, 30, 60, 60, 120, 120, 240, 240]
    taus = [20 * N ** 1.3 * f for N, f in zip(Ns, [1.05, 0.95] * 4)]
    taus[-1] = math.inf                                                  # one N = 240 run never memorizes
    rows, curves = _rows(list(zip(Ns, taus)), [125 * N for N in Ns])
    curve = T.b_curve(rows, curves)
    y = np.log([t if math.isfinite(t) else 125 * 240 for t in taus])
    ref = censored_fit(np.log(Ns), y, np.array([False] * 7 + [True]))
    assert curve[3]["b_runs"] == pytest.approx(ref["slope"]) and curve[3]["n_censored"] == 1
    assert curve[3]["b_ci_runs"] == pytest.approx([ref["lower"], ref["upper"]]) and not curve[3]["censored"]
    # the verdict's b: the per-N means as units (issue 73 item 8), t on 4 − 2 df, wider than the runs' interval
    from scoreprobe.stats.misfit import means_slope
    m = means_slope(np.log(Ns), y, np.array([False] * 7 + [True]))
    assert curve[3]["b"] == pytest.approx(m["slope"]) and curve[3]["b_ci"] == pytest.approx([m["lower"], m["upper"]])
    assert curve[3]["b_ci"][0] < ref["lower"] and curve[3]["b_ci"][1] > ref["upper"] and curve[3]["b_df"] == 2
    assert curve[3]["b_ci"][0] < 1.3 < curve[3]["b_ci"][1] and curve[3]["lack_of_fit"]["df"] == [2, 4]
    one_n = T.b_curve(rows[:2], curves)                                  # one N: no slope, said so
    assert math.isnan(one_n[0]["b"]) and "undefined" in T.b_cell(one_n[0])


@pytest.mark.slow   # trains the study's smoke runs end to end
def test_smoke_then_from_results(tmp_path):
    run = _analysis("capacity_exponent.run")
    run.main(["--smoke", "--out", str(tmp_path)])
    md, js = (tmp_path / "capacity_exponent_smoke.md").read_text(), (tmp_path / "capacity_exponent_smoke.json").read_text()
    plan = _analysis("capacity_exponent.grid").plan("smoke")
    assert f"{len(plan)} of {len(plan)} planned runs done" in md and "## Does b fall toward 1" in md
    assert set(json.loads(js)["sizes"]) == {"32x4", "16x1"}
    run.main(["--smoke", "--out", str(tmp_path), "--from-results"])
    assert (tmp_path / "capacity_exponent_smoke.md").read_text() == md
    assert (tmp_path / "capacity_exponent_smoke.json").read_text() == js


def test_the_slope_difference_is_the_interaction_of_one_fit():
    from scipy import stats
    from scoreprobe.stats.censored_slopes import slope_difference as diff

    def slope_difference(a, b, Ns):
        return diff(a, b, Ns, lambda r: r["meta"]["N"])
    rng = np.random.default_rng(0)
    Ns = [30, 30, 60, 60, 120, 120]
    ya = [1.3 * math.log(N) + 3 + 0.05 * rng.standard_normal() for N in Ns]
    yb = [1.1 * math.log(N) + 3.2 + 0.05 * rng.standard_normal() for N in Ns]
    row = lambda N, y: {"meta": {"N": N}, "curves": {"tau_mem": [0, 0, 0, math.exp(y), 0, 0]}}   # noqa: E731
    d = slope_difference([row(N, y) for N, y in zip(Ns, ya)], [row(N, y) for N, y in zip(Ns, yb)], {30, 60, 120})
    x = np.log(Ns)
    fa, fb = stats.linregress(x, ya), stats.linregress(x, yb)
    assert d["value"] == pytest.approx(fb.slope - fa.slope) and d["df"] == 8
    rss = sum((np.array(y) - f.intercept - f.slope * x) @ (np.array(y) - f.intercept - f.slope * x)
              for y, f in ((ya, fa), (yb, fb)))
    se = math.sqrt(rss / 8 * 2 / ((x - x.mean()) @ (x - x.mean())))
    assert d["ci"] == pytest.approx([d["value"] - stats.t.ppf(0.975, 8) * se, d["value"] + stats.t.ppf(0.975, 8) * se])
    # a censored run is kept in the likelihood (censored_coef); a group left with 2 crossed runs has no slope
    censored = [{**row(N, y), "steps": 1000} for N, y in zip(Ns, yb)]
    censored[-1]["curves"]["tau_mem"][3] = math.inf
    crossed = [{**row(N, y), "steps": 1000} for N, y in zip(Ns, ya)]
    d = slope_difference(crossed, censored, {30, 60, 120})
    assert math.isfinite(d["value"]) and d["n_censored"] == 1 and d["ci"][0] < d["value"] < d["ci"][1]
    for r in censored[1:4]:
        r["curves"]["tau_mem"][3] = None
    d = slope_difference(crossed, censored, {30, 60, 120})
    assert math.isnan(d["value"]) and "fewer than 3 crossed runs" in d["why"]


def test_the_design_line_names_the_learning_rate_and_where_a_larger_model_memorizes_later():
    """design_lines: one lr for every size is stated, and each N where the larger DiT's pooled τ_mem (0.1) is the
    later one is named; with τ_mem falling with size at every N it says none does."""
    T = _analysis("capacity_exponent.tables")
    runs = _analysis("capacity_exponent.grid").plan("cpu")
    j = 3   # memorization 0.1 in MEM_THRESHOLDS (0.01, 0.02, 0.05, 0.1, ...)

    def rows(size, params, taus):
        return [{"params": params, "meta": {"N": N, "size": size},
                 "curves": {"tau_mem": [t if k == j else None for k in range(6)]}} for N, t in taus for _ in (0, 1)]
    small = rows("80x4", 5e5, [(30, 1600.0), (60, 4200.0)])
    later = {"80x4": small, "192x4": rows("192x4", 3e6, [(30, 1400.0), (60, 6100.0)])}
    text = T.design_lines(later, runs)[0]
    assert "lr 0.002" in text and "N = 60: 80x4 4200, 192x4 6100" in text and "N = 30" not in text
    earlier = {"80x4": small, "192x4": rows("192x4", 3e6, [(30, 1400.0), (60, 3900.0)])}
    assert "no N shows a larger DiT memorizing later" in T.design_lines(earlier, runs)[0]


def test_a_recovered_spike_is_kept_named_and_its_run_left_out_beside():
    """A run whose training loss spiked and recovered (export meta "loss_spikes") stays in b's fit; the md names it
    and prints b without it beside b with it."""
    T = _analysis("capacity_exponent.tables")
    Ns = [30, 30, 60, 60, 120, 120, 240, 240]
    rows, curves = _rows([(N, 20 * N ** 1.3 * f) for N, f in zip(Ns, [1.05, 0.95] * 4)], [125 * N for N in Ns])
    for r in rows:
        r["curves"] = curves[r["run"]]
    rows[-1]["loss_spikes"] = [{"step": 15900, "loss": 6.12, "median": 0.127, "after": 0.149, "back_at": 16900}]
    lines, out = T.spike_lines({"128x4": rows})
    assert list(out["128x4"]["runs"]) == ["r7"] and "r7 at step 15,900 (loss 6.12, 48× the median" in lines[0]
    assert "back within 2× by step 16,900" in lines[0]
    assert out["128x4"]["b_with"]["b"] == pytest.approx(T.b_curve(rows, curves)[3]["b"])
    assert out["128x4"]["b_without"]["b"] == pytest.approx(T.b_curve(rows[:-1], curves)[3]["b"])
    assert out["128x4"]["b_with"]["b"] != out["128x4"]["b_without"]["b"]
    assert T.spike_lines({"128x4": rows[:-1]}) == ([], {})


def test_start_steps_give_b_counted_from_the_start_and_a_run_that_never_started_is_left_out():
    """Planted τ_mem = start + 20·N^1.3: counted from each run's start, b is 1.3 again; over τ_mem it is below."""
    T = _analysis("capacity_exponent.tables")
    Ns = [30, 30, 60, 60, 120, 120]
    starts = [1300, 200, 700, 200, 900, 300]
    rows, curves = _rows([(N, s + 20 * N ** 1.3 * f) for N, s, f in zip(Ns, starts, [1.02, 0.98] * 3)],
                         [125 * N for N in Ns])
    for r, s in zip(rows, starts):
        r.update(curves=curves[r["run"]], train_start=s)
    never = {**rows[0], "run": "stuck", "train_start": None}
    lines, out = T.start_lines({"192x4": rows}, [never])
    row = out["192x4"]
    assert (row["min"], row["max"]) == (200, 1300) and row["b_from_start"]["b"] == pytest.approx(1.3, abs=0.02)
    assert row["b"]["b"] < 1.2 and "steps 200–1300 (median 500; 6 of 6 runs)" in lines[0]
    assert "Training never started in stuck" in lines[0] and "left out of every fit" in lines[0]
    stuck = {**never, "lowest_loss": {"step": 1100, "loss": 0.8294}, "last_loss": {"step": 30000, "loss": 0.9913}}
    assert "never started in stuck (lowest logged loss 0.83 at step 1,100; 0.99 at step 30,000): its τ" in \
        T.start_lines({"192x4": rows}, [stuck])[0][0]
    lines, out = T.start_lines({"80x4": [{k: v for k, v in r.items() if k != "train_start"} for r in rows]})
    assert out == {} and "80x4: no run's log kept" in lines[0]


@pytest.mark.slow   # 6-11 s: -m slow, for the default suite's 480-s budget
def test_coverage_is_simulated_at_the_runs_design_and_kept_only_for_that_design(tmp_path, monkeypatch):
    """coverage.shares counts a run that did not reach the threshold (None or inf) in its N's share, capped; the
    cache measures a design once, quotes it again unchanged, and drops designs no longer asked for."""
    cov = _analysis("capacity_exponent.coverage")
    row = lambda N, t: {"meta": {"N": N}, "curves": {"tau_mem": [t]}}   # noqa: E731
    rows = [row(30, 5.0), row(30, 6.0), row(60, None), row(60, 9.0), row(120, math.inf), row(120, None)]
    n_of = lambda r: r["meta"]["N"]                                      # noqa: E731
    x, share, design, j = cov.size_design(rows, 0, n_of)
    assert share == [0, 0, 0.5, 0.5, cov.CAP, cov.CAP] and design is None and j == 1
    assert cov.describe(x, share) == "30 ×2, 60 ×2 (0.50 censored), 120 ×2 (0.95 censored)"
    x, share, design, j = cov.difference_design(rows[:4], rows[2:], 0, n_of)
    assert j == 3 and [d[2] for d in design] == [0] * 4 + [1] * 4 and design[5][3] == pytest.approx(math.log(60))
    path = tmp_path / "c.json"
    cache = cov.Cache(path, "smoke")
    first = cache.get([math.log(n) for n in (30, 30, 60, 60, 120, 120)], [0, 0, 0, 0, 0.5, 0.5])
    assert first["n_rep"] == 40 and 0 < first["coverage"] <= 1
    cache.get([math.log(n) for n in (30, 60, 120)], [0, 0, 0])
    cache.store()
    again = cov.Cache(path, "smoke")
    monkeypatch.setattr(cov, "coverage_fit", lambda *a, **k: pytest.fail("a stored design was simulated again"))
    assert again.get([math.log(n) for n in (30, 30, 60, 60, 120, 120)], [0, 0, 0, 0, 0.5, 0.5]) == first
    again.store()
    assert len(json.loads(path.read_text())) == 1


def test_every_pair_of_sizes_is_read_with_per_n_means_and_holm(tmp_path):
    """pairwise_lines on three planted sizes: each pair's value is misfit.means_difference on its runs, the Holm p
    is adjust_pvalues over the defined pairs, and a size with an N whose runs are all censored gives undefined
    pairs that say why (no number)."""
    from analyses.capacity_exponent import coverage as cov
    from analyses.capacity_exponent.tables import J_PAPER, pairwise_lines
    from scoreprobe.stats.misfit import means_difference
    from scoreprobe.stats.pvalues import adjust_pvalues
    rng = np.random.default_rng(2)
    Ns = [30, 60, 120, 240]

    def runs(b, censor_240=False):
        out = []
        for N in Ns:
            for _ in range(2):
                t = [0.0] * 6
                t[J_PAPER] = math.inf if censor_240 and N == 240 else math.exp(b * math.log(N) + 2 + 0.1 * rng.standard_normal())
                out.append({"meta": {"N": N}, "steps": 40000, "curves": {"tau_mem": t}})
        return out
    by = {"s": runs(1.3), "m": runs(1.1), "l": runs(1.2, censor_240=True)}
    out = {}
    lines = pairwise_lines(by, list(by), set(Ns), lambda r: r["meta"]["N"], cov.Cache(tmp_path / "c.json", "smoke"),
                           out)
    pw = {(x["a"], x["b"]): x for x in out["pairwise"]}
    xy = {k: (np.log([r["meta"]["N"] for r in v]), np.log([r["curves"]["tau_mem"][J_PAPER] for r in v]), None)
          for k, v in by.items() if k != "l"}
    ref = means_difference(xy["s"], xy["m"])
    assert pw[("s", "m")]["value"] == pytest.approx(ref["value"]) and pw[("s", "m")]["p"] == pytest.approx(ref["p"])
    assert pw[("s", "m")]["p_holm"] == pytest.approx(float(adjust_pvalues([ref["p"], np.nan, np.nan])[0]))
    assert pw[("s", "l")]["p_holm"] is None and "every run censored" in pw[("s", "l")]["why"]
    assert "Holm over the 3 pairs" in lines[0] and "undefined (an x with every run censored" in lines[2]
    assert pw[("s", "m")]["coverage_misfit"] is not None and "0.0" in pw[("s", "m")]["coverage_misfit"]
