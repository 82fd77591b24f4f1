"""PF-ODE schedule, per-sample noise, Heun integrator (vs scipy solve_ivp) and the sampler."""
import numpy as np
import pytest
import torch
from scipy import stats
from scipy.integrate import solve_ivp

from scoreprobe.errors import ConfigError, DataError
from scoreprobe.ode import edm_sigmas, integrate, randn_per_sample, sample
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.data.rules import Parity

F64 = torch.float64


def bits_of(x):
    return (x > 0).to(torch.uint8).numpy()


def even_parity_groups(bits, g):
    """Validity written out for contiguous groups of g pixels. bits: (N, D) -> bool (N,)."""
    return (bits.reshape(len(bits), -1, g).sum(2) % 2 == 0).all(1)


def on_vertices(x):
    return torch.isfinite(x).all(1) & ((x.abs() - 1).abs() <= 0.5).all(1)


# ---------------------------------------------------------------------------------------------
# Schedule and noise
# ---------------------------------------------------------------------------------------------

def test_edm_sigmas_formula():
    for n, lo, hi, rho in ((18, 0.002, 80.0, 7.0), (5, 0.1, 2.0, 3.0), (2, 0.002, 1.0, 7.0)):
        s = edm_sigmas(n, lo, hi, rho)
        assert s.dtype == F64 and s.shape == (n + 1,) and s[-1] == 0
        ref = [(hi ** (1 / rho) + i / (n - 1) * (lo ** (1 / rho) - hi ** (1 / rho))) ** rho for i in range(n)]
        np.testing.assert_allclose(s[:-1].numpy(), ref, rtol=1e-13)
        assert np.isclose(s[0].item(), hi) and np.isclose(s[-2].item(), lo)
        assert (s[1:] < s[:-1]).all()
    assert edm_sigmas(1, 0.002, 3.0).tolist() == [3.0, 0.0]
    for bad in (dict(n_steps=0), dict(n_steps=4, sigma_min=0.0), dict(n_steps=4, sigma_min=2.0, sigma_max=1.0),
                dict(n_steps=2.5)):
        with pytest.raises(ConfigError):
            edm_sigmas(**bad)


def test_randn_per_sample_depends_only_on_seed_and_index():
    full = randn_per_sample(7, np.arange(40), 36, dtype=F64)                    # (40, 36)
    assert full.shape == (40, 36) and full.dtype == F64
    part = randn_per_sample(7, [33, 2, 5], 36, dtype=F64)
    assert torch.equal(part, full[[33, 2, 5]])
    assert torch.equal(randn_per_sample(7, torch.arange(10), 36, dtype=F64), full[:10])
    assert torch.equal(randn_per_sample(7, [3], 36), full[3:4].float())       # float32 = cast of float64
    assert not torch.equal(randn_per_sample(8, np.arange(40), 36, dtype=F64), full)
    assert not torch.equal(full[0], full[1])
    big = randn_per_sample(0, np.arange(300), 36, dtype=F64).numpy()
    assert stats.kstest(big.ravel(), "norm").pvalue > 1e-3                      # standard normal
    assert abs(np.corrcoef(big[:-1].ravel(), big[1:].ravel())[0, 1]) < 0.05     # rows independent
    with pytest.raises(ConfigError):
        randn_per_sample(0, [-1], 4)


# ---------------------------------------------------------------------------------------------
# Integrator
# ---------------------------------------------------------------------------------------------

def reference_path(D, x0, sigma_start, sigma_end):
    """solve_ivp (RK45, tight tolerances) of dx/dlogσ = x - D(x, σ) from sigma_start to sigma_end.

    x0: (B, D) numpy; all rows are integrated as one system. -> (B, D) at sigma_end.
    """
    shape = x0.shape

    def rhs(t, flat):
        x = torch.as_tensor(flat, dtype=F64).reshape(shape)
        return (x - D(x, torch.full((shape[0],), np.exp(t), dtype=F64))).reshape(-1).numpy()
    sol = solve_ivp(rhs, (np.log(sigma_start), np.log(sigma_end)), x0.reshape(-1), method="RK45",
                    rtol=1e-9, atol=1e-9)
    assert sol.success
    return sol.y[:, -1].reshape(shape)


@pytest.mark.parametrize("which", ["rule", "empirical"])
def test_heun_matches_solve_ivp(which):
    rule = Parity(3)
    D = RuleDenoiser(rule) if which == "rule" else EmpiricalDenoiser(rule.sample(32, seed=1))
    for sigma_start in (2.0, 80.0):
        x0 = sigma_start * randn_per_sample(11, np.arange(4), 36, dtype=F64)   # (4, 36)
        states = {}
        out = integrate(D, x0, sigma_start, n_steps=256, solver="heun",
                        callback=lambda i, s, x: states.update({i: (s, x)}))
        sigma_min, x_min = states[255]
        assert sigma_min == 0.002
        ref = reference_path(D, x0.numpy(), sigma_start, sigma_min)            # (4, 36)
        assert np.abs(x_min.numpy() - ref).max() < 1e-3
        ref_end = D(torch.as_tensor(ref), torch.full((4,), sigma_min, dtype=F64))
        assert (out - ref_end).abs().max() < 1e-3


def test_callback_sees_every_step_and_euler():
    D = RuleDenoiser(Parity(2))
    x0 = 1.5 * randn_per_sample(0, np.arange(5), 36, dtype=F64)
    seen = []
    out = integrate(D, x0, 1.5, n_steps=6, solver="heun", callback=lambda i, s, x: seen.append((i, s, x)))
    assert [i for i, _, _ in seen] == list(range(7))
    np.testing.assert_allclose([s for _, s, _ in seen], edm_sigmas(6, 0.002, 1.5).numpy())
    assert torch.equal(seen[0][2], x0) and torch.equal(seen[-1][2], out)
    # a hand-written Euler loop on the same schedule gives the same result
    x, sig = x0, edm_sigmas(6, 0.002, 1.5).tolist()
    for s, s_next in zip(sig[:-1], sig[1:]):
        x = x + (s_next - s) * (x - D(x, torch.full((5,), s, dtype=F64))) / s
    torch.testing.assert_close(integrate(D, x0, 1.5, n_steps=6, solver="euler"), x, rtol=0, atol=1e-12)


def test_integrate_errors_and_nan_propagation():
    x0 = torch.randn(3, 4)
    with pytest.raises(DataError, match="shape"):
        integrate(lambda x, s: x[:, :2], x0, 1.0)
    with pytest.raises(ConfigError):
        integrate(lambda x, s: x, x0, 1.0, solver="rk4")
    with pytest.raises(ConfigError):
        integrate(lambda x, s: x, x0, 0.0)
    out = integrate(lambda x, s: torch.full_like(x, float("nan")), x0, 1.0, n_steps=3)
    assert torch.isnan(out).all()                                               # recorded, not raised


# ---------------------------------------------------------------------------------------------
# Sampler
# ---------------------------------------------------------------------------------------------

def test_sample_empirical_lands_on_training_items():
    train = Parity(3).sample(64, seed=2)
    x = sample(EmpiricalDenoiser(train), n=300, seed=0, n_steps=18)
    assert x.shape == (300, 36) and x.dtype == torch.float32
    items = {row.tobytes() for row in train}
    hits = np.array([row.tobytes() in items for row in bits_of(x)]) & on_vertices(x).numpy()
    assert hits.mean() >= 0.99


def test_sample_rule_is_valid_and_novel():
    rule = Parity(3)
    train = {row.tobytes() for row in rule.sample(256, seed=3)}
    x = sample(RuleDenoiser(rule), n=300, seed=1, n_steps=18)
    bits = bits_of(x)
    valid = even_parity_groups(bits, 3) & on_vertices(x).numpy()
    assert valid.mean() >= 0.99
    assert np.mean([row.tobytes() not in train for row in bits]) > 0.5
    assert len({row.tobytes() for row in bits}) > 250                           # diverse


def test_sample_invariant_to_batch_and_chunk():
    D = RuleDenoiser(Parity(2))
    full = sample(D, n=20, seed=5, n_steps=8)
    assert torch.equal(sample(D, n=20, seed=5, n_steps=8, chunk_size=7), full)
    assert torch.equal(sample(D, n=9, seed=5, n_steps=8, chunk_size=4), full[:9])
    assert not torch.equal(sample(D, n=20, seed=6, n_steps=8), full)
    E = EmpiricalDenoiser(Parity(2).sample(40, seed=0), chunk_size=16)
    torch.testing.assert_close(sample(E, n=20, seed=5, n_steps=8, chunk_size=3),
                               sample(E, n=20, seed=5, n_steps=8), rtol=0, atol=1e-5)


def test_sample_dimension_inference():
    with pytest.raises(ConfigError, match="dim"):
        sample(lambda x, s: torch.zeros_like(x), n=2, seed=0)
    x = sample(lambda x, s: torch.zeros_like(x), n=2, seed=0, dim=5, n_steps=3, dtype=F64)
    assert x.shape == (2, 5) and x.dtype == F64 and x.abs().max() < 1e-12


@pytest.mark.gpu
def test_sample_on_cuda_matches_cpu():
    D = RuleDenoiser(Parity(3))
    cpu = sample(D, n=64, seed=4, n_steps=18, dtype=F64)
    gpu = sample(D, n=64, seed=4, n_steps=18, dtype=F64, device="cuda", chunk_size=16)
    assert gpu.device.type == "cuda"
    torch.testing.assert_close(gpu.cpu(), cpu, rtol=0, atol=1e-9)
    x0 = randn_per_sample(4, np.arange(8), 36, device="cuda")
    assert torch.equal(x0.cpu(), randn_per_sample(4, np.arange(8), 36))


def test_fitting_rows_keeps_a_share_of_free_memory():
    from scoreprobe.ode import fitting_rows
    assert fitting_rows(4e9, 1e5, 10**6) == 10_000                    # a quarter of 4 GB at 100 kB per row
    assert fitting_rows(4e9, 1e5, 5_000) is None                       # everything fits: one chunk
    assert fitting_rows(4e9, 1e5, 10**6, multiple=32) == 9_984         # a stack's rows come in groups of K
    assert fitting_rows(1e6, 1e5, 10**6, least=256) == 256             # never below the measured probe


def test_auto_chunks_on_cpu_are_the_old_default():
    from scoreprobe.ode import AUTO_CPU_ROWS, auto_chunk_rows
    from scoreprobe.oracles import RuleDenoiser
    from scoreprobe.data.rules import Parity
    D = RuleDenoiser(Parity(2, shape=(2, 3)))
    x0 = randn_per_sample(0, np.arange(9000), 6, dtype=F64)
    assert auto_chunk_rows(D, x0, 1.0) == AUTO_CPU_ROWS
    calls = []
    counted = lambda x, s: calls.append(len(x)) or D(x, s)           # noqa: E731
    a = integrate(counted, x0, 1.0, n_steps=2, solver="heun", chunk_size="auto")
    rest = 9000 - 2 * AUTO_CPU_ROWS
    assert calls[:6] == [AUTO_CPU_ROWS] * 4 + [rest] * 2                 # Heun: two calls per chunk
    assert torch.equal(a, integrate(D, x0, 1.0, n_steps=2, solver="heun", chunk_size=AUTO_CPU_ROWS))
    calls.clear()                                                        # the engine: running rows, chunked
    b = integrate(counted, x0, 1.0, chunk_size="auto")
    assert calls[:3] == [AUTO_CPU_ROWS, AUTO_CPU_ROWS, rest] and max(calls) == AUTO_CPU_ROWS
    assert min(calls) < rest and torch.equal(b, integrate(D, x0, 1.0))  # rows left the batch


@pytest.mark.gpu
def test_auto_chunks_on_cuda_come_from_free_memory():
    import scoreprobe as sp
    from scoreprobe.ode import auto_chunk_rows
    s = sp.load_series()
    D = s.denoiser(s.steps[-1], device="cuda")
    x0 = randn_per_sample(0, np.arange(1 << 16), 36, device="cuda")
    rows = auto_chunk_rows(D, x0, 1.0)
    assert rows is None or rows >= 256
    a = integrate(D, x0, 1.0, chunk_size="auto")
    b = integrate(D, x0, 1.0, chunk_size=4096)
    assert ((a > 0) == (b > 0)).all(dim=1).float().mean() >= 0.999
