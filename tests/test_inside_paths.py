"""Path patching (issue 58 item 3): where nothing else can respond, the path from a site to the output equals
patching the site (the planted circuit with its MLP silenced; the shipped model's last MLP); a path needs the
sender before the receiver; labels are checked."""
import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe.errors import ConfigError
from tests.test_inside_patch import _pairs, planted


def test_the_path_to_the_output_is_the_patching_effect_where_nothing_else_responds():
    D = planted()
    with torch.no_grad():
        D.net.blocks[0].mlp.fc1.weight.zero_()                          # the MLP no longer reads the stream
    clean, corrupt = _pairs()
    heads = ["blocks.0.attn.hook_z[head=0]", "blocks.0.attn.hook_z[head=1]"]
    paths = sp.path_patch(D, clean, corrupt, 0.3, senders=heads, receivers="final")
    patched = sp.patch(D, clean, corrupt, 0.3, sites=heads)
    np.testing.assert_allclose(paths.effect.values[:, 0], patched.effect.values, atol=1e-6)
    assert float(paths.effect_pooled[0, 0]) > 0.3 > abs(float(paths.effect_pooled[1, 0]))


def flipped(data, n, bit):
    """The first n training items and the same with one bit flipped: (clean, corrupt) 0/1 arrays."""
    clean = data.train[:n]
    corrupt = clean.copy()
    corrupt[:, bit] ^= 1
    return clean, corrupt


def test_last_mlp_to_output_and_the_order_of_sender_and_receiver(shipped):
    D, data = shipped
    clean, corrupt = flipped(data, 6, 0)
    last = "blocks.3.hook_mlp_out"
    paths = sp.path_patch(D, clean, corrupt, 0.7, senders=[last, "blocks.0.attn.hook_z[head=1]"],
                          receivers=["final", "blocks.2.attn[head=0]", "blocks.1.mlp"])
    patched = sp.patch(D, clean, corrupt, 0.7, sites=last)
    np.testing.assert_allclose(paths.effect.sel(sender=last, receiver="final").values, patched.effect.values[0],
                               atol=1e-5)
    assert np.isnan(paths.effect.sel(sender=last, receiver="blocks.2.attn[head=0]")).all()   # block 3 is after 2
    assert np.isfinite(paths.effect.sel(sender="blocks.0.attn.hook_z[head=1]", receiver="blocks.1.mlp")).all()
    q_only = sp.path_patch(D, clean, corrupt, 0.7, senders="blocks.0.attn.hook_z[head=1]",
                           receivers="blocks.2.attn[head=0]", which="q")
    assert np.isfinite(q_only.effect).all()


def test_labels_are_checked(shipped):
    D, data = shipped
    clean = data.train[:2]
    corrupt = 1 - clean
    for kw, match in [(dict(senders="blocks.0", receivers="final"), "unknown sender"),
                      (dict(senders="blocks.0.hook_mlp_out", receivers="blocks.1"), "unknown receiver"),
                      (dict(senders="blocks.0.attn.hook_z[head=9]", receivers="final"), "unknown sender"),
                      (dict(senders="blocks.0.hook_mlp_out", receivers="final", which="x"), "which")]:
        with pytest.raises(ConfigError, match=match):
            sp.path_patch(D, clean, corrupt, 0.7, **kw)
