"""scoreprobe.studies.execute.run and collect end to end on a tiny grid (issue 57 items 1, 3): every cell
trained, measured and exported as it finishes; a second run does nothing and leaves the exports' bytes as
they were; collect's τ are run_curves' of each export; pool and fit_exponent read censored seeds as the
stats functions do."""
import logging

import numpy as np
import pytest

from scoreprobe.errors import ConfigError
from scoreprobe.stats.curves import run_curves
from scoreprobe.stats.seeds import pool_seeds
from scoreprobe.studies.divergence import training_start
from scoreprobe.studies.execute import run
from scoreprobe.studies.export import read_export
from scoreprobe.studies.grid import Grid
from scoreprobe.studies.tidy import collect, fit_exponent, pool
from scoreprobe.training.config import TrainConfig

# tiny: 4 runs of 300 steps of a width-32 one-block DiT at lr 1e-2 (N = 2 memorizes within them), 16 samples
BASE = TrainConfig(hidden_size=32, depth=1, num_heads=2, n_checkpoints=5, first_checkpoint=10, total_steps=300,
                   n_heldout=32, batch_size=16, lr=1e-2)
SIZES = dict(n_samples=16, n_steps=6)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    grid = Grid(BASE, {"N": [2, 4], "seed": [0, 1]}, name="tiny", out=tmp_path_factory.mktemp("grid"))
    seen = []
    summary = run(grid, progress=seen.append, **SIZES)
    return grid, summary, seen


@pytest.mark.slow   # shares a 15-30 s module fixture: -m slow, for the default suite's 480-s budget
def test_every_cell_is_exported_as_it_finishes(ran):
    grid, summary, seen = ran
    names = [r.name for r in grid]
    assert summary.done == names == seen and summary.skipped == summary.failed == summary.not_started == []
    assert summary.complete
    assert sorted(p.name for p in grid.exports.iterdir()) == sorted(n + ".npz" for n in names)
    assert all((grid.run_dir(r) / "clocks.zarr").is_dir() for r in grid)


@pytest.mark.slow   # shares a 15-30 s module fixture: -m slow, for the default suite's 480-s budget
def test_a_second_run_does_nothing_and_leaves_the_exports_unchanged(ran, caplog):
    grid, _, _ = ran
    before = {p.name: p.read_bytes() for p in grid.exports.iterdir()}
    with caplog.at_level(logging.INFO, logger="grid"):
        again = run(grid, **SIZES)
    assert again.done == [] and again.skipped == [r.name for r in grid]
    assert {p.name: p.read_bytes() for p in grid.exports.iterdir()} == before
    assert "grid tiny: 4 runs, 4 exported already, 0 to run" in caplog.text


@pytest.mark.slow   # shares a 15-30 s module fixture: -m slow, for the default suite's 480-s budget
def test_collect_holds_run_curves_of_each_export(ran):
    grid, _, _ = ran
    ds = collect(grid)
    assert dict(ds.sizes) == {"N": 2, "seed": 2, "rule_threshold": 10, "mem_threshold": 6}
    assert ds.exported.all() and ds.attrs["missing"] == "{}" and ds.tau_mem.attrs["units"] == "training steps"
    for r in grid:
        info = read_export(grid.exports / f"{r.name}.npz")
        want = run_curves(info["ds"])
        cell = ds.sel(N=r.cfg.n_train, seed=r.cfg.seed)
        for key, reached in (("tau_rule", "rule_reached"), ("tau_mem", "mem_reached")):
            np.testing.assert_array_equal(cell[reached].values, np.isfinite(want[key]))
            np.testing.assert_array_equal(cell[key].values, np.where(np.isfinite(want[key]), want[key], np.nan))
        assert cell.params == info["params"] and cell.budget == 300
        assert cell.peak_rule_acc == info["ds"].rule_acc.max() and cell.final_mem == info["ds"].mem_ratio[-1]
        start = training_start(grid.run_dir(r))                  # read again from the run's log
        assert info["meta"]["train_start"] == start and cell.loss_spikes == 0
        assert (bool(cell.never_started), float(cell.train_start) if start is not None else None) == (
            start is None, None if start is None else float(start))
    assert ds.mem_reached.sel(N=2).any()          # the tiny runs do cross something: the check is not all-NaN


@pytest.mark.slow   # shares a 15-30 s module fixture: -m slow, for the default suite's 480-s budget
def test_pool_and_fit_read_seeds_as_the_stats_functions_do(ran):
    grid, _, _ = ran
    ds = collect(grid)
    p = pool(ds, over="seed")
    assert dict(p.sizes) == {"N": 2, "rule_threshold": 10, "mem_threshold": 6} and (p.n_seeds == 2).all()
    assert "training seeds" in p.attrs["units"]
    for n in (2, 4):
        for t in ds.mem_threshold.values:
            cell = ds.sel(N=n, mem_threshold=t)
            pts = np.where(cell.mem_reached, cell.tau_mem, np.inf)
            got = p.sel(N=n, mem_threshold=t)
            if np.any(pts < cell.resolved_from.values):
                assert bool(got.tau_mem_under_resolved) and np.isnan(got.tau_mem)
                continue
            want = pool_seeds(pts, last_steps=cell.budget.values)
            if want["lower_bound"]:
                assert np.isnan(got.tau_mem) and got.tau_mem_lower_bound == pytest.approx(want["pooled"])
            else:
                assert got.tau_mem == pytest.approx(want["pooled"]) and got.tau_mem_lo == pytest.approx(want["ci"][0])
    f = fit_exponent(ds, x="N", over="seed")
    assert dict(f.sizes) == {"mem_threshold": 6} and set(f.data_vars) >= {"b", "b_lo", "b_hi", "n_points"}
    with pytest.raises(ConfigError, match="'width' is not an axis"):
        fit_exponent(ds, x="width")
    assert set(pool(ds.sel(mem_threshold=0.1), keys=["tau_mem"]).sizes) == {"N"}


@pytest.mark.slow   # shares a 15-30 s module fixture: -m slow, for the default suite's 480-s budget
def test_a_cell_not_exported_is_nan_and_named(ran, tmp_path):
    grid, _, _ = ran
    more = Grid(BASE, {"N": [2, 4, 8], "seed": [0, 1]}, name="tiny", out=grid.out)
    ds = collect(more)
    assert not ds.exported.sel(N=8).any() and np.isnan(ds.tau_rule.sel(N=8)).all()
    assert not ds.rule_reached.sel(N=8).any()
    assert ds.attrs["missing"] == '{"N8-seed0": "no export yet", "N8-seed1": "no export yet"}'
    assert (pool(ds).n_seeds.sel(N=8) == 0).all()


def test_bad_arguments_are_config_errors_before_any_work(tmp_path):
    grid = Grid(BASE, {"N": [2]}, out=tmp_path / "g")
    for kw, match in [({"jobs": 0}, "jobs"), ({"n_samples": 0}, "n_samples"), ({"hours": -1}, "hours"),
                      ({"scheduler": "not an address"}, "scheduler"),
                      ({"scheduler": ("local", 1), "hours": 1.0}, "hours= applies to local runs")]:
        with pytest.raises(ConfigError, match=match):
            run(grid, **kw)
    assert not (tmp_path / "g").exists()


def _conflict(grid, run):
    """A run directory for `run` that holds another run (5 steps at another lr): training there is refused."""
    import dataclasses
    from scoreprobe.training.train import train_run
    other = dataclasses.replace(run.cfg, total_steps=5, n_checkpoints=2, first_checkpoint=1, lr=5e-3)
    train_run(other, grid.run_dir(run), progress=False)


def test_a_failing_run_is_logged_and_the_others_go_on(tmp_path, caplog):
    grid = Grid(BASE, {"N": [2, 3]}, name="fails", out=tmp_path / "g")
    grid.runs[0].cfg.total_steps = grid.runs[1].cfg.total_steps = 40
    _conflict(grid, grid.runs[0])
    with caplog.at_level(logging.ERROR, logger="grid"):
        summary = run(grid, **SIZES)
    assert summary.failed == ["N2"] and summary.done == ["N3"] and not summary.complete
    assert "N2 failed: ConfigError: " in caplog.text and "already holds a run with different settings" in caplog.text
    assert [p.name for p in grid.exports.iterdir()] == ["N3.npz"]


def test_the_texts_never_print_an_undefined_number():
    """cells / exponent_text: a value with its interval, a bound, or why it is undefined; never 'nan'."""
    import xarray as xr
    from scoreprobe.studies import cells, exponent_text
    nan = float("nan")
    fit = xr.Dataset({"b": ("w", [1.3, nan, 1.1]), "b_lo": ("w", [1.2, nan, nan]), "b_hi": ("w", [1.4, nan, nan]),
                      "n_x": ("w", [4, 1, 2]), "x_left_out": ("w", [0, 1, 0])}, coords={"w": [1, 2, 3]},
                     attrs={"x": "N"})
    assert exponent_text(fit).values.tolist() == [
        "b = 1.30 [1.20, 1.40] over 4 N", "undefined: 1 N usable, 1 left out (a seed censored); a slope needs 2",
        "b = 1.10 (no interval) over 2 N"]
    p = xr.Dataset({"tau_mem": ("c", [900.0, nan, 800.0]), "tau_mem_lo": ("c", [800.0, nan, nan]),
                    "tau_mem_hi": ("c", [1000.0, nan, nan]), "tau_mem_lower_bound": ("c", [nan, 3000.0, nan]),
                    "tau_mem_n_reached": ("c", [3, 1, 1]), "tau_mem_under_resolved": ("c", [False, False, False]),
                    "n_seeds": ("c", [3, 3, 1])})
    assert cells(p, "tau_mem").values.tolist() == ["900 [800, 1000]", "> 3000 (1 of 3 reached)",
                                                   "800 (no interval: 1 seed)"]
