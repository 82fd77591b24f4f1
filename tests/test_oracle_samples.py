"""oracle_samples: the network's and the oracles' PF-ODE samples from the same noise, on planted truths."""
import warnings

import numpy as np
import pytest
import torch

from scoreprobe.data.datasets import make_dataset, to_bits
from scoreprobe.data.rules import Parity
from scoreprobe.errors import ConfigError, NonFiniteWarning
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.probes.clocks import clock_step
from scoreprobe.probes.oracle_samples import (
    CLASSES,
    compare,
    endpoints,
    oracle_samples,
    pixel_classes,
)

N = 48


@pytest.fixture(scope="module")
def setup():
    rule = Parity(G=2, shape=(6, 6), layout="contiguous")
    ds = make_dataset(rule, n_train=24, n_heldout=40, seed=0)
    return rule, ds, {"memorizer": EmpiricalDenoiser(ds.train), "rule": RuleDenoiser(rule)}


class Counting:
    """A denoiser that counts its calls (to show that bad input is refused before any work)."""

    def __init__(self, D):
        self.D, self.calls, self.dim = D, 0, D.dim

    def __call__(self, x, s):
        self.calls += 1
        return self.D(x, s)


@pytest.mark.parametrize("name", ["memorizer", "rule"])
def test_network_equal_to_an_oracle_agrees_exactly(setup, name):
    rule, ds, named = setup
    twin = EmpiricalDenoiser(ds.train) if name == "memorizer" else RuleDenoiser(rule)   # another instance
    out = oracle_samples(twin, ds, rule, oracles=named, n_samples=N, token_patch=2)
    me = out.sel(oracle=name)
    assert float(me.agree) == 1.0 and float(me.hamming) == 0.0 and float(me.r2_sample) == 1.0
    assert int(me.n_compared) == N and float(me.agree_low) > 0.9
    assert (me.pixel_agree.values == 1.0).all()
    assert np.array_equal(me.class_agree.values, np.where(out.class_size.values > 0, 1.0, np.nan), equal_nan=True)


def test_two_oracles_disagree_and_samples_are_what_they_should_be(setup):
    rule, ds, named = setup
    out = oracle_samples(named["memorizer"], ds, rule, oracles=named, n_samples=N)
    # the memorizer ends on training items only, the rule oracle on valid images only
    assert np.array_equal(out.oracle_train_item.values, [1.0, float(out.oracle_train_item.sel(oracle="rule"))])
    assert (out.oracle_valid.values == 1.0).all() and float(out.net_train_item) == 1.0
    # the rule oracle's samples are new images (24 training items among 2^18 valid ones)
    assert float(out.oracle_train_item.sel(oracle="rule")) < 0.2
    off = float(out.oracle_agree.sel(oracle="memorizer", oracle_b="rule"))
    assert off < 0.2 and float(out.agree.sel(oracle="rule")) == off
    # along the ODE grid: the same start (σ = 80), parting on the way, the endpoints' distance at σ = 0
    traj = out.traj_hamming.sel(oracle="rule")
    assert float(traj[0]) == 0.0 and np.isclose(float(traj[-1]), float(out.hamming.sel(oracle="rule")))
    assert float(out.ode_sigma[0]) == 80.0 and float(out.ode_sigma[-1]) == 0.0 and len(traj) == 33
    assert (out.traj_hamming.sel(oracle="memorizer") == 0).all()
    assert np.allclose(np.diag(out.oracle_agree.values), 1.0)
    assert float(out.hamming.sel(oracle="rule")) > 0.1 and (out.pixel_agree.sel(oracle="rule") < 1).any()


def test_pixel_classes_partition_and_token_pairs():
    for layout, patch, within in [("contiguous", 2, 18), ("contiguous", 1, 0), ("offset", 2, 0), ("offset", 6, 18)]:
        rule = Parity(G=2, shape=(6, 6), layout=layout)
        c = pixel_classes(rule, patch)
        assert not (c["border"] & c["interior"]).any() and (c["border"] | c["interior"]).all()
        assert c["border"].sum() == 20 and c["interior"].sum() == 16                 # 6x6: a ring of 20
        assert sorted(map(tuple, np.sort(c["pairs"], 1))) == sorted(map(tuple, np.sort(rule.groups, 1)))
        assert c["pair_within_token"].sum() == within and len(c["pair_within_token"]) == 18
    rule = Parity(G=3, shape=(6, 6), layout="contiguous")                         # 3 pairs per group
    c = pixel_classes(rule, (1, 3))
    assert len(c["pairs"]) == 12 * 3 and c["pair_within_token"].all()
    assert pixel_classes(rule)["pair_within_token"] is None


def test_compare_equals_brute_force(setup):
    rule, _, named = setup
    x_net = endpoints(lambda x, s: 0.5 * named["memorizer"](x, s) + 0.5 * named["rule"](x, s), N, 3, 16, 36)
    x_or = np.stack([endpoints(named[k], N, 3, 16, 36) for k in ("memorizer", "rule")])
    classes = pixel_classes(rule, 2)
    got = compare(x_net, x_or, classes, rule.image_shape)
    bn, bo = to_bits(x_net), to_bits(x_or)
    for k in range(2):
        assert got["agree"][k] == np.mean([np.array_equal(bn[i], bo[k, i]) for i in range(N)])
        assert np.isclose(got["hamming"][k], np.mean(bn != bo[k]))
        pix = np.array([[np.mean(bn[:, r * 6 + q] == bo[k, :, r * 6 + q]) for q in range(6)] for r in range(6)])
        assert np.allclose(got["pixel_agree"][k], pix)
        border = [b for b in range(36) if b // 6 in (0, 5) or b % 6 in (0, 5)]
        assert np.isclose(got["class_agree"][k, 0], np.mean(bn[:, border] == bo[k][:, border]))
        rel = [(bn[i, a] ^ bn[i, b]) == (bo[k, i, a] ^ bo[k, i, b]) for i in range(N) for a, b in rule.groups]
        joint = [bn[i, a] == bo[k, i, a] and bn[i, b] == bo[k, i, b] for i in range(N) for a, b in rule.groups]
        assert np.isclose(got["class_agree"][k, 2], np.mean(joint)) and np.isnan(got["class_agree"][k, 3])
        assert np.isclose(got["class_agree"][k, 4], np.mean(rel)) and np.isnan(got["class_agree"][k, 5])
        res, tot = ((x_net - x_or[k]) ** 2).sum(), ((x_net - x_net.mean(0)) ** 2).sum()
        assert np.isclose(got["r2_sample"][k], 1 - res / tot)
    assert 0 < got["agree"].max() < 1                                                # a mixture is neither


def test_same_samples_as_clocks(setup):
    rule, ds, named = setup
    mix = lambda x, s: 0.5 * named["memorizer"](x, s) + 0.5 * x / (1 + s[:, None] ** 2)
    out = oracle_samples(mix, ds, rule, oracles=("rule",), n_samples=N, seed=5)
    ref = clock_step(mix, ds, rule, n_samples=N, seed=5, keep_bits=True)
    assert float(out.net_train_item) == float(ref.mem_ratio) and float(out.net_valid) == float(ref.rule_acc)
    assert np.array_equal(ref.bits.values, to_bits(endpoints(mix, N, 5, 32, 36)))
    assert len(np.unique(ref.bits.values, axis=0)) > 10                            # the samples differ


def test_series_gives_a_step_dim_and_resumes(setup, tmp_path):
    rule, ds, named = setup
    series = {0: named["memorizer"], 7: named["rule"]}
    kw = {"oracles": named, "n_samples": 16, "token_patch": 2, "out": tmp_path / "os.zarr"}
    out = oracle_samples(series, ds, rule, **kw)
    assert out.agree.dims == ("step", "oracle") and list(out.step.values) == [0, 7]
    assert float(out.agree.sel(step=0, oracle="memorizer")) == 1.0 == float(out.agree.sel(step=7, oracle="rule"))
    assert out.pixel_agree.dims == ("step", "oracle", "row", "col") and CLASSES == tuple(out.pixel_class.values)
    again = oracle_samples(series, ds, rule, **kw)
    assert np.array_equal(again.agree.values, out.agree.values)


def test_token_size_read_from_the_network(shipped):
    D, ds = shipped
    out = oracle_samples(D, ds, oracles=("rule",), n_samples=8, n_steps=8, token_patch=3)   # the DiT's own wins
    assert (int(out.token_patch_h), int(out.token_patch_w)) == (2, 2)
    assert list(out.class_size.values) == [20, 16, 0, 18, 0, 18]          # the shipped offset layout: every pair across
    assert np.isnan(float(out.class_agree.sel(oracle="rule", pixel_class="pair_within_token")))


def test_shrinkage_network_keeps_the_noise_signs(setup):
    """The untrained adaLN-Zero DiT is x/(1+σ²): its PF-ODE only rescales the initial noise, so its samples are
    the noise's signs and its distance to each oracle is that oracle's distance to the noise, nothing more."""
    rule, ds, named = setup
    shrink = lambda x, s: x / (1 + s[:, None] ** 2)
    out = oracle_samples(shrink, ds, rule, oracles=named, n_samples=N)
    assert float(out.net_noise_hamming) == 0.0
    assert np.allclose(out.hamming.values, out.noise_hamming.values) and (out.noise_hamming > 0.1).all()
    twin = oracle_samples(named["rule"], ds, rule, oracles=named, n_samples=N)
    assert float(twin.net_noise_hamming) == float(twin.noise_hamming.sel(oracle="rule"))


def test_nonfinite_network_leaves_samples_out(setup):
    rule, ds, _ = setup
    bad = lambda x, s: torch.full_like(x, float("nan"))
    with pytest.warns(NonFiniteWarning):
        out = oracle_samples(bad, ds, rule, oracles=("rule",), n_samples=8, n_steps=4)
    assert out.n_compared.values.tolist() == [0]
    for v in ("agree", "agree_low", "agree_high", "hamming", "r2_sample", "cosine", "net_valid", "net_noise_hamming"):
        assert np.isnan(out[v].values).all(), v


@pytest.mark.parametrize("kw", [{"n_samples": 0}, {"n_samples": 2.5}, {"seed": -1}, {"n_steps": 0},
                                {"oracles": ("nope",)}, {"oracles": {}}, {"oracles": {"x": 3}},
                                {"token_patch": 0}, {"token_patch": (2, 2, 2)}, {"dtype": torch.int64},
                                {"sampler": "nope"}, {"patch": 2}])
def test_bad_input_refused_before_work(setup, kw):
    rule, ds, named = setup
    D = Counting(named["rule"])
    with pytest.raises(ConfigError):
        oracle_samples(D, ds, rule, **kw)
    assert D.calls == 0


def test_needs_data_and_rule(setup):
    with pytest.raises(ConfigError, match="oracle_samples"):
        oracle_samples(setup[2]["rule"])


def test_names_build_oracles(setup):
    rule, ds, _ = setup
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # oracles this version cannot build are left out of the default
        names = list(oracle_samples(RuleDenoiser(rule), ds, rule, n_samples=4, n_steps=4).oracle.values)
    assert {"memorizer", "rule", "local", "local_equivariant"} <= set(names)
    assert not set(names) - {"memorizer", "rule", "gaussian", "rule_gaussian", "local",
                                               "local_equivariant", "local_boundary"}


@pytest.mark.parametrize("sampler", ["adaptive", {"name": "edm-stochastic", "s_churn": 20}])
def test_other_samplers_share_their_noise_too(setup, sampler):
    rule, ds, named = setup
    out = oracle_samples(RuleDenoiser(rule), ds, rule, oracles=named, n_samples=16, sampler=sampler)
    assert float(out.agree.sel(oracle="rule")) == 1.0 and float(out.agree.sel(oracle="memorizer")) < 0.5
    assert ("traj_hamming" in out) == (sampler != "adaptive")       # the adaptive engine has no shared grid
