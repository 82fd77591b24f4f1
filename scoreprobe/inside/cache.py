"""run_with_cache: one forward of a scoreprobe network with its activations kept.

    out, cache = run_with_cache(D, x, sigma)                    # out == D(x, sigma) bit for bit
    cache["blocks.0.attn.hook_z"]  # (batch, pos, head, d_head): an ActivationCache (inside/activations.py)
    ds = cache.to_xarray()         # the Dataset form:
    ds["attn_pattern"]             # (sample, layer, head, query, key)
    ds["resid_post"]               # (sample, layer, token, d_model)

Every hook point becomes a variable named after it without `blocks.{i}.`, `hook_` and dots
(`blocks.{i}.attn.hook_z` -> `attn_z`, `final.hook_out` -> `final_out`); per-block hooks are
stacked along `layer`. A GPT is run teacher-forced on bits: x (B, D) 0/1, sigma None, out the
next-token logits (B, T, V) as `GPT.log_prob` computes them.
"""
import numpy as np
import torch

from scoreprobe.errors import ConfigError, DataError
from scoreprobe.limits import MAX_CACHE_BYTES, MAX_SAMPLES, check_int
from scoreprobe.inside.activations import ActivationCache
from scoreprobe.inside.hooks import hook_points, installed, network_of, select


def gpt_inputs(net, bits):
    """bits (B, D) 0/1 -> (B, T) long: BOS then the first T−1 tokens (what log_prob feeds the GPT)."""
    tokens = net.bits_to_tokens(torch.as_tensor(bits))                       # (B, T)
    bos = torch.full_like(tokens[:, :1], net.bos)
    return torch.cat([bos, tokens[:, :-1]], dim=1).to(net.lm_head.weight.device)


def forward(D, net, kind, x, sigma):
    """The network's output for one batch: D(x, sigma) (B, D) for a DiT denoiser, logits for a GPT."""
    if kind == "gpt":
        if sigma is not None:
            raise ConfigError("a GPT has no noise level: pass sigma=None")
        return net(gpt_inputs(net, x))                                       # (B, T, V)
    check_sigma(sigma, len(x))
    if D is net:
        raise ConfigError("pass the denoiser (series.denoiser(step), load_checkpoint(...)), not the bare DiT: "
                          "its preconditioning is part of the output")
    return D(x, sigma)


def check_sigma(sigma, n):
    """A DiT's σ: a real number or n of them (a tensor, array or list); ConfigError otherwise (NaN passes: the
    output then stays undefined)."""
    if sigma is None:
        raise ConfigError("a DiT denoiser needs sigma (a scalar or one per sample)")
    if isinstance(sigma, (str, bytes, bool)) or getattr(sigma, "dtype", None) in (torch.bool, np.bool_):
        raise ConfigError(f"sigma must be a number or {n} numbers, got {sigma!r}")
    try:
        s = torch.as_tensor(sigma)
    except (TypeError, ValueError, RuntimeError) as e:
        raise ConfigError(f"sigma must be a number or {n} numbers, got {type(sigma).__name__}") from e
    if not (s.is_floating_point() or s.dtype in (torch.int32, torch.int64)) or s.ndim > 1 or s.numel() not in (1, n):
        raise ConfigError(f"sigma must be a number or {n} numbers (one per row of x), got {s.dtype} "
                          f"{tuple(s.shape)}")


def check_input(D, kind, x):
    """x as a tensor (B, D) on the model's device, B >= 1; DataError for a wrong shape or an empty batch."""
    if isinstance(x, (str, bytes)):
        raise DataError(f"x must be a (B, D) array or tensor, got {type(x).__name__}")
    try:
        x = torch.as_tensor(x)
    except (TypeError, ValueError, RuntimeError) as e:
        raise DataError(f"x must be a (B, D) numeric array or tensor, got {type(x).__name__}") from e
    dim = D.n_bits if kind == "gpt" else getattr(D, "dim", None)
    if x.ndim != 2 or (dim is not None and x.shape[1] != dim):
        raise DataError(f"expected x of shape (B, {dim}), got {tuple(x.shape)}")
    if len(x) == 0:
        raise DataError("x has no rows (an empty batch): pass at least one")
    device = next(D.parameters()).device
    return x.to(device) if kind == "gpt" else x.to(device, torch.float32 if not x.is_floating_point() else x.dtype)


def run_with_cache(D, x, sigma=None, names=None, return_type="cache", dtype=None, device=None):
    """Run D once and keep the activations at the chosen hook points.

    Parameters
    ----------
    D : a scoreprobe denoiser wrapping a DiT (series.denoiser(step), load_checkpoint(...)) or a GPT.
    x : (B, D) inputs: noisy signed images for a DiT; 0/1 bits for a GPT.
    sigma : scalar or (B,) noise levels (DiT); None for a GPT.
    names : which hook points (None: all): names, fnmatch patterns or a predicate (inside.hooks.select).
    return_type : "cache" (below), "dataset" (the cache's `to_xarray()` form) or "dict": {hook name: tensor} in
        the network's own layout (B, *dims), e.g. `hook_z` (B, head, token, d_head). The cache and the dict keep
        `dtype` (default float32) on `device` (default: where it was computed): nothing stacked or copied to
        numpy, so a GPU cache can stay on the GPU and a float16 one takes half the memory.

    Returns
    -------
    out : torch.Tensor, D(x, sigma) bit for bit (the hooks only read), or the GPT's logits (B, T, V).
    cache : an ActivationCache (scoreprobe/inside/activations.py): `cache["blocks.0.attn.hook_z"]` (batch, pos,
        head, d_head) as TransformerLens, `cache["pattern", 0]`, `stack_head_results`, `decompose_resid`,
        `accumulated_resid`, `readout`, and `to_xarray()`: one variable per hook kind, dims `sample`, `layer`
        (per-block hooks) and the hook's own (`token`, `d_model`, `head`, `query`, `key`, `d_head`, `d_mlp`,
        `d_out`, `d_vocab`); attrs `kind`, `hooks` (JSON list of the hook names kept), coord `sigma` (DiT). What a
        Dataset answers (`cache.attn_pattern`, `cache["attn_z"]`) the cache answers through that form.
    """
    net, kind = network_of(D)
    x = check_input(D, kind, x)
    if kind == "dit":
        check_sigma(sigma, len(x))
    points = hook_points(net)
    chosen = select(points, names)
    if return_type not in ("cache", "dataset", "dict"):
        raise ConfigError(f"return_type must be 'cache', 'dataset' or 'dict', got {return_type!r}")
    dtype = torch.float32 if dtype is None else dtype
    if dtype not in (torch.float32, torch.float16, torch.bfloat16, torch.float64) or (
            return_type == "dataset" and dtype == torch.bfloat16):
        raise ConfigError(f"dtype must be a torch float type (bfloat16 not with return_type='dataset'), got {dtype!r}")
    check_cache_size(D, net, kind, x, sigma, chosen)
    kept = {}

    def keep(name):
        def fn(a):
            kept[name] = a.detach().to(dtype=dtype, device=device if device is not None else a.device, copy=True)
            return a
        return fn

    with torch.no_grad(), installed(net, {n: keep(n) for n in chosen}, compose=True):   # inside sp.hooks too
        out = forward(D, net, kind, x, sigma)
    if return_type == "dict":
        return out, kept
    s = None if kind == "gpt" else torch.as_tensor(sigma, dtype=torch.float64).reshape(-1).expand(len(x)).cpu()
    cache = ActivationCache(kept, D, net, kind, x, s, points, chosen)
    return out, (cache.to_xarray() if return_type == "dataset" else cache)


def check_cache_size(D, net, kind, x, sigma, chosen):
    """Refuse, before the batch runs, a cache of `chosen` hooks over the rows of x larger than MAX_CACHE_BYTES:
    the bytes of one row are measured on a one-row forward and multiplied by the row count."""
    n = len(x)
    check_int(n, "the batch (rows of x)", 1, MAX_SAMPLES)
    if n == 1:
        return
    one = {}

    def size(name):
        def fn(a):
            one[name] = a[:1].numel() * 4          # the cache keeps float32
            return a
        return fn
    s1 = sigma if sigma is None or torch.as_tensor(sigma).numel() == 1 else torch.as_tensor(sigma).reshape(-1)[:1]
    with torch.no_grad(), installed(net, {c: size(c) for c in chosen}, compose=True):
        forward(D, net, kind, x[:1], s1)
    total = sum(one.values()) * n
    if total > MAX_CACHE_BYTES:
        raise ConfigError(f"caching {len(chosen)} hook points over {n} rows would take {total / 2**30:.1f} GiB, over "
                          f"the {MAX_CACHE_BYTES >> 30} GiB limit (scoreprobe.limits): pass fewer names= or fewer rows")
