"""The mechanism statistics against planted truth (issue 35): one unit per independent thing (cluster
bootstrap, deduplicated planes / items / pairs), multiplicity over the whole step × σ family, half-change
steps from a fitted sigmoid, and the capture geometry that replaces "captured although closer"."""
import math

import numpy as np
import pytest

from scoreprobe.data.datasets import make_dataset, to_signed
from scoreprobe.data.rules import Parity
from scoreprobe.errors import ConfigError
from scoreprobe.oracles import EmpiricalDenoiser
from scoreprobe.probes.retention import retention
from scoreprobe.probes.capture import capture_distances, restart_outcomes
from scoreprobe.stats.dsm_stats import first_significant_step, significant_sets
from scoreprobe.stats.pvalues import adjust_family, adjust_pvalues
from scoreprobe.stats.timing import (bootstrap_means, fit_log_sigmoid, half_change, mean_ci,
                                      sigmoid_half_change)

STEPS = np.round(np.geomspace(200, 36000, 10))


def _sigmoid(steps, mid, lo=0.1, hi=0.7, w=0.5):
    return lo + (hi - lo) / (1 + np.exp(-(np.log(steps) - np.log(mid)) / w))


# ------------------------------------------------------------------------------------------------
# Half-change steps from a fitted sigmoid
# ------------------------------------------------------------------------------------------------

def test_fit_log_sigmoid_recovers_a_noiseless_curve():
    fit = fit_log_sigmoid(STEPS, _sigmoid(STEPS, 3000)[None])
    assert math.exp(fit["m"][0]) == pytest.approx(3000, rel=0.02)
    assert fit["c"][0] == pytest.approx(0.6, rel=0.02) and fit["a"][0] == pytest.approx(0.1, abs=0.01)
    falling = fit_log_sigmoid(STEPS, 1 - _sigmoid(STEPS, 3000)[None])
    assert math.exp(falling["m"][0]) == pytest.approx(3000, rel=0.02) and falling["c"][0] < 0
    assert np.isnan(fit_log_sigmoid(STEPS, np.where(np.arange(10) == 3, np.nan, 1.0)[None])["m"][0])


def test_dropping_the_first_checkpoint_moves_the_half_change_less_than_its_ci():
    rng = np.random.default_rng(0)
    vals = _sigmoid(STEPS, 3000) + rng.normal(0, 0.1, (60, STEPS.size))        # 60 units
    full = sigmoid_half_change(STEPS, vals, n_boot=400)
    cut = sigmoid_half_change(STEPS[1:], vals[:, 1:], n_boot=400)
    assert full["ci"][0] < 3000 < full["ci"][1]                                   # covers the planted midpoint
    half_width = (math.log(full["ci"][1]) - math.log(full["ci"][0])) / 2
    assert abs(math.log(cut["step"]) - math.log(full["step"])) < half_width
    old_full, old_cut = (half_change(s, v, to="extreme", n_boot=0)["step"]
                         for s, v in ((STEPS, vals), (STEPS[1:], vals[:, 1:])))
    assert abs(math.log(cut["step"] / full["step"])) < abs(math.log(old_cut / old_full))   # the old one moves more


def test_noise_does_not_bias_the_fitted_half_change_but_biases_the_extreme_one():
    """400 noisy mean curves of a planted sigmoid (midpoint 3000, noise SD 0.05 on a change of 0.6): the
    fitted midpoint's mean error in ln step is within 3 standard errors of 0; the old first-to-extreme
    half-change is pulled later (the noisy extreme overshoots), by more than 3 standard errors."""
    rng = np.random.default_rng(1)
    curves = _sigmoid(STEPS, 3000) + rng.normal(0, 0.05, (400, STEPS.size))
    fit = np.log(np.exp(fit_log_sigmoid(STEPS, curves)["m"]) / 3000)
    old = np.log(np.array([half_change(STEPS, c[None], to="extreme", n_boot=0)["step"] for c in curves]) / 3000)
    se_fit, se_old = fit.std() / math.sqrt(fit.size), old.std() / math.sqrt(old.size)
    assert abs(fit.mean()) < 3 * se_fit
    assert old.mean() > 3 * se_old and old.mean() > 2 * abs(fit.mean())


def test_a_midpoint_outside_the_checkpoints_is_a_bound():
    rng = np.random.default_rng(2)
    early = _sigmoid(STEPS, 60, w=0.6) + rng.normal(0, 0.02, (40, STEPS.size))   # mostly over before 200
    r = sigmoid_half_change(STEPS, early, n_boot=200)
    assert r["censored"] == "before" and math.isnan(r["step"]) and r["bound"] == STEPS[0]
    late = _sigmoid(STEPS, 2e5, w=0.6) + rng.normal(0, 0.02, (40, STEPS.size))
    r = sigmoid_half_change(STEPS, late, n_boot=200)
    assert r["censored"] == "after" and r["bound"] == STEPS[-1] and math.isinf(r["ci"][1])


def test_rise_and_fall_fits_up_to_the_extreme_and_flat_curves_show_no_change():
    rise_fall = np.concatenate([_sigmoid(STEPS[:7], 1500), [0.6, 0.5, 0.4]])
    rng = np.random.default_rng(3)
    r = sigmoid_half_change(STEPS, rise_fall + rng.normal(0, 0.05, (50, 10)), until="extreme", n_boot=300)
    assert r["fit_steps"][1] <= STEPS[7] and r["ci"][0] < 1500 < r["ci"][1]
    flat = sigmoid_half_change(STEPS, rng.normal(0.3, 0.05, (50, 10)), n_boot=300)
    assert flat["change_ci"][0] < 0 < flat["change_ci"][1]                          # no significant change
    few = sigmoid_half_change(STEPS[:3], np.ones((4, 3)), n_boot=10)
    assert math.isnan(few["step"]) and "too few" in few["note"]
    with pytest.raises(ConfigError):
        sigmoid_half_change(STEPS[::-1], np.ones((4, 10)))
    with pytest.raises(ConfigError):
        sigmoid_half_change(STEPS, np.ones((4, 10)), until="first")


# ------------------------------------------------------------------------------------------------
# One unit per independent thing: the cluster bootstrap
# ------------------------------------------------------------------------------------------------

def test_copies_of_a_unit_do_not_narrow_the_cluster_bootstrap():
    rng = np.random.default_rng(4)
    base = rng.normal(0, 1, (13, 1))                                              # 13 independent pairs
    copies = np.repeat(base, 3, axis=0)                                           # each drawn 3 times
    clusters = np.repeat(np.arange(13), 3)
    width = lambda r: float(r["hi"][0] - r["lo"][0])                              # noqa: E731
    honest = width(mean_ci(base, n_boot=2000, seed=1))
    clustered = width(mean_ci(copies, n_boot=2000, seed=1, clusters=clusters))
    naive = width(mean_ci(copies, n_boot=2000, seed=1))
    assert clustered == pytest.approx(honest, rel=0.12)
    assert naive < 0.75 * honest                                                  # ≈ 1/√3: falsely narrow
    tuples = [("a", "b"), ("a", "b"), ("c", "d")]                                 # tuple keys (plane clusters)
    assert bootstrap_means(np.array([[1.0], [1.0], [5.0]]), clusters=tuples, n_boot=50).shape == (50, 1)


def _cluster_coverage(n_draws, n_boot):
    """(cluster CI coverage, unit CI coverage) over n_draws: 12 pairs × 3 planes sharing their pair's effect."""
    rng = np.random.default_rng(5)
    hits = {"cluster": 0, "unit": 0}
    clusters = np.repeat(np.arange(12), 3)
    for _ in range(n_draws):
        v = (rng.normal(0, 1, 12)[clusters] + rng.normal(0, 0.2, 36))[:, None]
        for key, cl in (("cluster", clusters), ("unit", None)):
            r = mean_ci(v, n_boot=n_boot, seed=int(rng.integers(1 << 30)), clusters=cl)
            hits[key] += r["lo"][0] <= 0 <= r["hi"][0]
    return hits["cluster"] / n_draws, hits["unit"] / n_draws


@pytest.mark.slow   # a coverage simulation (150 draws × 2 bootstraps); its 40-draw version below stays in the default suite
def test_cluster_bootstrap_covers_and_the_unit_bootstrap_does_not():
    """Planes sharing a pair share its effect: 12 pairs × 3 planes, the pair effect dominating. Over 150
    draws the cluster CI covers the true mean ≈ 95%, the unit-level CI much less."""
    cluster, unit = _cluster_coverage(150, 300)
    assert 0.85 <= cluster <= 1.0
    assert unit < 0.8


def test_cluster_bootstrap_covers_and_the_unit_bootstrap_does_not_fast():
    """The same at 40 draws of 200 resamples: the unit-level CI (every plane a unit, though three share a pair's
    effect) still misses far more often than the cluster CI."""
    cluster, unit = _cluster_coverage(40, 200)
    assert cluster >= 0.8 and unit < 0.75 and cluster - unit >= 0.2


def test_the_shipped_series_symmetric_planes_are_20_distinct_in_13_pairs():
    from analyses.mechanism import measure as M
    from scoreprobe.loading.series import load_series
    from scoreprobe.studies import battery
    args = M.parse_args([])
    series = load_series(args.open_series)
    planes, drawn_by = battery.distinct_planes("symmetric", series, args)
    assert sum(len(d) for d in drawn_by) == 33 and len(planes) == 20
    assert len({battery.plane_cluster("symmetric", p) for p in planes}) == 13
    assert len({battery.plane_key(p) for p in planes}) == 20


def test_items_drawn_by_two_seeds_and_dsm_pairs_count_once():
    import xarray as xr
    from scoreprobe.studies.battery_summary import dsm_pair_gaps, item_units

    def ret(items, value):
        n = len(items)
        data = {k: (("step", "sigma", "sample"), np.full((2, 1, n), value))
                for k in ("retained", "captured", "captured_nearer_own", "capture_distance_ratio", "closer_nontrain")}
        return xr.Dataset(data, coords={"step": [1, 2], "sigma": [1.0], "split": ("sample", ["train"] * n),
                                        "item_index": ("sample", items)})
    col = {"retention": {0: ret([0, 1, 2], 0.2), 1: ret([2, 3], 0.6)}}
    out, n = item_units(col, "train", 1.0)
    assert out["retained"].shape == (4, 2) and sorted(n.tolist()) == [1, 1, 1, 2]
    np.testing.assert_allclose(sorted(out["retained"][:, 0]), [0.2, 0.2, 0.4, 0.6])   # item 2: mean of 0.2, 0.6

    def dsm(loss):                                                                   # 3 pairs, 2 σ in the band
        return xr.Dataset({"loss": (("step", "sigma", "sample"), loss)},
                          coords={"sigma": [0.5, 1.0], "split": ("sample", ["train"] * 3 + ["heldout"] * 3),
                                  "item_index": ("sample", [0, 1, 2, 0, 1, 2])})
    rng = np.random.default_rng(6)
    a, b = rng.normal(size=(2, 2, 6)), rng.normal(size=(2, 2, 6))
    gaps = dsm_pair_gaps({"dsm": {0: dsm(a), 1: dsm(b)}})
    mean = (a + b) / 2
    assert gaps.shape == (3, 2)                                                      # pairs, not (seed, pair)
    np.testing.assert_allclose(gaps, (mean[..., 3:] - mean[..., :3]).mean(axis=1).T)


# ------------------------------------------------------------------------------------------------
# Multiplicity over steps × σ, with planted effects
# ------------------------------------------------------------------------------------------------

def _families(rng, n_rep, planted, shift):
    """n_rep families of 10 steps × 24 σ one-sided p-values; `planted` (10, 24) bool true effects."""
    import scipy.stats
    z = rng.normal(size=(n_rep, 10, 24)) + shift * planted
    return scipy.stats.norm.sf(z)


def test_holm_over_the_family_controls_fwer_and_finds_the_planted_effects():
    rng = np.random.default_rng(7)
    planted = np.zeros((10, 24), bool)
    planted[6:, 8:14] = True                                                          # 24 true effects, late steps
    p = _families(rng, 1000, planted, shift=6.0)
    fam = np.stack([adjust_family(x, "holm") for x in p]) < 0.05
    per_step = adjust_pvalues(p, "holm") < 0.05                                       # each step its own family
    fwer = np.mean((fam & ~planted).any(axis=(1, 2)))
    assert fwer <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 1000)
    assert np.mean(fam[:, planted]) > 0.95                                            # planted ones found
    first = [first_significant_step(f, np.arange(10)) for f in np.where(fam, 0.0, 1.0)]
    assert np.mean(np.array(first) == 6) > 0.9                                        # the first true step
    null = _families(rng, 1000, np.zeros((10, 24), bool), 0.0)
    per_step_null = adjust_pvalues(null, "holm") < 0.05
    assert np.mean(per_step_null.any(axis=(1, 2))) > 0.25                             # ≈ 1 − 0.95^10: uncontrolled
    assert per_step.shape == fam.shape


def test_bh_over_the_family_controls_the_false_discovery_rate():
    rng = np.random.default_rng(8)
    planted = np.zeros((10, 24), bool)
    planted[3:, :12] = True
    p = _families(rng, 600, planted, shift=3.0)
    sig = np.stack([adjust_family(x, "bh") for x in p]) < 0.05
    false = (sig & ~planted).sum(axis=(1, 2))
    fdr = np.mean(false / np.maximum(sig.sum(axis=(1, 2)), 1))
    assert fdr <= 0.05 * (~planted).mean() + 0.01                                     # BH: FDR ≤ α·m0/m
    assert np.mean(sig[:, planted]) > 0.5


def test_significant_sigma_are_sets_with_their_gaps():
    grid = [0.1, 0.2, 0.5, 1.0, 2.0]
    p = np.array([[0.01, 0.2, 0.01, 0.01, 0.3], [0.5, 0.5, 0.5, 0.5, 0.5]])
    assert significant_sets(p, grid) == [[0.1, 0.5, 1.0], []]
    assert first_significant_step(p[::-1], [10, 20]) == 20
    assert math.isnan(first_significant_step(p[1:], [10]))
    from scoreprobe.studies.format import sigma_runs
    assert sigma_runs([0.1, 0.5, 1.0], grid) == "0.1, 0.5–1" and sigma_runs([], grid) == "none"
    assert adjust_family(np.array([[0.01, np.nan], [0.02, 0.04]])).shape == (2, 2)


# ------------------------------------------------------------------------------------------------
# The capture geometry (replacing "captured although closer to a valid non-training vertex")
# ------------------------------------------------------------------------------------------------

def test_capture_geometry_by_brute_force():
    from scoreprobe.data.datasets import STATE_CODES
    own = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0]], np.uint8)
    train = np.array([[0, 0, 1, 1], [1, 1, 1, 0]], np.uint8)
    starts = np.array([[1.1, 0.9, -1.0, -1.0],                        # at its own item, captured by far train 0
                       [0.0, 0.0, 1.0, 0.9],                          # nearer train 0, captured by it
                       [1.0, 1.0, -1.0, -1.0]])                       # not captured
    c = {"state": np.array([STATE_CODES["valid_memorized"]] * 2 + [STATE_CODES["valid_heldout"]]),
         "bits": np.array([train[0], train[0], own[2]]), "train_index": np.array([0, 0, -1])}
    out = restart_outcomes(c, own, np.full(3, -1), None, starts, train)
    d_own, d_cap = capture_distances(starts, own, train[[0, 0, 0]])
    np.testing.assert_array_equal(out["captured_nearer_own"], [True, False, False])
    np.testing.assert_allclose(out["capture_distance_ratio"][:2], (d_own / d_cap)[:2])
    assert np.isnan(out["capture_distance_ratio"][2])
    assert out["capture_distance_ratio"][0] < 1 < out["capture_distance_ratio"][1]
    no_geo = restart_outcomes(c, own, np.full(3, -1), None)
    assert not no_geo["captured_nearer_own"].any() and np.isnan(no_geo["capture_distance_ratio"]).all()


def test_capture_geometry_varies_where_closer_nontrain_is_identically_one():
    """The memorizer captures every held-out restart. The old statistic's `closer_nontrain` is 1 for held-out
    starts at small σ (the item itself is a valid non-training vertex; in the study's 36 bits at every σ up
    to 2); the share of captured restarts whose start is nearer its own item falls from 1 at small σ to
    well below 1 at large σ."""
    rule = Parity(G=2, shape=(4, 4), layout="offset")
    ds = make_dataset(rule, n_train=20, n_heldout=60, seed=0)
    r = retention(EmpiricalDenoiser(ds.train), sigmas=(0.2, 0.7, 3.0), n_noise=16, n_train=4, n_heldout=12,
                  dataset=ds, rule=rule, n_steps=24)
    ho = r.sel(sample=r.split == "heldout")
    assert float(ho.closer_nontrain.sel(sigma=0.2).min()) == 1.0                      # = plain capture: dropped
    share = (ho.captured_nearer_own.mean("sample") / ho.captured.mean("sample")).values   # (σ,)
    assert share[0] == pytest.approx(1.0) and share[-1] < 0.8 and share[-1] < share[0]
    ratio = ho.capture_distance_ratio.values
    assert np.nanmin(ratio) < 1 < np.nanmax(ratio)                                    # not identically anything
    assert np.all(np.isfinite(ratio) == (ho.captured.values > 0))
    assert to_signed(ds.train).shape[1] == 16


# ------------------------------------------------------------------------------------------------
# Across trained models: the t interval over seeds, the remedies' comparisons
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_seeds", [3, 5])
def test_seed_t_interval_covers_at_three_and_five_seeds(n_seeds):
    from scoreprobe.stats.timing import seed_t_interval
    rng = np.random.default_rng(n_seeds)
    hits = [(lambda r: r["lo"] <= 1.0 <= r["hi"])(seed_t_interval(rng.normal(1.0, 0.3, n_seeds)))
            for _ in range(4000)]
    assert 0.93 <= np.mean(hits) <= 0.97
    one = seed_t_interval([2.0])
    assert one["mean"] == 2.0 and math.isnan(one["lo"]) and math.isnan(one["p"])


def test_remedies_comparisons_pair_by_seed_leave_bounds_out_and_adjust_over_the_family():
    from analyses.remedies.run import FAMILY, value
    from analyses.remedies.paired_seeds import comparisons as paired

    def comparisons(rows):
        return paired(rows, FAMILY, value)

    def row(variant, seed, acc, mem, tau):
        return {"variant": variant, "seed": seed, "final_rule_acc": acc, "final_mem_ratio": mem, "tau_mem": tau}
    rows = [row("baseline", s, 0.4 + 0.01 * s, 0.2, 10000.0 + s) for s in (0, 1, 2)]
    rows += [row("multiplicative", s, 0.6 + 0.01 * s, 0.2 + 0.001 * s, 8000.0 if s else float("nan")) for s in (0, 1, 2)]
    rows += [row("global_token", 0, 0.5, 0.2, 9000.0)]
    cmp = {(c["variant"], c["reference"], c["quantity"]): c for c in comparisons(rows)}
    acc = cmp[("multiplicative", "baseline", "final_rule_acc")]
    assert acc["seeds"] == [0, 1, 2] and acc["mean"] == pytest.approx(0.2) and acc["p"] < 1e-6
    assert acc["p_holm"] >= acc["p"] and acc["significant"]
    tau = cmp[("multiplicative", "baseline", "log_tau_mem")]
    assert tau["censored_seeds"] == [0] and tau["n"] == 2                      # a bound is no number
    one = cmp[("global_token", "baseline", "final_rule_acc")]
    assert one["n"] == 1 and math.isnan(one["p"]) and not one["significant"]  # one seed: no interval
    assert len(cmp) == len(FAMILY)


def test_the_shipped_mechanism_json_re_reports_as_the_issue_found():
    """From the shipped json alone: Holm per step reproduces the stored adjusted p-values exactly; over the
    whole step × σ family the open series' first significant step is 738, not 500; 33 symmetric planes drawn
    are 20 distinct in 13 pairs; the closed series' 90 training items drawn are its 30; the old capture
    statistic's 'closer' share is ≈ 1."""
    from pathlib import Path
    from analyses.mechanism import measure as M
    from analyses.mechanism.rereport import rereport, rereport_markdown
    path = Path(__file__).resolve().parents[1] / "analyses" / "results" / "mechanism.json"
    args = M.parse_args(["--report-only"])
    report = rereport(args, path)
    rr = report["re_report"]["series"]
    for r in rr.values():
        assert r["dsm"]["per_step_holm_reproduced_max_abs_error"] == 0.0 and r["dsm"]["family_size"] == 240
    assert rr["open"]["dsm"]["holm"]["first_significant_step"] == 738
    assert rr["open"]["dsm"]["per_step_holm"]["first_significant_step"] == 500
    assert rr["open"]["units"]["symmetric/local"] == {"drawn": 33, "distinct_planes": 20, "clusters": 13}
    assert rr["closed"]["units"]["retention_train_items"] == {"drawn": 90, "distinct": 30}
    assert rr["open"]["capture"]["closer_nontrain_min_sigma_le_2"] > 0.998
    dsm = rr["open"]["half_change"]["DSM paired gap, σ in [0.2, 2.0]"]
    assert dsm["exact_mean_curve"] and 500 < dsm["step"] < 36000
    md = rereport_markdown(report, args)
    assert "ONE trained model" in md and "First significant step: **738**" in md
