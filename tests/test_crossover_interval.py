"""τ_cross with an interval (`tau_cross_interval`, `boot_crossing`) on planted crossings."""
import numpy as np
import pytest
import torch

from scoreprobe.data.datasets import make_dataset
from scoreprobe.data.rules import Parity
from scoreprobe.errors import ConfigError
from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
from scoreprobe.probes.crossover import crossing_step
from scoreprobe.stats.tau_cross import boot_crossing, tau_cross_interval

STEPS = np.array([100, 200, 400, 800, 1600, 3200, 6400], np.float64)


def test_boot_crossing_covers_a_planted_crossing_at_its_level():
    """diff = a line in ln(step+1) crossing 0 at t0, plus per-cell noise: the 90% interval covers the crossing of
    the noiseless line in ≥ 80% of 60 replicates (the nominal 90% less a margin for 60 draws) and is not a point."""
    x = np.log(STEPS + 1)
    t0 = 1000.0
    true = -0.02 * (x - np.log(t0 + 1))                                      # (S,) crossing 0 at t0
    truth = crossing_step(STEPS, true)
    assert abs(truth - t0) < 1e-6 * t0                                       # linear in ln(step+1): exact
    rng = np.random.default_rng(1)
    hits, widths = 0, []
    for _ in range(60):
        cells = true[:, None] + rng.normal(0, 0.05, (1, 200)) + rng.normal(0, 0.02, (len(STEPS), 200))
        tau, lo, hi, never = boot_crossing(STEPS, cells, n_boot=300, ci=0.9, seed=int(rng.integers(1 << 30)))
        assert never == 0 and lo <= tau <= hi
        hits += lo <= truth <= hi
        widths.append(np.log(hi / lo))
    assert hits >= 48
    assert np.median(widths) > 0.05                                          # a real interval, not a point


def test_boot_crossing_not_reached_is_nan_not_a_number():
    cells = np.full((len(STEPS), 50), 0.1) + np.random.default_rng(0).normal(0, 0.01, (len(STEPS), 50))
    tau, lo, hi, never = boot_crossing(STEPS, cells, n_boot=100)
    assert np.isnan(tau) and np.isnan(lo) and np.isnan(hi) and never == 1.0


class Mix:
    """R + c (M − R): the rule oracle moved a share c towards the memorizer (c < 0: away from it)."""
    def __init__(self, R, M, c):
        self.R, self.M, self.c = R, M, c

    def __call__(self, x, sigma):
        r = self.R(x, sigma)
        return r + self.c * (self.M(x, sigma) - r)


def test_planted_denoiser_crossing_covered_by_its_interval_and_models_as_units():
    """c rises with ln(step) and is 0 at t0: below t0 the mixture is worse than the rule oracle on the training
    set, above it better (the memorizer minimises the training loss). Three "models" (data seeds) give three
    intervals that cover the crossing read with many draws, and their mean (t interval over models) is t0 up to the
    interpolation between checkpoints (the loss difference is quadratic in c, interpolated linearly)."""
    rule = Parity(2, shape=(4, 4), layout="offset", seed=0)
    R, t0 = RuleDenoiser(rule), 900.0
    sig = np.geomspace(0.1, 5, 6)
    sources, datasets = [], []
    for s in range(3):
        ds = make_dataset(rule, 12, 4, seed=s)
        M = EmpiricalDenoiser(ds.train)
        sources.append({int(k): Mix(R, M, 0.3 * np.log((k + 1) / (t0 + 1))) for k in STEPS})
        datasets.append(ds)
    outs = [tau_cross_interval(src, dataset=ds, rule=rule, sigmas=sig, n_draws=3, n_boot=200, ci=0.95,
                               dtype=torch.float64) for src, ds in zip(sources, datasets)]
    for out, src, ds in zip(outs, sources, datasets):
        ref = tau_cross_interval(src, dataset=ds, rule=rule, sigmas=sig, n_draws=40, n_boot=10, seed=100,
                                 dtype=torch.float64)
        truth = float(ref.tau_cross[0])
        assert abs(np.log(truth / t0)) < 0.1                                 # the planted crossing, read finely
        assert float(out.tau_cross_lo[0]) <= truth <= float(out.tau_cross_hi[0])
        assert float(out.tau_cross_lo[0]) < float(out.tau_cross_hi[0])
    multi = tau_cross_interval(sources, dataset=datasets, rule=rule, sigmas=sig, n_draws=3, n_boot=200,
                               dtype=torch.float64)
    assert multi.sizes["model"] == 3 and multi.attrs["n_models"] == 3
    assert np.allclose(multi.tau_cross.values, [float(o.tau_cross[0]) for o in outs])   # same cells, same τ
    lo, hi = multi.attrs["tau_cross_mean_lo"], multi.attrs["tau_cross_mean_hi"]
    assert lo < multi.attrs["tau_cross_mean"] < hi
    assert abs(np.log(multi.attrs["tau_cross_mean"] / t0)) < 0.1             # t0 up to the checkpoint interpolation


def test_config_errors_before_work():
    with pytest.raises(ConfigError):
        tau_cross_interval([], n_draws=4)
    with pytest.raises(ConfigError):
        tau_cross_interval({1: None}, n_draws=1)
