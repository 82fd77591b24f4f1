"""Issue 53 items 5 and 7: bounds before allocation and the remaining silent acceptances (tests/abuse53_bounds.py)."""
import pytest

import abuse_issue53
from abuse53_bounds import ATTACKS


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack(attack, tmp_path):
    outcome, detail = abuse_issue53.run(attack, tmp_path)
    assert outcome in ("clean", "right"), detail


@pytest.mark.parametrize("equivariant", [False, True])
def test_local_sigma0_ties_brute_force(equivariant):
    """σ = 0 is the exact limit with ties: x in {-1, 0, 1} (x = 0 ties every candidate of a position), brute force at
    σ = 0.1, where squared distances differ by ≥ 1 so the non-nearest weigh < e^-50 relative (and none underflows)."""
    import numpy as np
    import torch
    from scoreprobe.oracles import LocalDenoiser
    from test_local_oracle import all_images, brute_force
    rng = np.random.default_rng(3)
    train = all_images(9)[rng.permutation(512)[:12]]
    x = np.concatenate([np.zeros((1, 9)), rng.integers(-1, 2, size=(5, 9)).astype(np.float64)])
    got = LocalDenoiser(train, patch=3, equivariant=equivariant)(torch.tensor(x), torch.zeros(6, dtype=torch.float64))
    want = np.stack([brute_force(train, xi, 0.1, 3, equivariant, (1, 3, 3)) for xi in x])
    assert np.isfinite(want).all() and np.abs(got.numpy() - want).max() < 1e-12
