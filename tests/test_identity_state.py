"""A module's identity covers what its forward reads (issue 33, section 3): non-persistent buffers and
tensor attributes in the weights digest, plain attributes through the output fingerprint; stores that
recorded the weights alone still resume; a model_id names a module whose outputs cannot be fingerprinted."""
import hashlib
import json

import numpy as np
import pytest
import torch

from scoreprobe.errors import StoreError
from scoreprobe.loading.series import load_series
from scoreprobe.probes.field import score_field
from scoreprobe.slices import Plane
from scoreprobe.sweep import identity


class Gained(torch.nn.Module):
    """tanh(gain · (W x + shift)): W a parameter, `shift` a non-persistent buffer, `gain` a plain float."""

    def __init__(self, gain=1.0, shift=0.0, dim=8):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(dim, dim)
        self.register_buffer("shift", torch.full((dim,), float(shift)), persistent=False)
        self.gain, self.dim = gain, dim

    def forward(self, x, sigma):
        return torch.tanh(self.gain * (self.lin(x) + self.shift))


def test_a_non_persistent_buffer_or_a_tensor_attribute_changes_the_weights_digest():
    a, b = Gained(shift=0.0), Gained(shift=0.5)
    assert a.state_dict().keys() == b.state_dict().keys() and "shift" not in a.state_dict()
    assert identity.weights_digest(a) != identity.weights_digest(b)
    c = Gained()
    c.scale = torch.tensor(2.0)                       # a tensor held as a plain attribute
    assert identity.weights_digest(c) != identity.weights_digest(a)


def _old_digest(model):
    """The digest recorded before issue 33: the state_dict's tensors and the settings."""
    h = hashlib.sha256()
    state = model.state_dict()
    for name in sorted(state):
        t = state[name].detach()
        h.update(json.dumps([name, str(t.dtype), list(t.shape)]).encode())
        h.update(t.reshape(-1).contiguous().cpu().view(torch.uint8).numpy().tobytes())
    h.update(json.dumps(identity._settings(model), sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def test_a_module_without_unsaved_tensors_keeps_the_digest_stores_recorded():
    series = load_series()
    D = series.denoiser(series.steps[-1])
    assert identity.weights_digest(D) == _old_digest(D)
    new = identity.model_identity(D, 36)
    assert set(new) == {"weights", "outputs"}
    assert identity.same({"weights": new["weights"]}, new)          # a store written before: resumes on weights
    assert not identity.same({"weights": "0" * 16}, new)


def test_a_plain_attribute_is_caught_by_the_fingerprint_and_model_id_replaces_it():
    a, b = Gained(gain=1.0), Gained(gain=3.0)
    assert identity.weights_digest(a) == identity.weights_digest(b)   # no digest can see `gain`...
    ia, ib = identity.model_identity(a, 8), identity.model_identity(b, 8)
    assert ia["weights"] == ib["weights"] and not identity.same(ia, ib)   # ...the fingerprint does
    assert identity.same(ia, identity.model_identity(Gained(gain=1.0), 8))
    named = identity.model_identity(a, 8, model_id="gain-1")
    assert named == {"weights": ia["weights"], "model_id": "gain-1"}
    assert not identity.same(named, identity.model_identity(a, 8, model_id="gain-3"))


@pytest.mark.parametrize("change", [dict(shift=0.5), dict(gain=3.0)])
def test_a_store_of_one_module_is_not_resumed_with_a_changed_one(tmp_path, change):
    rng = np.random.default_rng(0)
    plane = Plane.through(*(rng.integers(0, 2, (3, 8)) * 2.0 - 1.0))
    kw = dict(sigmas=[0.5, 1.0], res=3, out=tmp_path / "f.zarr", progress=False)
    score_field({100: Gained()}, plane, **kw)
    score_field({100: Gained()}, plane, **kw)                        # the same module: resumed
    with pytest.raises(StoreError, match="step 100 was measured on another model"):
        score_field({100: Gained(**change)}, plane, **kw)
