"""Bad input to the intervention API gets one clear typed error before any work (issue 76, the hook items): a
predicate or a site list that selects nothing, a hook returning the wrong shape, dtype or type (it was broadcast,
truncated, or a traceback), bad hook names, an empty batch, σ of the wrong length or type, seed=-1 in ablate;
direct_attribution at a σ where the float32 forward overflows leaves its shares undefined, with a warning."""
import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe.errors import ConfigError, DataError

NAME = "blocks.0.attn.hook_z"


def _x(n=3):
    return torch.randn(n, 36, generator=torch.Generator().manual_seed(0))


def test_a_predicate_matching_no_hook_point_is_an_error(shipped):
    D, _ = shipped
    with pytest.raises(ConfigError, match="matches no hook point"):
        sp.run_with_hooks(D, _x(), 0.7, fwd_hooks=[(lambda n: n.endswith("hook_nothing"), lambda a, n: a * 0)])
    with pytest.raises(ConfigError, match="raised ZeroDivisionError"):
        sp.run_with_hooks(D, _x(), 0.7, fwd_hooks=[(lambda n: 1 / 0, lambda a, n: a)])


@pytest.mark.parametrize("ret, what", [
    (lambda a: a[:1], "float32 (1,"),                                # wrong shape: was broadcast
    (lambda a: a.long(), "int64"),                                   # was silently truncated
    (lambda a: a.double(), "float64"),                               # was a traceback
    (lambda a: "zero", "returned str"),                              # was a traceback
])
def test_a_hook_returning_the_wrong_thing_is_refused(shipped, ret, what):
    D, _ = shipped
    with pytest.raises(ConfigError, match=what.replace("(", r"\(")):
        sp.run_with_hooks(D, _x(), 0.7, fwd_hooks=[(NAME, lambda a, n: ret(a))])
    with pytest.raises(ConfigError, match=what.replace("(", r"\(")):          # a persistent hook is checked too
        D.add_hook(NAME, lambda a, n: ret(a))
        try:
            with torch.no_grad():
                D(_x(), 0.7)
        finally:
            D.reset_hooks()


@pytest.mark.parametrize("name", [None, 5, ["blocks.0.attn.hook_z", 3], b"hook_embed"])
def test_bad_hook_names_are_one_clear_error(shipped, name):
    D, _ = shipped
    with pytest.raises(ConfigError, match="a hook is|hook names are"):
        sp.run_with_hooks(D, _x(), 0.7, fwd_hooks=[(name, lambda a, n: a)])


def test_an_empty_batch_and_bad_sigma_are_clear_errors(shipped):
    D, _ = shipped
    for call in (lambda x, s: sp.run_with_hooks(D, x, s), lambda x, s: sp.run_with_cache(D, x, s),
                 lambda x, s: sp.ablate(D, x, s, sites="blocks.0")):
        with pytest.raises(DataError, match="empty batch"):
            call(torch.zeros(0, 36), 0.7)
        for bad in (torch.ones(2), [0.5, 0.6, 0.7, 0.8], "0.7", True, torch.ones(3, 1), object()):
            with pytest.raises(ConfigError, match="sigma must be"):
                call(_x(), bad)
    assert sp.run_with_hooks(D, _x(), np.array([0.5, 0.6, 0.7])).shape == (3, 36)


def test_ablate_refuses_a_negative_seed_and_sites_selecting_nothing(shipped):
    D, _ = shipped
    with pytest.raises(ConfigError, match="seed"):
        sp.ablate(D, _x(), 0.7, sites="blocks.0", how="resample", seed=-1)
    for sites in ("none", ["none"], None, 5, []):
        with pytest.raises(ConfigError, match="select nothing|no patching sites|sites are"):
            sp.ablate(D, _x(), 0.7, sites=sites)


def test_direct_attribution_where_the_forward_overflows_is_undefined_and_warned(shipped):
    D, _ = shipped
    x = _x()
    ok = sp.direct_attribution(D, x, 0.7, np.ones(36))
    np.testing.assert_allclose(ok.share.sum("component") + ok.skip + ok.bias, ok.total, rtol=1e-4, atol=1e-5)
    with pytest.warns(UserWarning, match="do not add up"):
        ds = sp.direct_attribution(D, x, 1e30, np.ones(36))
    assert np.isnan(ds.total).all() and np.isnan(ds.share).all()
