"""probes.basins and probes.retention: basins and retention against the two oracles, the symmetric plane, stores, check_convergence.
The CLI subcommands on these probes: tests/test_basins_cli.py."""
import warnings

import numpy as np
import pytest
import torch

from scoreprobe.data.datasets import STATE_CODES, Dataset, make_dataset, to_signed
from scoreprobe.defaults import DEFAULT_N_STEPS
from scoreprobe.errors import ConfigError, ScoreprobeWarning, StoreError
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.probes.basins import LABEL_CHANGE_TOL, basins
from scoreprobe.probes.retention import retention
from scoreprobe.data.rules import Parity
from scoreprobe.slices import Plane, auto_plane

VALID = [STATE_CODES[s] for s in ("valid_novel", "valid_heldout", "valid_memorized")]


@pytest.fixture(scope="module")
def setup():
    rule = Parity(G=3, shape=(3, 4), layout="random", seed=2)
    ds = make_dataset(rule, n_train=24, n_heldout=24, seed=0)
    return rule, ds, auto_plane(ds, rule, seed=0)


def test_memorizer_basins_end_on_training_items(setup):
    rule, ds, plane = setup
    b = basins(EmpiricalDenoiser(ds.train), plane, sigma_start=(0.5, 1.0, 2.0), res=10, dataset=ds, rule=rule)
    assert b.endpoint_state.dims == ("sigma_start", "v", "u")
    mem = (b.endpoint_state == STATE_CODES["valid_memorized"]).mean(("v", "u"))
    assert (mem >= 0.99).all()
    np.testing.assert_allclose(b.fraction.sel(state="valid_memorized"), mem)
    np.testing.assert_allclose(b.fraction.sum("state"), 1.0)
    # endpoint_index is the training item reached: its bits equal the endpoint's
    idx = b.endpoint_index.values[b.endpoint_state.values == STATE_CODES["valid_memorized"]]
    assert (idx >= 0).all() and (idx < len(ds.train)).all()


def test_anchors_in_their_own_basins(setup):
    rule, ds, plane = setup
    # margin=0: the three anchors of auto_plane sit on grid corners
    res = 5
    pts, u, v = plane.grid(res, margin=0.0)
    corner = {}
    for k, (au, av) in enumerate(plane.anchor_uv):
        iu, iv = np.abs(u - au).argmin(), np.abs(v - av).argmin()
        np.testing.assert_allclose(pts[iv * res + iu], plane.anchors[k], atol=1e-9)
        corner[k] = (iv, iu)
    kw = dict(res=res, margin=0.0, dataset=ds, rule=rule, sigma_start=(0.2, 0.5))
    mem = basins(EmpiricalDenoiser(ds.train), plane, **kw).endpoint_anchor.values
    gen = basins(RuleDenoiser(rule), plane, **kw).endpoint_anchor.values
    for s in range(2):
        assert mem[s][corner[0]] == 0                  # the training item attracts itself...
        assert mem[s][corner[1]] != 1                  # ...the memorizer has no held-out attractor
        assert gen[s][corner[0]] == 0 and gen[s][corner[1]] == 1   # valid vertices are attractors
        assert gen[s][corner[2]] != 2 and mem[s][corner[2]] != 2   # the violating vertex is not


def test_rule_oracle_basins_end_on_valid_vertices(setup):
    rule, ds, plane = setup
    # a plane through three valid vertices: a training item and two held-out items
    valid_plane = Plane.through(*(to_signed(x) for x in (ds.train[0], ds.heldout[0], ds.heldout[1])))
    b = basins(RuleDenoiser(rule), valid_plane, sigma_start=(0.5, 2.0), res=10, dataset=ds, rule=rule)
    valid = b.fraction.sel(state=["valid_novel", "valid_heldout", "valid_memorized"]).sum("state")
    assert (valid >= 0.99).all()
    assert np.isin(b.endpoint_state.values, VALID).mean() >= 0.99
    # Through the violating anchor of auto_plane the plane lies in the fixed set of a rule symmetry
    # (swapping two untouched bits of the broken group), so some starts end on a saddle (`invalid`),
    # but the exact rule oracle never ends on a rule-violating vertex: a saddle end (off-vertex, its
    # bits at ±0 follow rounding noise) may threshold to violating bits, an on-vertex end never does.
    for solver in ("adaptive", "heun"):
        b = basins(RuleDenoiser(rule), plane, sigma_start=(0.5, 2.0), res=10, dataset=ds, rule=rule, solver=solver)
        assert ((b.endpoint_state != STATE_CODES["rule_violating"]) | (b.endpoint_off_vertex == 1)).all()


def test_symmetric_plane_gives_a_mirror_symmetric_map():
    # Parity with contiguous groups of 4: swapping bits 0 and 1 (same group) is a symmetry of the
    # rule. Anchors a, b = a with bits 0, 1 swapped, c fixed by the swap: the swap acts on the plane
    # as u -> -u, so the map must be mirror symmetric with anchors a and b exchanged.
    rule = Parity(G=4, shape=(2, 4))
    a = np.array([1, 0, 1, 0, 1, 1, 0, 0], np.uint8)
    b = a[[1, 0, 2, 3, 4, 5, 6, 7]]
    c = np.array([1, 1, 1, 1, 1, 1, 0, 0], np.uint8)       # valid and fixed by the swap (c0 = c1)
    heldout = np.array([[1, 0, 0, 1, 0, 0, 0, 0], [0, 1, 0, 1, 0, 0, 0, 0]], np.uint8)   # closed under the swap
    ds = Dataset(train=np.stack([a, b]), heldout=heldout, rule=rule)
    plane = Plane.through(to_signed(a), to_signed(b), to_signed(c))
    assert plane.anchor_uv[0, 0] == pytest.approx(-plane.anchor_uv[1, 0]) and abs(plane.anchor_uv[2, 0]) < 1e-12
    res = 16
    out = basins(RuleDenoiser(rule), plane, sigma_start=(0.5, 1.0, 2.0), res=res, dataset=ds, rule=rule,
                 dtype=torch.float64)
    st, an = out.endpoint_state.values, out.endpoint_anchor.values
    assert np.isin(st, VALID).mean() >= 0.99
    np.testing.assert_array_equal(st, st[..., ::-1])
    swap = np.array([1, 0, 2, -1])                        # anchor id a <-> b; index -1 maps to -1
    np.testing.assert_array_equal(an, swap[an[..., ::-1]])
    assert (an == 0).any() and (an == 1).any()            # both basins are on the map


def test_retention_memorizer_and_rule_oracle(setup):
    rule, ds, _ = setup
    sig = (0.1, 0.4, 1.0)
    r = retention(EmpiricalDenoiser(ds.train), None, sig, n_noise=8, n_train=6, n_heldout=6, dataset=ds, rule=rule)
    assert r.retained.dims == ("sigma", "sample") and list(r.split.values) == ["train"] * 6 + ["heldout"] * 6
    tr, ho = r.sel(sample=r.split == "train"), r.sel(sample=r.split == "heldout")
    assert (tr.retained.sel(sigma=0.1) >= 0.99).all()                     # training items keep their basin
    assert (ho.retained == 0).all() and (ho.captured >= 0.99).all()        # held-out items are swallowed
    g = retention(RuleDenoiser(rule), None, sig, n_noise=8, n_train=6, n_heldout=6, dataset=ds, rule=rule)
    gho = g.sel(sample=g.split == "heldout")
    assert (gho.retained.sel(sigma=0.1) >= 0.99).all() and (gho.captured.sel(sigma=0.1) == 0).all()
    assert (g.valid >= 0.99).all()
    # chunking does not change the result (noise is drawn per (item, restart) index)
    g2 = retention(RuleDenoiser(rule), None, sig, n_noise=8, n_train=6, n_heldout=6, dataset=ds, rule=rule,
                   chunk_size=5)
    np.testing.assert_array_equal(g.retained.values, g2.retained.values)


def test_retention_points_and_split_from_lookup(setup):
    rule, ds, _ = setup
    pts = to_signed(np.stack([ds.heldout[3], ds.train[5], rule.sample(1, seed=9)[0]]))
    r = retention(RuleDenoiser(rule), pts, 0.2, n_noise=2, dataset=ds, rule=rule)
    assert r.item_index.values[:2].tolist() == [3, 5]
    assert r.split.values[0] == "heldout" and r.split.values[1] == "train"
    with pytest.raises(ConfigError):
        retention(RuleDenoiser(rule), pts[:, :5], 0.2, dataset=ds, rule=rule)


def _counted(D, calls):
    """D, appending the batch size of every call to `calls`."""
    def f(x, s):
        calls.append(len(x))
        return D(x, s)
    return f


def test_basins_over_a_mapping_writes_an_idempotent_store(setup, tmp_path):
    rule, ds, plane = setup
    calls = []
    m = {100: _counted(RuleDenoiser(rule), calls), 10: _counted(EmpiricalDenoiser(ds.train), calls)}
    ids = {100: "rule oracle", 10: "memorizer"}   # named: the behavioural fingerprint would add denoiser calls
    kw = dict(sigma_start=1.0, res=6, dataset=ds, rule=rule, out=tmp_path / "b.zarr", model_id=ids)
    b = basins(m, plane, **kw)
    assert b.endpoint_state.dims == ("step", "sigma_start", "v", "u") and b.step.values.tolist() == [10, 100]
    assert b.fraction.sel(step=10, state="valid_memorized").item() >= 0.99
    n = len(calls)
    b2 = basins(m, plane, **kw)                           # rerun: everything is read back, nothing recomputed
    assert len(calls) == n
    np.testing.assert_array_equal(b.endpoint_state.values, b2.endpoint_state.values)
    with pytest.raises(ConfigError):
        basins(RuleDenoiser(rule), plane, res=4)          # no dataset/rule


# ---------------------------------------------------------------------------------------------
# check_convergence: labels at n_steps vs 2·n_steps
# ---------------------------------------------------------------------------------------------

def _direct_endpoints(D, plane, sigma, res, n_steps, ds, rule, dtype=torch.float32, solver="heun"):
    """Endpoints of every grid point computed without basin_map (integrate + classify_endpoints).

    Returns
    -------
    labels : (P, 3) int64, (state, train item, held-out item); off : (P,) bool, some |x_i| farther
    than 0.5 from 1 (the endpoint is not at a vertex, e.g. a saddle).
    """
    from scoreprobe.ode import integrate
    from scoreprobe.slices import classify_endpoints
    points, _, _ = plane.grid(res, 0.5)
    x = integrate(D, torch.as_tensor(points, dtype=dtype), sigma, n_steps=n_steps, solver=solver, chunk_size=4096)
    c = classify_endpoints(x, ds, rule)
    off = (np.abs(np.abs(x.double().numpy()) - 1) > 0.5).any(axis=1)
    return np.stack([c["state"].astype(np.int64), c["train_index"], c["heldout_index"]], axis=1), off


def _check_vars(b, n_steps, solver="heun"):
    from scoreprobe.ode import describe_solver, finer
    for name in ("label_change_fraction", "label_change_fraction_item"):
        assert b[name].dims == ("sigma_start",) and b[name].dtype == np.float64
        assert b[name].attrs["units"] == "1" and "finer setting" in b[name].attrs["long_name"]
        assert f"integrated again with {describe_solver(*finer(solver, n_steps))}" in b[name].attrs["comment"]


@pytest.mark.parametrize("solver", ["heun", "adaptive"])
def test_rule_oracle_labels_do_not_change_with_steps(setup, solver):
    from scoreprobe.ode import finer
    rule, ds, plane = setup
    sig, D = (0.5, 1.0, 2.0), RuleDenoiser(rule)
    # A plane through three valid vertices: every start ends on a vertex, and no label changes.
    valid_plane = Plane.through(*(to_signed(x) for x in (ds.train[0], ds.heldout[0], ds.heldout[1])))
    kw = dict(sigma_start=sig, res=10, dataset=ds, rule=rule, solver=solver)    # n_steps: DEFAULT_N_STEPS
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScoreprobeWarning)                       # converged: no warning
        b = basins(D, valid_plane, check_convergence=True, **kw)
    _check_vars(b, DEFAULT_N_STEPS, solver)
    np.testing.assert_array_equal(b.label_change_fraction.values, 0.0)
    np.testing.assert_array_equal(b.label_change_fraction_item.values, 0.0)
    plain = basins(D, valid_plane, **kw)           # the option adds variables, it does not change the map
    assert "label_change_fraction" not in plain
    for name in plain.data_vars:
        np.testing.assert_array_equal(b[name].values, plain[name].values)
    # auto_plane lies in the fixed set of a rule symmetry: some starts end exactly on a saddle
    # (coordinates at ±0), whose thresholded bits depend on the sign of rounding noise, not on the
    # step count. Such points (off-vertex at both step counts) are not basins and are not counted:
    # the stored fraction equals the direct one computed without them, and it is 0 for the oracle.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ScoreprobeWarning)
        b = basins(D, plane, check_convergence=True, **kw)
    saddles = 0
    for i, s in enumerate(sig):
        (a, off_a), (c, off_c) = (_direct_endpoints(D, plane, s, 10, n, ds, rule, solver=sv)
                                  for sv, n in ((solver, DEFAULT_N_STEPS), finer(solver, DEFAULT_N_STEPS)))
        judged = ~(off_a & off_c)
        saddles += int((~judged).sum())
        assert b.label_change_fraction.values[i] == np.mean((a[:, 0] != c[:, 0]) & judged) == 0
        assert b.label_change_fraction_item.values[i] == np.mean((a != c).any(axis=1) & judged) == 0
        np.testing.assert_array_equal(b.endpoint_off_vertex.sel(sigma_start=s).values.ravel(), off_a)
    assert saddles > 0  # the case this guards against does occur on this plane
    warned = [w for w in caught if issubclass(w.category, ScoreprobeWarning)]
    assert len(warned) == int(bool((b.label_change_fraction > LABEL_CHANGE_TOL).any()))


@pytest.mark.parametrize("n_steps", [1, 2])
def test_label_change_matches_an_independent_computation(setup, n_steps):
    # The memorizer with very few steps: at n_steps=1 the endpoint is D(x, sigma_start) itself, a
    # blend of items wherever the posterior is not yet concentrated, so states change at 2 steps;
    # at n_steps=2 every endpoint is a training item but near basin boundaries not the same one.
    rule, ds, _ = setup
    D = EmpiricalDenoiser(ds.train)
    plane = Plane.through(*(to_signed(x) for x in (ds.train[0], ds.heldout[0], ds.heldout[1])))
    sig, res = (0.5, 1.0, 2.0), 12
    with pytest.warns(ScoreprobeWarning, match="not converged") if n_steps == 1 else warnings.catch_warnings():
        b = basins(D, plane, sigma_start=sig, res=res, n_steps=n_steps, dataset=ds, rule=rule, check_convergence=True,
                   solver="heun")
    want_state, want_item = [], []
    for s in sig:
        (a, _), (c, _) = (_direct_endpoints(D, plane, s, res, n, ds, rule) for n in (n_steps, 2 * n_steps))
        want_state.append(np.mean(a[:, 0] != c[:, 0]))
        want_item.append(np.mean((a != c).any(axis=1)))
    np.testing.assert_array_equal(b.label_change_fraction.values, want_state)
    np.testing.assert_array_equal(b.label_change_fraction_item.values, want_item)
    _check_vars(b, n_steps)
    assert b.label_change_fraction_item.max() > 0                           # labels do change here
    assert (b.label_change_fraction_item >= b.label_change_fraction).all()
    if n_steps == 1:
        assert b.label_change_fraction.max() > LABEL_CHANGE_TOL


@pytest.mark.filterwarnings("ignore::scoreprobe.errors.ScoreprobeWarning")   # 4 steps: the memorizer may warn
def test_check_convergence_store_is_distinct_and_resumable(setup, tmp_path):
    from scoreprobe.store import stored_config
    rule, ds, plane = setup
    calls = []
    m = {100: _counted(RuleDenoiser(rule), calls), 10: _counted(EmpiricalDenoiser(ds.train), calls)}
    ids = {100: "rule oracle", 10: "memorizer"}   # named: the behavioural fingerprint would add denoiser calls
    kw = dict(sigma_start=(0.5, 1.0), res=5, n_steps=4, dataset=ds, rule=rule, model_id=ids, solver="heun")
    plain = basins(m, plane, out=tmp_path / "plain.zarr", **kw)
    assert "check_convergence" not in stored_config(tmp_path / "plain.zarr")   # old stores keep matching
    n_plain = len(calls)
    b = basins(m, plane, out=tmp_path / "b.zarr", check_convergence=True, **kw)
    assert stored_config(tmp_path / "b.zarr")["check_convergence"] is True
    assert b.label_change_fraction.dims == ("step", "sigma_start") and b.step.values.tolist() == [10, 100]
    heun_calls = {n: 2 * n - 1 for n in (4, 8)}                     # denoiser calls per row and sigma_start
    assert sum(calls[n_plain:]) * heun_calls[4] == sum(calls[:n_plain]) * (heun_calls[4] + heun_calls[8])
    np.testing.assert_array_equal(b.endpoint_state.values, plain.endpoint_state.values)
    n = len(calls)
    b2 = basins(m, plane, out=tmp_path / "b.zarr", check_convergence=True, **kw)   # resumed: nothing recomputed
    assert len(calls) == n
    np.testing.assert_array_equal(b2.label_change_fraction.values, b.label_change_fraction.values)
    basins(m, plane, out=tmp_path / "plain.zarr", **kw)                           # plain store still resumable
    assert len(calls) == n
    for out, flag in (("b.zarr", False), ("plain.zarr", True)):
        with pytest.raises(StoreError, match="check_convergence"):
            basins(m, plane, out=tmp_path / out, check_convergence=flag, **kw)


def test_keep_bits_stores_each_endpoint_and_is_part_of_the_store_identity(setup, tmp_path):
    """endpoint_bits classify back to the stored state and items; a stack of checkpoints keeps the same bits."""
    import json

    from scoreprobe.endpoints import classify
    rule, ds, plane = setup
    models = {0: RuleDenoiser(rule), 5: EmpiricalDenoiser(ds.train)}
    kw = {"sigma_start": (0.5, 2.0), "res": 5, "n_steps": 6, "dataset": ds, "rule": rule, "progress": False,
          "keep_bits": True}
    b = basins(models, plane, out=str(tmp_path / "b.zarr"), **kw)
    assert b.endpoint_bits.dims == ("step", "sigma_start", "v", "u", "bit") and b.endpoint_bits.dtype == np.uint8
    bits = b.endpoint_bits.values.reshape(-1, rule.n_bits)
    c = classify(to_signed(bits), ds, rule, anchors=plane.anchors)
    np.testing.assert_array_equal(c["state"], b.endpoint_state.values.ravel())
    np.testing.assert_array_equal(c["train_index"], b.endpoint_train_index.values.ravel())
    mem = b.endpoint_state.values.ravel() == STATE_CODES["valid_memorized"]
    assert mem.any() and (ds.train[c["train_index"][mem]] == bits[mem]).all()
    stacked = basins(models, plane, models_per_pass=2, **kw)
    np.testing.assert_array_equal(stacked.endpoint_bits.values, b.endpoint_bits.values)
    assert json.loads(b.attrs["scoreprobe_config"])["keep_bits"] is True
    plain = basins(models, plane, **{**kw, "keep_bits": False})
    assert "endpoint_bits" not in plain and "keep_bits" not in json.loads(plain.attrs["scoreprobe_config"])
    with pytest.raises(StoreError):
        basins(models, plane, out=str(tmp_path / "b.zarr"), **{**kw, "keep_bits": False})
