"""Named points inside a network where an activation can be read or replaced.

A `HookPoint` is an identity module placed on an activation inside DiT and GPT (`h = self.hook_x(h)`).
It holds no parameter or buffer, so state_dicts and checkpoints are unchanged, and while nothing is
installed it costs a few attribute tests per call: it bypasses nn.Module's call machinery unless torch
hooks are registered on it. With a function installed (`point.fn = f`), the activation becomes
`f(activation)`: a function that returns its argument only reads (run_with_cache), one that returns
another tensor replaces it (patching).

torch's own hooks run too: `point.register_forward_hook(h)` / `register_forward_pre_hook(h)` (and the
global `register_module_forward_hook`, a replaced `forward` as nnsight installs, full backward hooks)
send the call through nn.Module.__call__; the installed `fn` then acts on what those hooks return, so
persistent torch hooks run before the hooks scoreprobe installs for one call (TransformerLens's order:
the persistent ones first), and a cache reads the activation as torch's hooks left it.

`dims` names the activation's axes after the batch axis, e.g. ("head", "query", "key") for an
attention pattern; scoreprobe.inside turns cached activations into xarray variables with them.
The attention modules take their explicit per-head path only when their pattern hook returns a new
tensor; reading the pattern computes it beside the fused kernel, so outputs stay bit for bit.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules import module as _torch_module

# torch's global module hooks (register_module_forward_hook, ...): dicts mutated in place, never rebound
_G_FWD, _G_PRE = _torch_module._global_forward_hooks, _torch_module._global_forward_pre_hooks
_G_BWD, _G_BWD_PRE = _torch_module._global_backward_hooks, _torch_module._global_backward_pre_hooks


class HookPoint(nn.Module):
    """Identity on a tensor (B, *dims), or `fn(tensor)` while a function is installed.
    batched=False: the tensor has no batch axis (*dims), e.g. GPT's position embeddings."""

    def __init__(self, *dims, batched=True):
        super().__init__()
        self.dims = tuple(dims)
        self.batched = batched
        self.fn = None

    def forward(self, x):
        return x

    def __call__(self, x):
        """x, or fn(x); through nn.Module.__call__ first when torch hooks are registered (module docstring). The
        look is inlined (dict lookups, no method call): it runs on every call of every hook point."""
        d = self.__dict__
        if (d["_forward_hooks"] or d["_forward_pre_hooks"] or d["_backward_hooks"] or d["_backward_pre_hooks"]
                or "forward" in d or _G_FWD or _G_PRE or _G_BWD or _G_BWD_PRE):
            x = nn.Module.__call__(self, x)
        fn = d["fn"]
        return x if fn is None else fn(x)

    def torch_hooked(self):
        """True when torch hooks (this module's, global ones) or a replaced `forward` are there: the cases
        nn.Module.__call__ is needed for."""
        d = self.__dict__
        return bool(d["_forward_hooks"] or d["_forward_pre_hooks"] or d["_backward_hooks"] or d["_backward_pre_hooks"]
                    or "forward" in d or _G_FWD or _G_PRE or _G_BWD or _G_BWD_PRE)

    @property
    def active(self):
        """True when a call may replace the activation (an installed fn or torch hooks): the attention and the
        layer norms take their explicit path only then."""
        return self.fn is not None or self.torch_hooked()

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


def attention_scores(q, k, causal=False):
    """q kᵀ / √d_head per head, −inf where a causal mask hides a key: (B, h, Tq, hd), (B, h, Tk, hd) -> (B, h, Tq, Tk).

    causal: query i sees keys j <= i + (Tk − Tq) (the cached keys come first)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])          # (B, h, Tq, Tk)
    if causal:
        Tq, Tk = scores.shape[-2:]
        mask = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(Tk - Tq)
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores


def attention_pattern(q, k, causal=False):
    """softmax(q kᵀ / √d_head) per head: q (B, h, Tq, hd), k (B, h, Tk, hd) -> (B, h, Tq, Tk)."""
    return attention_scores(q, k, causal).softmax(dim=-1)


def attend(q, k, v, hook_pattern, causal=False, hook_scores=None):
    """Per-head outputs z (B, h, T, hd): the fused kernel, unless a hook replaces the pre-softmax scores
    (`hook_scores`, "attn_scores") or the pattern (then z = pattern' v). Hooks that only read leave the fused
    result untouched (bit for bit)."""
    scores_hooked = hook_scores is not None and hook_scores.active
    if not hook_pattern.active and not scores_hooked:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    scores = attention_scores(q, k, causal)                             # (B, h, T, Tk)
    new_scores = hook_scores(scores) if scores_hooked else scores
    pattern = new_scores.softmax(dim=-1)
    new = hook_pattern(pattern)
    if new is pattern and new_scores is scores:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return new @ v


def per_head_result(z, proj, hook_result):
    """The output projection of per-head outputs z (B, h, T, hd): fused, unless `hook_result` is installed:
    then the heads' results r_h = z_h W_O,hᵀ (B, h, T, D) go through it and are summed with the bias; a hook
    that only reads leaves the fused result (bit for bit)."""
    B, H, T, hd = z.shape
    fused = proj(z.transpose(1, 2).reshape(B, T, H * hd))               # (B, T, D)
    if not hook_result.active:
        return fused
    W = proj.weight.view(-1, H, hd)                                     # (D, h, hd)
    result = torch.einsum("bhtd,ehd->bhte", z, W)                       # (B, h, T, D)
    new = hook_result(result)
    return fused if new is result else new.sum(1) + (proj.bias if proj.bias is not None else 0)


class HookedLayerNorm(nn.LayerNorm):
    """nn.LayerNorm with `hook_scale` on √(var + ε) (B, T) (TransformerLens's ln hook_scale): fused while idle or
    read; a hook that replaces the scale (e.g. freezes it at another input's) divides by the new one."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.hook_scale = HookPoint("token")

    def forward(self, x):
        if not self.hook_scale.active:
            return super().forward(x)
        mean = x.mean(-1, keepdim=True)
        scale = (x.var(-1, unbiased=False, keepdim=True) + self.eps).sqrt()[..., 0]   # (B, T)
        new = self.hook_scale(scale)
        if new is scale:
            return super().forward(x)
        out = (x - mean) / new[..., None]
        return out * self.weight + self.bias if self.elementwise_affine else out
