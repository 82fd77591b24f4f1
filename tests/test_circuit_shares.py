"""Circuits readings (issue 73 item 6): each cell's rank and the size of the σ's largest effect beside its Holm p,
and outcome shares over models with an interval inside [0, 1] that holds its coverage at 3 models (planted
clustered binomials), where the t interval it replaces leaves [0, 1] and falls short at small shares."""
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from analyses.circuits import circuits_md
from scoreprobe.stats import circuit_effects_across as A
from scoreprobe.stats.unit_intervals import cluster_share, t_summary

RESULTS = Path(__file__).resolve().parents[1] / "analyses" / "results"


def test_cluster_share_by_hand_and_inside_the_unit_interval():
    shares, n = np.array([[0.09], [0.33], [0.43]]), np.array([[11], [6], [7]])
    m, lo, hi = cluster_share(shares, n)
    p, v = shares.mean(), shares.var(ddof=1) / 3
    n_eff = min(p * (1 - p) / v, 24) * (stats.norm.ppf(0.975) / stats.t.ppf(0.975, 2)) ** 2
    assert m[0] == pytest.approx(p) and lo[0] == pytest.approx(stats.beta.ppf(0.025, p * n_eff, n_eff - p * n_eff + 1))
    assert hi[0] == pytest.approx(stats.beta.ppf(0.975, p * n_eff + 1, n_eff - p * n_eff))
    t_lo = t_summary(shares)[1][0]
    assert t_lo < 0 <= lo[0]                                   # the t interval leaves [0, 1]; this one does not
    for s in (0.0, 1.0):                                       # every model at an end: the interval keeps its width
        m, lo, hi = cluster_share(np.full((3, 1), s), n)
        assert 0 <= lo[0] <= hi[0] <= 1 and (lo[0] == 0 if s == 0 else hi[0] == 1) and hi[0] - lo[0] > 0.1
    assert math.isnan(cluster_share(np.array([[0.2], [np.nan], [0.3]]), n)[1][0])
    assert math.isnan(cluster_share(shares[:1], n[:1])[1][0])


@pytest.mark.parametrize("mu, sd, n", [(0.3, 0.1, 8), (0.05, 0.0, 8), (0.5, 0.2, 10), (0.8, 0.15, 8)])
def test_cluster_share_covers_at_three_models(mu, sd, n):
    """3 models, each with its own share p_m ~ Beta(mean mu, sd) and n apart pairs: the interval covers mu in
    ≥ 0.93 of 400 planted designs; at mu = 0.05 the t interval over models covers < 0.8 (the old reading)."""
    rng = np.random.default_rng(0)
    hit = t_hit = 0
    for _ in range(400):
        if sd > 0:
            k = mu * (1 - mu) / sd ** 2 - 1
            pm = rng.beta(mu * k, (1 - mu) * k, 3)
        else:
            pm = np.full(3, mu)
        sh = rng.binomial(n, pm)[:, None] / n
        _, lo, hi = cluster_share(sh, np.full((3, 1), n))
        hit += lo[0] <= mu <= hi[0]
        _, tl, th, _ = t_summary(sh)
        t_hit += tl[0] <= mu <= th[0]
    assert hit / 400 >= 0.93
    if mu == 0.05:
        assert t_hit / 400 < 0.8


def _per_model(effect):
    """per_model dicts of 3 models with one pair kind: effect (M, σ, site)."""
    e = np.asarray(effect, float)
    M, S, J = e.shape
    one = lambda v: np.full((S, J), v).tolist()   # noqa: E731
    return {f"s{m}": {"effects": {"rule": {"effect": e[m].tolist(), "reason": np.where(np.isnan(e[m]), "mixed sign",
                                                                                       "").tolist(),
                                           "half_step_over_tau": one(0.5), "half_step": one(100.0),
                                           "half_step_is_bound": np.zeros((S, J), bool).tolist()}}} for m in range(M)}


def test_a_holm_significant_small_cell_reads_with_its_rank_and_the_largest_effect():
    """σ 1.5: a large effect the models disagree on (+0.6 ± 0.3) and a small one they agree on (+0.09 ± 0.001): the
    small one is the Holm-significant cell, read as rank 3 of 3 with the largest (+0.60) beside it."""
    e = np.array([[[0.3, 0.2, 0.089]], [[0.6, 0.25, 0.090]], [[0.9, 0.15, 0.091]]])     # (M, σ = 1, site = 3)
    cells, family = A.effects_across(_per_model(e), "rule", ["s0", "s1", "s2"], ["a", "b", "c"], [1.5])
    small = next(c for c in cells if c["site"] == "c")
    assert [c["rank"] for c in cells] == [1, 2, 3] and small["n_ranked"] == 3
    assert small["top_mean"] == pytest.approx(0.6) and small["p_holm"] < 0.05 < cells[0]["p_holm"]
    text = circuits_md._significant(small)
    assert "rank 3 of 3 at σ 1.5, the largest there +0.60" in text and "p_Holm" in text
    e[1, 0, 1] = np.nan                                          # an undefined cell is not ranked
    cells, _ = A.effects_across(_per_model(e), "rule", ["s0", "s1", "s2"], ["a", "b", "c"], [1.5])
    assert math.isnan(cells[1]["rank"]) and cells[2]["rank"] == 2 and cells[2]["n_ranked"] == 2


@pytest.mark.parametrize("name", ["circuits", "circuits_closed", "circuits_gpt"])
def test_circuits_reports_regenerate_from_the_shipped_json(name):
    from tests.test_analyses import _analysis
    study = _analysis("circuits")
    from analyses.circuits import circuits_gpt_md
    res = json.loads((RESULTS / f"{name}.json").read_text())
    md = (circuits_gpt_md.markdown(res, study.GPT_COMMAND) if name == "circuits_gpt" else
          circuits_md.markdown(res, study.SERIES_WHO, study.RESULT_NAME, study.COMMAND))
    assert md == (RESULTS / f"{name}.md").read_text()
