"""The residual stream of a cached forward, TransformerLens's way: per-head results, its additive parts, its value
entering each block, and a readout of the output from any point of it (a logit lens for a denoiser).

The DiT's stream entering block l is r_l = e + p + Σ_{i<l} (a_i + m_i): e the patch embedding (`hook_embed`),
p the fixed sin-cos positions (`net.pos_embed`), a_i = gate_msa,i ⊙ Attn_i the gated attention output
(`hook_attn_out`; per head gate_msa,i ⊙ z_h W_O,h plus gate_msa,i ⊙ b_O) and m_i the gated MLP output. The GPT's is
the same with token and position embeddings and ungated outputs. A DiT with a broadcasting register adds a term
this does not follow: decompose_resid refuses it.

readout(r) sends r through what follows the last block. DiT (EDM): F = U(W·[LN(r)(1 + scale) + shift] + b), with
U the unpatchify, the final adaLN's shift and scale those of this forward's σ, the LayerNorm recomputed on r (not
frozen), and D = c_skip(σ)·x + c_out(σ)·F with c_skip = σ_d²/(σ² + σ_d²), c_out = σσ_d/√(σ² + σ_d²) — so the
readout of the last block's output is D(x, σ) itself. GPT: logits = lm_head(ln_f(r)).
"""
import torch

from scoreprobe.errors import ConfigError
from scoreprobe.models.dit import modulate
from scoreprobe.models.edm import EDMDenoiser


def _need(cache, name):
    if name not in cache._hooks:
        raise ConfigError(f"{name!r} was not cached: run_with_cache(..., names=None) keeps every hook point")
    return cache.raw(name)


def _blocks(cache):
    return cache.net.blocks if cache.kind == "dit" else cache.net.transformer.h


def _upto(cache, layer):
    L = len(_blocks(cache))
    if layer is None:
        return L
    if isinstance(layer, bool) or not isinstance(layer, int) or not -L <= layer <= L:
        raise ConfigError(f"layer must be an int in [-{L}, {L}] (None: after the last block), got {layer!r}")
    return layer % (L + 1) if layer >= 0 else L + layer


def _out(parts, labels, return_labels):
    stack = torch.stack(parts) if parts else None
    if stack is None:
        raise ConfigError("nothing to stack: layer 0 has no block before it")
    return (stack, labels) if return_labels else stack


def stack_head_results(cache, layer=None, pos_slice=None, return_labels=False):
    """(component, B, T, d_model): each head's contribution to the stream, blocks < layer; see module docstring."""
    parts, labels = [], []
    for i, blk in enumerate(_blocks(cache)[:_upto(cache, layer)]):
        z = _need(cache, f"blocks.{i}.attn.hook_z")                            # (B, h, T, hd)
        proj = blk.attn.proj if cache.kind == "dit" else blk.attn.c_proj
        H, hd = z.shape[1], z.shape[3]
        W = proj.weight.view(-1, H, hd).to(z.dtype)                             # (d, h, hd)
        res = torch.einsum("bhtd,ehd->bhte", z, W)                              # (B, h, T, d)
        if cache.kind == "dit":
            res = _need(cache, f"blocks.{i}.hook_gate_msa")[:, None, None, :] * res
        for h in range(H):
            r = res[:, h]
            parts.append(r[:, pos_slice] if pos_slice is not None else r)
            labels.append(f"L{i}H{h}")
    return _out(parts, labels, return_labels)


def decompose_resid(cache, layer=None, mode="all", return_labels=False):
    """(component, B, T, d_model) summing to the stream entering block `layer`; see module docstring."""
    if mode not in ("all", "attn", "mlp"):
        raise ConfigError(f"mode must be 'all', 'attn' or 'mlp', got {mode!r}")
    net = cache.net
    if cache.kind == "dit" and getattr(net, "register", None) is not None:
        raise ConfigError("decompose_resid: a DiT with a broadcasting register adds a term it does not follow")
    embed = _need(cache, "hook_embed")                                          # (B, T, d)
    if cache.kind == "dit":
        pos = net.pos_embed.to(embed.dtype).expand_as(embed)
    else:
        pos = _need(cache, "hook_pos_embed").to(embed.dtype).expand_as(embed)
    parts, labels = [embed, pos], ["embed", "pos_embed"]
    for i in range(_upto(cache, layer)):
        for sub in ("attn", "mlp"):
            if mode in ("all", sub):
                parts.append(_need(cache, f"blocks.{i}.hook_{sub}_out"))
                labels.append(f"{i}_{sub}_out")
    return _out(parts, labels, return_labels)


def accumulated_resid(cache, layer=None, incl_mid=False, return_labels=False):
    """(component, B, T, d_model): the stream entering blocks 0 .. layer−1 and then at `layer` itself (None: leaving
    the last block), as TransformerLens's accumulated_resid."""
    L, upto = len(_blocks(cache)), _upto(cache, layer)
    parts, labels = [], []
    for i in range(upto):
        parts.append(_need(cache, f"blocks.{i}.hook_resid_pre"))
        labels.append(f"{i}_pre")
        if incl_mid:
            parts.append(_need(cache, f"blocks.{i}.hook_resid_mid"))
            labels.append(f"{i}_mid")
    last = f"blocks.{L - 1}.hook_resid_post" if upto == L else f"blocks.{upto}.hook_resid_pre"
    parts.append(_need(cache, last))
    labels.append("final_post" if upto == L else f"{upto}_pre")
    return _out(parts, labels, return_labels)


@torch.no_grad()
def readout(cache, stream):
    """The output read from `stream` (…, B, T, d_model): DiT D (…, B, D); GPT logits (…, B, T, V)."""
    stream = torch.as_tensor(stream)
    B = len(cache._x)
    if stream.ndim < 3 or stream.shape[-3] != B:
        raise ConfigError(f"readout takes a stream (…, {B}, pos, d_model), got {tuple(stream.shape)}")
    if cache.kind == "gpt":
        return cache.net.lm_head(cache.net.transformer.ln_f(stream))
    D, net = cache.model, cache.net
    if not isinstance(D, EDMDenoiser):
        raise ConfigError(f"readout follows the EDM preconditioning; {type(D).__name__} has another (docs/inside.md)")
    T = net.grid[0] * net.grid[1]
    lead = stream.shape[:-3]
    r = stream[..., :T, :].reshape(-1, T, stream.shape[-1])                    # (N·B, T, d) register dropped
    shift = _need(cache, "final.hook_shift").repeat(r.shape[0] // B, 1)        # (N·B, d)
    scale = _need(cache, "final.hook_scale").repeat(r.shape[0] // B, 1)
    fl = net.final_layer
    y = fl.linear(modulate(fl.norm_final(r), shift, scale))                     # (N·B, T, p·p·C_out)
    F_x = net.unpatchify(y)[:, :D.image_shape[0]].reshape(*lead, B, -1)        # (…, B, D)
    x32, sigma = D._inputs(cache._x, cache._sigma.to(torch.float32))
    s = sigma[:, None]
    sd2 = D.sigma_data ** 2
    c_skip, c_out = sd2 / (s ** 2 + sd2), s * D.sigma_data / (s ** 2 + sd2).sqrt()
    return (c_skip * x32 + c_out * F_x).to(cache._x.dtype)
