"""The equivariant local oracles' two boundaries — pooled (scoreprobe's soft variant) and position_class
(Kamb & Ganguli's boundary-broken ELS) — against a reference written here from the formula: per pixel,
the candidate windows listed one by one (training image × position), the position's class decided by
its own definition, the weights exp(−‖x_P − t‖²/2σ²) and their weighted centre summed explicitly."""
import numpy as np
import pytest
import torch

from scoreprobe.errors import ConfigError
from scoreprobe.oracles import LocalDenoiser, local

from tests.test_local_oracle import window   # the zero-padded window, written once

F64 = torch.float64


def same_class(i, a, size, r):
    """Rows (or columns) i and a share a class: equal, or both at least r from either border."""
    interior = lambda k: r <= k < size - r
    return i == a or (interior(i) and interior(a))


def candidates(imgs, i, j, patch, boundary):
    """Every candidate window for pixel (i, j), with multiplicity: (n_cand, C·p·p)."""
    _, _, h, w = imgs.shape
    r = patch // 2
    keep = lambda a, b: boundary == "pooled" or (same_class(i, a, h, r) and same_class(j, b, w, r))
    return np.array([window(t, a, b, patch) for t in imgs for a in range(h) for b in range(w) if keep(a, b)])


def reference(bits, x, sigma, patch, boundary, shape):
    """Posterior mean of every pixel from the formula (float64, explicit). x: (D,) -> (D,)."""
    c, h, w = shape
    imgs = bits.reshape(-1, c, h, w).astype(np.float64) * 2 - 1
    xi = x.reshape(c, h, w)
    centre = [ch * patch * patch + (patch // 2) * patch + patch // 2 for ch in range(c)]
    out = np.zeros((c, h, w))
    for i in range(h):
        for j in range(w):
            cand = candidates(imgs, i, j, patch, boundary)
            d2 = ((window(xi, i, j, patch)[None] - cand) ** 2).sum(1)
            wts = np.exp(-(d2 - d2.min()) / (2 * sigma ** 2))
            out[:, i, j] = wts @ cand[:, centre] / wts.sum()
    return out.ravel()


@pytest.mark.parametrize("boundary", ["pooled", "position_class"])
@pytest.mark.parametrize("shape,patch", [((1, 4, 4), 3), ((1, 6, 6), 5), ((2, 3, 5), 3), ((1, 5, 4), 1)])
def test_against_the_formula(boundary, shape, patch):
    rng = np.random.default_rng(sum(shape) + patch)
    d = int(np.prod(shape))
    bits = (rng.random((3, d)) < 0.5).astype(np.uint8)
    oracle = LocalDenoiser(bits, patch=patch, equivariant=True, shape=shape, boundary=boundary)
    x = rng.normal(size=(3, d)) * 1.2
    for sigma in (0.3, 0.8, 2.0):
        got = oracle(torch.from_numpy(x), sigma).numpy()
        ref = np.stack([reference(bits, xi, sigma, patch, boundary, shape) for xi in x])
        assert np.abs(got - ref).max() < 1e-12


def test_position_classes_partition():
    """4×4, patch 3: 1 interior class (the 2×2 centre), 4 corners, and edge classes of 2 pixels each."""
    cls = local.position_classes(4, 4, 3).reshape(4, 4)
    assert len(set(cls[1:3, 1:3].ravel().tolist())) == 1
    assert [int((cls == cls[0, 0]).sum()), int((cls == cls[0, 1]).sum()), int((cls == cls[1, 1]).sum())] == [1, 2, 4]
    assert len(torch.unique(cls)) == 9


@pytest.mark.parametrize("shape,patch", [((1, 4, 4), 5), ((1, 4, 4), 7), ((1, 5, 5), 5), ((2, 3, 3), 3)])
def test_no_interior_is_per_position(shape, patch):
    """When every row and column is within r of a border, each class is one position: the LS machine."""
    rng = np.random.default_rng(patch)
    d = int(np.prod(shape))
    bits = (rng.random((4, d)) < 0.5).astype(np.uint8)
    x = torch.from_numpy(rng.normal(size=(5, d)))
    a = LocalDenoiser(bits, patch, equivariant=True, shape=shape, boundary="position_class")(x, 0.6)
    b = LocalDenoiser(bits, patch, equivariant=False, shape=shape)(x, 0.6)
    assert float((a - b).abs().max()) < 1e-14


def test_where_the_variants_agree_and_differ():
    rng = np.random.default_rng(2)
    bits = (rng.random((5, 36)) < 0.5).astype(np.uint8)
    pooled = LocalDenoiser(bits, 3, equivariant=True, shape=(1, 6, 6))
    classed = LocalDenoiser(bits, 3, equivariant=True, shape=(1, 6, 6), boundary="position_class")
    near = torch.from_numpy(bits[:2] * 2.0 - 1 + 0.01 * rng.normal(size=(2, 36)))
    # near a training image at small σ the own patch dominates: border candidates cost ≥ 3/(2σ²) = 600
    assert float((pooled(near, 0.05) - classed(near, 0.05)).abs().max()) < 1e-12
    far = torch.from_numpy(rng.normal(size=(4, 36)))
    diff = (pooled(far, 1.0) - classed(far, 1.0)).abs().reshape(4, 6, 6)
    border = torch.ones(6, 6, dtype=torch.bool)
    border[1:5, 1:5] = False
    assert float(diff[:, border].max()) > 0.05                 # the hard boundary changes the border pixels
    one_p = LocalDenoiser(bits, 1, equivariant=True, shape=(1, 6, 6))     # no padding at patch 1: identical
    one_c = LocalDenoiser(bits, 1, equivariant=True, shape=(1, 6, 6), boundary="position_class")
    assert torch.equal(one_p(far, 0.7), one_c(far, 0.7))


def test_sigma_limits_position_class():
    rng = np.random.default_rng(9)
    shape, patch = (1, 5, 5), 3
    bits = (rng.random((4, 25)) < 0.5).astype(np.uint8)
    imgs = bits.reshape(-1, *shape) * 2.0 - 1
    oracle = LocalDenoiser(bits, patch, equivariant=True, shape=shape, boundary="position_class")
    x = rng.normal(size=25)
    nearest, flat = np.zeros(shape), np.zeros(shape)
    for i in range(5):
        for j in range(5):
            cand = candidates(imgs, i, j, patch, "position_class")
            d2 = ((window(x.reshape(shape), i, j, patch)[None] - cand) ** 2).sum(1)
            nearest[0, i, j] = cand[np.argmin(d2), 4]
            flat[0, i, j] = cand[:, 4].mean()                  # σ → ∞: multiplicities only
    xt = torch.from_numpy(x[None])
    assert np.array_equal(oracle(xt, 0.0).numpy()[0], nearest.ravel())
    assert np.abs(oracle(xt, 1e-3).numpy()[0] - nearest.ravel()).max() < 1e-12
    assert np.abs(oracle(xt, 1e6).numpy()[0] - flat.ravel()).max() < 1e-9


def test_float32_chunking_and_counts(monkeypatch):
    rng = np.random.default_rng(4)
    bits = (rng.random((6, 36)) < 0.5).astype(np.uint8)
    oracle = LocalDenoiser(bits, 3, equivariant=True, shape=(1, 6, 6), boundary="position_class")
    assert oracle.variant == "position_class" and repr(oracle).startswith("LocalDenoiser(patch=3, position_class")
    counts = oracle.n_candidates.reshape(6, 6)
    assert counts[0, 0] <= 6 and counts[2, 2] <= 6 * 16 and counts[0, 2] <= 6 * 4   # same class only
    x = torch.from_numpy(rng.normal(size=(7, 36)))
    whole = oracle(x, 0.5)
    monkeypatch.setattr(local, "_ELEMENT_BUDGET", 1)            # one row per chunk
    assert torch.equal(oracle(x, 0.5), whole)
    out32 = oracle(x.float(), 0.5)
    assert out32.dtype == torch.float32 and float((out32.double() - whole).abs().max()) < 1e-5


@pytest.mark.parametrize("shape", [(1, 4, 4), (1, 3, 5)])
def test_every_odd_patch_up_to_the_image_is_accepted(shape):
    _, h, w = shape
    bits = np.zeros((2, h * w), np.uint8)
    widest = 2 * max(h, w) - 1
    for patch in range(1, widest + 1, 2):
        for kw in ({}, {"equivariant": True}, {"equivariant": True, "boundary": "position_class"}):
            assert LocalDenoiser(bits, patch, shape=shape, **kw).patch == patch
    for bad in (0, 2, 4, -1, widest + 2, True, 3.0, "3"):
        with pytest.raises(ConfigError, match=f"odd integer from 1 to {widest}"):
            LocalDenoiser(bits, bad, shape=shape, equivariant=True, boundary="position_class")


def test_bad_boundary():
    bits = np.zeros((2, 16), np.uint8)
    with pytest.raises(ConfigError, match="boundary must be one of pooled, position_class"):
        LocalDenoiser(bits, 3, equivariant=True, boundary="zeros")
    with pytest.raises(ConfigError, match="pass equivariant=True"):
        LocalDenoiser(bits, 3, equivariant=False, boundary="position_class")
