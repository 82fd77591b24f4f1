"""Direct attribution: each component's additive share of a DiT denoiser's output D(x, σ), projected on a
direction (the analogue of logit attribution).

The residual stream entering the final layer is a sum: r = e + Σ_i (a_i + m_i), with e the patch and
position embedding (`blocks.0.hook_resid_pre`) and a_i, m_i block i's gated attention and MLP outputs
(`hook_attn_out`, `hook_mlp_out`). The final layer is y = W·[LN(r)·(1 + scale) + shift] + b, and the
EDM preconditioning D = c_skip·x + c_out·F with F the first C channels of unpatchify(y). With the
LayerNorm's scale s = √(var(r) + ε) **frozen at its value on this input** (r the network's own stream; as TransformerLens's
`apply_ln_to_stack`), LN(r) = Σ_c (c − mean(c))/s is linear in the components, so

    D = c_skip·x  +  c_out·U(W·shift + b)  +  Σ_c c_out·U(W·[(c − mean(c))/s · (1 + scale)])

exactly, U the unpatchify. The shares sum to ⟨D(x, σ), w⟩ to float rounding (tests/test_inside_attribution.py).

At an intermediate layer (`layer=l`, TransformerLens's logit lens read per component): r is the stream entering
block l, r_l = e + Σ_{i<l} (a_i + m_i), read out through the same final layer (its LayerNorm scale frozen at its
value on r_l, the final adaLN's shift and scale of this σ) and preconditioning; `total` is that readout,
D_l = c_skip·x + c_out·U(W·[LN(r_l)(1 + scale) + shift] + b), computed in float32 as the network computes D, and
the shares of the blocks < l sum to it. l = L (or None) is the final layer: D itself. A GPT's readout at l is
lm_head(ln_f(r_l)).
Per head: a_i splits over heads through the output projection, gate_msa · (z_h W_O,h) (+ the projection's
bias as its own component). DiTs with a broadcasting global token (`--global-token`) add a term the
decomposition does not follow: refused. Only EDM-parameterized denoisers (scoreprobe's own) are taken.
"""
import warnings

import numpy as np
import torch
import xarray as xr

from scoreprobe.errors import ConfigError
from scoreprobe.inside.cache import check_input
from scoreprobe.inside.hooks import installed, keepers, network_of
from scoreprobe.models.edm import EDMDenoiser


def _components(net, kept):
    """[(label, layer, (B, T, D) tensor)] of the stream entering the final layer, per head where split."""
    out = [("embed", -1, kept["blocks.0.hook_resid_pre"])]
    for i, blk in enumerate(net.blocks):
        z = kept[f"blocks.{i}.attn.hook_z"]                                   # (B, h, T, hd)
        gate = kept[f"blocks.{i}.hook_gate_msa"][:, None, :]                 # (B, 1, D)
        W = blk.attn.proj.weight.double()                                    # (D, h·hd)
        H, hd = z.shape[1], z.shape[3]
        for h in range(H):
            part = z[:, h].double() @ W[:, h * hd:(h + 1) * hd].T             # (B, T, D)
            out.append((f"blocks.{i}.attn.hook_result[head={h}]", i, gate * part))
        out.append((f"blocks.{i}.attn.proj_bias", i, gate * blk.attn.proj.bias.double()[None, None, :]
                    .expand_as(kept[f"blocks.{i}.hook_attn_out"])))
        out.append((f"blocks.{i}.hook_mlp_out", i, kept[f"blocks.{i}.hook_mlp_out"]))
    return out


@torch.no_grad()
def direct_attribution(D, x, sigma, direction, layer=None):
    """Each component's share of ⟨D(x, σ), direction⟩ for a DiT denoiser (or of ⟨logits, direction⟩ for a GPT).

    x : (B, D) noisy signed images; sigma : scalar or (B,); direction : (B, D) or (D,). A GPT: x (B, D) 0/1 bits
    (teacher forced), sigma None, direction (B, T, V), (T, V) or (V,) weights on its logits (e.g. +1/−1 on the two
    tokens at one position: a logit difference); `skip` is 0 and `bias` the final LayerNorm's bias term.
    Returns xarray.Dataset: `share` (component, sample) — summing with `skip` (c_skip·⟨x, w⟩) and `bias`
    (the final layer's shift and bias) to `total` = ⟨D(x, σ), w⟩ (sample); coords component, layer (-1:
    outside the blocks); attrs: the frozen-LayerNorm statement and `read_at`, the stream read.
    layer : None (the final layer) or an int l in [-L, L]: the stream entering block l read out through the final
        layer (module docstring); `total` is then that readout's projection and only blocks < l have shares."""
    net, kind = network_of(D)
    depth = len(net.blocks) if kind == "dit" else len(net.transformer.h) if kind == "gpt" else 0
    upto = _layer(layer, depth)
    if kind == "gpt":
        if sigma is not None:
            raise ConfigError("a GPT has no noise level: pass sigma=None")
        return _gpt_attribution(net, check_input(D, kind, x), direction, upto)
    if kind != "dit" or not isinstance(D, EDMDenoiser) or getattr(D, "label", None) is not None:
        raise ConfigError("direct_attribution takes an EDM denoiser wrapping a scoreprobe DiT (series.denoiser(step))")
    if any(b.broadcast is not None for b in net.blocks):
        raise ConfigError("direct_attribution: a DiT with a broadcasting global token adds a term it does not follow")
    x = check_input(D, kind, x).double()
    w = torch.as_tensor(np.asarray(direction), dtype=torch.float64, device=x.device)
    w = w.expand(len(x), -1) if w.ndim == 1 else w
    if w.shape != x.shape or not torch.isfinite(w).all():
        raise ConfigError(f"direction must be finite, of shape {tuple(x.shape)} or ({x.shape[1]},)")
    kept, total = _run(D, net, x.float(), sigma, upto)
    if upto < len(net.blocks):
        total = _lens(D, net, kept, x.float(), sigma, kept[_stream(upto, len(net.blocks))])
    s = torch.as_tensor(sigma, dtype=torch.float64, device=x.device).reshape(-1).expand(len(x))[:, None]
    c_skip = D.sigma_data ** 2 / (s ** 2 + D.sigma_data ** 2)
    c_out = s * D.sigma_data / (s ** 2 + D.sigma_data ** 2).sqrt()
    comps = [c for c in _components(net, kept) if c[1] < upto]
    T = net.grid[0] * net.grid[1]
    r = kept[_stream(upto, len(net.blocks))].double()[:, :T]                # (B, T, D) the network's own stream
    scale_ln = (r.var(-1, unbiased=False, keepdim=True) + net.final_layer.norm_final.eps).sqrt()
    one_plus = 1 + kept["final.hook_scale"].double()[:, None, :]             # (B, 1, D)
    lin = net.final_layer.linear
    project = lambda y: (c_out * _first_channels(net, D, y)).mul(w).sum(1)   # noqa: E731  (B, T, p·p·C) -> (B,)
    shares = []
    for _, _, c in comps:
        c = c.double()[:, :T]
        shares.append(project(((c - c.mean(-1, keepdim=True)) / scale_ln * one_plus) @ lin.weight.double().T))
    bias = project(kept["final.hook_shift"].double()[:, None, :].expand(-1, T, -1) @ lin.weight.double().T
                   + lin.bias.double())
    skip = (c_skip * x * w).sum(1)
    return _dataset(comps, shares, skip, bias, (total.double() * w).sum(1), _read_at(upto, len(net.blocks)))


def _layer(layer, depth):
    """The block whose input stream is read: an int in [0, depth] (depth: the final layer's input)."""
    if layer is None:
        return depth
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not -depth <= layer <= depth:
        raise ConfigError(f"layer must be None (the final layer) or an int in [-{depth}, {depth}], got {layer!r}")
    return int(layer) % (depth + 1) if layer >= 0 else depth + int(layer)


def _stream(upto, depth):
    """The hook holding the stream read at `upto`: block upto's input, or the last block's output."""
    return f"blocks.{upto}.hook_resid_pre" if upto < depth else f"blocks.{depth - 1}.hook_resid_post"


def _read_at(upto, depth):
    return "final layer input" if upto == depth else f"blocks.{upto}.hook_resid_pre"


def _lens(D, net, kept, x32, sigma, r):
    """D_l (B, D) float32: the stream r (B, T[+1], d) read through the final layer and the preconditioning, in the
    order of EDMDenoiser.forward (module docstring)."""
    from scoreprobe.models.dit import modulate
    fl, T = net.final_layer, net.grid[0] * net.grid[1]
    y = fl.linear(modulate(fl.norm_final(r[:, :T]), kept["final.hook_shift"], kept["final.hook_scale"]))
    F_x = _first_channels(net, D, y)                                         # (B, D)
    _, s32 = D._inputs(x32, sigma)
    s = s32[:, None]
    sd2 = D.sigma_data ** 2
    return sd2 / (s ** 2 + sd2) * x32 + s * D.sigma_data / (s ** 2 + sd2).sqrt() * F_x


def _gpt_attribution(net, bits, direction, upto):
    """The GPT's logit attribution: the stream entering ln_f is embed + pos_embed + Σ heads (z_h W_O,h) + Σ proj
    biases + Σ MLP outputs; with ln_f's scale frozen, ⟨lm_head(ln_f(r)), w⟩ splits over them exactly."""
    from scoreprobe.inside.cache import gpt_inputs
    L = len(net.transformer.h)
    names = ["hook_embed", "hook_pos_embed"] + [f"blocks.{i}.{h}" for i in range(L)
                                                for h in ("attn.hook_z", "hook_attn_out", "hook_mlp_out")]
    fns, kept = keepers(names + [_stream(upto, L)])
    with installed(net, fns, compose=True):
        logits = net(gpt_inputs(net, bits))                                  # (B, T, V)
        if upto < L:                                                         # the logit lens at block upto's input
            logits = net.lm_head(net.transformer.ln_f(kept[_stream(upto, L)]))
    logits = logits.double()
    w = torch.as_tensor(np.asarray(direction), dtype=torch.float64, device=logits.device)
    if w.ndim > 3 or w.shape != logits.shape[3 - w.ndim:] or not torch.isfinite(w).all():
        raise ConfigError(f"a GPT's direction weighs its logits: finite, of shape {tuple(logits.shape)} or a "
                          "trailing part of it")
    w = w.expand_as(logits)
    comps = [("embed", -1, kept["hook_embed"]), ("pos_embed", -1, kept["hook_pos_embed"].expand_as(kept["hook_embed"]))]
    for i, blk in enumerate(net.transformer.h):
        z, W = kept[f"blocks.{i}.attn.hook_z"].double(), blk.attn.c_proj.weight.double()   # (B, h, T, hd), (d, h·hd)
        hd = z.shape[3]
        comps += [(f"blocks.{i}.attn.hook_result[head={h}]", i, z[:, h] @ W[:, h * hd:(h + 1) * hd].T)
                  for h in range(z.shape[1])]
        if blk.attn.c_proj.bias is not None:
            comps.append((f"blocks.{i}.attn.proj_bias", i, blk.attn.c_proj.bias.double().expand_as(comps[0][2])))
        comps.append((f"blocks.{i}.hook_mlp_out", i, kept[f"blocks.{i}.hook_mlp_out"]))
    comps = [c for c in comps if c[1] < upto]
    ln, head = net.transformer.ln_f, net.lm_head.weight.double()
    r = kept[_stream(upto, L)].double()                                      # (B, T, d) the network's own stream
    scale = (r.var(-1, unbiased=False, keepdim=True) + ln.eps).sqrt()
    gamma = ln.weight.double() if ln.weight is not None else 1.0
    project = lambda y: (y @ head.T * w).sum((1, 2))                         # noqa: E731  (B, T, d) -> (B,)
    shares = [project((c.double() - c.double().mean(-1, keepdim=True)) / scale * gamma) for _, _, c in comps]
    bias = project(ln.bias.double().expand_as(r)) if ln.bias is not None else torch.zeros(len(r), dtype=torch.float64)
    return _dataset(comps, shares, torch.zeros_like(bias), bias, (logits * w).sum((1, 2)), _read_at(upto, L))


def _first_channels(net, D, y):
    """(B, T, p·p·C_out) -> the first C channels of its unpatchify, flattened (B, D)."""
    return net.unpatchify(y)[:, :D.image_shape[0]].reshape(len(y), -1)


def _run(D, net, x, sigma, upto):
    names = ["blocks.0.hook_resid_pre", "final.hook_shift", "final.hook_scale", _stream(upto, len(net.blocks))] + [
        f"blocks.{i}.{h}" for i in range(len(net.blocks))
        for h in ("attn.hook_z", "hook_gate_msa", "hook_attn_out", "hook_mlp_out")]
    fns, kept = keepers(sorted(set(names)))
    with torch.no_grad(), installed(net, fns, compose=True):
        out = D(x, sigma)
    return kept, out


def _undefined(arr, skip, bias, total):
    """(B,) bool: samples whose shares do not sum to the network's own output (beyond float rounding), e.g. at a σ
    whose σ² overflows the float32 forward (σ = 1e30: total 0, shares summing to 90), or a non-finite output."""
    parts = np.abs(arr).sum(0) + np.abs(skip) + np.abs(bias)
    gap = np.abs(arr.sum(0) + skip + bias - total)
    with np.errstate(invalid="ignore"):
        return ~(gap <= 1e-4 * parts + 1e-6) | ~np.isfinite(total)


def _dataset(comps, shares, skip, bias, total, read_at):
    arr = torch.stack(shares).cpu().numpy()                                  # (C, B)
    skip, bias, total = skip.cpu().numpy(), bias.cpu().numpy(), total.cpu().numpy()
    bad = _undefined(arr, skip, bias, total)
    if bad.any():
        arr, skip, bias, total = arr.copy(), skip.copy(), bias.copy(), total.copy()
        arr[:, bad] = skip[bad] = bias[bad] = total[bad] = np.nan
        warnings.warn(f"direct_attribution: for {int(bad.sum())} of {len(bad)} samples the shares do not add up to "
                      "the network's output (its float32 forward over- or underflows at this σ, or is not finite): "
                      "left undefined (NaN)", stacklevel=4)
    coords = {"component": [c[0] for c in comps], "layer": ("component", [c[1] for c in comps]),
              "sample": np.arange(arr.shape[1])}
    return xr.Dataset({
        "share": (("component", "sample"), arr, {"long_name": "component's share of ⟨D(x, σ), w⟩"}),
        "skip": ("sample", skip, {"long_name": "c_skip·⟨x, w⟩"}),
        "bias": ("sample", bias, {"long_name": "final layer shift and bias"}),
        "total": ("sample", total, {"long_name": "⟨D(x, σ), w⟩"}),
    }, coords=coords, attrs={"layernorm": "final LayerNorm scale frozen at its value on each input",
                             "read_at": read_at})
