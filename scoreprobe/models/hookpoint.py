"""Named points inside a network where an activation can be read or replaced.

A `HookPoint` is an identity module placed on an activation inside DiT and GPT (`h = self.hook_x(h)`).
It holds no parameter or buffer, so state_dicts and checkpoints are unchanged, and it costs one
attribute test per call while nothing is installed: it bypasses nn.Module's call machinery. With a
function installed (`point.fn = f`), the activation becomes `f(activation)`: a function that returns
its argument only reads (run_with_cache), one that returns another tensor replaces it (patching).

`dims` names the activation's axes after the batch axis, e.g. ("head", "query", "key") for an
attention pattern; scoreprobe.inside turns cached activations into xarray variables with them.
The attention modules take their explicit per-head path only when their pattern hook returns a new
tensor; reading the pattern computes it beside the fused kernel, so outputs stay bit for bit.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class HookPoint(nn.Module):
    """Identity on a tensor (B, *dims), or `fn(tensor)` while a function is installed.
    batched=False: the tensor has no batch axis (*dims), e.g. GPT's position embeddings."""

    def __init__(self, *dims, batched=True):
        super().__init__()
        self.dims = tuple(dims)
        self.batched = batched
        self.fn = None

    def forward(self, x):
        fn = self.fn
        return x if fn is None else fn(x)

    __call__ = forward          # no nn.Module hooks machinery: one attribute test when idle

    def extra_repr(self):
        return ", ".join(self.dims)


def fast_lookup(model):
    """Keep every HookPoint of `model` also in its parent's instance dict, so that `self.hook_x` in a
    forward is a plain attribute hit: nn.Module's __getattr__ fallback for submodules is ~7x slower and
    would be most of an idle hook's cost. The module tree (named_modules, state_dict) is unchanged."""
    for parent in model.modules():
        for name, child in parent._modules.items():
            if isinstance(child, HookPoint):
                parent.__dict__[name] = child
    return model


def attention_pattern(q, k, causal=False):
    """softmax(q kᵀ / √d_head) per head: q (B, h, Tq, hd), k (B, h, Tk, hd) -> (B, h, Tq, Tk).

    causal: query i sees keys j <= i + (Tk − Tq) (the cached keys come first)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])          # (B, h, Tq, Tk)
    if causal:
        Tq, Tk = scores.shape[-2:]
        mask = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(Tk - Tq)
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=-1)


def attend(q, k, v, hook_pattern, causal=False):
    """Per-head outputs z (B, h, T, hd): the fused kernel, unless `hook_pattern` replaces the pattern
    (then z = pattern' v). A hook that only reads the pattern leaves the fused result untouched."""
    if hook_pattern.fn is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    pattern = attention_pattern(q, k, causal)                           # (B, h, T, Tk)
    new = hook_pattern(pattern)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal) if new is pattern else new @ v
