"""probes.warm: a refined map seeded from the previous checkpoint's, against dense integration.

Two "checkpoints" are two planted denoisers (tests/test_refine.py's: vertex A inside a stripe of pixel columns, or
an island, B elsewhere, exactly), given to `basins` as a {step: denoiser} series, so the second map is seeded from
the first; the dense map of the second is known pixel by pixel."""
import json
import pickle

import numpy as np
import pytest
import torch

from scoreprobe.probes.basins import basins
from scoreprobe.probes.refine import OUTCOMES, RefineSettings
from scoreprobe.probes.warm import SEEDINGS, Seed, WarmChain
from scoreprobe.sweep.executor import call_probe
from test_refine import RES, SIGMA, planted, setup, vertex   # noqa: F401  (setup: the fixture)

WARM_VARS = {"warm_start", "warm_seed_step", "warm_changed_points", "warm_reopened_fraction"}


def series(setup, first, second, dense=True, **settings):
    """The two maps of {0: first, 1: second} refined with `settings`, and (dense) the dense map of `second`."""
    rule, ds, plane, _ = setup
    kw = dict(sigma_start=SIGMA, res=RES, dataset=ds, rule=rule, keep_bits=True)
    two = basins({0: first, 1: second}, plane, refine=RefineSettings(**settings), progress=False, **kw)
    return two, basins(second, plane, refine=False, **kw) if dense else None


def island_or(stripe, island):
    return lambda x, sigma: torch.maximum(stripe(x, sigma), island(x, sigma))   # A (bit 7 = +1) where either is


def test_moved_boundary_is_followed_exactly(setup):
    """(a) Both boundaries of a stripe move between lattice lines (stride 8: columns 0, 8, 16, 24, 31): the left one
    by a point (inside the seed's boundary), the right one by three (followed point by point): exact, every
    changed point integrated and no cell refined cold; (b) one moved by ten points, across a lattice line: the
    cells whose lattice points changed are refined cold, exact."""
    t_col = setup[3]
    d1 = planted(t_col, list(range(6, 25)))
    for cols, reopened in ((range(7, 28), False), (range(16, 25), True)):
        two, dense = series(setup, d1, planted(t_col, list(cols)), stride=8)
        w = two.sel(step=1)
        np.testing.assert_array_equal(vertex(w), vertex(dense))
        np.testing.assert_array_equal(w.endpoint_state.values, dense.endpoint_state.values)
        assert SEEDINGS[int(w.warm_start[0])] == "warm" and int(w.warm_seed_step[0]) == 0
        assert OUTCOMES[int(w.refine_outcome[0])] == "refined" and int(w.audit_failures[0]) == 0
        assert (float(w.warm_reopened_fraction[0]) > 0) == reopened
        integrated = w.endpoint_integrated.values[0].astype(bool)
        assert (w.nfe.values[0][~integrated] == 0).all() and np.isnan(w.endpoint_decided_sigma.values[0][~integrated]).all()
        assert 0 < float(w.audit_bound[0]) < 1
        if not reopened:
            assert float(w.warm_changed_points[0]) == 4 * RES == (vertex(dense) != vertex(two.sel(step=0))).sum()


def test_widespread_change_is_refined_cold_and_exact(setup):
    t_col = setup[3]
    two, dense = series(setup, planted(t_col, [28, 29, 30]), planted(t_col, list(range(2, 27))))
    w = two.sel(step=1)
    np.testing.assert_array_equal(vertex(w), vertex(dense))
    assert SEEDINGS[int(w.warm_start[0])] == "widespread" and float(w.warm_reopened_fraction[0]) == 1.0


def test_new_island_is_found_by_the_audit_or_within_its_bound(setup):
    """The stated limitation: a 2 x 2 island appearing inside a cell left to the seed, off its lattice points and
    the seed's boundary, is found only when the audit's sample hits it; when missed, within the audit's bound."""
    rule, ds, plane, t_col = setup
    s = (t_col[4] + t_col[5]) / 2, (t_col[6] + t_col[7]) / 2                  # rows 5, 6 (v runs like u here)
    stripe = planted(t_col, list(range(10, 31)))
    both = island_or(stripe, planted(t_col, [5, 6], rows=s))
    found = 0
    dense = basins(both, plane, sigma_start=SIGMA, res=RES, dataset=ds, rule=rule, refine=False, keep_bits=True)
    for seed in range(8, 16):
        two = series(setup, stripe, both, dense=False, seed=seed)[0]
        w = two.sel(step=1)
        assert (vertex(dense) != vertex(two.sel(step=0))).sum() == 4
        wrong = (vertex(w) != vertex(dense)).sum()
        assert wrong in (0, 4) and SEEDINGS[int(w.warm_start[0])] == "warm"
        if wrong == 0:
            found += 1
            assert int(w.audit_failures[0]) == 1                          # the audit found it, the cell refined
        else:
            assert wrong / (w.endpoint_integrated.values[0] == 0).sum() <= float(w.audit_bound[0])
    assert 1 <= found < 8                                                  # some seeds' audits hit it, some miss


def test_warm_start_false_is_the_cold_refinement(setup):
    t_col = setup[3]
    d1, d2 = planted(t_col, list(range(10, 31))), planted(t_col, list(range(14, 31)))
    cold, _ = series(setup, d1, d2, warm_start=False)
    rule, ds, plane, _ = setup
    alone = basins(d2, plane, sigma_start=SIGMA, res=RES, dataset=ds, rule=rule, keep_bits=True,
                   refine=RefineSettings(warm_start=False))
    assert not WARM_VARS & set(cold.data_vars) and not WARM_VARS & set(alone.data_vars)
    assert "warm_start" not in json.loads(cold.attrs["scoreprobe_config"])["refine"]
    for name in alone.data_vars:
        np.testing.assert_array_equal(cold[name].sel(step=1).values, alone[name].values)
    warm, _ = series(setup, d1, d2)
    assert json.loads(warm.attrs["scoreprobe_config"])["refine"]["warm_start"] is True
    first = warm.sel(step=0)                                               # no seed: the cold map, and says so
    assert SEEDINGS[int(first.warm_start[0])] == "cold" and int(first.warm_seed_step[0]) == -1
    assert np.isnan(float(first.warm_changed_points[0]))
    for name in cold.data_vars:
        np.testing.assert_array_equal(first[name].values, cold[name].sel(step=0).values)
    with pytest.raises(Exception, match="warm_start"):
        RefineSettings(warm_start="yes")


def test_chain_seeds_only_within_a_local_sweep():
    chain, seed = WarmChain(), Seed(5, {})
    chain.last[0] = seed
    assert call_probe(lambda _: chain.plan(0, 2), None, (6, 7)) == [(seed, 6), (seed, 7)]   # a stack of two
    assert chain.plan(0, 1) == [(None, None)]                              # outside a sweep: the step is unknown
    assert call_probe(lambda _: chain.plan(1, 1), None, (6,)) == [(None, 6)]   # no map yet at this sigma_start
    sent = pickle.loads(pickle.dumps(chain))                               # a copy on a dask worker
    assert call_probe(lambda _: sent.plan(0, 1), None, (6,)) == [(None, None)]
