"""analyses/exactk_ladder and scoreprobe.probes.counts: the count error against brute force, the chance levels
against exact enumeration on a small shape, the export's Σ bits against the clocks' own bits (and version-1
exports still loading), the CPU plan reusing the scaling study's parity runs, and the smoke preset end to end
with --from-results byte-identical."""
import importlib
import itertools
import json
import math
import shutil
from fractions import Fraction

import numpy as np
import pytest
import scipy.stats

from scoreprobe.data.rules import ExactK, Parity
from scoreprobe.probes.counts import (NOT_FINITE, bit_sums, chance_accuracy, chance_count_error, count_error,
                                      count_error_shares)
from tests.test_analyses import _analysis

INVALID = 0   # STATE_CODES["invalid"]


def _brute_shares(sums, k, top=3):
    """The count-error distribution of one list of sums, counted one sample at a time."""
    finite = [abs(s - k) for s in sums if s != NOT_FINITE]
    n = len(sums)
    share = [sum(1 for e in finite if e == j) / n for j in range(top)]
    return (sum(finite) / len(finite) if finite else math.nan, share,
            sum(1 for e in finite if e >= top) / n, (n - len(finite)) / n)


def test_count_error_of_known_samples():
    """Five samples of 4 bits, k = 2: sums 2, 1, 3, 4 and a non-finite one -> errors 0, 1, 1, 2, (none)."""
    bits = np.array([[1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 1, 0]], np.uint8)
    state = np.array([2, 1, 1, 1, INVALID], np.int8)
    sums = bit_sums(bits, state)
    assert sums.tolist() == [2, 1, 3, 4, NOT_FINITE] and count_error(sums, 2).tolist() == [0, 1, 1, 2, -1]
    c = count_error_shares(sums, 2)
    assert c["mean_abs"] == 1.0 and c["share"].tolist() == [0.2, 0.4, 0.2]
    assert c["share_top"] == 0.0 and c["share_not_finite"] == 0.2


def test_count_error_shares_match_brute_force_over_steps():
    rng = np.random.default_rng(3)
    bits = (rng.random((4, 50, 36)) < rng.random((4, 1, 1))).astype(np.uint8)        # (steps, samples, bits)
    state = np.where(rng.random((4, 50)) < 0.1, INVALID, 1).astype(np.int8)
    sums = bit_sums(bits, state)
    for k in (0, 3, 18, 36):
        c = count_error_shares(sums, k)
        for s in range(4):
            mean, share, top, nf = _brute_shares(sums[s].tolist(), k)
            assert math.isclose(c["mean_abs"][s], mean) and np.allclose(c["share"][s], share)
            assert math.isclose(c["share_top"][s], top) and math.isclose(c["share_not_finite"][s], nf)
            assert math.isclose(c["share"][s].sum() + c["share_top"][s] + c["share_not_finite"][s], 1.0)
    all_bad = count_error_shares(np.full((1, 3), NOT_FINITE), 2)
    assert math.isnan(all_bad["mean_abs"][0]) and all_bad["share_not_finite"][0] == 1.0


def test_chance_levels_match_exact_enumeration_on_a_3x4_image():
    """Every one of the 2^12 images of a 3×4 shape: the valid share is chance_accuracy, and the |Σ − k|
    histogram is chance_count_error, as exact fractions."""
    every = np.array(list(itertools.product((0, 1), repeat=12)), np.uint8)          # (4096, 12)
    sums = every.sum(axis=1, dtype=np.int64)
    for k in range(13):
        rule = ExactK(k, shape=(3, 4))
        assert chance_accuracy(rule) == Fraction(int(rule.is_valid(every).sum()), 4096)
        c = chance_count_error(12, k)
        err = np.abs(sums - k)
        assert c["share"] == [Fraction(int((err == e).sum()), 4096) for e in range(3)]
        assert c["share_top"] == Fraction(int((err >= 3).sum()), 4096)
        assert c["mean_abs"] == Fraction(int(err.sum()), 4096)
    for G in (2, 3, 4, 6):
        for layout in ("contiguous", "offset", "random"):
            rule = Parity(G, shape=(3, 4), layout=layout)
            assert chance_accuracy(rule) == Fraction(int(rule.is_valid(every).sum()), 4096) == Fraction(1, 2 ** (12 // G))


def test_chance_levels_of_the_ladder():
    """On 6×6: error 0 of random bits is the exact-K chance accuracy; k = 18 is ≈ 0.132 (issue 36: ≈ 0.14
    measured at step 0)."""
    for k in (3, 9, 18):
        assert chance_count_error(36, k)["share"][0] == chance_accuracy(ExactK(k)) == Fraction(math.comb(36, k), 2 ** 36)
    assert abs(float(chance_accuracy(ExactK(18))) - 0.13206) < 1e-5
    assert chance_accuracy(Parity(3, layout="offset")) == Fraction(1, 2 ** 12)


def test_chance_copies_are_the_perfect_generalizers_memorized_share():
    """N / n_valid: exact, and 1 − it is the library's novel_oracle for the same training set and rule;
    k = 3 of 36 at N = 240 copies 3.4% by chance, so memorization thresholds 0.01 and 0.02 are below it."""
    from types import SimpleNamespace
    from scoreprobe.probes.clocks import novel_oracle
    S = importlib.import_module("analyses.exactk_ladder.count_error")
    for rule in (ExactK(3), ExactK(18), Parity(2, layout="offset")):
        c = S.chance(rule.spec(), 240)["copies"]
        assert Fraction(*c["fraction"]) == Fraction(240, int(rule.n_valid))
        assert abs(1 - c["value"] - novel_oracle(SimpleNamespace(train=range(240)), rule)) < 1e-15
    assert S.chance(ExactK(3).spec(), 240)["copies"]["fraction"] == [4, 119]   # 240 / 7140


def test_cpu_plan_reuses_the_scaling_parity_runs_and_fits_its_budget():
    grid, run = _analysis("exactk_ladder.grid"), _analysis("exactk_ladder.run")
    from scoreprobe.studies.export import load_exports
    plan = grid.plan("cpu")
    scaling = {r.name: r for r in _analysis("scaling.grid").plan("cpu", ("G",))}
    parity = [r for r in plan if not grid.has_counts(r)]
    assert len(plan) == 18 and len(parity) == 9 and all(r.cfg == scaling[r.name].cfg for r in parity)
    args = run.parse_args(["--device", "cpu"])
    done, _ = load_exports(parity, args.results / "scaling_cpu")
    assert set(done) == {r.name for r in parity}
    exact = [r for r in plan if grid.has_counts(r)]
    assert sorted({r.cfg.rule["k"] for r in exact}) == [3, 9, 18] and {r.cfg.n_train for r in plan} == {240}
    assert {r.steps for r in plan} == {30000} and all(r.cfg.n_heldout == 1024 for r in exact)
    each = {importlib.import_module("scoreprobe.studies.recipes").run_seconds(r, args.n_samples) for r in exact}
    assert len(each) == 1                                   # equal runs: 9 of them two at a time take 5 rounds
    each = each.pop()
    assert math.ceil(len(exact) / args.jobs) * each / 3600 <= 1.05 * grid.CPU_BUDGET_H
    presets = importlib.import_module("scoreprobe.studies.presets")
    left = [r for r in exact if r.name not in presets.exported(plan, run.folder_of(args))]   # shipped so far count
    hours = math.ceil(len(left) / args.jobs) * each / 3600
    first = presets.plan_lines(plan, args, run.folder_of(args), run.describe)[0]
    assert first.startswith(f"18 runs, preset cpu ({18 - len(left)} exported already), 2 at a time")
    assert f"{hours:.2f} h" in first
    assert len(left) == 9 - len(list((args.results / "exactk_ladder_cpu").glob("exactk*.npz")))


def test_bad_cli_input_is_one_line_and_exit_2(capsys):
    run = _analysis("exactk_ladder.run")
    with pytest.raises(SystemExit) as e:
        run.main(["--jobs", "0", "--plan"])
    assert e.value.code == 2 and "--jobs must be at least 1" in capsys.readouterr().err


def test_step0_interval_counts_identical_samples_once():
    S = importlib.import_module("analyses.exactk_ladder.count_error")
    rows = [{"curve": {"step": [0, 5], "rule_acc": [0.125, 0.5]}, "n_samples": 32, "step0_states": "a"}
            for _ in range(3)]
    same = S.step0(rows, 0.132)
    assert same["identical"] and same["n"] == 32 and same["relation"] == "consistent"
    rows[1]["step0_states"] = "b"
    assert S.step0(rows, 0.132)["n"] == 96 and not S.step0(rows, 0.132)["identical"]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """The smoke preset once (12 toy runs, ≈ 1 min): (folder, markdown, json)."""
    out = tmp_path_factory.mktemp("ladder")
    _analysis("exactk_ladder.run").main(["--smoke", "--out", str(out)])
    return out, (out / "exactk_ladder_smoke.md").read_text(), (out / "exactk_ladder_smoke.json").read_text()


@pytest.mark.slow   # its fixture trains the study's smoke runs
def test_smoke_exports_hold_the_bit_sums_of_the_clocks_bits(smoke):
    """Σ bits of each exact-K export = the sum of the bits the clocks stored; error 0 = the rule's own validity
    (states); the step-0 bits are the signs of the sampler's starting noise (the untrained DiT outputs 0)."""
    out, md, _ = smoke
    from scoreprobe.studies.export import read_export
    from scoreprobe.noise import randn_per_sample
    from scoreprobe.store.format import open_store
    plan = _analysis("exactk_ladder.grid").plan("smoke")
    assert "Not done: none." in md and len(plan) == 12
    for r in plan:
        folder = "exactk_ladder_smoke" if r.meta["rule"] == "exactk" else "scaling_smoke"
        info = read_export(out / folder / f"{r.name}.npz")
        assert info["version"] == 2 and ("bit_sum" in info["ds"]) == (r.meta["rule"] == "exactk")
        if r.meta["rule"] != "exactk":
            continue
        bits = open_store(out / r.folder / r.name / "clocks.zarr")["bits"].transpose("step", "sample", "bit").values
        ds = info["ds"]
        assert np.array_equal(ds["bit_sum"].values, bits.sum(axis=2))
        valid = (ds["state"].values >= 2)
        assert np.array_equal(ds["bit_sum"].values == r.cfg.rule["k"], valid)
        noise = randn_per_sample(0, np.arange(bits.shape[1]), 36).numpy()
        assert int(ds.step[0]) == 0 and np.array_equal(bits[0], (noise > 0).astype(np.uint8))


@pytest.mark.slow   # its fixture trains the study's smoke runs
def test_smoke_tables_then_from_results_byte_identical(smoke):
    out, md, js = smoke
    rep = json.loads(js)
    assert set(rep["chance"]) == {f"exact-K k = {k}" for k in (3, 9, 18)} | {f"parity G = {G}" for G in (2, 3, 4)}
    k18 = rep["chance"]["exact-K k = 18"]
    assert Fraction(*k18["chance"]["accuracy"]) == Fraction(math.comb(36, 18), 2 ** 36)
    assert k18["step0"]["identical"] and k18["step0"]["n"] == 32
    n_train = _analysis("exactk_ladder.grid").plan("smoke")[0].cfg.n_train
    k3 = rep["chance"]["exact-K k = 3"]["chance"]["copies"]
    assert Fraction(*k3["fraction"]) == Fraction(n_train, 7140) and f"| {k3['value']:.3g} |" in md
    counts = rep["count_error"]["exact-K k = 9"]["pooled"]
    assert counts["share0_is_rule_acc"] and counts["rows"][0]["step"] == 0
    for row in counts["rows"]:
        assert math.isclose(sum(row["share"]) + row["share_top"] + row["share_not_finite"], 1.0)
        assert math.isclose(row["share"][0], row["rule_acc"])
    pairs = rep["ratios"]["exactk_over_parity"]["exact-K k = 3"]
    assert set(pairs) == {f"exact-K k = 3 / parity G = {G}" for G in (2, 3, 4)}
    assert "| chance | 2.377 | 0.132 | 0.250 | 0.213 | 0.405 | 0.000 |" in md
    for p in ("two_clocks", "scaling", "exactk_ladder_smoke.md", "exactk_ladder_smoke.json", "exactk_ladder_smoke.png"):
        shutil.rmtree(out / p) if (out / p).is_dir() else (out / p).unlink()
    _analysis("exactk_ladder.run").main(["--smoke", "--out", str(out), "--from-results"])
    assert (out / "exactk_ladder_smoke.md").read_text() == md and (out / "exactk_ladder_smoke.json").read_text() == js
    assert (out / "exactk_ladder_smoke.png").stat().st_size > 0


def test_version_1_exports_still_load_and_newer_ones_are_refused(tmp_path):
    """A shipped scaling export (version 1, no `version` key) loads without Σ bits; a version-2 file written
    from it reads the same, and a version from the future is refused."""
    export = importlib.import_module("scoreprobe.studies.export")
    src = "analyses/results/scaling_cpu/exactk18-n120-s0.npz"
    old = export.read_export(src)
    assert old["version"] == 1 and "bit_sum" not in old["ds"]
    with np.load(src) as z:
        arrays = {k: z[k] for k in z.files}
    np.savez(tmp_path / "v2.npz", **arrays, version=np.int64(2), bit_sum=np.zeros(arrays["state"].shape, np.int16))
    new = export.read_export(tmp_path / "v2.npz")
    assert new["version"] == 2 and np.array_equal(new["ds"].state.values, old["ds"].state.values)
    assert new["ds"]["bit_sum"].dims == ("step", "sample")
    np.savez(tmp_path / "v9.npz", **arrays, version=np.int64(9))
    with pytest.raises(ValueError, match="export version 9"):
        export.read_export(tmp_path / "v9.npz")
    from scoreprobe.stats.compare import read_export as compare_read
    assert np.array_equal(compare_read(tmp_path / "v2.npz").state.values, old["ds"].state.values)


def _planted(label, taus, steps=30000):
    """Rows and curves of planted τ_rule per seed (the same τ at every rule threshold; inf: not reached)."""
    rows = [{"run": f"{label}-s{s}", "seed": s, "steps": steps} for s in range(len(taus))]
    return rows, {r["run"]: {"tau_rule": np.full(10, float(t))} for r, t in zip(rows, taus)}


def test_ratios_of_planted_taus_and_bounds_where_one_side_never_reaches():
    """exact-K at 1000, 2000, 4000 against parity at 8000 × the same: ratio 1/8 with a Welch interval; against
    a parity that never reaches: censored, with the bound gm(τ_exact) / budget = 2000 / 30000."""
    tables = importlib.import_module("analyses.exactk_ladder.rule_ladder")
    bounded = importlib.import_module("analyses.exactk_ladder.ratio_bounds").bounded_ratio_curve
    ex, c1 = _planted("exactk", [1000, 2000, 4000])
    par, c2 = _planted("parity", [8000, 16000, 32000])
    never, c3 = _planted("never", [math.inf] * 3)
    curves = {**c1, **c2, **c3}
    fast = bounded(par, ex, curves, "tau_rule")
    assert math.isclose(fast[0]["value"], 1 / 8) and fast[0]["ci"][0] < 1 / 8 < fast[0]["ci"][1] < 1
    assert "bound" not in fast[0]
    cens = bounded(never, ex, curves, "tau_rule")
    assert cens[0]["censored"] and cens[0]["bound"]["side"] == "<"
    assert math.isclose(cens[0]["bound"]["value"], 2000 / 30000)
    assert "exactk learned earlier (bound: every exactk seed reaches it, no never seed does) at 0.3–0.95" in \
        tables._bound_text(cens, "never", "exactk")
    mirror = bounded(ex, never, curves, "tau_rule")[0]["bound"]
    assert mirror["side"] == ">" and math.isclose(mirror["value"], 30000 / 2000)
    line = tables.bounded_table("rule threshold", [("a", fast), ("b", cens)], 0.9)[2]
    assert line.startswith("| 0.3 | 0.12 [") and line.endswith("| < 0.07 (bound: one side reaches in no seed) |")


def test_pooled_counts_at_selected_steps_of_planted_runs():
    """Two seeds with planted count errors: the mean |Σ − k| and its t interval over the seeds, the shares as
    means over the seeds, at step 0, the first, every 4th, the last and the peak of rule_acc."""
    S = importlib.import_module("analyses.exactk_ladder.count_error")
    assert S.selected_steps(21, 7) == [0, 1, 5, 7, 9, 13, 17, 20] and S.selected_steps(3, 2) == [0, 1, 2]
    steps = list(range(0, 60, 10))                                                      # 6 checkpoints
    rows = []
    for seed, shift in ((0, 0.0), (1, 1.0)):
        mean_abs = [5.0 - j + shift for j in range(6)]
        share = [[0.1 * j, 0.2, 0.1] for j in range(6)]
        rows.append({"seed": seed, "curve": {"rule_acc": [s[0] for s in share]},
                     "counts": {"step": steps, "mean_abs": mean_abs, "share": share,
                                "share_top": [0.7 - 0.1 * j for j in range(6)], "share_not_finite": [0.0] * 6,
                                "share0_is_rule_acc": True}})
    rows.append({"seed": 2, "curve": {"rule_acc": [0.0] * 6}, "counts": None})            # a version-1 export
    p = S.pooled_counts(rows)
    assert p["seeds"] == [0, 1] and [r["step"] for r in p["rows"]] == [0, 10, 50]
    last = p["rows"][-1]
    assert math.isclose(last["mean_abs"], 0.5) and np.allclose(last["share"], [0.5, 0.2, 0.1])
    half = scipy.stats.t.ppf(0.975, 1) * math.sqrt(0.5) / math.sqrt(2)   # seeds 0 and 1 differ by 1: sd √0.5
    assert last["mean_abs_ci"] == [0.0, 0.5 + half]                      # the lower end, 0.5 − 6.35, clipped at 0
    assert math.isclose(p["rows"][1]["mean_abs_ci"][1], 4.5 + half)
    assert S.pooled_counts([rows[2]]) is None
