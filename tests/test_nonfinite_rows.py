"""NaN rows are counted, never labelled as basin states (issue 33, section 3): a denoiser that returns NaN
below σ = 0.9 for some rows; the fixed Heun grid and the adaptive engine must label exactly those rows
non-finite (`invalid`, status non_finite), the basins store keeps the per-point status, the warning says NaN."""
import warnings

import numpy as np
import pytest
import torch

from scoreprobe.data.datasets import STATES, make_dataset, to_signed
from scoreprobe.data.rules import Parity
from scoreprobe.errors import NonFiniteWarning
from scoreprobe.ode import integrate
from scoreprobe.ode.engine import STATUS
from scoreprobe.probes.basins import basins
from scoreprobe.slices import Plane

NAN_BELOW = 0.9


def nan_below(x, sigma):
    """A smooth hypercube denoiser tanh(x/σ²) that keeps coordinate 0 (so x_0 stays as it started) and
    returns NaN for the rows with x_0 > 0 once σ < 0.9. (B, D), (B,) -> (B, D)."""
    out = torch.tanh(x / sigma[:, None] ** 2)
    out[:, 0] = x[:, 0]
    bad = (x[:, 0] > 0) & (sigma < NAN_BELOW)
    return torch.where(bad[:, None], torch.full_like(out, float("nan")), out)


@pytest.mark.parametrize("solver", ["heun", "adaptive"])
def test_rows_meeting_nan_end_non_finite_with_either_solver(solver):
    gen = torch.Generator().manual_seed(0)
    x0 = 2.0 * torch.randn(64, 8, generator=gen)                  # (B, D) at σ = 2
    planted = (x0[:, 0] > 0).numpy()
    assert 0 < planted.sum() < 64
    with pytest.warns(NonFiniteWarning, match=rf"{planted.sum()} of 64 PF-ODE endpoints are non-finite \(NaN/inf\)"):
        res = integrate(nan_below, x0, 2.0, n_steps=12, solver=solver, info=True)
    nan_rows = (~torch.isfinite(res.x)).any(dim=1).numpy()
    np.testing.assert_array_equal(nan_rows, planted)
    np.testing.assert_array_equal(res.status == STATUS.index("non_finite"), planted)
    assert not (res.status == STATUS.index("max_steps")).any()     # not "loosen rtol/atol": NaN, said as such


def test_the_engine_stops_a_nan_row_at_once_instead_of_shrinking_its_step():
    x0 = torch.tensor([[0.5, 1.0, -1.0], [-0.5, 1.0, -1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NonFiniteWarning)
        res = integrate(nan_below, x0, 2.0, info=True)
    assert res.status.tolist() == [STATUS.index("non_finite"), STATUS.index("success")]
    assert res.nfe[0] < 20 <= res.nfe[0] + 200           # a few steps, not max_steps (200) of rejections


@pytest.mark.parametrize("solver", ["heun", "adaptive"])
def test_basins_store_keeps_the_per_point_status_and_labels_nan_points_invalid(solver, tmp_path):
    rule = Parity(2, shape=(2, 4))
    ds = make_dataset(rule, 4, 4, seed=0)
    a, b = to_signed(ds.train[:2]).astype(np.float64)
    c = a.copy()
    c[0] = -a[0]                                              # the plane spans both signs of coordinate 0
    plane = Plane.through(a, b, c)
    points, _, _ = plane.grid(8)
    planted = (points[:, 0] > 0).reshape(8, 8)               # (v, u): the points that meet NaN below 0.9
    assert 0 < planted.sum() < 64
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = basins(nan_below, plane, sigma_start=[0.5, 2.0], res=8, n_steps=8, solver=solver, dataset=ds,
                     rule=rule, out=tmp_path / "b.zarr", progress=False)
    said = [str(w.message) for w in caught if issubclass(w.category, NonFiniteWarning)]
    assert len(said) == 1 and f"{2 * planted.sum()} of 128 PF-ODE endpoints" in said[0] and "NaN" in said[0], said
    state, status = out.endpoint_state.values, out.endpoint_status.values     # (S, v, u)
    for s in range(2):
        np.testing.assert_array_equal(state[s] == STATES.index("invalid"), planted)
        np.testing.assert_array_equal(status[s] == STATUS.index("non_finite"), planted)
    assert out.endpoint_status.attrs["flag_meanings"] == " ".join(STATUS)
    from scoreprobe.store.format import open_store
    stored = open_store(tmp_path / "b.zarr")
    np.testing.assert_array_equal(stored.endpoint_status.values[0], status)        # (step, S, v, u)
