"""sp.top_activating against brute force on a hand-built SAE (a latent that fires only on known rows lists exactly
those, ties by row index, a dead latent gets -1 / NaN), and plot_top_activating drawn (Agg)."""
import numpy as np
import pytest
import torch
import xarray as xr

import scoreprobe as sp
from scoreprobe.errors import ConfigError, DataError
from scoreprobe.features.sae import SAE


def _planted_sae():
    """standard SAE, d_in 4, d_sae 4: latent j = relu(x_j) for j < 3; latent 3 is dead (b_enc -100)."""
    sae = SAE(4, 4, "standard")
    with torch.no_grad():
        sae.W_enc.copy_(torch.eye(4))
        sae.W_dec.copy_(torch.eye(4))
        sae.b_enc[3] = -100.0
    return sae


def _rows(seed=0):
    x = -np.abs(np.random.default_rng(seed).normal(size=(40, 4))).astype(np.float32)   # nothing fires...
    x[[7, 3, 21], 0] = [2.0, 0.5, 1.0]                 # ...but latent 0 on rows 7 > 21 > 3
    x[:, 1] = np.random.default_rng(seed + 1).normal(size=40).astype(np.float32)     # latent 1 on about half
    x[[5, 30, 12], 2] = 1.5                             # latent 2: a three-way tie
    return x


def _brute(f, k):
    """Per latent: the (row, activation) of its k strongest active rows, by (-activation, row)."""
    out = []
    for j in range(f.shape[1]):
        ranked = sorted((-f[i, j], i) for i in range(len(f)) if f[i, j] > 0)[:k]
        out.append([(i, -a) for a, i in ranked] + [(-1, np.nan)] * (k - len(ranked)))
    return out


def test_top_activating_matches_brute_force_and_never_invents_rows():
    sae, x = _planted_sae(), _rows()
    tops = sp.top_activating(sae, x, k=5)
    assert tops.row.dims == ("latent", "rank") and tops.row.shape == (4, 5)
    assert tops.row.sel(latent=0).values.tolist() == [7, 21, 3, -1, -1]      # exactly the planted rows, in order
    assert tops.row.sel(latent=2).values.tolist() == [5, 12, 30, -1, -1]     # a tie: by row index
    assert (tops.row.sel(latent=3) == -1).all() and np.isnan(tops.activation.sel(latent=3)).all()   # dead
    assert tops.n_active.values.tolist()[::2] == [3, 3] and int(tops.n_active.sel(latent=3)) == 0
    with torch.no_grad():
        f = sae.encode(torch.tensor(x)).numpy()
    for j, want in enumerate(_brute(f, 5)):
        assert tops.row.values[j].tolist() == [i for i, _ in want]
        np.testing.assert_array_equal(tops.activation.values[j], np.array([a for _, a in want], dtype=np.float64))
    sub = sp.top_activating(sae, x, k=2, latents=[2, 0])
    assert sub.latent.values.tolist() == [2, 0] and sub.row.values.tolist() == [[5, 12], [7, 21]]


def test_top_activating_reports_the_rows_sample_coordinate():
    sae, x = _planted_sae(), _rows()
    rows = xr.DataArray(x, dims=("row", "d_in"), coords={"sample": ("row", np.arange(100, 140))})
    tops = sp.top_activating(sae, rows, k=4, latents=[0])
    assert tops.sample.values.tolist() == [[107, 121, 103, -1]]


@pytest.mark.parametrize("kw", [dict(k=0), dict(k=41), dict(k=2.0), dict(k=True), dict(latents=[4]),
                                dict(latents=[-1]), dict(latents=[])])
def test_top_activating_refuses_bad_arguments(kw):
    with pytest.raises(ConfigError):
        sp.top_activating(_planted_sae(), _rows(), **{"k": 3, **kw})


def test_top_activating_refuses_rows_of_another_width():
    with pytest.raises(DataError):
        sp.top_activating(_planted_sae(), np.zeros((5, 3), np.float32), k=2)


def test_plot_top_activating_draws_each_latent_with_its_best_feature():
    sae, x = _planted_sae(), _rows()
    clean = (np.arange(40)[:, None] >> np.arange(4) & 1).astype(np.uint8)   # 2x2 images
    truth = clean.astype(bool)
    scores = sp.sae_scores(sae, x, truth)
    tops = sp.top_activating(sae, x, k=3, latents=[0, 3])
    fig = sp.plot_top_activating(tops, clean, noisy=x, scores=scores)
    titles = [s._suptitle.get_text() for s in fig.subfigs]
    assert titles[0].startswith("latent 0 (active on 3 rows): best ") and "F1" in titles[0]
    assert titles[1] == "latent 3 (active on 0 rows): dead"
    j = int(np.nanargmax(scores.f1.sel(latent=0).values))
    assert titles[0].endswith(f"best {scores.feature.values[j]} F1 {float(scores.f1.sel(latent=0)[j]):.2f}")
    assert len(fig.get_axes()) == 2 * 2 * 3
    fig.canvas.draw()
    with pytest.raises(ConfigError):
        sp.plot_top_activating(tops, clean[:, :3])                      # 3 pixels: not square
    with pytest.raises(ConfigError):
        sp.plot_top_activating(tops, clean[:5])                         # fewer rows than tops.row indexes


def test_best_latents_ranks_by_the_best_f1_of_the_named_features():
    sae, x = _planted_sae(), _rows()
    truth = np.zeros((40, 3), bool)
    truth[[7, 3, 21], 0] = True                         # "a0": exactly latent 0's rows -> F1 1
    truth[[5, 30], 1] = True                            # "a1": 2 of latent 2's 3 rows -> F1 0.8
    truth[:20, 2] = True                                # "b": a feature the prefix leaves out
    scores = sp.sae_scores(sae, x, xr.DataArray(truth, dims=("sample", "feature"),
                                                coords={"sample": np.arange(40), "feature": ["a0", "a1", "b"]}))
    lat, feat, f1 = sp.best_latents(scores, 2, prefix="a")
    assert lat.tolist() == [0, 2] and feat.tolist() == ["a0", "a1"] and f1.tolist() == [1.0, 0.8]
    f = scores.f1.sel(feature=["a0", "a1"]).values
    want = sorted(range(4), key=lambda i: (-np.nanmax(f[i]), i))
    assert sp.best_latents(scores, 4, prefix="a")[0].tolist() == want
    with pytest.raises(ConfigError):
        sp.best_latents(scores, 2, prefix="zzz")
