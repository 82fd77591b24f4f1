"""Patching effects read per model and over models (scoreprobe.stats.circuit_effects, circuit_effects_across,
unit_intervals) and the GPT rule pairs (scoreprobe.probes.circuits.gpt_rule_pairs)."""


def test_crossing_interpolates_in_log_step():
    import numpy as np

    from scoreprobe.stats import circuit_effects as circuits
    steps = np.array([99.0, 999.0, 9999.0])
    np.testing.assert_allclose(circuits.crossing(steps, np.array([0.0, 0.5, 1.0]), 1.0), 999.0)
    assert circuits.crossing(steps, np.array([np.nan, 0.6, 1.0]), 1.0) == 999.0     # NaN skipped: a bound
    np.testing.assert_allclose(circuits.decay(steps, np.array([1.0, 0.5, 0.0])), 999.0)
    mid = circuits.crossing(steps, np.array([0.0, 0.25, 1.0]), 1.0)
    np.testing.assert_allclose(np.log(mid + 1), (np.log(1000) + np.log(10000)) / 2 - (np.log(10000) - np.log(1000)) / 6)
    assert np.isnan(circuits.crossing(steps, np.array([0.0, 0.1, 0.2]), -1.0))


def test_models_as_units_t_interval_and_holm():
    """The across-model summary against scipy's one-sample t test, NaN kept NaN, and Holm over the defined cells."""
    import numpy as np
    from scipy import stats

    from scoreprobe.stats.circuit_effects_across import effects_across
    from scoreprobe.stats.unit_intervals import t_summary
    v = np.array([[0.5, 0.1, np.nan], [0.7, -0.2, 0.3], [0.6, 0.2, 0.2]])          # (models, cells)
    mean, lo, hi, p = t_summary(v)
    t = stats.ttest_1samp(v[:, :2], 0.0)
    np.testing.assert_allclose(p[:2], t.pvalue)
    half = stats.t.ppf(0.975, 2) * v[:, 0].std(ddof=1) / np.sqrt(3)
    np.testing.assert_allclose([lo[0], hi[0]], [0.6 - half, 0.6 + half])
    assert np.isnan([mean[2], lo[2], p[2]]).all()
    per_model = {n: {"effects": {"rule": {"effect": [v[i, :2].tolist()], "reason": [["", ""]],
                                          "half_step_over_tau": [[1.0, 1.0]], "half_step": [[500.0, 900.0]],
                                          "half_step_is_bound": [[False, True]]}}}
                 for i, n in enumerate("abc")}
    per_model["b"]["effects"]["rule"]["reason"] = [["", "mixed sign"]]
    per_model["b"]["effects"]["rule"]["effect"] = [[0.7, np.nan]]
    cells, family = effects_across(per_model, "rule", list("abc"), ["x", "y"], [0.7])
    assert family["size"] == 1 and cells[1]["undefined"] == "b: mixed sign" and np.isnan(cells[1]["mean"])
    np.testing.assert_allclose(cells[0]["p_holm"], t.pvalue[0])                     # a family of one: p unchanged


def test_gpt_rule_pairs_flip_the_earlier_group_member():
    """The flipped bit is the first of its parity group in token order and the position read is the group's last
    member (after it: a teacher-forced log-odds can read it); every clean image is valid, every corrupt one not."""
    import numpy as np

    from scoreprobe.data.datasets import make_dataset
    from scoreprobe.data.rules import rule_from_spec
    from scoreprobe.probes.circuits import gpt_rule_pairs
    rule = rule_from_spec({"name": "parity", "G": 3, "shape": [6, 6]})
    data = make_dataset(rule, 8, 40, 0)
    clean, corrupt, positions = gpt_rule_pairs(data, rule, 40, 3)
    diff = clean != corrupt
    assert (diff.sum(1) == 1).all() and (positions.sum(1) == 1).all() and set(np.unique(positions)) == {0.0, 1.0}
    flipped, read = diff.argmax(1), positions.argmax(1)
    groups = np.asarray(rule.groups)
    for b, r in zip(flipped, read):
        g = groups[(groups == b).any(1)][0]
        assert b == g.min() and (g > b).sum() == len(g) - 1 and r == g.max()
    assert rule.is_valid(clean).all() and not rule.is_valid(corrupt).any()


def test_gpt_read_steps_and_across_models():
    """read_steps: the common checkpoint nearest (in log step) to the mean clock; gpt_across: the per-model
    effects at those checkpoints, their mean and a t interval over models, Holm over the defined cells."""
    import numpy as np

    from scoreprobe.stats.circuit_effects_across import gpt_across, read_steps
    steps = [0, 100, 300, 900, 1500]
    at = read_steps(steps, {"a": {"tau_rule": 250, "tau_mem": 800}, "b": {"tau_rule": 350, "tau_mem": None}})
    assert at == {"tau_rule": 300, "tau_mem": 900, "last": 1500}
    assert read_steps(steps, {"a": {"tau_rule": None, "tau_mem": None}}) == {"last": 1500}
    rng = np.random.default_rng(0)
    per_model = {}
    for n, shift in (("m0", 0.0), ("m1", 0.1), ("m2", -0.1)):
        eff = rng.uniform(0, 1, (len(steps), 2)) + shift
        eff[:, 1] = np.nan                                      # site y undefined everywhere
        per_model[n] = {"steps": steps, "sites": ["x", "y"],
                        **{k: {"effect": eff.tolist(), "reason": [["", "mixed sign"]] * len(steps),
                               "contrast_mean": list(range(len(steps)))} for k in ("rule", "copy")}}
    out = gpt_across(per_model, list(per_model), at)
    cells = {(c["read"], c["site"]): c for c in out["rule"]["cells"]}
    x = [per_model[n]["rule"]["effect"][3][0] for n in per_model]
    assert np.isclose(cells[("tau_mem", "x")]["mean"], np.mean(x))
    assert np.isnan(cells[("last", "y")]["mean"]) and "m0: mixed sign" in cells[("last", "y")]["undefined"]
    assert out["rule"]["family"]["size"] == 3                  # 3 readings × site x (y undefined)
    assert out["copy"]["contrast"]["last"]["mean"] == 4
