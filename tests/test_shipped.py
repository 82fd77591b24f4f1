"""The shipped default series (checkpoints/): loadable, small, and showing both clocks."""
import json
from pathlib import Path

import numpy as np
import pytest

import scoreprobe as sp
from scoreprobe.loading.series import DEFAULT_SERIES, checkpoints_dir
from scoreprobe.probes.clocks import clock_step

N_SAMPLES = 1000    # as measure.py measures them (binomial s.d. <= 0.016 on each ratio below)


@pytest.fixture(scope="module")
def series():
    return sp.load_series()


def _measure(series, step):
    ds = clock_step(series.denoiser(step), series.dataset, series.rule, n_samples=N_SAMPLES, seed=0)
    return float(ds.rule_acc), float(ds.mem_ratio)


def test_shipped_series_is_complete_and_small(series):
    assert len(series.steps) >= 20 and series.steps[0] == 0
    assert series.kind == "dit"
    folder = checkpoints_dir() / DEFAULT_SERIES
    total = sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())
    assert total <= 25 * 2**20


def test_every_parity_group_spans_at_least_two_tokens(series):
    p = series.arch["net"]["patch_size"]
    _, H, W = series.rule.image_shape
    rows, cols = np.divmod(series.rule.groups, W)               # (n_groups, G) pixel coordinates
    token = (rows // p) * (W // p) + cols // p
    assert all(len(set(t)) >= 2 for t in token.tolist())


@pytest.mark.slow   # 1000 Heun samples of a shipped checkpoint (binomial s.d. <= 0.016)
def test_first_checkpoint_knows_nothing(series):
    rule_acc, mem = _measure(series, series.steps[0])
    assert rule_acc < 0.05 and mem < 0.05


@pytest.mark.slow   # 1000 Heun samples of a shipped checkpoint (binomial s.d. <= 0.016)
def test_some_checkpoint_is_in_the_innovation_window(series):
    """Rule accuracy >= 0.9 while memorization < 0.1 at the checkpoint that measure.py picked."""
    measured = json.loads((Path(series.path) / "clocks.json").read_text())
    window = measured["window_step"]
    assert window in series.steps
    rule_acc, mem = _measure(series, window)
    assert rule_acc >= 0.9 and mem < 0.1


@pytest.mark.slow   # 1000 Heun samples of a shipped checkpoint (binomial s.d. <= 0.016)
def test_last_checkpoint_memorizes(series):
    """Past τ_mem: at least half of the samples of the last checkpoint are copies of training items."""
    _, mem = _measure(series, series.steps[-1])
    assert mem >= 0.5


@pytest.mark.slow
def test_clocks_of_shipped_series_show_both_clocks(series):
    """Re-measured on every checkpoint with `sp.clocks` (1000 samples, default sampler), by
    docs/definitions.md: the window is open with τ_rule < τ_mem, memorization reaches 0.5 at the
    last checkpoint, and every third checkpoint alone gives the same τ and window bounds within
    the CIs (the definitions do not depend on which checkpoints were measured)."""
    ds = sp.clocks(series, n_samples=1000, seed=0)
    a = ds.attrs
    assert a["window_open"] and a["tau_rule"] < a["tau_mem"] and float(ds.mem_ratio[-1]) >= 0.5
    # copies are rare before τ_rule, so the rule clock that copying cannot advance agrees with it
    assert a["tau_rule_ci"][0] <= a["tau_novel"] <= a["tau_rule_ci"][1]
    third = sp.tau_summary(ds.isel(step=slice(None, None, 3)), warn=False)
    for key in ("tau_rule", "tau_mem", "window_lo"):
        assert a[key + "_ci"][0] <= third[key] <= a[key + "_ci"][1], (key, a[key + "_ci"], third[key])
        assert third[key + "_ci"][0] <= a[key] <= third[key + "_ci"][1], (key, third[key + "_ci"], a[key])
    measured = json.loads((Path(series.path) / "clocks.json").read_text())["taus"]
    for key in ("tau_rule", "tau_mem", "window_log10_width"):   # clocks.json was made by this code
        assert a[key] == pytest.approx(measured[key], rel=1e-6)
