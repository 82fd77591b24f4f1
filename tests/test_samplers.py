"""samplers.py: EDM's stochastic sampler and DDIM-η / ancestral against the oracles (ground truth).

The exact denoisers of a set of vertices (EmpiricalDenoiser of the set, RuleDenoiser of a rule) make
every correct sampler draw uniformly from that set, and keep the law of x at level σ equal to the
noised data (E‖x‖²/D = 1 + σ² for signed vertices); a wrong noise scale breaks both (checked too).
"""
import json
import re

import numpy as np
import pytest
import torch
from scipy import stats

import scoreprobe as sp
from scoreprobe.ode import samplers
from scoreprobe.cli import main
from scoreprobe.data.bitindex import BitIndex
from scoreprobe.data.datasets import make_dataset
from scoreprobe.errors import ConfigError, StoreError
from scoreprobe.noise import randn_per_sample, stream_seed
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.probes.clocks import clock_step
from scoreprobe.stats.clocks import clocks
from scoreprobe.data.rules import Parity
from scoreprobe.ode.samplers import Sampler, integrate_with, sample

F64 = torch.float64
# six vertices of {0,1}^8 with very different neighbourhoods: three within Hamming distance 2 of each
# other, three far apart. Symmetry cannot make the samples uniform here; only a correct sampler does.
CLUSTERED = np.array([[0] * 8, [0] * 7 + [1], [0] * 6 + [1, 1], [1] * 8, [1] * 4 + [0] * 4, [1, 0] * 4], np.uint8)
STOCHASTIC = [Sampler("edm-stochastic", s_churn=40), Sampler("edm-stochastic", s_churn=10, s_tmin=0.05, s_tmax=50),
              Sampler("ancestral"), Sampler("ddim", eta=0.5)]


def _name(spec):
    return spec.describe()


@pytest.fixture(scope="module")
def parity():
    rule = Parity(2, shape=(2, 4))   # 8 bits, 4 pairs: 16 valid images
    return rule, RuleDenoiser(rule)


# ---------------------------------------------------------------------------------------------
# The deterministic limits are the deterministic samplers, bit for bit
# ---------------------------------------------------------------------------------------------

def test_churn_zero_is_heun_exactly(parity):
    rule, D = parity
    E = EmpiricalDenoiser(CLUSTERED)
    for den, dim in ((D, None), (E, 8)):
        heun = sample(den, 200, 3, n_steps=12, dim=dim)
        for spec in (Sampler("edm-stochastic", s_churn=0), Sampler("edm-stochastic", s_churn=40, s_tmin=100)):
            assert torch.equal(sample(den, 200, 3, n_steps=12, dim=dim, sampler=spec), heun)
    assert torch.equal(sample(D, 50, 3, n_steps=12), sp.sample(D, 50, 3, n_steps=12))   # sp.sample is this one


def test_ddim_eta_zero_is_euler_exactly(parity):
    rule, D = parity
    euler = sample(D, 200, 3, n_steps=12, solver="euler")
    assert torch.equal(sample(D, 200, 3, n_steps=12, sampler="ddim"), euler)
    assert torch.equal(sample(D, 200, 3, n_steps=12, sampler=Sampler("ddim", eta=0.0)), euler)
    # and it is the DDIM update x0 + σ'·ε̂ written out (one step from σ = 2 to σ' = 0.5)
    x = 2.0 * randn_per_sample(0, np.arange(64), 8, dtype=F64)
    x0 = D(x, torch.full((64,), 2.0, dtype=F64))
    steps = []
    integrate_with(D, x, 2.0, "ddim", 0, n_steps=2, sigma_min=0.5, rho=1.0,
                   callback=lambda i, s, xi: steps.append(xi))
    torch.testing.assert_close(steps[1], x0 + 0.5 * (x - x0) / 2.0, rtol=1e-12, atol=1e-12)


def test_stochastic_samplers_really_differ(parity):
    rule, D = parity
    heun = sample(D, 200, 3, n_steps=12)
    for spec in STOCHASTIC:
        assert not torch.equal(sample(D, 200, 3, n_steps=12, sampler=spec), heun), _name(spec)


# ---------------------------------------------------------------------------------------------
# Noise: a pure function of (seed, step, sample index)
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec", STOCHASTIC, ids=_name)
def test_independent_of_chunks_and_batch_size(parity, spec):
    rule, D = parity
    full = sample(D, 60, 5, n_steps=10, sampler=spec)
    assert torch.equal(sample(D, 60, 5, n_steps=10, sampler=spec, chunk_size=7), full)
    assert torch.equal(sample(D, 25, 5, n_steps=10, sampler=spec, chunk_size=4), full[:25])
    assert not torch.equal(sample(D, 60, 6, n_steps=10, sampler=spec), full)   # the seed matters


def test_rows_with_the_same_index_get_the_same_noise(parity):
    """The K copies of a sample in a stacked denoiser (index repeated) follow the same path."""
    rule, D = parity
    x0 = 80.0 * randn_per_sample(1, np.arange(30), 8)
    x = integrate_with(D, x0.repeat_interleave(2, 0), 80.0, STOCHASTIC[0], 1, index=np.repeat(np.arange(30), 2),
                       n_steps=10, chunk_size=9)                                     # (60, 8)
    assert torch.equal(x[0::2], x[1::2])
    assert torch.equal(x[0::2], integrate_with(D, x0, 80.0, STOCHASTIC[0], 1, n_steps=10))


def test_step_streams_are_distinct_from_the_initial_noise():
    seeds = {stream_seed(0, k) for k in range(100)} | {stream_seed(1, k) for k in range(100)}
    assert len(seeds) == 200 and 0 not in seeds and 1 not in seeds
    assert stream_seed(7, 3) == stream_seed(7, 3)
    with pytest.raises(ConfigError):
        stream_seed(0, -1)


# ---------------------------------------------------------------------------------------------
# The right distribution
# ---------------------------------------------------------------------------------------------

def _counts(spec, n=3000, n_steps=32):
    x = sample(EmpiricalDenoiser(CLUSTERED), n, 1, n_steps=n_steps, sampler=spec, dim=8)
    k = BitIndex(CLUSTERED).lookup((x > 0).numpy().astype(np.uint8))
    return (k < 0).mean(), np.bincount(k[k >= 0], minlength=len(CLUSTERED))


@pytest.mark.parametrize("spec", [Sampler()] + STOCHASTIC, ids=_name)
def test_uniform_over_the_memorized_set(spec):
    """The exact denoiser of six uneven vertices: samples land on them, uniformly (chi-square)."""
    off, counts = _counts(spec)
    assert off == 0
    assert stats.chisquare(counts).pvalue > 1e-3, counts


def test_the_uniformity_test_catches_a_wrong_noise_scale():
    for s_noise in (0.5, 1.5):   # too little or too much churn noise: the basins' sizes show through
        off, counts = _counts(Sampler("edm-stochastic", s_churn=40, s_noise=s_noise))
        assert stats.chisquare(counts).pvalue < 1e-6, (s_noise, counts)


@pytest.mark.parametrize("spec", STOCHASTIC, ids=_name)
def test_rule_oracle_gives_uniform_valid_images(parity, spec):
    rule, D = parity
    x = sample(D, 3200, 2, n_steps=32, sampler=spec)
    bits = (x > 0).numpy().astype(np.uint8)
    assert rule.is_valid(bits).all()
    counts = np.bincount(BitIndex(rule.enumerate()).lookup(bits), minlength=rule.n_valid)
    assert stats.chisquare(counts).pvalue > 1e-3, counts


def _worst_moment_error(spec, D, n, n_steps):
    """max over the path's levels σ_i of |mean x_i² / (1 + σ_i²) − 1| (mean over samples and bits)."""
    path = []
    sample(D, n, 4, n_steps=n_steps, sampler=spec, dtype=F64,
           callback=lambda i, s, x: path.append((s, float((x ** 2).mean()))))
    sigma, m2 = np.array(path).T                                                    # (N + 1,) each
    return float(np.max(np.abs(m2 / (1 + sigma ** 2) - 1)))


def test_marginals_stay_the_noised_data(parity):
    """At every level σ_i of the path E[x²] = 1 + σ_i² (signed vertices plus N(0, σ_i²) noise), up to
    the discretization error (a few % at 64 steps here) and 1000 samples' noise (about 1.5%)."""
    rule, D = parity
    assert _worst_moment_error(Sampler("edm-stochastic", s_churn=40), D, 1000, 64) < 0.08
    # the same check sees a churn noise 30% too large (it measures above 0.5)
    assert _worst_moment_error(Sampler("edm-stochastic", s_churn=40, s_noise=1.3), D, 1000, 64) > 0.2


@pytest.mark.slow
@pytest.mark.parametrize("spec", [Sampler()] + STOCHASTIC, ids=_name)
def test_marginals_of_every_sampler_at_128_steps(parity, spec):
    """Every sampler, finer steps: within 6% (ancestral, first order, is the worst: about 5%)."""
    rule, D = parity
    assert _worst_moment_error(spec, D, 2000, 128) < 0.06


# ---------------------------------------------------------------------------------------------
# Parameters, records and stores
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, match", [
    (dict(name="edm-stochastic"), "needs s_churn"),
    (dict(name="edm-stochastic", s_churn=-1), "s_churn must be finite and >= 0"),
    (dict(name="edm-stochastic", s_churn=float("inf")), "s_churn must be finite"),
    (dict(name="edm-stochastic", s_churn=1, s_noise=0), "s_noise must be finite and > 0"),
    (dict(name="edm-stochastic", s_churn=1, s_tmin=2, s_tmax=1), "s_tmax .* must be >= s_tmin"),
    (dict(name="edm-stochastic", s_churn="a lot"), "s_churn must be a number"),
    (dict(name="ddim", eta=1.5), r"eta must lie in \[0, 1\]"),
    (dict(name="ddim", s_churn=1), "s_churn does not apply to the ddim sampler"),
    (dict(name="heun", eta=0.5), "eta does not apply to the heun sampler"),
    (dict(name="ancestral", eta=0.5), "ancestral sampler is ddim with eta 1"),
    (dict(name="dpm"), "unknown sampler 'dpm'"),
])
def test_bad_parameters_are_refused(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        Sampler(**kwargs)


def test_config_records_every_parameter():
    assert Sampler().config() == {"name": "heun"}
    assert Sampler("edm-stochastic", s_churn=40).config() == {
        "name": "edm-stochastic", "s_churn": 40.0, "s_noise": 1.0, "s_tmin": 0.0, "s_tmax": None}
    assert Sampler("ddim").config() == {"name": "ddim", "eta": 0.0}
    assert Sampler("ancestral").config() == {"name": "ancestral", "eta": 1.0}
    assert samplers.as_sampler({"name": "ddim", "eta": 0.3}) == Sampler("ddim", eta=0.3)
    assert samplers.as_sampler(None, "euler") == Sampler("euler")
    with pytest.raises(ConfigError, match="disagree"):
        samplers.as_sampler("ddim", "euler")
    with pytest.raises(ConfigError, match="sampler must be"):
        samplers.as_sampler(3)


@pytest.fixture(scope="module")
def small():
    rule = Parity(2, shape=(3, 4))
    return rule, make_dataset(rule, 16, 16, seed=0)


def test_clocks_store_refuses_another_sampler(small, tmp_path):
    rule, data = small
    mapping, out = {0: RuleDenoiser(rule), 5: EmpiricalDenoiser(data.train)}, tmp_path / "clocks.zarr"
    kw = dict(n_samples=30, n_steps=8, dataset=data, rule=rule, out=out, progress=False)
    churn = Sampler("edm-stochastic", s_churn=20)
    first = clocks(mapping, steps=[0], sampler=churn, **kw)
    assert json.loads(first.attrs["scoreprobe_config"])["sampler"] == churn.config()
    again = clocks(mapping, sampler=churn, **kw)             # the same sampler: resumes, step 0 reused
    assert list(again.step.values) == [0, 5] and (again.state.isel(step=0) == first.state.isel(step=0)).all()
    for other, keys in ((None, "sampler.name, sampler.s_churn, sampler.s_noise, sampler.s_tmax, sampler.s_tmin"),
                        (Sampler("edm-stochastic", s_churn=40), "sampler.s_churn"),
                        (Sampler("edm-stochastic", s_churn=20, s_noise=1.007), "sampler.s_noise"),
                        ("ancestral", "sampler.eta, sampler.name, sampler.s_churn, sampler.s_noise, sampler.s_tmax, sampler.s_tmin")):
        with pytest.raises(StoreError, match=re.escape(f"(config keys differ: {keys});")):
            clocks(mapping, sampler=other, **kw)
    heun = clocks(mapping, n_samples=30, n_steps=8, dataset=data, rule=rule, progress=False)
    assert json.loads(heun.attrs["scoreprobe_config"])["sampler"] == {"name": "heun"}


def test_clocks_with_a_sampler_equal_sample_then_classify(small):
    rule, data = small
    spec = Sampler("ancestral")
    ds = clock_step(RuleDenoiser(rule), data, rule, n_samples=40, n_steps=8, sampler=spec, keep_bits=True)
    x = sample(RuleDenoiser(rule), 40, 0, n_steps=8, sampler=spec)
    np.testing.assert_array_equal(ds.bits.values, (x > 0).numpy().astype(np.uint8))


def test_token_samplers_take_only_the_default(small):
    class Tokens:   # anything with .sample(n, seed) -> bits, as a GPT
        def sample(self, n, seed, chunk_size=None):
            return np.zeros((n, 12), np.uint8)
    rule, data = small
    assert clock_step(Tokens(), data, rule, n_samples=4).rule_acc == 1
    with pytest.raises(ConfigError, match="a GPT samples its tokens"):
        clock_step(Tokens(), data, rule, n_samples=4, sampler="ancestral")


# ---------------------------------------------------------------------------------------------
# The CLI
# ---------------------------------------------------------------------------------------------

def test_cli_names_match_the_library():
    from scoreprobe.cli.curves import CLI_NAMES, SAMPLER_NAMES
    assert SAMPLER_NAMES == samplers.SAMPLERS and set(CLI_NAMES) == set(samplers.API_NAMES)


@pytest.mark.parametrize("args, says", [
    (["--sampler", "edm-stochastic"], "needs --s-churn"),
    (["--sampler", "edm-stochastic", "--s-churn", "-1"], "--s-churn must be finite and >= 0"),
    (["--sampler", "edm-stochastic", "--s-churn", "5", "--s-noise", "0"], "--s-noise must be finite and > 0"),
    (["--sampler", "edm-stochastic", "--s-churn", "5", "--s-tmin", "3", "--s-tmax", "1"], "--s-tmax (1) must be >="),
    (["--sampler", "ddim", "--eta", "2"], "--eta must lie in [0, 1]"),
    (["--s-churn", "10"], "--s-churn does not apply to the heun sampler"),
    (["--sampler", "ancestral", "--eta", "0.5"], "ddim with --eta 1"),
    (["--sampler", "dpm"], "'dpm' is not one of"),
])
def test_cli_refuses_bad_sampler_options(args, says, capsys, tmp_path):
    out = tmp_path / "c.zarr"
    with pytest.raises(SystemExit) as e:
        main(["clocks", "--out", str(out), *args])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("error: ") and says in err and "Traceback" not in err, err
    assert len(err.splitlines()) <= 2 and not out.exists()
