"""Issue 53, item 1 (undefined is never an answer): every attack of tests/abuse53_undefined.py must end clean
(refused with its typed error) or right (its answer checked), plus the unit checks that read better alone."""
import numpy as np
import pytest
import xarray as xr

import abuse_issue53
from abuse53_undefined import ATTACKS


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack(attack, tmp_path):
    outcome, detail = abuse_issue53.run(attack, tmp_path)
    assert outcome in ("clean", "right"), detail


def _decomposed(r2):
    """A decompose-like Dataset (step, sigma, split, oracle) from r² (step, sigma, oracle)."""
    r2 = np.asarray(r2, np.float64)[:, :, None, :]
    return xr.Dataset({"r2": (("step", "sigma", "split", "oracle"), r2)},
                      coords={"step": [0, 10], "sigma": [0.5, 1.0], "split": ["heldout"],
                              "oracle": ["memorizer", "rule"]})


def test_cli_table_band_mean_is_nan_when_one_sigma_is_undefined(capsys):
    """The mean r² over the band is NaN when r² is NaN at one σ of the band (was the other σ's value), and the
    undefined cell reads '?' (was 'M', the first oracle)."""
    from scoreprobe.cli.decompose import _table
    ds = _decomposed([[[0.2, 0.9], [0.3, 0.8]], [[np.nan, np.nan], [0.6, 0.1]]])
    _table(ds, "heldout")
    lines = [ln.split() for ln in capsys.readouterr().out.splitlines()]
    rows = {ln[0]: ln[1:] for ln in lines if ln[:1] in (["0"], ["10"])}
    assert rows["0"] == ["R", "R", "0.250", "0.850"]
    assert rows["10"] == ["?", "M", "nan", "nan"]


def test_best_oracle_keeps_ties_and_names_only_defined_cells():
    from scoreprobe.probes.decompose import best_oracle
    ds = _decomposed([[[0.2, 0.9], [0.5, 0.505]], [[np.inf, 0.1], [0.6, np.nan]]])
    best = best_oracle(ds.sel(split="heldout"))
    assert best.values.tolist() == [["rule", "tie"], ["undefined", "undefined"]]
    assert best.attrs["flag_meanings"].split() == ["memorizer", "rule", "tie", "undefined"]


def test_circuits_decay_reads_only_defined_checkpoints():
    """A diverged checkpoint (NaN metric) takes no part in the decay step (was NaN from interpolating through
    it; an all-NaN curve raised ValueError)."""
    from analyses.circuits.run import decay
    steps = np.array([0.0, 10.0, 100.0])
    assert decay(steps, np.array([1.0, np.nan, 0.4])) == decay(steps[[0, 2]], np.array([1.0, 0.4]))
    assert np.isnan(decay(steps, np.full(3, np.nan)))


def test_a_reproduction_check_counts_an_undefined_mismatch():
    """max |a − b| of a reproduction check: a value NaN on one side only is a mismatch (was skipped: 0.0)."""
    from analyses.mechanism.rereport import max_abs_error
    assert max_abs_error([0.1, np.nan], [0.1, 0.2]) == np.inf
    assert max_abs_error([0.1, np.nan], [0.15, np.nan]) == pytest.approx(0.05)
    assert np.isnan(max_abs_error([np.nan], [np.nan]))
