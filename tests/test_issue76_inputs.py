"""Issue 76 item 1, from the user's side: undefined input stays undefined, and bad input is one clear error before any
work. Each test failed on the code before the fix (the grid axis with no values aside: it was refused already).

- the Gaussian and local oracles at σ = NaN returned finite numbers (the local one its σ = 0 output);
- verdict read an uncensored [inf, inf] as "supported" and censored=["False", "False"] or [nan, nan] as censored;
- censored_mean of three 1e308 gave a mean of inf, of [-1e200, 1e200, 0] an interval of ±inf;
- a 1000 x 1000 Grid was still being built after 120 s; a steps= callable returning 10.9 gave 10 steps;
- Monitor stored 10.9 as step 10, np.float64(30.7) as 30, True as 1, and nan / inf were tracebacks;
- collect over an export whose meta was tampered with was a traceback (AttributeError, ValueError, TypeError)."""
import json
import math
import time

import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe.errors import ConfigError, DataError
from scoreprobe.stats.censored import censored_mean
from scoreprobe.stats.verdict import verdict
from scoreprobe.studies.export import clocks_dataset, export_run
from scoreprobe.studies.grid import Grid
from scoreprobe.studies.tidy import collect
from scoreprobe.training.config import TrainConfig

RULE = sp.Parity(G=2, shape=(4, 4))
DATA = sp.make_dataset(RULE, n_train=8, n_heldout=8, seed=0)
BASE = TrainConfig(hidden_size=32, depth=1, num_heads=2, n_checkpoints=3, first_checkpoint=10, total_steps=30)


@pytest.mark.parametrize("make", [
    lambda: sp.GaussianDenoiser(np.zeros(16), np.eye(16)),
    lambda: sp.GaussianDenoiser.from_bits(DATA.train),
    lambda: sp.GaussianDenoiser.from_rule(RULE),
    lambda: sp.LocalDenoiser(DATA.train, patch=3),
    lambda: sp.LocalDenoiser(DATA.train, patch=3, equivariant=True),
    lambda: sp.LocalDenoiser(DATA.train, patch=3, equivariant=True, boundary="position_class"),
], ids=["gaussian", "gaussian_bits", "gaussian_rule", "local", "local_pooled", "local_class"])
def test_an_oracle_at_sigma_nan_is_nan_and_the_other_rows_are_unchanged(make):
    D = make()
    x = torch.randn(3, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    out = D(x, torch.tensor([0.5, math.nan, 0.0]))
    assert torch.isnan(out[1]).all() and torch.isfinite(out[[0, 2]]).all()
    torch.testing.assert_close(out[[0, 2]], D(x[[0, 2]], torch.tensor([0.5, 0.0])), rtol=0, atol=0)


@pytest.mark.parametrize("end, region", [(math.inf, (1.0, math.inf)), (-math.inf, (-math.inf, 1.0))])
def test_an_interval_holding_no_finite_value_is_undefined(end, region):
    v = verdict([0.5, 0.9], [end, end], [end, end], [end, end], region=region, paper_threshold=0.9)
    assert v.word == "undefined" and {r.word for r in v.readings} == {"undefined"}


@pytest.mark.parametrize("flags", [["False", "False"], [math.nan, math.nan], [0.0, 1.0], [0, 2], [None, None]])
def test_censored_flags_must_be_bools(flags):
    with pytest.raises(ConfigError, match=r"censored must hold True or False \(or 0 / 1\)"):
        verdict([0.5, 0.9], [2, 2], [1, 1], [3, 3], region=(0, 5), paper_threshold=0.9, censored=flags)
    assert verdict([0.5, 0.9], [2, 2], [1, 1], [3, 3], region=(0, 5), paper_threshold=0.9,
                   censored=np.array([False, True])).word == "supported"
    assert verdict([0.5, 0.9], [2, 2], [1, 1], [3, 3], region=(0, 5), paper_threshold=0.9,
                   censored=[0, 1]).word == "supported"           # integer flags 0 / 1 read as they are


@pytest.mark.parametrize("y", [[1e308] * 3, [-1e200, 1e200, 0.0], [36000.0, 72000.0, 50000.0]])
def test_censored_mean_refuses_values_no_logarithm_has(y):
    with pytest.raises(ConfigError, match=r"within ±1000 .*pass ln τ, not τ"):
        censored_mean(y, [False] * 3)


def test_censored_mean_of_ln_tau_is_the_t_interval():
    r = censored_mean([1.0, 2.0, 3.0], [False] * 3)
    half = 4.302652729911275 / math.sqrt(3)          # t_{2, 0.975} · sd / √n, sd = 1
    assert r["mean"] == 2.0 and math.isclose(r["upper"] - 2.0, half, rel_tol=1e-9)


def test_a_grid_past_the_cell_limit_is_refused_at_once():
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=r"1000000 cells \(1000 x 1000\), more than the limit 10000"):
        Grid(BASE, {"N": range(2, 1002), "seed": range(1000)})
    with pytest.raises(ConfigError, match="more than 10000 values"):
        Grid(BASE, {"seed": range(10**12)})
    assert time.perf_counter() - t0 < 1.0


@pytest.mark.parametrize("steps", [10.9, math.nan, math.inf, True, "12"])
def test_a_steps_callable_must_give_a_whole_number(steps):
    with pytest.raises(ConfigError, match=r"cell N2: steps\(cfg\) \(total_steps\) must be"):
        Grid(BASE, {"N": [2]}, steps=lambda cfg: steps)
    assert Grid(BASE, {"N": [2]}, steps=lambda cfg: 40.0).runs[0].cfg.total_steps == 40


@pytest.mark.parametrize("values", [[], np.array([]), iter([]), range(0)])
def test_a_grid_axis_with_no_values_is_refused(values):
    with pytest.raises(ConfigError, match="grid axis 'seed' needs a non-empty list"):
        Grid(BASE, {"N": [2], "seed": values})


@pytest.mark.parametrize("step", [10.9, np.float64(30.7), True, math.nan, math.inf, "10", torch.tensor(10.0)])
def test_monitor_refuses_a_step_that_is_not_an_integer(step):
    monitor = sp.Monitor(DATA, RULE, every=10, n_samples=4, n_steps=2)
    with pytest.raises(ConfigError, match="Monitor: the training step must be an integer"):
        monitor(step, sp.EmpiricalDenoiser(DATA.train))
    assert monitor.steps == []


def test_monitor_takes_integer_steps_of_any_kind():
    monitor = sp.Monitor(DATA, RULE, every=10, n_samples=4, n_steps=2)
    for step in (np.int64(10), torch.tensor(20), 25):
        monitor(step, sp.EmpiricalDenoiser(DATA.train))
    assert monitor.steps == [10, 20]


def _exported_grid(tmp_path, meta):
    """A one-cell grid with an export made from planted states (no training), its meta as given (JSON text)."""
    grid = Grid(BASE, {"N": [8]}, out=tmp_path)
    state = np.zeros((3, 4), np.int8)
    export_run(clocks_dataset([0, 10, 30], state, 0.5), grid.runs[0].cfg, 1000, grid.exports / "N8.npz",
               meta={"train_start": 10})
    with np.load(grid.exports / "N8.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["meta"] = meta
    np.savez_compressed(grid.exports / "N8.npz", **arrays)
    return grid


@pytest.mark.parametrize("meta", ['[1, 2]', 'null', '{"train_start": "abc"}', '{"train_start": [1]}',
                                  '{"train_start": true}', '{"train_start": -5}', '{"loss_spikes": 5}',
                                  '{"loss_spikes": "abc"}'])
def test_collect_over_a_tampered_meta_names_the_export(tmp_path, meta):
    grid = _exported_grid(tmp_path, meta)
    with pytest.raises(DataError, match=rf"{grid.exports / 'N8.npz'}: (field 'meta' must be a JSON object|meta "
                                        "(train_start|loss_spikes) must be)"):
        collect(grid)


def test_collect_reads_an_untampered_meta(tmp_path):
    ds = collect(_exported_grid(tmp_path, json.dumps({"train_start": 10, "loss_spikes": [{"step": 5}]})))
    assert ds.exported.all() and ds.train_start.item() == 10 and ds.loss_spikes.item() == 1
