"""Tidy clocks results (stats/tidy.py) and several runs side by side (stats/compare.py, `scoreprobe compare`).

Ground truth: the scaling study's own τ table (analyses/results/scaling_cpu.json, computed by taus() from the
same exports), planted shifts of the step axis (τ + 1 scaled by exactly 10), and a run compared with itself."""
import json
import math
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import scoreprobe as sp
from scoreprobe.cli import main
from scoreprobe.data.rules import Parity
from scoreprobe.errors import ConfigError, DataError, StoreError
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.stats.compare import read_export

ROOT = Path(__file__).resolve().parents[1]
EXPORTS = ROOT / "analyses" / "results" / "scaling_cpu"
TABLE = ROOT / "analyses" / "results" / "scaling_cpu.json"
THREE = ("g2-n120", "g2-n120-s1", "g2-n120-s2")


@pytest.fixture(scope="module")
def oracle_clocks():
    rule = Parity(2, shape=(3, 4))
    data = sp.make_dataset(rule, 16, 16, seed=0)
    models = {0: RuleDenoiser(rule), 30: RuleDenoiser(rule), 300: EmpiricalDenoiser(data.train)}
    return sp.clocks(models, n_samples=200, dataset=data, rule=rule, progress=False), rule, data


def test_taus_are_data_variables_equal_to_the_attrs_and_survive_concat(oracle_clocks):
    ds, _, _ = oracle_clocks
    for key in ("tau_rule", "tau_novel", "tau_mem", "window_lo", "window_hi", "window_log10_width", "log10_ratio"):
        np.testing.assert_equal(float(ds[key]), np.nan if ds.attrs[key] is None else ds.attrs[key])
    for key in ("tau_rule", "tau_novel", "tau_mem", "window_log10_width"):
        np.testing.assert_equal(ds[key + "_ci"].values, np.array(ds.attrs[key + "_ci"], dtype=float))
    assert bool(ds["window_open"]) == ds.attrs["window_open"]
    assert list(ds["bound"].values) == ["lo", "hi"] and ds["tau_mem"].attrs["units"] == "training steps"
    both = xr.concat([ds, ds.assign(tau_mem=ds["tau_mem"] + 7)], dim="run")
    np.testing.assert_equal(both["tau_mem"].values, [ds.attrs["tau_mem"], ds.attrs["tau_mem"] + 7])
    assert both["tau_rule_ci"].dims == ("run", "bound")


def test_summary_is_one_row_of_the_taus(oracle_clocks):
    ds, _, _ = oracle_clocks
    s = sp.summary(ds)
    assert s.shape[0] == 1
    row = s.iloc[0]
    assert row["tau_mem"] == ds.attrs["tau_mem"] and row["tau_mem_lo"] == ds.attrs["tau_mem_ci"][0]
    assert row["n_checkpoints"] == 3 and row["last_step"] == 300 and row["n_samples"] == 200
    assert row["final_mem_ratio"] == float(ds["mem_ratio"].sel(step=300))
    assert row["window_status"] == ds.attrs["window_status"]


def test_summary_of_a_dataset_without_taus_computes_them():
    ds = read_export(EXPORTS / "g2-n120.npz")
    assert "tau_rule" not in ds.attrs
    row = sp.summary(ds).iloc[0]
    assert row["tau_rule"] == pytest.approx(sp.tau_summary(ds, warn=False)["tau_rule"], rel=1e-12)


def test_existing_threshold_dimension_is_kept_and_flattened(oracle_clocks):
    """A τ along a threshold dimension (written by a later taus()) is not replaced; summary makes columns."""
    ds, _, _ = oracle_clocks
    ds = ds.drop_vars(["tau_rule", "tau_rule_ci"]).assign(
        tau_rule=("rule_threshold_level", [10.0, 20.0]),
        tau_rule_ci=(("rule_threshold_level", "bound"), [[5.0, 15.0], [15.0, 25.0]])).assign_coords(
        rule_threshold_level=[0.5, 0.9])
    kept = sp.with_taus(ds)
    assert kept["tau_rule"].dims == ("rule_threshold_level",)
    row = sp.summary(kept).iloc[0]
    assert row["tau_rule[0.9]"] == 20.0 and row["tau_rule[0.5]_lo"] == 5.0 and row["tau_rule[0.9]_hi"] == 25.0
    both = sp.compare([kept, kept], names=["a", "b"], n_boot=20)
    assert both["tau_rule"].dims == ("run", "rule_threshold_level") and both["tau_rule"].values.tolist() == [
        [10.0, 20.0], [10.0, 20.0]]
    assert sp.summary(both).loc["b", "tau_rule[0.9]"] == 20.0


# ---------------------------------------------------------------------------------------------
# compare
# ---------------------------------------------------------------------------------------------


def test_compare_on_three_scaling_exports_reproduces_their_tau_table():
    table = {r["run"]: r for r in json.loads(TABLE.read_text())["runs"]}
    ds = sp.compare([EXPORTS / f"{n}.npz" for n in THREE])
    assert list(ds["run"].values) == list(THREE) and ds.attrs["step_axis"].startswith("the runs' own steps")
    for i, name in enumerate(THREE):
        want = table[name]
        for key in ("tau_rule", "tau_novel", "tau_mem", "window_log10_width"):
            got = float(ds[key].values[i])
            assert (math.isnan(got) and want[key] is None) or got == pytest.approx(want[key], rel=1e-9), (name, key)
            lo, hi = ds[key + "_ci"].values[i]
            w_lo, w_hi = (math.inf if v is None else v for v in want[key + "_ci"])
            if want[key] is None and want[key + "_ci"][0] is None:   # a τ never reached: its CI ends are unknown
                continue
            assert lo == pytest.approx(w_lo, rel=1e-9) and hi == pytest.approx(w_hi, rel=1e-9), (name, key)
        assert bool(ds["window_open"].values[i]) == want["window_open"]
        np.testing.assert_allclose(ds["rule_acc"].values[i], want["curve"]["rule_acc"], rtol=0, atol=1e-12)
    assert ds["paired"].values.all() and ds["same_data"].values.all()   # seeds of one configuration share data
    summ = sp.summary(ds)
    assert list(summ.index) == list(THREE) and summ.loc["g2-n120-s1", "tau_mem"] == pytest.approx(
        table["g2-n120-s1"]["tau_mem"], rel=1e-9)


def _shifted(ds, factor=10):
    """The same states at steps with step + 1 multiplied by `factor`: every τ + 1 is multiplied by it."""
    return ds.assign_coords(step=(ds["step"].values + 1) * factor - 1)


def test_planted_step_shift_gives_its_log_ratio_exactly_with_a_paired_ci():
    base = read_export(EXPORTS / "g2-n120.npz")
    ds = sp.compare([base, base, _shifted(base)], names=["a", "same", "x10"], n_boot=200)
    assert ds["d_log10_tau_mem"].values[1] == 0 and list(ds["d_log10_tau_mem_ci"].values[1]) == [0, 0]
    assert ds["d_log10_tau_mem"].values[2] == pytest.approx(1.0, abs=1e-12)
    # paired: the same resampled indices give the same curves on a shifted axis, so the CI is the point
    np.testing.assert_allclose(ds["d_log10_tau_rule_ci"].values[2], [1.0, 1.0], atol=1e-12)
    assert ds["d_window_log10_width"].values[2] == pytest.approx(0.0, abs=1e-12)
    assert "union" in ds.attrs["step_axis"] and "state" not in ds
    # every run's curve is its own at its own checkpoints
    x10 = ds.sel(run="x10")
    at = x10["measured"].values
    np.testing.assert_allclose(x10["rule_acc"].values[at], base["rule_acc"].values, atol=1e-12)
    assert np.isnan(x10["rule_acc"].values[~at & (ds["step"].values < x10["step"].values[at].min())]).all()


def test_unpaired_runs_are_resampled_independently():
    base = read_export(EXPORTS / "g2-n120.npz")
    other = base.copy()
    other.attrs["scoreprobe_config"] = json.dumps({**json.loads(base.attrs["scoreprobe_config"]), "seed": 5})
    ds = sp.compare([base, other], n_boot=400)
    assert not ds["paired"].values[1] and ds["d_log10_tau_mem"].values[1] == 0
    lo, hi = ds["d_log10_tau_mem_ci"].values[1]
    assert lo < 0 < hi    # two independent resamplings of the same run: the interval holds 0 and has width


def test_a_stored_unreached_upper_end_reads_back_as_inf():
    ds = sp.with_taus(read_export(EXPORTS / "g2-n120.npz").assign_attrs(tau_rule_ci=[1.0, None], tau_rule=None,
                                                                           window_lo_ci=[None, None]))
    assert list(ds["tau_rule_ci"].values) == [1.0, np.inf] and np.isnan(ds["window_lo_ci"].values).all()


def test_compare_reads_stores_and_run_directories(tmp_path, oracle_clocks):
    from scoreprobe.training.train import TrainConfig, train_run
    _, rule, data = oracle_clocks
    store = tmp_path / "c.zarr"
    direct = sp.clocks({0: RuleDenoiser(rule), 30: EmpiricalDenoiser(data.train)}, n_samples=100, dataset=data,
                       rule=rule, out=store, progress=False)
    cfg = TrainConfig(rule={"name": "parity", "G": 2, "shape": [4, 4], "layout": "random", "seed": 0}, n_train=16,
                      n_heldout=16, hidden_size=32, depth=1, num_heads=2, batch_size=16, total_steps=8,
                      n_checkpoints=3, log_every=4, resume_every=7)
    run = train_run(cfg, tmp_path / "run", progress=False)
    ds = sp.compare([store, run], n_samples=40, progress=False, n_boot=50)
    assert list(ds["run"].values) == ["c.zarr", "run"]
    assert float(ds["tau_mem"].values[0]) == direct.attrs["tau_mem"]
    measured = sp.clocks(sp.load_series(run), n_samples=40, progress=False)
    assert float(ds["mem_ratio"].sel(run="run", step=8)) == float(measured["mem_ratio"].sel(step=8))
    assert not ds["same_data"].values[1]


def test_bad_items_are_typed_errors_before_any_work(tmp_path, oracle_clocks):
    ds, rule, data = oracle_clocks
    with pytest.raises(ConfigError, match="at least one"):
        sp.compare([])
    with pytest.raises(ConfigError, match="nothing at"):
        sp.compare([ds, tmp_path / "missing"])
    with pytest.raises(ConfigError, match="names"):
        sp.compare([ds, ds], names=["a"])
    with pytest.raises(ConfigError, match="differ"):
        sp.compare([ds, ds], names=["a", "a"])
    with pytest.raises(ConfigError, match="clocks Dataset"):
        sp.compare([xr.Dataset({"x": ("step", [1.0])})])
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.zeros(3))
    with pytest.raises(DataError, match="not a scoreprobe-scaling-run"):
        sp.compare([bad])
    junk = tmp_path / "junk.npz"
    junk.write_text("junk")
    with pytest.raises(DataError, match="not an .npz file"):
        sp.compare([junk])
    dsm_store = tmp_path / "dsm.zarr"
    sp.dsm_by_sigma({0: RuleDenoiser(rule)}, sigmas=[0.5, 1.0], n_noise=1, dataset=data, out=dsm_store,
                    progress=False)
    with pytest.raises(StoreError, match="not clocks"):
        sp.compare([dsm_store])


def test_compare_command_prints_the_table_and_plots(tmp_path, capsys):
    fig = tmp_path / "cmp.png"
    code = main(["compare", *(str(EXPORTS / f"{n}.npz") for n in THREE[:2]), str(EXPORTS / "g2-n240.npz"),
                 "--n-boot", "100", "--plot", str(fig)])
    out = capsys.readouterr().out
    assert code in (None, 0) and fig.stat().st_size > 10_000
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["run", "checkpoints"] and lines[1].startswith("g2-n120 ")
    assert "1712 [" in lines[1] and "9920" in lines[1] and "union of the runs' steps" in out
    assert "g2-n240 vs g2-n120" in out and "paired bootstrap, other or unknown data" in out


def test_two_run_directories_to_clocks_measure_each_and_compare(tmp_path, capsys):
    from scoreprobe.training.train import TrainConfig, train_run
    runs = []
    for seed in (0, 1):
        cfg = TrainConfig(rule={"name": "parity", "G": 2, "shape": [4, 4], "layout": "random", "seed": 0},
                          n_train=16, n_heldout=16, hidden_size=32, depth=1, num_heads=2, batch_size=16,
                          total_steps=8, n_checkpoints=3, log_every=4, resume_every=7, seed=seed)
        runs.append(str(train_run(cfg, tmp_path / f"run{seed}", progress=False)))
    main(["clocks", *runs, "--n-samples", "30", "--n-steps", "6", "--steps", "all", "--out", str(tmp_path / "st.zarr")])
    out = capsys.readouterr().out
    assert "carry no training data" not in out and out.count("clocks of ") == 2
    assert "run1 vs run0 (log10 ratio of τ + 1; 95% CI, paired bootstrap, same data)" in out
    stored = sp.compare([tmp_path / "st" / "run0.zarr", tmp_path / "st" / "run1.zarr"])
    alone = sp.clocks(sp.load_series(runs[1]), n_samples=30, n_steps=6, progress=False)
    np.testing.assert_array_equal(stored["state"].values[1], alone["state"].values)
    # the library still reads one series: several run directories there name compare
    with pytest.raises(ConfigError, match="scoreprobe compare"):
        sp.open_source(runs)
