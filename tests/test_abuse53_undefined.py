"""Issue 53, item 1 (undefined is never an answer): every attack of tests/abuse53_undefined.py must end clean
(refused with its typed error) or right (its answer checked), plus the unit checks that read better alone."""
import abuse_issue53
import numpy as np
import pytest
import torch
from abuse53_undefined import ATTACKS


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack(attack, tmp_path):
    outcome, detail = abuse_issue53.run(attack, tmp_path)
    assert outcome in ("clean", "right"), detail


def _decomposed_real():
    """A decompose result over steps 0 (the rule oracle) and 10 (NaN output at σ = 1 only)."""
    import scoreprobe as sp
    series = sp.load_series()
    R = sp.RuleDenoiser(series.rule)

    def half_nan(x, s):
        return R(x, s) if float(s.reshape(-1)[0]) < 0.75 else torch.full_like(x, float("nan"))
    return sp.decompose({0: R, 10: half_nan}, dataset=series.dataset, rule=series.rule, sigmas=[0.5, 1.0],
                        n_points=24, n_noise=1, oracles=("memorizer", "rule"), progress=False)


def test_cli_table_band_mean_is_nan_when_one_sigma_is_undefined(capsys):
    """The mean r² over the band is NaN when r² is NaN at one σ of the band (was the other σ's value), and the
    undefined cell reads '?' (never an oracle's letter)."""
    from scoreprobe.cli.decompose import _table
    ds = _decomposed_real()
    _table(ds, "heldout", n_boot=50)
    lines = [ln.split() for ln in capsys.readouterr().out.splitlines()]
    rows = {}
    for ln in lines:
        if ln[:1] in (["0"], ["10"]):
            rows.setdefault(ln[0], ln[1:])                               # the first line of a step: its calls
    assert rows["10"][:2] == ["R", "?"] and rows["10"][2:] == ["nan", "nan"]
    assert rows["0"][:2] == ["R", "R"]


def test_best_oracle_names_only_defined_cells():
    from scoreprobe.stats.decompose_calls import best_oracle
    best = best_oracle(_decomposed_real().sel(split="heldout"))
    assert best.values.tolist() == [["rule", "rule"], ["rule", "undefined"]]
    assert best.attrs["flag_meanings"].split()[-1] == "undefined"


def test_circuits_decay_reads_only_defined_checkpoints():
    """A diverged checkpoint (NaN metric) takes no part in the decay step (was NaN from interpolating through
    it; an all-NaN curve raised ValueError)."""
    from scoreprobe.stats.circuit_effects import decay
    steps = np.array([0.0, 10.0, 100.0])
    assert decay(steps, np.array([1.0, np.nan, 0.4])) == decay(steps[[0, 2]], np.array([1.0, 0.4]))
    assert np.isnan(decay(steps, np.full(3, np.nan)))


def test_a_reproduction_check_counts_an_undefined_mismatch():
    """max |a − b| of a reproduction check: a value NaN on one side only is a mismatch (was skipped: 0.0)."""
    from scoreprobe.stats.dsm_stats import max_abs_error
    assert max_abs_error([0.1, np.nan], [0.1, 0.2]) == np.inf
    assert max_abs_error([0.1, np.nan], [0.15, np.nan]) == pytest.approx(0.05)
    assert np.isnan(max_abs_error([np.nan], [np.nan]))
