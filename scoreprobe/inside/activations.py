"""ActivationCache: what `run_with_cache` returns by default, with TransformerLens's habits.

    out, cache = sp.run_with_cache(D, x, sigma)
    cache["blocks.0.attn.hook_z"]        # (batch, pos, head, d_head), TransformerLens's layout (a torch tensor)
    cache["pattern", 0]                  # shorthand: blocks.0.attn.hook_pattern (batch, head, query, key)
    cache["resid_post", -1]              # the last block's
    ds = cache.to_xarray()               # the Dataset form (dims sample, layer, token, head, ...)
    heads, labels = cache.stack_head_results(return_labels=True)   # (component, batch, pos, d_model)
    lens = cache.readout(cache.accumulated_resid())                # D(x, σ) read from every layer (logit lens)

Per-head activations (`hook_q`, `hook_k`, `hook_v`, `hook_z`, `hook_result`) are kept as the network computes
them, (batch, head, pos, ·), and `cache[name]` hands them out as TransformerLens does, (batch, pos, head, ·);
`return_type="dict"` keeps the network's own layout. A name without a layer ("embed", "cond", "out") is a hook
name's shorthand, as in TransformerLens. Anything else a Dataset answers (`cache.attn_pattern`, `cache["attn_z"]`,
`cache.embed`, `cache.sizes`, `cache.sel(...)`) still works: it is answered by `to_xarray()`.
"""
import json
import re
from collections.abc import Mapping

import numpy as np
import torch
import xarray as xr

from scoreprobe.errors import ConfigError
from scoreprobe.inside import resid
from scoreprobe.inside.hooks import split_name

_PER_HEAD = re.compile(r"attn\.hook_(q|k|v|z|result)$")
_ATTN = ("q", "k", "v", "z", "pattern", "attn_scores", "result")
_MLP = ("pre", "post", "pre_linear")
_ALIASES = {"attn": "pattern", "attn_logits": "attn_scores", "mlp_pre": "pre", "mlp_post": "post",
            "mlp_pre_linear": "pre_linear"}


def act_name(name, layer=None, layer_type=None, depth=None, kind="dit"):
    """TransformerLens's shorthand -> a hook name: ("pattern", 0) -> 'blocks.0.attn.hook_pattern', ("resid_pre", 2),
    ("scale", 1, "ln1"), ("embed",), ("out",) -> 'final.hook_out'. A negative layer counts from the end."""
    if not isinstance(name, str):
        raise ConfigError(f"a cache key is a hook name or (name, layer[, layer type]), got {name!r}")
    name = _ALIASES.get(name, name)
    if layer is None:
        return "final.hook_out" if name == "out" else f"hook_{name}"
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
        raise ConfigError(f"a layer is an int, got {layer!r}")
    layer = int(layer) + (depth if layer < 0 and depth else 0)
    if name in _ATTN:
        return f"blocks.{layer}.attn.hook_{name}"
    if name in _MLP:
        return f"blocks.{layer}.mlp.hook_{name}"
    if name == "scale":
        norms = {"ln1": "norm1", "ln2": "norm2"} if kind == "dit" else {"ln1": "ln_1", "ln2": "ln_2"}
        if layer_type not in norms:
            raise ConfigError("('scale', layer, layer_type) needs layer_type 'ln1' or 'ln2'")
        return f"blocks.{layer}.{norms[layer_type]}.hook_scale"
    return f"blocks.{layer}.hook_{name}"


class ActivationCache(Mapping):
    """{hook name: activation} of one forward, with the inputs that made it (module docstring).

    acts: {name: tensor (B, *dims)} in the network's layout; D, net, kind: the model; x: its input (B, D);
    sigma: (B,) float64 tensor (DiT) or None; points: the network's hook points; chosen: the names kept. The inputs are
    `_x`, `_sigma` (`cache.sigma` is the Dataset's coordinate, as before)."""

    def __init__(self, acts, D, net, kind, x, sigma, points, chosen):
        self._acts, self.model, self.net, self.kind = acts, D, net, kind
        self._x, self._sigma, self._points, self._hooks = x, sigma, points, list(chosen)
        self._ds = None

    # -- the mapping: hook names ---------------------------------------------------------------
    def __getitem__(self, key):
        if isinstance(key, tuple):
            key = act_name(*key, depth=self.depth, kind=self.kind)
        elif isinstance(key, str) and key not in self._acts and act_name(key) in self._acts:
            key = act_name(key)                                             # "embed", "out": as TransformerLens
        if isinstance(key, str) and key in self._acts:
            a = self._acts[key]
            return a.transpose(1, 2) if _PER_HEAD.search(key) else a
        if isinstance(key, str) and key in self.to_xarray().data_vars:      # the Dataset's names (before issue 78)
            return self.to_xarray()[key]
        if isinstance(key, str) and key in self._points:
            raise KeyError(f"{key!r} was not cached: pass names= including it to run_with_cache")
        raise KeyError(f"{key!r} is not a hook name of this {self.kind} (names look like 'blocks.0.attn.hook_z')")

    def __iter__(self):
        return iter(self._acts)

    def __len__(self):
        return len(self._acts)

    def __repr__(self):
        return f"ActivationCache({self.kind}, {len(self)} hook points, batch {len(self._x)})"

    @property
    def depth(self):
        return len(self.net.blocks) if self.kind == "dit" else len(self.net.transformer.h)

    def raw(self, name):
        """The activation in the network's own layout (per-head hooks: (batch, head, pos, ·))."""
        if name not in self._acts:
            raise KeyError(f"{name!r} was not cached")
        return self._acts[name]

    # -- the Dataset form ----------------------------------------------------------------------
    def to_xarray(self):
        """The cache as an xarray.Dataset: one variable per hook kind named without `blocks.{i}.`, `hook_` and dots,
        per-block hooks stacked along `layer`; attrs `kind`, `hooks`; coords `sigma` (DiT), `register`."""
        if self._ds is None:
            kept = {n: _numpy(a) for n, a in self._acts.items()}
            ds = to_dataset(kept, self._points, len(self._x))
            if getattr(self.net, "register", None) is not None:
                ds = ds.assign_coords(register=("token", np.arange(ds.sizes["token"]) == ds.sizes["token"] - 1))
            ds.attrs.update(kind=self.kind, hooks=json.dumps(self._hooks))
            if self._sigma is not None:
                ds = ds.assign_coords(sigma=("sample", self._sigma.cpu().numpy(),
                                             {"units": "1", "long_name": "noise level σ"}))
            self._ds = ds
        return self._ds

    def __getattr__(self, name):
        """What a Dataset answers (cache.attn_pattern, cache.sizes, cache.sel): the cache's Dataset form."""
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.to_xarray(), name)

    # -- residual stream tools (scoreprobe/inside/resid.py) -------------------------------------
    def stack_head_results(self, layer=None, pos_slice=None, return_labels=False):
        """Each head's contribution to the residual stream, (component, batch, pos, d_model), heads of blocks < layer
        (None: all); DiT: gated, gate_msa ⊙ z_h W_O,h. Labels 'L{l}H{h}'."""
        return resid.stack_head_results(self, layer, pos_slice, return_labels)

    def decompose_resid(self, layer=None, mode="all", return_labels=False):
        """The additive parts of the stream entering block `layer` (None: leaving the last block), (component,
        batch, pos, d_model): embed, pos_embed, then each block's attn_out and mlp_out (mode "attn"/"mlp": one kind)."""
        return resid.decompose_resid(self, layer, mode, return_labels)

    def accumulated_resid(self, layer=None, incl_mid=False, return_labels=False):
        """The stream entering each block up to `layer` (None: all, then the stream leaving the last), stacked
        (component, batch, pos, d_model); incl_mid: also between attention and MLP."""
        return resid.accumulated_resid(self, layer, incl_mid, return_labels)

    def readout(self, stream):
        """What the output would be if `stream` (…, batch, pos, d_model) entered the final layer (a logit lens): DiT,
        D(x, σ) (…, batch, D) through the final adaLN LayerNorm (this input's shift and scale) and the EDM
        preconditioning c_skip·x + c_out·F; GPT, the logits (…, batch, pos, vocab) through ln_f and lm_head."""
        return resid.readout(self, stream)


def _numpy(a):
    """A cached tensor as numpy, its dtype kept (bfloat16, which numpy lacks, as float32)."""
    a = a.detach().cpu()
    return (a.float() if a.dtype == torch.bfloat16 else a).numpy()


def to_dataset(kept, points, n):
    """{hook name: array (B, ...)} -> Dataset: per-block hooks stacked along `layer`."""
    groups = {}
    for name, arr in kept.items():
        layer, var = split_name(name)
        groups.setdefault(var, []).append((layer, name, arr))
    data = {}
    for var, items in groups.items():
        point = points[items[0][1]]
        dims = ("sample",) * point.batched + point.dims
        if items[0][0] is None:
            data[var] = xr.Variable(dims, items[0][2], {"hook": items[0][1]})
            continue
        items.sort(key=lambda t: t[0])
        arr = np.stack([a for _, _, a in items], axis=1)                     # (B, L, ...)
        pattern = items[0][1].replace(f"blocks.{items[0][0]}.", "blocks.{i}.", 1)
        data[var] = xr.DataArray(arr, dims=("sample", "layer") + dims[1:],
                                 coords={"layer": [layer for layer, _, _ in items]}, attrs={"hook": pattern})
    data = _pad_tokens(data)
    ds = xr.Dataset(data).assign_coords(sample=np.arange(n))
    for dim in ("head", "token", "query", "key"):
        if dim in ds.dims:
            ds = ds.assign_coords({dim: np.arange(ds.sizes[dim])})
    return ds


def _pad_tokens(data):
    """A DiT with a register token has T+1 tokens in the stream but T in `embed` and `final_out`: those
    are padded with NaN at the register's index (the last), so one `token` axis serves all."""
    sizes = {v.sizes["token"] if isinstance(v, xr.DataArray) else v.shape[v.dims.index("token")]
             for v in data.values() if "token" in v.dims}
    if len(sizes) < 2:
        return data
    full = max(sizes)
    out = {}
    for name, v in data.items():
        dims = v.dims
        if "token" in dims and (v.shape[dims.index("token")] < full):
            width = [(0, 0)] * len(dims)
            width[dims.index("token")] = (0, full - v.shape[dims.index("token")])
            arr = np.pad(np.asarray(v.values if isinstance(v, xr.DataArray) else v.data), width,
                         constant_values=np.nan)
            coords = {"layer": v.layer.values} if isinstance(v, xr.DataArray) and "layer" in v.coords else {}
            v = xr.DataArray(arr, dims=dims, coords=coords, attrs=v.attrs)
        out[name] = v
    return out
