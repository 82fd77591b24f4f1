"""Constraint-family clocks: family_taus on a hand-built Dataset (rows cross 0.9 before columns), and
`clocks` on 4 x 4 Sudoku storing family variables that agree with Rule.family_valid of the stored bits."""
import math

import numpy as np
import pytest
import xarray as xr

from scoreprobe import store
from scoreprobe.data.datasets import make_dataset
from scoreprobe.data.rules import LatinSquare, Parity, Sudoku
from scoreprobe.errors import ConfigError
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.stats.clocks import clocks
from scoreprobe.stats.families import family_taus
from scoreprobe.stats.seeds import tau_draws

STEPS = np.array([10, 100, 300, 1000, 3000, 10000])
N = 500


def hand_built(rows_acc, cols_acc):
    """family_valid with exactly round(N·acc) satisfying samples per step; rows and columns independent."""
    fv = np.zeros((len(STEPS), N, 2), np.uint8)
    rng = np.random.default_rng(0)
    for i, (r, c) in enumerate(zip(rows_acc, cols_acc)):
        fv[i, rng.permutation(N)[: round(r * N)], 0] = 1
        fv[i, rng.permutation(N)[: round(c * N)], 1] = 1
    return xr.Dataset({"family_valid": (("step", "sample", "family"), fv)},
                      coords={"step": STEPS, "family": ["rows", "columns"]})


def logit(p):
    return math.log(p / (1 - p))


def test_rows_before_columns_on_a_hand_built_dataset():
    rows = [0.1, 0.5, 0.8, 0.96, 0.99, 0.99]
    cols = [0.05, 0.2, 0.5, 0.8, 0.96, 0.99]
    ds = hand_built(rows, cols)
    out = family_taus(ds, n_boot=400, seed=1)
    u = np.log1p(STEPS)   # the crossing by hand: linear in (log(step + 1), logit y) between the bracketing knots
    t_rows = math.expm1(u[2] + (logit(0.9) - logit(0.8)) / (logit(0.96) - logit(0.8)) * (u[3] - u[2]))
    t_cols = math.expm1(u[3] + (logit(0.9) - logit(0.8)) / (logit(0.96) - logit(0.8)) * (u[4] - u[3]))
    assert out["rows"]["tau"] == pytest.approx(t_rows) and out["columns"]["tau"] == pytest.approx(t_cols)
    assert out["rows"]["ci"][0] <= t_rows <= out["rows"]["ci"][1] and out["rows"]["reached"] == 1.0
    order = out["order"]["rows<columns"]
    assert order["ratio"] == pytest.approx(t_rows / t_cols) and order["ci"][1] < 1 and order["share_first"] == 1.0
    point, draws = tau_draws(ds, "tau_family:columns", n_boot=400, seed=1)
    assert point == pytest.approx(t_cols)
    assert [np.percentile(draws, 2.5, method="lower"), np.percentile(draws, 97.5, method="higher")] == \
        pytest.approx(out["columns"]["ci"])


def test_never_reached_and_ties():
    ds = hand_built([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    out = family_taus(ds, n_boot=200)
    assert math.isnan(out["rows"]["tau"]) and out["rows"]["ci"][1] == math.inf and out["rows"]["reached"] == 0
    assert out["order"]["rows<columns"]["share_first"] == 0.5 and math.isnan(out["order"]["rows<columns"]["ratio"])
    with pytest.raises(ConfigError, match="family_valid"):
        family_taus(ds.drop_vars("family_valid"))
    with pytest.raises(ConfigError, match="no constraint family"):
        tau_draws(ds, "tau_family:boxes")


@pytest.mark.filterwarnings("ignore::scoreprobe.errors.ResolutionWarning")
def test_clocks_on_sudoku_store_family_variables(tmp_path):
    """Step 0 samples the Sudoku oracle (all families hold); step 5 a memorizer of Latin squares that are not
    all Sudoku grids (boxes fail for some); stored family variables equal family_valid of the stored bits."""
    rule = Sudoku(4)
    data = make_dataset(rule, 24, 24, seed=0)
    latin = LatinSquare(4).enumerate()
    non_sudoku = latin[~rule.is_valid(latin)][:40]
    mapping = {0: RuleDenoiser(rule), 5: EmpiricalDenoiser(non_sudoku)}
    out = tmp_path / "sudoku.zarr"
    ds = clocks(mapping, n_samples=40, dataset=data, rule=rule, keep_bits=True, out=out, progress=False, n_boot=50)
    assert list(ds.family.values) == list(rule.family_names)
    assert ds.family_valid.dims == ("step", "sample", "family") and ds.family_valid.dtype == np.uint8
    for i in range(2):
        expected = rule.family_valid(ds.bits.values[i]) & (ds.state.values[i] != 0)[:, None]
        assert np.array_equal(ds.family_valid.values[i], expected)
        assert np.allclose(ds.family_acc.values[i], expected.mean(axis=0))
    acc = ds.family_acc.sel(step=5)
    assert float(acc.sel(family="rows")) == 1.0 and float(acc.sel(family="boxes")) < 1.0
    back = store.open_store(out)
    assert np.array_equal(back.family_valid.values, ds.family_valid.values)
    assert list(back.family.values) == list(rule.family_names)
    again = clocks(mapping, n_samples=40, dataset=data, rule=rule, keep_bits=True, out=out, progress=False,
                   n_boot=50)   # resumes: nothing recomputed, same variables
    assert np.array_equal(again.family_valid.values, ds.family_valid.values)


def test_parity_clocks_have_no_family_variables():
    rule = Parity(2, shape=(2, 2))
    data = make_dataset(rule, 2, 2, seed=0)
    ds = clocks({0: RuleDenoiser(rule)}, n_samples=10, dataset=data, rule=rule, progress=False, n_boot=10)
    assert "family" not in ds.dims and "family_valid" not in ds and "families" not in ds.attrs["scoreprobe_config"]
