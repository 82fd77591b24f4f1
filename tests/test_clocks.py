"""probes/clocks.py: oracles through clocks (ground truth), taus on synthetic curves, power-law fits."""
import itertools
import json
import warnings

import numpy as np
import pytest
import scipy.stats
import xarray as xr

from scoreprobe import store
from scoreprobe.data.datasets import STATES, make_dataset
from scoreprobe.errors import ConfigError
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.stats.clocks import clocks
from scoreprobe.stats.taus import fit_power_law
from scoreprobe.data.rules import Parity

N_TRAIN, N_HELDOUT, N_SAMPLES = 16, 16, 400


@pytest.fixture(scope="module")
def small():
    """Parity G=2 on 3x4 (contiguous groups = horizontal pixel pairs): 2^6 = 64 valid images."""
    rule = Parity(2, shape=(3, 4))
    return rule, make_dataset(rule, N_TRAIN, N_HELDOUT, seed=0)


def brute_force_valid(bits):
    """Even parity of each pair (2i, 2i+1), checked directly."""
    return ((bits[:, 0::2] + bits[:, 1::2]) % 2 == 0).all(axis=1)


def test_memorizer_copies_training_items(small):
    rule, data = small
    ds = clocks({0: EmpiricalDenoiser(data.train), 7: EmpiricalDenoiser(data.train)}, n_samples=N_SAMPLES,
                dataset=data, rule=rule, progress=False)
    assert list(ds.step.values) == [0, 7]
    assert (ds.mem_ratio >= 0.99).all() and (ds.rule_acc == 1).all() and (ds.group_acc == 1).all()
    assert (ds.group_mem >= 0.99).all() and (ds.nearest_train_hamming.values[ds.state.values == 4] == 0).all()
    assert ds.attrs["tau_rule"] == 0 and ds.attrs["tau_mem"] == 0 and ds.attrs["window_open"] is False
    # a pure memorizer scores rule_acc 1 but never "learns the rule": nothing valid is new
    assert (ds.novel_valid == 0).all() and np.isnan(ds.attrs["tau_novel"])
    assert ds.attrs["novel_oracle"] == pytest.approx(1 - N_TRAIN / rule.n_valid)


def test_rule_oracle_generalizes(small):
    rule, data = small
    ds = clocks({0: RuleDenoiser(rule), 100: RuleDenoiser(rule)}, n_samples=N_SAMPLES, dataset=data, rule=rule,
                keep_bits=True, progress=False)
    assert (ds.rule_acc >= 0.99).all() and ds.attrs["tau_novel"] == 0
    p = N_TRAIN / rule.n_valid  # uniform over the valid set: P(sample is a training item) = N / n_valid
    tol = 4 * np.sqrt(p * (1 - p) / N_SAMPLES) + 0.02  # binomial 4σ + ODE discretization slack
    assert np.all(np.abs(ds.mem_ratio.values - p) < tol), (ds.mem_ratio.values, p)
    assert np.all(np.abs(ds.heldout_hit.values - N_HELDOUT / rule.n_valid) < tol)
    # same seed -> same initial noise at every step: a model that does not change gives the same samples
    np.testing.assert_array_equal(ds.bits.values[0], ds.bits.values[1])
    _check_against_brute_force(ds.isel(step=0), data)


def _check_against_brute_force(ds, data):
    """States, ratios and nearest distances recomputed from the kept bits by direct enumeration."""
    bits = ds.bits.values
    train = {tuple(r) for r in data.train}
    held = {tuple(r) for r in data.heldout}
    expect = np.where(~brute_force_valid(bits), 1,
                      [4 if tuple(b) in train else 3 if tuple(b) in held else 2 for b in bits])
    np.testing.assert_array_equal(ds.state.values, expect)  # no invalid endpoints with an exact oracle
    dist = (bits[:, None, :] != data.train[None, :, :]).sum(axis=2).min(axis=1)
    np.testing.assert_array_equal(ds.nearest_train_hamming.values, dist)
    for name, code in [("mem_ratio", 4), ("heldout_hit", 3), ("novel_ratio", 2), ("violating_ratio", 1)]:
        assert float(ds[name]) == pytest.approx(np.mean(expect == code))
    assert float(ds.rule_acc) == pytest.approx(brute_force_valid(bits).mean())
    assert ds.state.attrs["flag_meanings"].split() == list(STATES)


def test_samples_do_not_depend_on_n_or_chunks(small):
    rule, data = small
    a = clocks(RuleDenoiser(rule), n_samples=60, dataset=data, rule=rule, keep_bits=True)
    b = clocks(RuleDenoiser(rule), n_samples=25, dataset=data, rule=rule, keep_bits=True, chunk_size=7)
    assert "step" not in a.dims  # a single denoiser gives one slab
    np.testing.assert_array_equal(a.bits.values[:25], b.bits.values)


class BitSampler:
    """Stand-in for a GPT sampler: `.sample(n, seed)` returns bits (here: training items)."""

    def __init__(self, items):
        self.items = items

    def sample(self, n, seed, temperature=1.0):
        return self.items[np.random.default_rng(seed).integers(0, len(self.items), n)]


def test_ancestral_samplers_are_classified_directly(small):
    rule, data = small
    ds = clocks({0: BitSampler(data.heldout), 9: BitSampler(data.train)}, n_samples=50, dataset=data, rule=rule,
                progress=False)
    np.testing.assert_array_equal(ds.heldout_hit.values, [1, 0])
    np.testing.assert_array_equal(ds.mem_ratio.values, [0, 1])


def test_mapping_needs_data(small):
    rule, data = small
    with pytest.raises(ConfigError, match="dataset= and rule="):
        clocks({0: RuleDenoiser(rule)}, n_samples=4)


def test_store_keeps_taus_and_resumes(small, tmp_path):
    rule, data = small
    mapping = {0: RuleDenoiser(rule), 50: EmpiricalDenoiser(data.train)}
    out = tmp_path / "clocks.zarr"
    ds = clocks(mapping, n_samples=40, dataset=data, rule=rule, out=out, progress=False)
    disk = store.open_store(out)
    for key in ("tau_rule", "tau_mem", "window_open", "rule_threshold", "mem_threshold", "window_intervals"):
        assert disk.attrs[key] == ds.attrs[key]
    assert json.loads(disk.attrs["scoreprobe_config"])["n_samples"] == 40
    again = clocks(mapping, n_samples=40, dataset=data, rule=rule, out=out, progress=False)
    xr.testing.assert_equal(again, ds)
    with pytest.raises(Exception, match="config keys differ: n_samples"):
        clocks(mapping, n_samples=41, dataset=data, rule=rule, out=out, progress=False)


# ---------------------------------------------------------------------------------------------
# Synthetic curves (τ itself: tests/test_taus.py)
# ---------------------------------------------------------------------------------------------


def curves(steps, rule_acc, mem_ratio):
    steps = np.asarray(steps, dtype=np.int64)
    return xr.Dataset({"rule_acc": ("step", np.asarray(rule_acc, float)),
                       "mem_ratio": ("step", np.asarray(mem_ratio, float))}, coords={"step": steps})


STEPS = np.array([0, 10, 30, 100, 300, 1000, 3000, 10000])


# ---------------------------------------------------------------------------------------------
# fit_power_law
# ---------------------------------------------------------------------------------------------


def test_power_law_exact_and_noisy():
    N = np.array([64, 128, 256, 512, 1024, 2048])
    fit = fit_power_law(N, 35 * N ** 1.14)
    assert fit["a"] == pytest.approx(35, rel=1e-9) and fit["b"] == pytest.approx(1.14, rel=1e-9)
    rng = np.random.default_rng(1)
    covered_a = covered_b = 0
    trials = 300
    for _ in range(trials):
        tau = 35 * N ** 1.14 * np.exp(rng.normal(0, 0.1, N.size))
        f = fit_power_law(N, tau)
        covered_b += f["b_ci"][0] <= 1.14 <= f["b_ci"][1]
        covered_a += f["a_ci"][0] <= 35 <= f["a_ci"][1]
    lo, hi = scipy.stats.binom.ppf([0.0005, 0.9995], trials, 0.95)  # 95% intervals must cover 95% of the time
    assert lo <= covered_b <= hi and lo <= covered_a <= hi
    # scipy's nonlinear least squares in log space agrees with the linear fit
    popt, _ = scipy.optimize.curve_fit(lambda x, la, b: la + b * x, np.log(N), np.log(tau))
    assert f["b"] == pytest.approx(popt[1], rel=1e-6) and np.log(f["a"]) == pytest.approx(popt[0], rel=1e-6)


def test_power_law_drops_missing_and_rejects_too_few():
    fit = fit_power_law([10, 20, 40, 80], [np.nan, 2 * 20 ** 0.5, 2 * 40 ** 0.5, 2 * 80 ** 0.5])
    assert fit["n"] == 3 and fit["b"] == pytest.approx(0.5)
    assert np.isnan(fit_power_law([1, 2], [1, 2])["b_ci"][0])  # two points: a fit but no interval
    with pytest.raises(ConfigError, match="at least two distinct N"):
        fit_power_law([10, 20], [1.0, np.nan])


def test_itertools_ground_truth_of_n_valid(small):
    rule, _ = small  # the expected mem ratio above uses n_valid: check it by enumeration
    bits = np.array(list(itertools.product([0, 1], repeat=12)), dtype=np.uint8)
    assert brute_force_valid(bits).sum() == rule.n_valid == 64


def test_clock_figures_mark_taus_and_stack_states():
    from scoreprobe.viz import plot_clocks, plot_states
    u = np.log1p(STEPS)  # logit-linear in log(step + 1): the interpolant is exact (docs/definitions.md)
    rule_acc = 1 / (1 + np.exp(-(np.log(9) + 1.5 * (u - np.log1p(200.0)))))    # 0.9 at step 200
    mem = 1 / (1 + np.exp(-(np.log(1 / 9) + 2.0 * (u - np.log1p(1000.0)))))   # 0.1 at step 1000
    ds = curves(STEPS, rule_acc, mem)
    ds["heldout_hit"] = ds.rule_acc * 0 + 0.1
    fig = plot_clocks(ds)
    vlines = sorted(line.get_xdata()[0] for line in fig.axes[0].lines if len(set(line.get_xdata())) == 1)
    assert vlines == pytest.approx([200.0, 1000.0])  # τ_rule and τ_mem computed when attrs are absent
    assert len(fig.axes[0].patches) == 1  # the shaded innovation window (one interval)
    rng = np.random.default_rng(0)
    states = xr.Dataset({"state": (("step", "sample"), rng.integers(0, 5, (len(STEPS), 50)).astype(np.int8))},
                        coords={"step": STEPS})
    fig = plot_states(states)
    tops = fig.axes[0].collections[-1].get_paths()[0].vertices[:, 1]
    assert tops.max() == pytest.approx(1.0)  # the five fractions stack to one
    with warnings.catch_warnings():  # one checkpoint (`clocks --steps S --plot`): no singular-xlim warning
        warnings.simplefilter("error")
        plot_clocks(curves([100], [0.5], [0.0]))


# ---------------------------------------------------------------------------------------------
# Trained series: a tiny GPT (ancestral samples) and the CLI on a tiny DiT
# ---------------------------------------------------------------------------------------------

SMALL_RULE = {"name": "parity", "G": 2, "shape": [3, 4], "layout": "contiguous", "seed": 0}


def _train(tmp_path_factory, name, **kw):
    from scoreprobe.loading.series import load_series
    from scoreprobe.training.train import TrainConfig, train_run
    cfg = TrainConfig(rule=SMALL_RULE, n_train=8, n_heldout=8, hidden_size=32, depth=1, num_heads=2, **kw)
    run = tmp_path_factory.mktemp(name) / "run"
    train_run(cfg, run, progress=False)
    return load_series(run)


def test_clocks_on_a_tiny_trained_gpt(tmp_path_factory):
    series = _train(tmp_path_factory, "gpt", model="gpt", total_steps=200, n_checkpoints=4, batch_size=32, lr=1e-2,
                    log_every=50)
    ds = clocks(series, n_samples=100, keep_bits=True, progress=False)
    assert list(ds.step.values) == series.steps
    assert (ds.invalid_ratio == 0).all()  # ancestral samples are always vertices
    last = series.steps[-1]
    np.testing.assert_array_equal(ds.bits.sel(step=last).values, series.sampler(last).sample(100, 0))
    for step in series.steps:
        _check_against_brute_force(ds.sel(step=step), series.dataset)
    # chance of a valid 12-bit image is 1/64; a trained GPT is far above it
    assert float(ds.rule_acc.isel(step=-1)) > 0.3 > float(ds.rule_acc.isel(step=0))


def test_a_gpt_clocks_store_resumes_by_the_gpt_weights(tmp_path_factory, tmp_path):
    """The GPT's steps are identified by its weights (through clocks' sampler wrapper), so a rerun
    resumes the store instead of refusing it as 'cannot tell whether it is the same model'."""
    series = _train(tmp_path_factory, "gpt", model="gpt", total_steps=200, n_checkpoints=4, batch_size=32, lr=1e-2,
                    log_every=50)
    out = tmp_path / "clocks.zarr"
    first = clocks(series, n_samples=50, out=out, progress=False)
    record = json.loads((out / "zarr.json").read_text())["attributes"]["scoreprobe_record"]
    assert all("weights" in m for m in record["models"])
    again = clocks(series, n_samples=50, out=out, progress=False)
    xr.testing.assert_equal(again, first)


def test_cli_clocks_on_a_tiny_dit(tmp_path_factory, tmp_path, capsys):
    from scoreprobe.cli import main
    series = _train(tmp_path_factory, "dit", model="dit", patch_size=1, total_steps=3, n_checkpoints=3, batch_size=8)
    out, png = tmp_path / "c.zarr", tmp_path / "c.png"
    args = [str(series.path), "--n-samples", "16", "--n-steps", "3", "--device", "cpu", "--out", str(out)]
    main(["clocks", *args, "--plot", str(png)])
    text = capsys.readouterr().out
    assert "rule_acc" in text and "tau_rule" in text and "innovation window" in text
    rows = [line.split() for line in text.splitlines() if line.split() and line.split()[0].isdigit()]
    assert [int(r[0]) for r in rows] == series.steps and all(len(r) == 9 for r in rows)
    disk = store.open_store(out)
    np.testing.assert_allclose([float(r[1]) for r in rows], disk.rule_acc.values, atol=5e-4)
    assert png.stat().st_size > 0
    with pytest.raises(SystemExit) as e:  # a different analysis on the same store: one line, exit 2
        main(["clocks", *args[:2], "17", *args[3:]])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "n_samples" in err


@pytest.mark.parametrize("rule", [Parity(3, shape=(3, 4), layout="random", seed=2), Parity(2, shape=(2, 4))],
                         ids=["parity-random", "parity"])
def test_group_bits_match_group_valid(rule):
    """Flipping one bit of a valid image breaks exactly the groups that contain it."""
    _check_group_bits(rule)


def test_group_bits_other_rules():
    from scoreprobe.data.rules import ExactK, LatinSquare, RowK, Sudoku
    for rule in (ExactK(3, shape=(3, 3)), RowK(2, shape=(3, 4)), LatinSquare(3), Sudoku(4)):
        _check_group_bits(rule)


def _check_group_bits(rule):
    from scoreprobe.probes.clocks import group_bits
    groups = group_bits(rule)
    assert groups.shape[0] == rule.n_groups
    v = rule.sample(1, seed=0)
    for i in range(rule.n_bits):
        w = v.copy()
        w[0, i] ^= 1
        broken = set(np.flatnonzero(~rule.group_valid(w)[0]))
        assert broken == {g for g in range(rule.n_groups) if i in groups[g]}, (rule, i)


def test_group_mem_by_hand():
    from scoreprobe.probes.clocks import _group_mem
    rule = Parity(2, shape=(1, 4))  # groups (0,1), (2,3)
    train = np.array([[0, 0, 1, 1], [1, 1, 1, 1]], dtype=np.uint8)
    bits = np.array([[0, 0, 1, 1], [0, 0, 0, 0], [1, 0, 1, 0]], dtype=np.uint8)
    nearest = np.array([0, 0, 1])  # sample 2 is at distance 2 from both; take item 1
    # sample 0: both groups equal; sample 1: first group only; sample 2: none
    assert _group_mem(bits, train, nearest, rule) == pytest.approx((1 + 0.5 + 0) / 3)


def test_thresholded_bits_decide_validity_and_nan_rows_are_excluded(small):
    """An off-vertex endpoint that rounds to a valid vertex is valid for rule_acc and group_acc alike;
    a non-finite endpoint is `invalid`, excluded from the group metrics, with sentinel distances."""
    from scoreprobe.data.datasets import to_signed
    from scoreprobe.probes.clocks import sample_metrics
    from scoreprobe.slices import classify_endpoints
    rule, data = small
    valid = to_signed(data.heldout[:1]).astype(float)                    # (1, D) a valid vertex
    violating = valid.copy()
    violating[0, 0] *= -1                                                  # breaks exactly one pair
    x = np.concatenate([valid, 0.4 * valid, np.full_like(valid, np.nan), violating])
    cls = classify_endpoints(x, data, rule)
    codes = [STATES[c] for c in cls["state"]]
    assert codes == ["valid_heldout", "valid_heldout", "invalid", "rule_violating"]
    assert cls["off_vertex"].tolist() == [False, True, False, False]
    assert cls["nearest_train_hamming"][2] == -1 and cls["nearest_train_index"][2] == -1
    m = sample_metrics(cls, data, rule)
    assert m["rule_acc"] == 0.5 and m["heldout_hit"] == 0.5 and m["invalid_ratio"] == 0.25
    assert m["off_vertex"] == pytest.approx(1 / 3)
    n_groups = rule.n_groups
    assert m["group_acc"] == pytest.approx((3 * n_groups - 1) / (3 * n_groups))  # finite rows only
    states = ("novel_ratio", "heldout_hit", "mem_ratio", "violating_ratio", "invalid_ratio")
    assert sum(m[k] for k in states) == pytest.approx(1.0)


def test_clocks_warn_about_nonfinite_samples(small):
    from scoreprobe.errors import NonFiniteWarning
    rule, data = small

    def nan_denoiser(x, sigma):
        return x * float("nan")

    with pytest.warns(NonFiniteWarning, match="400 of 400 sampled endpoints are non-finite"):
        ds = clocks(nan_denoiser, n_samples=400, dataset=data, rule=rule, n_steps=2)
    assert float(ds.invalid_ratio) == 1 and float(ds.rule_acc) == 0 and np.isnan(float(ds.group_acc))


def test_a_store_sampled_with_other_noise_is_refused(small, tmp_path):
    """A store written before the counter-based noise (its config has no `noise`) is not extended."""
    rule, data = small
    out = tmp_path / "clocks.zarr"
    clocks({0: RuleDenoiser(rule)}, n_samples=8, dataset=data, rule=rule, out=out, progress=False)
    meta_path = out / "zarr.json"
    meta = json.loads(meta_path.read_text())
    config = json.loads(meta["attributes"]["scoreprobe_config"])
    assert config["noise"] == "splitmix64-box-muller"
    del config["noise"]
    meta["attributes"]["scoreprobe_config"] = json.dumps(config)
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(Exception, match="config keys differ: noise.*overwrite=True"):
        clocks({0: RuleDenoiser(rule), 5: RuleDenoiser(rule)}, n_samples=8, dataset=data, rule=rule, out=out,
               progress=False)
