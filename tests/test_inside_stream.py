"""Caches streamed over checkpoints × σ (issue 58 item 5): each step's cache equals run_with_cache at that step and
σ, the store resumes without recomputing, float16 halves it, and bad input is refused before any work."""
import numpy as np
import pytest
import torch

import scoreprobe as sp
from scoreprobe.errors import ConfigError


def test_streamed_cache_equals_run_with_cache_and_resumes(tmp_path):
    series = sp.load_series()
    x = torch.randn(3, 36, generator=torch.Generator().manual_seed(0))
    steps = [2876, 36000]
    ds = sp.cache_series(series, x, [0.5, 1.0], names="blocks.*.attn.hook_z", steps=steps, out=tmp_path / "z.zarr",
                         progress=False)
    assert ds.attn_z.dims[:3] == ("step", "sigma", "sample") and list(ds.step.values) == steps
    for st in steps:
        for s in (0.5, 1.0):
            _, ref = sp.run_with_cache(series.denoiser(st), x, s, names="blocks.*.attn.hook_z")
            np.testing.assert_array_equal(ds.attn_z.sel(step=st, sigma=s).values, ref.attn_z.values)
    assert sp.written_steps(tmp_path / "z.zarr") == steps
    again = sp.cache_series(series, x, [0.5, 1.0], names="blocks.*.attn.hook_z", steps=steps, out=tmp_path / "z.zarr",
                            progress=False)                                    # resumes: nothing new
    assert np.array_equal(again.attn_z.values, ds.attn_z.values)
    half = sp.cache_series(series, x, [0.5, 1.0], names="blocks.*.attn.hook_z", steps=steps[:1], dtype=torch.float16,
                           progress=False)
    assert half.attn_z.dtype == np.float16 and half.attn_z.nbytes * 2 == ds.attn_z.sel(step=steps[:1]).nbytes


def test_bad_input_is_refused():
    series = sp.load_series()
    x = torch.zeros(2, 36)
    with pytest.raises(ConfigError, match="sigmas"):
        sp.cache_series(series, x, [0.5, 0.5])
    with pytest.raises(ConfigError, match="one denoiser"):
        sp.cache_series(series.denoiser(36000), x, [0.5])
    with pytest.raises(ConfigError, match="dtype"):
        sp.cache_series(series, x, [0.5], dtype=torch.bfloat16)
    with pytest.raises(ConfigError, match="predicate"):
        sp.cache_series(series, x, [0.5], names=lambda n: True)
