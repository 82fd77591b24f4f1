"""The adaptive PF-ODE engine: accuracy against scipy, early decision on the exact oracles, per-row
independence of batch and chunk size, stacks, statuses and settings."""
import numpy as np
import pytest
import torch
from scipy.integrate import solve_ivp

from scoreprobe.ode.engine import STATUS, EngineSettings, evaluate, solve
from scoreprobe.errors import ConfigError, ScoreprobeWarning
from scoreprobe.ode import finer, integrate, randn_per_sample, resolve_solver, solver_config
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.data.rules import Parity

F64 = torch.float64

# The rule oracle's trajectories are the long ones (about 5-10 s each against scipy at tight tolerances): they run
# under -m slow; the empirical oracle's run by default.
RULE_SLOW = pytest.param("rule", marks=pytest.mark.slow)


def oracle(which):
    rule = Parity(3)
    return RuleDenoiser(rule) if which == "rule" else EmpiricalDenoiser(rule.sample(32, seed=1))


def per_point_reference(D, x0, sigma_start, sigma_min=0.002):
    """scipy RK45 (rtol = atol = 1e-9) of dx/dlnσ = x − D(x, σ), one row at a time, then D(x, σ_min)."""
    ends = []
    for row in x0.numpy():
        def rhs(t, x):
            xt = torch.as_tensor(x, dtype=F64)[None]
            return (xt - D(xt, torch.full((1,), np.exp(t), dtype=F64)))[0].numpy()
        sol = solve_ivp(rhs, (np.log(sigma_start), np.log(sigma_min)), row, method="RK45", rtol=1e-9, atol=1e-9)
        assert sol.success
        ends.append(sol.y[:, -1])
    x = torch.as_tensor(np.stack(ends))
    return D(x, torch.full((len(x),), sigma_min, dtype=F64))


@pytest.mark.parametrize("which", [RULE_SLOW, "empirical"])
@pytest.mark.parametrize("pair", ["bs3", "heun-euler"])
def test_the_engine_converges_to_scipy_without_early_decision(which, pair):
    D = oracle(which)
    for sigma_start in (2.0, 80.0):
        x0 = sigma_start * randn_per_sample(3, np.arange(6), 36, dtype=F64)     # (6, 36)
        ref = per_point_reference(D, x0, sigma_start)
        errs = []
        for tol in (1e-3, 1e-5):
            r = solve(D, x0, sigma_start, EngineSettings(pair=pair, rtol=tol, atol=tol, patience=0, max_steps=5000))
            assert (r.status == 0).all() and (r.decided_sigma == 0).all()
            errs.append(float((r.x - ref).abs().max()))
        assert errs[1] < 1e-3 and errs[1] < errs[0] + 1e-12                    # converges as tol shrinks


def test_a_constant_denoiser_is_integrated_exactly():
    """For D ≡ c the solution is linear in σ (x(σ) = c + (x0 − c)σ/σ0): every step of the pair is exact,
    so nothing is rejected and the steps grow at the controller's largest rate."""
    c = torch.linspace(-0.9, 0.9, 8, dtype=F64)
    x0 = randn_per_sample(0, np.arange(5), 8, dtype=F64) * 3
    r = solve(lambda x, s: c.expand_as(x).clone(), x0, 3.0, EngineSettings(patience=0, rtol=1e-8, atol=1e-8))
    assert (r.rejected == 0).all()
    torch.testing.assert_close(r.x, c.expand_as(x0), rtol=0, atol=1e-12)


@pytest.mark.parametrize("which", [RULE_SLOW, "empirical"])
def test_the_decision_criterion_holds_on_the_exact_oracles(which):
    """The criterion of docs/definitions.md: where |D(x, σ) − v|_∞ <= tol at v = sign(x), the rest of
    the flow keeps D within tol of v (the box around v is trapping for a posterior mean), so the
    endpoint is v to within tol. Checked by integrating such points to σ = 0 with 512 Heun steps."""
    D, tol = oracle(which), EngineSettings().decide_tol
    items = Parity(3).sample(32, seed=1) if which == "empirical" else Parity(3).sample(600, seed=2)
    clean = 2.0 * torch.as_tensor(items, dtype=F64).repeat(600 // len(items), 1) - 1           # (600, 36)
    for sigma in (0.6, 0.45, 0.3):
        x = clean + sigma * randn_per_sample(5, np.arange(len(clean)), 36, dtype=F64)      # noisy at σ
        v = torch.where(x > 0, 1.0, -1.0).to(F64)
        close = (D(x, torch.full((len(x),), sigma, dtype=F64)) - v).abs().amax(dim=1) <= tol
        assert 20 < close.sum() < len(x)                                        # both kinds of points
        seen = []
        end = integrate(D, x[close], sigma, n_steps=512, solver="heun",
                        callback=lambda i, s, xi: seen.append((s, xi)))
        worst = max(float((D(xi, torch.full((len(xi),), s, dtype=F64)) - v[close]).abs().max())
                    for s, xi in seen[:-1:8])
        assert worst <= tol + 1e-9
        assert float((end - v[close]).abs().max()) <= tol


@pytest.mark.parametrize("pair, patience, steps", [("bs3", 3, 1), ("bs3", 4, 1), ("bs3", 5, 2),
                                                 ("heun-euler", 3, 1), ("heun-euler", 4, 2)])
def test_patience_counts_the_evaluations_along_the_accepted_path(pair, patience, steps):
    """D ≡ a vertex v, rows in v's orthant: every evaluation is within decide_tol of v, so the count
    is 1 at the start, then + the step's stages after its start (bs3: 2, the last being the new
    point; heun-euler: 1) + the new point: decided after `steps` accepted steps."""
    v = torch.where(torch.arange(8) % 3 == 0, 1.0, -1.0).to(F64)                 # (8,)
    x0 = v * (0.5 + randn_per_sample(2, np.arange(4), 8, dtype=F64).abs())       # (4, 8) in v's orthant
    r = solve(lambda x, s: v.expand_as(x).clone(), x0, 3.0, EngineSettings(pair=pair, patience=patience))
    assert (r.decided_sigma > 0).all() and (r.accepted == steps).all() and (r.rejected == 0).all()
    assert torch.equal(r.x, v.expand_as(x0))


@pytest.mark.parametrize("which", [RULE_SLOW, "empirical"])
def test_early_decision_keeps_the_labels_of_a_tight_reference(which):
    D = oracle(which)
    for sigma_start in (1.0, 2.0, 80.0):
        x0 = sigma_start * randn_per_sample(7, np.arange(600), 36, dtype=F64)
        ref = integrate(D, x0, sigma_start, solver=EngineSettings(rtol=1e-6, atol=1e-6, patience=0, max_steps=5000))
        undecided = integrate(D, x0, sigma_start, solver=EngineSettings(patience=0), info=True)
        r = integrate(D, x0, sigma_start, info=True)
        assert torch.equal(r.x > 0, undecided.x > 0)          # deciding early changes no label
        assert ((r.x > 0) == (ref > 0)).all(1).double().mean() >= 0.99   # the steps' own error: near boundaries
        decided = r.decided_sigma > 0
        assert decided.mean() > 0.3 and (r.nfe[decided] < r.nfe.max()).any()
        # a decided row ends exactly on its vertex, on-vertex by construction
        assert torch.equal(r.x[decided].abs(), torch.ones_like(r.x[decided]))
        assert r.nfe.mean() < undecided.nfe.mean() - 3      # saves more than one bs3 step per row
        assert r.nfe.mean() < (30 if sigma_start <= 2 else 70)


def test_rows_do_not_depend_on_batch_order_chunks_or_neighbours():
    D = oracle("empirical")
    x0 = 1.0 * randn_per_sample(9, np.arange(64), 36, dtype=F64)
    base = solve(D, x0, 1.0)
    perm = torch.randperm(64, generator=torch.Generator().manual_seed(0))
    for xs, chunk, idx in ((x0, 7, torch.arange(64)), (x0[perm], None, perm), (x0[:5], 2, torch.arange(5)),
                           (torch.cat([x0[10:11], 50 * x0]), 3, torch.tensor([10]))):
        r = solve(D, xs, 1.0, chunk_size=chunk)
        n = len(idx)
        assert torch.equal(r.x[:n], base.x[idx])
        for name in ("nfe", "accepted", "rejected", "status"):
            np.testing.assert_array_equal(getattr(r, name)[:n], getattr(base, name)[idx.numpy()])
        # σ is exp of a sum of steps; D's matmul may round differently for another batch size
        np.testing.assert_allclose(r.decided_sigma[:n], base.decided_sigma[idx.numpy()], rtol=1e-12)


def test_a_stack_layout_is_kept_when_rows_leave_the_batch():
    """Rows of a stacked batch go to model r % K; `evaluate` pads each model's running rows."""
    scales = torch.tensor([0.5, 1.0, 2.0], dtype=F64)

    class Stack:   # a stand-in for models.stack.StackedDenoiser: model k scales x by scales[k]
        k = 3

        def __call__(self, x, s):
            assert len(x) % 3 == 0
            return x * scales.repeat(len(x) // 3)[:, None]
    x = torch.arange(10 * 4, dtype=F64).reshape(10, 4)
    rows = torch.tensor([0, 2, 3, 5, 8, 9])                                      # models 0, 2, 0, 2, 2, 0
    out = evaluate(Stack(), x[rows], torch.ones(6, dtype=F64), rows, k=3, chunk=3)
    torch.testing.assert_close(out, x[rows] * scales[rows % 3][:, None])


def test_statuses_non_finite_and_max_steps():
    def D(x, s):
        out = torch.tanh(x)
        out[x[:, 0] > 2] = float("nan")                                         # some rows blow up
        return out
    x0 = torch.tensor([[3.0, 0.1], [0.5, -0.2], [-1.0, 0.3]], dtype=F64)
    r = solve(D, x0, 1.0)
    assert [STATUS[c] for c in r.status] == ["non_finite", "success", "success"]
    assert torch.isnan(r.x[0]).all() and torch.isfinite(r.x[1:]).all()
    with pytest.warns(ScoreprobeWarning, match="max_steps"):
        r = integrate(lambda x, s: torch.tanh(3 * x), x0[1:], 1.0, solver={"max_steps": 1, "patience": 0},
                      info=True)
    assert [STATUS[c] for c in r.status] == ["max_steps", "max_steps"]
    assert ((r.accepted + r.rejected) == 1).all() and (r.decided_sigma == 0).all()
    assert (r.x.abs() < 1).all()                                                # D (tanh) where they stopped


def test_tight_tolerances_reject_steps_and_count_evaluations():
    D = oracle("rule")
    x0 = 80 * randn_per_sample(1, np.arange(8), 36, dtype=F64)
    r = solve(D, x0, 80.0, EngineSettings(rtol=1e-6, atol=1e-6, patience=0, h0=2.0, max_steps=5000))
    assert r.rejected.sum() > 0
    # bs3 is FSAL: one first evaluation, 3 per attempt, 1 more after a rejection is not needed
    np.testing.assert_array_equal(r.nfe, 1 + 3 * (r.accepted + r.rejected))


def test_settings_validation_and_store_config():
    for bad in ({"pair": "rk4"}, {"rtol": 0}, {"decide_tol": 0.5}, {"patience": -1}, {"max_steps": 0},
                {"h0": float("inf")}, {"tolerance": 1}):
        with pytest.raises(ConfigError):
            EngineSettings.of(bad)
    with pytest.raises(ConfigError):
        resolve_solver("rk45")
    assert solver_config("heun", 32) == {"solver": "heun", "n_steps": 32}
    cfg = solver_config("adaptive", 32)
    assert cfg["solver"] == "adaptive" and cfg["engine"] == EngineSettings().spec() and "n_steps" not in cfg
    assert solver_config({"rtol": 1e-3}, 32)["engine"]["rtol"] == 1e-3
    tighter, n = finer("adaptive", 32)
    assert tighter.rtol == EngineSettings().rtol / 10 and finer("heun", 32) == ("heun", 64)
    with pytest.raises(ConfigError, match="fixed-grid"):
        integrate(lambda x, s: x, torch.zeros(2, 3), 1.0, callback=print)
