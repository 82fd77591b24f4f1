"""Inside the network: hook points, activation cache and patching for scoreprobe's DiT and GPT.

    hooks.py    hook point names (TransformerLens style), finding the network inside a denoiser, installing
    cache.py    run_with_cache: one forward with activations kept
    activations.py  ActivationCache: what run_with_cache returns (TransformerLens's keys and shorthands, to_xarray)
    resid.py    the residual stream of a cache: head results, decomposition, accumulated stream, readout (logit lens)
    sites.py    patching sites: parse 'blocks.1.attn.hook_z[head=2]', the default grid
    patch.py    activation patching and attribution patching (AtP, AtP*) at one σ
    ratio.py    a patching effect's checked denominator: pooled and per-unit ratios, NaN with the reason
    atp.py      the AtP estimator: one joint first-order term per site, AtP*'s QK fix and GradDrop
    ode.py      patching along the PF-ODE: the basin-flip fraction
    attribution.py  direct attribution: each component's additive share of D(x, σ) on a direction
    stream.py   cache_series: caches over checkpoints × σ, streamed to a zarr store
    paths.py    path patching: a sender's effect through one receiver or a set of them
    intervene.py  hooks as an API (hooks, run_with_hooks, backward hooks) and ablations (zero, mean, resample)

Definitions and the hook names: docs/inside.md.
"""
from scoreprobe.inside.cache import run_with_cache
from scoreprobe.inside.ode import patch_ode
from scoreprobe.inside.patch import patch

__all__ = ["patch", "patch_ode", "run_with_cache"]
