"""Disjoint pairs read between a floor and a ceiling (scoreprobe.stats.disjoint_pairs; analyses/decompose's pairs): planted denoisers whose answer is
known — two memorizers of disjoint sets (the floor), the rule oracle with itself (the ceiling, 1 by construction), a
pair that is the rule oracle plus independent perturbations (in between) — and training sets really disjoint."""
import numpy as np
import pytest
from scipy import stats as st

from analyses.decompose.stages import pair_configs
from scoreprobe.data.datasets import make_dataset
from scoreprobe.data.rules import Parity, rule_from_spec
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.probes.disjoint import compare_pair, disjoint_check, disjoint_data_seeds
from scoreprobe.stats.disjoint_pairs import one_pair, over_replicates, pair_members
from scoreprobe.stats.unit_intervals import t_triple as t_interval
from scoreprobe.stats.unit_intervals import wilson_triple as wilson

SPEC = {"name": "parity", "G": 2, "shape": [4, 4], "layout": "offset", "seed": 0}
KW = dict(sigmas=(0.2, 0.5, 1.0, 2.0, 5.0), n_points=32, n_samples=48, n_planes=1, res=6, n_steps=10)


class Perturbed:
    """The rule oracle's output through I + W, W a fixed random map (its own seed): imperfect, but generalizing."""
    def __init__(self, rule, seed, scale=0.15):
        import torch
        self.R = RuleDenoiser(rule)
        g = torch.Generator().manual_seed(seed)
        self.W = scale * torch.randn(rule.n_bits, rule.n_bits, generator=g, dtype=torch.float64) / rule.n_bits ** 0.5

    def __call__(self, x, sigma):
        r = self.R(x, sigma)
        return r + (r.to(self.W.dtype) @ self.W).to(r.dtype)


@pytest.fixture(scope="module")
def planted():
    rule = rule_from_spec(SPEC)
    seeds = disjoint_data_seeds(SPEC, 12, 4, 2)
    ta, tb = (make_dataset(rule, 12, 4, s).train for s in seeds)
    return rule, ta, tb, {
        "floor": compare_pair(EmpiricalDenoiser(ta), EmpiricalDenoiser(tb), rule, **KW),
        "ceiling": compare_pair(RuleDenoiser(rule), RuleDenoiser(rule), rule, **KW),
        "between": compare_pair(Perturbed(rule, 1), Perturbed(rule, 2), rule, **KW)}


def test_ceiling_is_one_by_construction(planted):
    c = planted[3]["ceiling"]
    assert np.abs(c.cosine.values - 1).max() < 1e-12 and np.all(c.rms_diff.values == 0)
    assert float(c.sample_same) == 1.0 and np.all(c.basin_same.values == 1.0)


def test_floor_below_ceiling_and_no_shared_sample(planted):
    rule, ta, tb, out = planted
    f, b = out["floor"], out["between"]
    assert disjoint_check(ta, tb) == 0
    assert float(f.sample_same) == 0.0                       # each memorizer ends on its own (disjoint) items
    assert np.all(f.cosine.values < 0.999)                   # below the ceiling at every σ ...
    assert f.cosine.sel(sigma=5.0) > 0.3                     # ... but far from 0 at large σ: both pull to the mean
    assert f.cosine.sel(sigma=0.2) < f.cosine.sel(sigma=5.0)
    assert np.all(b.cosine.values > f.cosine.values)        # a generalizing pair sits between floor and ceiling
    assert np.all(b.cosine.values < 1 - 1e-4)
    assert float(b.sample_same) > float(f.sample_same)


def test_per_pair_and_replicate_intervals_are_the_closed_forms(planted):
    f = planted[3]["floor"]
    a = {v: f[v].values for v in ("cosine", "cosine_sd", "sample_same", "sample_nonfinite", "basin_same",
                                   "basin_nonfinite")}
    one = one_pair(a, {"n_points": 32, "n_samples": 48, "n_grid": 36})
    m, lo, hi = one["cosine"][2]
    half = st.t.ppf(0.975, 31) * float(f.cosine_sd[2]) / np.sqrt(32)
    assert np.isclose(m, float(f.cosine[2])) and np.isclose(hi - m, half) and np.isclose(m - lo, half)
    assert one["sample_same"][0] == 0.0 and abs(one["sample_same"][1]) < 1e-12 and 0 < one["sample_same"][2] < 0.1
    x = [0.2, 0.5, 0.3]
    mean, lo, hi = t_interval(x)
    assert np.isclose(mean, np.mean(x)) and np.isclose(hi - mean, 4.302652729911275 * np.std(x, ddof=1) / np.sqrt(3))
    assert t_interval([0.4]) == [0.4, None, None] and t_interval([0.4, np.nan]) == [None, None, None]
    w = wilson(0.5, 100)                                      # Wilson at p = 1/2, n = 100: 0.5 ± 0.0962
    assert np.isclose(w[1], 0.40383, atol=1e-4) and np.isclose(w[2], 0.59617, atol=1e-4)
    rep = over_replicates([a, a, a])
    assert rep["n_pairs"] == 3 and np.isclose(rep["cosine"][0][1], rep["cosine"][0][0])   # no spread: no width


def test_disjoint_data_seeds_are_pairwise_disjoint():
    rule = Parity(2, shape=(2, 4), layout="offset", seed=0)          # 16 valid images: collisions are likely
    spec = {"name": "parity", "G": 2, "shape": [2, 4], "layout": "offset", "seed": 0}
    seeds = disjoint_data_seeds(spec, 3, 1, 4)
    sets = [make_dataset(rule, 3, 1, s).train for s in seeds]
    assert all(disjoint_check(sets[i], sets[j]) == 0 for i in range(4) for j in range(i + 1, 4))
    assert seeds != list(range(4))                                   # some seeds were skipped: the check worked
    with pytest.raises(RuntimeError):
        disjoint_data_seeds(spec, 5, 1, 4)                           # 4 × 5 > 16 images: impossible


def test_members_differ_in_data_and_init():
    p = dict(pair_Ns=[12], pair_replicates=3, pair_same_data=[0], pair_heldout=4, pair_width=16, pair_depth=1,
             pair_batch=8, pair_steps=10, pair_checkpoints=2, pair_first=5)
    names = [m[0] for m in pair_members(p["pair_Ns"], p["pair_replicates"], p["pair_same_data"])]
    assert names == ["n12-r0-a", "n12-r0-b", "n12-r0-c", "n12-r1-a", "n12-r1-b", "n12-r2-a", "n12-r2-b"]
    cfg = dict(pair_configs(p, SPEC))
    assert len({c.seed for c in cfg.values()}) == len(cfg)             # every member its own init
    assert cfg["n12-r0-c"].data_seed == cfg["n12-r0-a"].data_seed        # the same-data pair
    disjoint = [k for k in cfg if not k.endswith("-c")]
    assert len({cfg[k].data_seed for k in disjoint}) == len(disjoint)
    rule = rule_from_spec(SPEC)
    sets = {k: make_dataset(rule, 12, 4, cfg[k].data_seed).train for k in disjoint}
    assert all(disjoint_check(sets[x], sets[y]) == 0 for i, x in enumerate(disjoint) for y in disjoint[i + 1:])
