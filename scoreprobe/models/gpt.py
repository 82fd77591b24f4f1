"""A small causal transformer (nanoGPT style) over the bits of a binary image.

Plain binary images are read as one token per bit (vocab 2). One-hot images of n-symbol puzzles
(LatinSquare, Sudoku: C = n channels, bit c*n*n + row*n + col) are read as one token per cell
(vocab n). The pixels are read in the architecture's token order (`token_order`: raster, patch or
random; scoreprobe.models.order): bit tokens channel by channel, each channel in that pixel order.
Bits in and samples out are always in image (C, H, W) order. A start token BOS = vocab_size opens
every sequence, so

    log p(bits) = Σ_t log softmax(f(BOS, x_1..x_{t-1}))[x_t].

`GPT.loss(bits)` is the per-sample mean cross-entropy (nats per token); `GPT.sample(n, seed)` draws
ancestral samples whose row i depends only on (seed, i), whatever the batch or chunk size.
"""
import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from scoreprobe.errors import ConfigError, DataError
from scoreprobe.models.hooked import HookedModel
from scoreprobe.models.hookpoint import HookedLayerNorm, HookPoint, attend, fast_lookup, per_head_result
from scoreprobe.models.order import check_pixel_order, check_token_order, pixel_order

PUZZLE_RULES = ("latin", "sudoku")


@dataclass
class GPTConfig:
    image_shape: tuple = (1, 6, 6)   # (C, H, W) of the images
    tokens: str = "bits"             # "bits": a token per bit; "cells": a token per one-hot cell
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 64
    mlp_ratio: float = 4.0
    token_order: str = "raster"      # name of the pixel order (models.order.TOKEN_ORDERS)
    token_perm: tuple = None         # (H*W,) pixel read at each token; None = raster (identity)

    @property
    def vocab_size(self):
        return 2 if self.tokens == "bits" else self.image_shape[0]

    @property
    def n_tokens(self):
        C, H, W = self.image_shape
        return C * H * W if self.tokens == "bits" else H * W

    def validate(self):
        if self.tokens not in ("bits", "cells"):
            raise ConfigError(f"GPT tokens must be 'bits' or 'cells', got {self.tokens!r}")
        if len(self.image_shape) != 3 or min(self.image_shape) < 1:
            raise ConfigError(f"image_shape must be (C, H, W) positive, got {self.image_shape}")
        if self.tokens == "cells" and self.image_shape[0] < 2:
            raise ConfigError("cell tokens need C >= 2 one-hot channels")
        if self.n_embd % self.n_head:
            raise ConfigError(f"n_embd {self.n_embd} is not divisible by n_head {self.n_head}")
        check_token_order(self.token_order, self.token_perm, self.image_shape[1] * self.image_shape[2])

    def token_index(self):
        """(n_tokens,) int64: the bit (or cell) index, in image order, that token t reads."""
        C, H, W = self.image_shape
        perm = np.arange(H * W) if self.token_perm is None else np.asarray(self.token_perm, dtype=np.int64)
        if self.tokens == "cells":
            return perm                                                      # (H*W,)
        return (np.arange(C)[:, None] * H * W + perm[None, :]).reshape(-1)   # (C*H*W,) channel-major


GPT_SIZES = {
    "tiny": dict(n_layer=4, n_head=4, n_embd=64),
    "small": dict(n_layer=6, n_head=4, n_embd=128),
    "base": dict(n_layer=8, n_head=8, n_embd=256),
}


def gpt_arch(cfg, rule):
    """JSON-able architecture dict for a train.TrainConfig (size preset + overrides) and its rule."""
    preset = GPT_SIZES.get(cfg.size)
    if preset is None:
        raise ConfigError(f"unknown GPT size {cfg.size!r}; choose from {sorted(GPT_SIZES)}")
    over = {"n_embd": cfg.hidden_size, "n_layer": cfg.depth, "n_head": cfg.num_heads}
    net = {**preset, **{k: v for k, v in over.items() if v is not None}}
    tokens = "cells" if rule.name in PUZZLE_RULES else "bits"
    order = getattr(cfg, "token_order", "raster")
    perm = None if order == "raster" else pixel_order(order, rule.image_shape[1:], cfg.patch_size).tolist()
    arch = dataclasses.asdict(GPTConfig(image_shape=tuple(rule.image_shape), tokens=tokens, token_order=order,
                                        token_perm=perm, **net))
    arch["image_shape"] = list(arch["image_shape"])
    if perm is None:
        del arch["token_perm"]
    return arch


def build_gpt(arch):
    """GPT from an architecture dict (as gpt_arch returns). ConfigError on unknown keys. Dicts written
    before token orders existed (no `token_order`) read raster order, which is what they were trained on."""
    names = {f.name for f in dataclasses.fields(GPTConfig)}
    unknown = set(arch) - names
    if unknown:
        raise ConfigError(f"unknown GPT settings {sorted(unknown)}; expected {sorted(names)}")
    shape = tuple(int(s) for s in arch.get("image_shape", (1, 6, 6)))
    perm = arch.get("token_perm")
    perm = None if perm is None else tuple(check_pixel_order(perm, shape[1] * shape[2]).tolist())
    cfg = GPTConfig(**{**arch, "image_shape": shape, "token_perm": perm})
    return GPT(cfg)


# ---------------------------------------------------------------------------------------------
# Transformer
# ---------------------------------------------------------------------------------------------

class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head = cfg.n_head
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.hook_q, self.hook_k, self.hook_v = (HookPoint("head", "token", "d_head") for _ in range(3))
        self.hook_attn_scores = HookPoint("head", "query", "key")          # before the softmax
        self.hook_pattern = HookPoint("head", "query", "key")
        self.hook_z = HookPoint("head", "token", "d_head")
        self.hook_result = HookPoint("head", "token", "d_model")           # per head, after W_O

    def forward(self, x, cache=None):
        """x: (B, T, E). cache: None, or a list holding this layer's past (k, v) (updated in place)."""
        B, T, E = x.shape
        q, k, v = self.c_attn(x).split(E, dim=2)                            # (B, T, E) each
        q, k, v = (t.view(B, T, self.n_head, E // self.n_head).transpose(1, 2) for t in (q, k, v))
        q, k, v = self.hook_q(q), self.hook_k(k), self.hook_v(v)           # (B, h, T, hd)
        if cache is not None and cache:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)   # (B, h, L+T, hd)
        if cache is not None:
            cache[:] = [k, v]
        causal = T > 1 and k.shape[2] == T  # one new token may see every cached one
        if T > 1 and not causal:
            raise ValueError("feed cached sequences one token at a time")
        y = self.hook_z(attend(q, k, v, self.hook_pattern, causal, self.hook_attn_scores))   # (B, heads, T, hd)
        return per_head_result(y, self.c_proj, self.hook_result)            # (B, T, E)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        hidden = int(cfg.mlp_ratio * cfg.n_embd)
        self.c_fc = nn.Linear(cfg.n_embd, hidden)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(hidden, cfg.n_embd)
        self.hook_pre, self.hook_post = HookPoint("token", "d_mlp"), HookPoint("token", "d_mlp")

    def forward(self, x):
        return self.c_proj(self.hook_post(self.gelu(self.hook_pre(self.c_fc(x)))))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = HookedLayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = HookedLayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)
        for name in ("resid_pre", "attn_out", "resid_mid", "mlp_out", "resid_post"):
            setattr(self, f"hook_{name}", HookPoint("token", "d_model"))

    def forward(self, x, cache=None):
        x = self.hook_resid_pre(x)
        x = self.hook_resid_mid(x + self.hook_attn_out(self.attn(self.ln_1(x), cache)))
        return self.hook_resid_post(x + self.hook_mlp_out(self.mlp(self.ln_2(x))))


class GPT(HookedModel, nn.Module):
    """Causal transformer over bit or cell tokens; token id vocab_size is BOS.

    forward(idx (B, t) long, BOS first) -> logits (B, t, vocab_size) of the next token. With a
    `cache` (a list of per-layer lists, filled on the way), idx holds only the new tokens.
    """

    def __init__(self, cfg):
        super().__init__()
        cfg.validate()
        self.config = cfg
        self.vocab_size, self.n_tokens = cfg.vocab_size, cfg.n_tokens
        self.bos = cfg.vocab_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg.vocab_size + 1, cfg.n_embd),
            wpe=nn.Embedding(cfg.n_tokens, cfg.n_embd),
            h=nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)]),
            ln_f=HookedLayerNorm(cfg.n_embd),
        ))
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.hook_embed = HookPoint("token", "d_model")
        self.hook_pos_embed = HookPoint("token", "d_model", batched=False)
        self.hook_out = HookPoint("token", "d_vocab")
        index = cfg.token_index()                                           # (T,) image index of token t
        self._order = None if cfg.token_perm is None else torch.from_numpy(index)
        self._unorder = None if cfg.token_perm is None else torch.from_numpy(np.argsort(index))
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2 scaled init of the residual projections
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))
        fast_lookup(self)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    @property
    def image_shape(self):
        return tuple(self.config.image_shape)

    @property
    def n_bits(self):
        return math.prod(self.config.image_shape)

    def forward(self, idx, cache=None):
        start = cache[0][0].shape[2] if cache and cache[0] else 0          # tokens already cached
        t = idx.shape[1]
        if start + t > self.n_tokens:
            raise DataError(f"sequence of {start + t} tokens is longer than the model's {self.n_tokens}")
        pos = torch.arange(start, start + t, device=idx.device)
        x = self.hook_embed(self.transformer.wte(idx)) + self.hook_pos_embed(self.transformer.wpe(pos))
        for i, block in enumerate(self.transformer.h):
            x = block(x, None if cache is None else cache[i])               # (B, t, E)
        return self.hook_out(self.lm_head(self.transformer.ln_f(x)))        # (B, t, V)

    # ----- tokens <-> bits -------------------------------------------------------------------

    def bits_to_tokens(self, bits):
        """bits: (B, D) 0/1 tensor in image order -> (B, T) long tokens (bits, or cell symbols for one-hot
        images) in the model's token order."""
        bits = torch.as_tensor(bits)
        if bits.ndim != 2 or bits.shape[1] != self.n_bits:
            raise DataError(f"expected bits of shape (B, {self.n_bits}), got {tuple(bits.shape)}")
        bits = bits.long()
        if ((bits != 0) & (bits != 1)).any():
            raise DataError("bits must be 0 or 1")
        if self.config.tokens == "bits":
            return self._reorder(bits, self._order)                         # (B, D)
        C = self.config.image_shape[0]
        onehot = bits.view(len(bits), C, -1)                                # (B, C, H*W)
        if (onehot.sum(dim=1) != 1).any():
            raise DataError("cell tokens need one-hot images: every cell must hold exactly one symbol")
        return self._reorder(onehot.argmax(dim=1), self._order)             # (B, H*W)

    def tokens_to_bits(self, tokens):
        """tokens: (B, T) long in the model's token order -> (B, D) uint8 bits in (C, H, W) order."""
        tokens = self._reorder(tokens, self._unorder)                       # (B, T) image order
        if self.config.tokens == "bits":
            return tokens.to(torch.uint8)
        onehot = F.one_hot(tokens, self.vocab_size)                         # (B, H*W, C)
        return onehot.transpose(1, 2).reshape(len(tokens), -1).to(torch.uint8)

    @staticmethod
    def _reorder(x, index):
        """x (B, T) with its columns taken at `index` (None: unchanged)."""
        return x if index is None else x[:, index.to(x.device)]

    # ----- likelihood ------------------------------------------------------------------------

    def log_prob(self, bits):
        """bits: (B, D) tensor on the model's device -> (B,) log-likelihood in nats."""
        tokens = self.bits_to_tokens(bits).to(self.lm_head.weight.device)   # (B, T)
        bos = torch.full_like(tokens[:, :1], self.bos)
        logits = self(torch.cat([bos, tokens[:, :-1]], dim=1))             # (B, T, V)
        logp = F.log_softmax(logits.float(), dim=-1)
        return logp.gather(2, tokens[:, :, None])[:, :, 0].sum(dim=1)     # (B,)

    def loss(self, bits):
        """bits: (B, D) -> (B,) per-sample mean cross-entropy per token (nats)."""
        return -self.log_prob(bits) / self.n_tokens

    # ----- sampling --------------------------------------------------------------------------

    @torch.no_grad()
    def sample(self, n, seed, temperature=1.0, device=None, chunk_size=None):
        """Ancestral samples -> uint8 numpy (n, D).

        Token t of sample i is the inverse-CDF draw of softmax(logits / temperature) at a uniform
        number that depends only on (seed, i, t), so rows do not depend on n, batch or chunk size.
        temperature = 0 takes the most likely token (greedy).

        Parameters
        ----------
        n : number of samples; seed : int, the random stream (per sample index).
        temperature : float >= 0, divides the logits.
        device : where to run (the model is moved there); default the model's device.
        chunk_size : rows per batch (memory bound); None = all at once. Results do not depend on it.
        """
        n = int(n)
        if n < 0 or temperature < 0 or not math.isfinite(temperature):
            raise ConfigError(f"need n >= 0 and a finite temperature >= 0, got n={n}, temperature={temperature}")
        if chunk_size is not None and int(chunk_size) < 1:
            raise ConfigError(f"chunk_size must be a positive integer or None, got {chunk_size!r}")
        device = torch.device(device) if device is not None else self.lm_head.weight.device
        was_training = self.training
        self.eval().to(device)
        step = n if chunk_size is None else int(chunk_size)
        out = [self._sample_chunk(np.arange(i, min(i + step, n)), seed, temperature, device)
               for i in range(0, n, max(step, 1))]
        self.train(was_training)
        return np.concatenate(out) if out else np.zeros((0, self.n_bits), np.uint8)

    def _sample_chunk(self, index, seed, temperature, device):
        u = torch.from_numpy(per_sample_uniform(seed, index, self.n_tokens)).to(device)   # (M, T)
        tok = torch.full((len(index),), self.bos, dtype=torch.long, device=device)       # (M,)
        cache = [[] for _ in self.transformer.h]
        out = []
        for t in range(self.n_tokens):
            logits = self(tok[:, None], cache)[:, -1].double()             # (M, V)
            if temperature == 0:
                tok = logits.argmax(dim=1)
            else:
                cdf = F.softmax(logits / temperature, dim=1).cumsum(dim=1)  # (M, V)
                tok = (u[:, t:t + 1] >= cdf[:, :-1]).sum(dim=1)             # inverse CDF
            out.append(tok)
        return self.tokens_to_bits(torch.stack(out, dim=1)).cpu().numpy()  # (M, D)


def per_sample_uniform(seed, index, d):
    """Uniform [0, 1) numbers (len(index), d) float64; row i depends only on (seed, index[i])."""
    out = np.empty((len(index), d))
    for row, i in enumerate(np.asarray(index).tolist()):
        out[row] = np.random.default_rng([int(seed) & 0xFFFFFFFFFFFFFFFF, int(i)]).random(d)
    return out
