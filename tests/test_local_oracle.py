"""LocalDenoiser against brute force: for each pixel, the posterior over the values of its patch,
enumerated state by state and summed explicitly (numpy, float64), written here without the
package's window code."""
import itertools

import numpy as np
import pytest
import torch

from scoreprobe.errors import ConfigError, DataError
from scoreprobe.oracles import EmpiricalDenoiser, LocalDenoiser

F64 = torch.float64


def window(img, i, j, patch):
    """Zero-padded patch×patch window of a signed (C, H, W) image centred on (i, j): (C·p·p,)."""
    c, h, w = img.shape
    r = patch // 2
    out = np.zeros((c, patch, patch))
    for di in range(-r, r + 1):
        for dj in range(-r, r + 1):
            if 0 <= i + di < h and 0 <= j + dj < w:
                out[:, di + r, dj + r] = img[:, i + di, j + dj]
    return out.ravel()


def brute_force(train_bits, x, sigma, patch, equivariant, shape):
    """Posterior mean of every pixel by enumerating patch states u with the empirical prior
    (training patches at that pixel, or at every pixel when equivariant) and the Gaussian
    likelihood exp(-‖x_P - u‖²/2σ²): every u that is 0 on the padded slots of some position and
    ±1 elsewhere (the only states a prior can hold), summed explicitly. x: (D,) -> (D,)."""
    c, h, w = shape
    imgs = train_bits.reshape(-1, c, h, w).astype(np.float64) * 2 - 1
    xi = x.reshape(c, h, w)
    centre = [ch * patch * patch + (patch // 2) * patch + patch // 2 for ch in range(c)]
    inside = {(a, b): window(np.ones((c, h, w)), a, b, patch) != 0 for a in range(h) for b in range(w)}
    pooled = [window(t, a, b, patch) for t in imgs for a in range(h) for b in range(w)]
    out = np.zeros((c, h, w))
    for i in range(h):
        for j in range(w):
            cands = pooled if equivariant else [window(t, i, j, patch) for t in imgs]
            prior = {}
            for u in cands:
                prior[tuple(u)] = prior.get(tuple(u), 0) + 1.0 / len(cands)
            masks = {tuple(m) for m in inside.values()} if equivariant else {tuple(inside[i, j])}
            xp = window(xi, i, j, patch)
            num, den = np.zeros(c), 0.0
            for mask in masks:
                free = np.flatnonzero(mask)
                for vals in itertools.product((-1.0, 1.0), repeat=len(free)):   # every state, explicit sum
                    u = np.zeros(len(mask))
                    u[free] = vals
                    p = prior.get(tuple(u), 0.0)
                    lik = np.exp(-((xp - u) ** 2).sum() / (2 * sigma ** 2))
                    num += p * lik * u[centre]
                    den += p * lik
            out[:, i, j] = num / den
    return out.ravel()


def all_images(d):
    return np.array(list(itertools.product((0, 1), repeat=d)), dtype=np.uint8)


@pytest.mark.parametrize("equivariant", [False, True])
@pytest.mark.parametrize("n_train", [512, 20])
def test_brute_force_3x3(equivariant, n_train):
    rng = np.random.default_rng(n_train)
    train = all_images(9)[rng.permutation(512)[:n_train]]        # all 512 states, or 20 of them
    oracle = LocalDenoiser(train, patch=3, equivariant=equivariant)
    for sigma in (0.3, 1.0, 4.0):
        x = rng.normal(size=(3, 9)) * 1.2
        got = oracle(torch.tensor(x, dtype=F64), torch.full((3,), sigma, dtype=F64)).numpy()
        want = np.stack([brute_force(train, xi, sigma, 3, equivariant, (1, 3, 3)) for xi in x])
        assert np.abs(got - want).max() < 1e-10


def test_brute_force_two_channels_rectangular():
    """C = 2, H×W = 2×3 (a one-hot-like layout): the window holds both channels of its pixels."""
    rng = np.random.default_rng(1)
    train = rng.integers(0, 2, size=(7, 12), dtype=np.uint8)
    for eq in (False, True):
        oracle = LocalDenoiser(train, patch=3, equivariant=eq, shape=(2, 2, 3))
        x = rng.normal(size=(2, 12))
        got = oracle(torch.tensor(x, dtype=F64), torch.full((2,), 0.7, dtype=F64)).numpy()
        want = np.stack([brute_force(train, xi, 0.7, oracle.patch, eq, (2, 2, 3)) for xi in x])
        assert np.abs(got - want).max() < 1e-10


def test_whole_image_patch_is_the_memorizer():
    """A window of side 2·max(H, W) - 1 covers the whole image from every pixel: non-equivariant,
    every pixel's posterior is over whole training images, the EmpiricalDenoiser."""
    rng = np.random.default_rng(2)
    train = rng.integers(0, 2, size=(30, 16), dtype=np.uint8)
    local, mem = LocalDenoiser(train, patch=7), EmpiricalDenoiser(train)
    x = torch.tensor(rng.normal(size=(50, 16)) * 2, dtype=F64)
    for sigma in (0.05, 0.5, 2.0, 30.0):
        s = torch.full((50,), sigma, dtype=F64)
        assert (local(x, s) - mem(x, s)).abs().max() < 1e-12


@pytest.mark.parametrize("equivariant", [False, True])
def test_sigma_limits(equivariant):
    rng = np.random.default_rng(3)
    train = rng.integers(0, 2, size=(25, 36), dtype=np.uint8)
    oracle = LocalDenoiser(train, patch=3, equivariant=equivariant)
    signed = torch.tensor(train, dtype=F64) * 2 - 1
    # σ → 0 at a training image: every window matches that image's patch exactly
    got = oracle(signed, torch.full((25,), 1e-3, dtype=F64))
    assert (got - signed).abs().max() < 1e-12
    # σ → ∞: the prior mean of the patch centre (per pixel, or pooled over pixels)
    x = torch.tensor(rng.normal(size=(4, 36)), dtype=F64)
    got = oracle(x, torch.full((4,), 1e7, dtype=F64))
    want = signed.mean(0) if not equivariant else signed.mean().expand(36)
    assert (got - want).abs().max() < 1e-6


def test_float32_small_sigma_finite_and_dtype():
    rng = np.random.default_rng(4)
    train = rng.integers(0, 2, size=(40, 36), dtype=np.uint8)
    for eq in (False, True):
        oracle = LocalDenoiser(train, patch=3, equivariant=eq)
        x = torch.randn(8, 36)
        for sigma in (0.002, 80.0):
            out = oracle(x, torch.full((8,), sigma))
            assert out.dtype == torch.float32 and torch.isfinite(out).all() and out.abs().max() <= 1


def test_chunking_does_not_change_results(monkeypatch):
    from scoreprobe.oracles import local
    rng = np.random.default_rng(5)
    train = rng.integers(0, 2, size=(40, 36), dtype=np.uint8)
    oracle = LocalDenoiser(train, patch=3, equivariant=True)
    x, s = torch.tensor(rng.normal(size=(9, 36)), dtype=F64), torch.full((9,), 0.4, dtype=F64)
    full = oracle(x, s)
    monkeypatch.setattr(local, "_ELEMENT_BUDGET", 1)
    assert torch.equal(oracle(x, s), full)


def test_bad_input():
    train = np.zeros((3, 36), np.uint8)
    with pytest.raises(ConfigError, match="odd"):
        LocalDenoiser(train, patch=2)
    with pytest.raises(ConfigError, match="not square"):
        LocalDenoiser(np.zeros((3, 12), np.uint8))
    with pytest.raises(ConfigError, match="shape"):
        LocalDenoiser(train, shape=(2, 3, 3))
    with pytest.raises(DataError, match="0/1"):
        LocalDenoiser(train * 0 - 1 + 0.0)
    with pytest.raises(DataError, match="shape"):
        LocalDenoiser(train)(torch.zeros(2, 35), torch.ones(2))


def test_public_name():
    import scoreprobe as sp
    assert sp.LocalDenoiser is LocalDenoiser
