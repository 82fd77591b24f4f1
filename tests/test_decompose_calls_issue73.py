"""Issue 73 items 1–4: calls over models that hold their level, "none" where nothing fits, the network's own
linear part as a baseline, and mixture weights named with their oracle set — on planted denoisers."""
import numpy as np
import pytest
import torch

from decompose_planted import false_calls, weight_coverage
from scoreprobe.data.datasets import make_dataset
from scoreprobe.data.rules import Parity
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.probes.decompose import decompose
from scoreprobe.probes.decompose_fit import affine_heldout_sse
from scoreprobe.stats.decompose_calls import LINEAR, NONE, SHRINKAGE, decompose_summary, mixture_weights
from scoreprobe.stats.decompose_infer import N_FLIPS, sign_flip_p

ORACLES = ("memorizer", "rule", "gaussian")


@pytest.fixture(scope="module")
def setup():
    rule = Parity(G=2, shape=(6, 6), layout="contiguous")
    ds = make_dataset(rule, n_train=24, n_heldout=60, seed=0)
    return rule, ds, EmpiricalDenoiser(ds.train), RuleDenoiser(rule)


def run(D, rule, ds, **kw):
    kw = {"sigmas": (0.5, 1.0), "n_points": 48, "n_noise": 2, "dtype": torch.float64, "oracles": ORACLES, **kw}
    return decompose(D, dataset=ds, rule=rule, progress=False, **kw)


def noisy(D, scale, seed):
    g = torch.Generator().manual_seed(seed)
    return lambda x, s: D(x, s) + scale * torch.randn(x.shape, generator=g, dtype=x.dtype)


def test_a_planted_tie_over_three_models_is_rarely_called():
    """a_m ~ N(0.5, 0.1), three models, 3 σ: the old two-level bootstrap called rule or memorizer in 8 of these
    20 recipes; the model as the unit (t, 2 df) with Holm over the cells must stay near 5% (≤ 4 of 20: a 5%
    procedure exceeds it with probability 0.016), while most cells are tested (the bound is not vacuous; the
    others are mostly "linear": a 50/50 mixture plus noise is close to its own affine fit at large σ)."""
    called, n, tested = false_calls(20, n_models=3, n_points=64, n_noise=2, seed=11, min_r2=0.0)
    assert called <= 4, called
    assert tested >= 0.6 * 3 * n, tested


@pytest.mark.slow   # 2 × 200 recipes × 3 models × 3 σ: 1.5–3.5 minutes on a shared 2-core machine
def test_a_planted_tie_over_three_models_is_called_at_most_5_percent_of_200_recipes():
    for n_points, n_noise in ((64, 2), (32, 4)):
        called, n, tested = false_calls(200, n_models=3, n_points=n_points, n_noise=n_noise, seed=7, min_r2=0.0)
        assert called <= 0.05 * n and tested >= 0.6 * 3 * n, (n_points, called, tested)


def test_mixture_weights_over_three_models_cover_the_recipe_mean():
    hits, n = weight_coverage(40, n_models=3, n_points=64, seed=3)
    assert hits >= 34, hits                      # a 95% interval: ≥ 34 of 40 with probability 0.99


def test_the_sign_flip_p_value_is_exact_and_states_its_floor():
    u = np.array([[1.0, 2.0, 3.0, 4.0, 5.0], [1.0, -1.0, 2.0, -2.0, 0.0]])
    p = sign_flip_p(u)
    # all 2^5 sign vectors: |Σ s·u| ≥ 15 only for ±(1, …, 1): exact p = 2/32; the random flips estimate it
    assert abs(p[0] - 2 / 32) < 0.015 and p[0] >= 1 / (N_FLIPS + 1)
    assert p[1] == 1.0                           # an exact tie: every flip is as extreme


def test_rule_plus_noise_of_equal_size_is_none_with_its_best_r2_kept(setup):
    rule, ds, _, R = setup
    s = decompose_summary(run(noisy(R, 1.0, 0), rule, ds))
    assert (s.best_oracle == NONE).all(), s.best_oracle.values
    assert (s.best_value < 0.8).all() and (s.best_value > 0.2).all() and (s.leader == "rule").all()
    assert s.attrs["min_r2"] == 0.8


def test_the_exact_rule_oracle_at_tiny_sigma_is_not_shrinkage(setup):
    rule, ds, _, R = setup
    s = decompose_summary(run(R, rule, ds, sigmas=(1e-3,)))
    assert not (s.best_oracle == SHRINKAGE).any(), s.best_oracle.values
    assert (s.best_oracle == "indistinguishable").all() and (s.r2_shrink > 0.999).all()


def test_the_held_out_affine_fit_is_brute_force_ridge_chosen_by_gcv():
    """Each half's map is the ridge solution (X_c'X_c + λI)⁻¹X_c'Y_c at the λ of least GCV (written out with the hat
    matrix), scored on the other half; too few rows: no baseline."""
    from scoreprobe.probes.decompose_fit import AFFINE_LAMBDAS
    rng = np.random.default_rng(0)
    x = rng.normal(size=(10, 3, 4))
    y = x @ rng.normal(size=(4, 4)) + 0.3 + 0.5 * rng.normal(size=(10, 3, 4))
    got = affine_heldout_sse(y, x)
    for k in (0, 1):
        fit_on, score = np.arange(10) % 2 != k, np.arange(10) % 2 == k
        X, Y = x[fit_on].reshape(-1, 4), y[fit_on].reshape(-1, 4)
        Xc, Yc = X - X.mean(0), Y - Y.mean(0)
        best = None
        for lam in AFFINE_LAMBDAS * np.mean(np.linalg.svd(Xc, compute_uv=False) ** 2):
            H = Xc @ np.linalg.solve(Xc.T @ Xc + lam * np.eye(4), Xc.T)
            gcv = ((Yc - H @ Yc) ** 2).sum() / (1 - (np.trace(H) + 1) / 15) ** 2
            if best is None or gcv < best[0]:
                best = (gcv, np.linalg.solve(Xc.T @ Xc + lam * np.eye(4), Xc.T @ Yc))
        W = best[1]
        pred = x[score] @ W + (Y.mean(0) - X.mean(0) @ W)
        assert np.allclose(got[score], ((y[score] - pred) ** 2).sum((1, 2)))
    assert np.isnan(affine_heldout_sse(y[:2], x[:2])).all()         # 3 rows per half < D + 1 = 5: no baseline


def test_a_planted_affine_denoiser_is_linear_and_a_planted_memorizer_is_still_copying(setup):
    rule, ds, M, _ = setup
    A = torch.as_tensor(0.6 * np.eye(36) + np.random.default_rng(1).normal(size=(36, 36)) / 30, dtype=torch.float64)
    lin = decompose_summary(run(lambda x, s: x @ A.T + 0.1, rule, ds))
    fresh = lin.sel(split=["heldout", "random_valid"])         # 24 training items: too few rows for the baseline
    assert (fresh.best_oracle == LINEAR).all(), lin.best_oracle.values
    assert np.allclose(fresh.r2_affine, 1.0) and (lin.sel(split="train").best_oracle == NONE).all()
    mem = decompose_summary(run(noisy(M, 0.05, 0), rule, ds))
    held = mem.sel(split="heldout")
    assert (held.best_oracle == "memorizer").all(), mem.best_oracle.values
    assert (held.over_affine > 0).all() and (held.over_gaussian > 0).all() and (held.p_adjusted <= 0.05).all()


def test_the_offered_set_and_the_family_are_named(setup):
    rule, ds, M, R = setup
    out = run(noisy(lambda x, s: 0.7 * M(x, s) + 0.3 * R(x, s), 0.05, 0), rule, ds, sigmas=(1.0,))
    s = decompose_summary(out, adjust="bh")
    assert s.attrs["adjust"] == "bh" and s.attrs["n_family"] >= 1 and "split × step × σ" in s.attrs["family"]
    assert s.attrs["oracles"] == "memorizer rule gaussian" and "oracles offered" in s.attrs["sentence"]
    all3, two = mixture_weights(out, n_boot=50), mixture_weights(out, n_boot=50, oracles=("memorizer", "rule"))
    assert all3.attrs["oracles"] == "memorizer rule gaussian" and two.attrs["oracles"] == "memorizer rule"
    rule_weight = float(two.weight.sel(oracle="rule", split="heldout", sigma=1.0))
    assert "conditional_on" in two.attrs and abs(rule_weight - 0.3) < 0.05


def test_the_model_level_interval_is_the_t_interval_of_the_models_own_leads(setup):
    """Three models: the summary's lead interval is mean ± t(0.975, 2)·sd/√3 of each model's own lead (read from
    its one-model summary), and the r² it compares equal decompose's."""
    from scipy import stats as st
    rule, ds, M, R = setup
    models = [run(noisy(lambda x, s, a=a: a * M(x, s) + (1 - a) * R(x, s), 0.05, i), rule, ds, sigmas=(1.0,),
                  oracles=("memorizer", "rule")).sel(split="heldout", sigma=1.0) for i, a in enumerate((0.55, 0.65, 0.75))]
    pooled = decompose_summary(models, min_r2=0.0)
    own = [decompose_summary(m, min_r2=0.0) for m in models]
    assert all(o.leader.item() == "memorizer" for o in own) and pooled.leader.item() == "memorizer"
    leads = np.array([float(o.lead) for o in own])
    half = st.t.ppf(0.975, 2) * leads.std(ddof=1) / np.sqrt(3)
    assert np.isclose(float(pooled.lead), leads.mean()) and np.isclose(float(pooled.lead_lower), leads.mean() - half)
    assert np.isclose(float(pooled.lead_upper), leads.mean() + half)
    assert np.isclose(float(own[0].best_value), float(models[0].r2.max()))
    assert np.isclose(float(own[0].r2_shrink), float(models[0].r2_shrink))
    assert np.isclose(float(own[0].r2_affine), float(models[0].r2_affine))


def test_the_study_md_names_the_offered_set_and_how_its_calls_were_made():
    """The md of a series' calls names the oracle set beside the weights and says which definition made the calls:
    the current one (its family, adjustment and unit) or, for a json written before issue 73, the former one."""
    import json

    from decompose_planted import oracle_outputs, recipe
    from analyses.decompose.decompose_calls_md import models_section
    from scoreprobe.stats.decompose_models import calls_over_models, models_summary
    outputs = oracle_outputs(32, 4, sigmas=(1.0, 2.0), local=True)
    models, _ = recipe(outputs, 4, 3, np.random.default_rng(0))
    dss = {f"m{i}": d.expand_dims(step=[0, 10]) for i, d in enumerate(models)}
    m = calls_over_models(dss, 50, {n: f"runs/{n}" for n in dss})
    m = json.loads(json.dumps(m))                              # as the study stores it
    assert m["calls"]["adjust"] == "holm" and m["calls"]["oracles"] == "memorizer rule local"
    s = {"models": models_summary(m)}
    text = "\n".join(models_section(m, s, {}, "", {"open": "planted"}))
    assert "Oracles offered: memorizer, rule, local." in text and "holm over the" in text and "former" not in text
    assert "t interval over the models" in text
    # the weights over the nested set memorizer + rule (a proper subset of the offered three; the set with the
    # Gaussian is not offered here, so not mixed): mixture_weights on that set, and the md's nested table
    from scoreprobe.stats.decompose_calls import mixture_weights
    assert list(m["mixture_nested"]) == ["memorizer+rule"]
    direct = mixture_weights(list(dss.values()), oracles=["memorizer", "rule"], n_boot=50, seed=0)
    got = np.array(m["mixture_nested"]["memorizer+rule"]["weight"], float)
    want = direct.weight.transpose("step", "sigma", "split", "oracle").values
    np.testing.assert_allclose(got, want, atol=6e-5)                      # the json keeps 4 decimals
    assert "Mixture weights over nested sets of oracles" in text and "| memorizer+rule | " in text
    assert "| all offered (3) | " in text
    old = {k: v for k, v in m.items() if k != "calls"}         # a json written before issue 73's calls
    text = "\n".join(models_section(old, s, {}, "", {"open": "shipped"}))
    assert "former definition" in text and "Oracles offered: memorizer, rule, local." in text
    assert "two-level bootstrap interval" in text
