"""The hook points of a scoreprobe network, by TransformerLens-style name, and installing functions on them.

    net, kind = network_of(D)                 # the DiT inside a denoiser wrapper, or a GPT
    points = hook_points(net)                 # {"blocks.0.attn.hook_z": HookPoint, ...}
    with installed(net, {"blocks.0.attn.hook_z": fn}):
        out = D(x, sigma)                     # fn(z) replaces z in block 0

Names (docs/inside.md): `hook_embed`, `hook_cond` (DiT), `hook_pos_embed` (GPT), per block
`blocks.{i}.hook_resid_pre|hook_attn_out|hook_resid_mid|hook_mlp_out|hook_resid_post`,
`blocks.{i}.attn.hook_q|hook_k|hook_v|hook_pattern|hook_z`, `blocks.{i}.mlp.hook_pre|hook_post`
(GLU: also `hook_pre_linear`), DiT adaLN `blocks.{i}.hook_shift_msa|scale_msa|gate_msa|shift_mlp|
scale_mlp|gate_mlp`, and `final.hook_shift|hook_scale|hook_out` (DiT) / `final.hook_out` (GPT logits).
"""
import contextlib
import re

import torch.nn as nn

from scoreprobe.errors import ConfigError
from scoreprobe.models.dit import DiT
from scoreprobe.models.gpt import GPT
from scoreprobe.models.hooked import hook_points, select   # noqa: F401 (re-exported: inside's names)

_BLOCK = re.compile(r"^blocks\.(\d+)\.(.+)$")


def network_of(D):
    """(network, kind) for a scoreprobe network or a denoiser wrapping one; kind "dit" or "gpt".

    Accepted: a GPT, a DiT, or a denoiser wrapper (EDMDenoiser, VPDenoiser: anything whose `.net` is
    a DiT, which is where facebookresearch/DiT, diffusers and EDM-wrapped checkpoints load).
    ConfigError (one line) for anything else: its insides have no named hook points."""
    if isinstance(D, GPT):
        return D, "gpt"
    if isinstance(D, DiT):
        return D, "dit"
    net = getattr(D, "net", None) if isinstance(D, nn.Module) else None
    if isinstance(net, DiT):
        return net, "dit"
    what = type(D).__name__
    if getattr(D, "k", None) is not None and hasattr(D, "base"):
        raise ConfigError(f"{what}: a stack of checkpoints has no single set of activations; pass one denoiser")
    raise ConfigError(f"{what} has no hook points: run_with_cache and patch need a scoreprobe DiT or GPT "
                      "(or a denoiser wrapping a DiT), not a plain callable")


def split_name(name):
    """'blocks.2.attn.hook_z' -> (2, 'attn_z'); 'hook_embed' -> (None, 'embed'); 'final.hook_out' ->
    (None, 'final_out'): the layer and the Dataset variable that holds the hook's activation."""
    m = _BLOCK.match(name)
    layer, rest = (int(m.group(1)), m.group(2)) if m else (None, name)
    return layer, rest.replace("hook_", "").replace(".", "_")


def keepers(names, grad=False):
    """({name: fn}, kept): hook functions that put each activation in `kept` under its name (and return it);
    grad: a new tensor with retain_grad, so a backward leaves ∂/∂a in its .grad — the pattern hook then takes the
    explicit path; an activation outside the graph (one that does not depend on anything requiring a gradient,
    e.g. the σ conditioning) is kept as it is, its .grad stays None."""
    kept = {}

    def keep(name):
        def fn(a):
            if grad and a.requires_grad:
                a = a.view_as(a)
                a.retain_grad()
            kept[name] = a
            return a
        return fn
    return {n: keep(n) for n in names}, kept


@contextlib.contextmanager
def installed(net, fns, compose=False):
    """Install {hook name: fn(tensor) -> tensor} on `net` for the duration of the block; every hook is
    restored on exit (also on error). ConfigError for an unknown name, or for a hook already in use unless
    `compose`: then fn runs after the function already there (which sees the activation first), so a cache
    installed inside an intervention reads the intervened activation."""
    points = hook_points(net)
    unknown = sorted(set(fns) - set(points))
    if unknown:
        raise ConfigError(f"unknown hook point(s) {unknown[:3]}; see docs/inside.md for the names")
    busy = [n for n in fns if points[n].fn is not None]
    if busy and not compose:
        raise ConfigError(f"hook point {busy[0]!r} already has a function installed")
    before = {name: points[name].fn for name in fns}
    try:
        for name, fn in fns.items():
            points[name].fn = fn if before[name] is None else _chain(before[name], fn)
        yield points
    finally:
        for name in fns:
            points[name].fn = before[name]


def _chain(first, then):
    return lambda a: then(first(a))
