"""Diffusion Transformer (DiT) for small (C, H, W) binary images.

Parameter names and semantics follow facebookresearch/DiT `models.py`, so a state_dict written by that
code loads here with `strict=True`: `x_embedder.proj`, `pos_embed`, `t_embedder.mlp.0/2`,
`y_embedder.embedding_table`, `blocks.{i}.attn.qkv|proj`, `blocks.{i}.mlp.fc1|fc2`,
`blocks.{i}.adaLN_modulation.1`, `final_layer.linear|adaLN_modulation.1`. The label table row added to
the timestep embedding is row 0 unless `forward` is given rows `y` (class-conditional and
classifier-free-guidance models: the null row is the last one). Two options exist only to reproduce
diffusers' DiTTransformer2DModel: `time_freq_shift` (its timestep frequencies use half − 1) and
`mlp_norm_eps` (its second LayerNorm uses the config's norm_eps). Written from the published facts of
that architecture; no code was copied.
"""
import math

import numpy as np
import torch
import torch.nn as nn

from scoreprobe.models.hookpoint import HookedLayerNorm, HookPoint, attend, fast_lookup, per_head_result


def modulate(x, shift, scale):
    """adaLN modulation: x (B, T, D), shift/scale (B, D)."""
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


#################################################################################
#               Embedding layers for timesteps, labels and patches               #
#################################################################################

def timestep_embedding(t, dim, max_period=10000, freq_shift=0):
    """Sinusoidal embedding of scalar times t (B,) -> (B, dim): cos half, then sin half.

    Frequencies exp(−ln(max_period)·i/(half − freq_shift)), i = 0..half−1 (DiT: freq_shift 0).
    """
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32, device=t.device)
                      / (half - freq_shift))
    args = t[:, None].float() * freqs[None]                         # (B, half)
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)     # (B, 2*half)
    if dim % 2:
        emb = torch.cat([emb, torch.zeros_like(emb[:, :1])], dim=-1)
    return emb


class TimestepEmbedder(nn.Module):
    """Scalar time -> vector: sinusoidal frequencies followed by a 2-layer SiLU MLP."""

    def __init__(self, hidden_size, frequency_embedding_size=256, freq_shift=0):
        super().__init__()
        self.frequency_embedding_size = frequency_embedding_size
        self.freq_shift = freq_shift
        self.mlp = nn.Sequential(
            nn.Linear(frequency_embedding_size, hidden_size, bias=True),
            nn.SiLU(),
            nn.Linear(hidden_size, hidden_size, bias=True),
        )

    def forward(self, t):
        emb = timestep_embedding(t, self.frequency_embedding_size, freq_shift=self.freq_shift)
        return self.mlp(emb)                                                # (B, D)


class LabelEmbedder(nn.Module):
    """Label table; an unconditional model keeps one row, added to every timestep embedding."""

    def __init__(self, num_rows, hidden_size):
        super().__init__()
        self.embedding_table = nn.Embedding(num_rows, hidden_size)

    def forward(self, batch_size, rows=None):
        """rows: (B,) long row indices, or None for row 0 -> (B, D)."""
        if rows is None:
            return self.embedding_table.weight[0].expand(batch_size, -1)   # (B, D)
        return self.embedding_table(rows)                                   # (B, D)


def patch_hw(patch_size):
    """(ph, pw) of a patch size: an int p (a square p x p patch) or a pair (ph, pw) (ph rows, pw columns)."""
    if isinstance(patch_size, (list, tuple)):
        ph, pw = patch_size
        return int(ph), int(pw)
    return int(patch_size), int(patch_size)


class PatchEmbed(nn.Module):
    """(B, C, H, W) -> (B, T, D) by a conv with kernel = stride = patch size (int p, or (ph, pw))."""

    def __init__(self, patch_size, in_channels, hidden_size):
        super().__init__()
        self.proj = nn.Conv2d(in_channels, hidden_size, kernel_size=patch_size, stride=patch_size, bias=True)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)                     # (B, T, D)


def sincos_1d(embed_dim, pos):
    """Fixed 1D sin-cos embedding of positions pos (M,) -> (M, embed_dim): sin half, then cos half."""
    omega = 1.0 / 10000 ** (np.arange(embed_dim // 2, dtype=np.float64) / (embed_dim / 2.0))
    out = np.einsum("m,d->md", pos.reshape(-1).astype(np.float64), omega)  # (M, D/2)
    return np.concatenate([np.sin(out), np.cos(out)], axis=1)


def sincos_2d(embed_dim, grid_h, grid_w):
    """Fixed 2D sin-cos positions for a (grid_h, grid_w) token grid -> (grid_h*grid_w, embed_dim).

    As in DiT, the first half of the channels encodes the column index and the second half the row
    index (DiT builds `meshgrid(w, h)` and embeds `grid[0]` first).
    """
    cols, rows = np.meshgrid(np.arange(grid_w, dtype=np.float64), np.arange(grid_h, dtype=np.float64))
    return np.concatenate([sincos_1d(embed_dim // 2, cols), sincos_1d(embed_dim // 2, rows)], axis=1)


#################################################################################
#                                 Core DiT model                                 #
#################################################################################

class Attention(nn.Module):
    """Multi-head self-attention with a fused qkv projection (qkv bias on)."""

    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)
        self.hook_q, self.hook_k, self.hook_v = (HookPoint("head", "token", "d_head") for _ in range(3))
        self.hook_attn_scores = HookPoint("head", "query", "key")          # before the softmax
        self.hook_pattern = HookPoint("head", "query", "key")
        self.hook_z = HookPoint("head", "token", "d_head")
        self.hook_result = HookPoint("head", "token", "d_model")           # per head, after W_O

    def forward(self, x):
        B, T, D = x.shape
        qkv = self.qkv(x).reshape(B, T, 3, self.num_heads, D // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = self.hook_q(qkv[0]), self.hook_k(qkv[1]), self.hook_v(qkv[2])   # (B, heads, T, hd)
        out = self.hook_z(attend(q, k, v, self.hook_pattern, hook_scores=self.hook_attn_scores))   # (B, heads, T, hd)
        return per_head_result(out, self.proj, self.hook_result)          # (B, T, D)


class Mlp(nn.Module):
    """Two linear layers with tanh-approximated GELU."""

    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU(approximate="tanh")
        self.fc2 = nn.Linear(hidden, dim)
        self.hook_pre, self.hook_post = HookPoint("token", "d_mlp"), HookPoint("token", "d_mlp")

    def forward(self, x):
        return self.fc2(self.hook_post(self.act(self.hook_pre(self.fc1(x)))))


class GluMlp(nn.Module):
    """Multiplicative MLP (GEGLU): fc2(GELU(a) * b) with [a, b] = fc1(x), so one layer can form
    products of two projections of its input. `hidden` is chosen by `glu_hidden` to keep the
    parameter count of the plain Mlp it replaces."""

    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, 2 * hidden)
        self.act = nn.GELU(approximate="tanh")
        self.fc2 = nn.Linear(hidden, dim)
        self.hook_pre, self.hook_pre_linear, self.hook_post = (HookPoint("token", "d_mlp") for _ in range(3))

    def forward(self, x):
        a, b = self.fc1(x).chunk(2, dim=-1)                               # (B, T, hidden) each
        return self.fc2(self.hook_post(self.act(self.hook_pre(a)) * self.hook_pre_linear(b)))


def glu_hidden(dim, mlp_hidden):
    """Width h of a GluMlp with the parameters of an Mlp(dim, mlp_hidden): 3·dim·h + 2h + dim ≈ 2·dim·m + m + dim."""
    return max(1, round((2 * dim * mlp_hidden + mlp_hidden) / (3 * dim + 2)))


ADALN = ("shift_msa", "scale_msa", "gate_msa", "shift_mlp", "scale_mlp", "gate_mlp")


class DiTBlock(nn.Module):
    """Transformer block with adaptive LayerNorm-Zero conditioning.

    mlp: "gelu" (the DiT MLP) or "glu" (GluMlp, same parameter count). broadcast: the last token is a
    global register whose state is added, through a zero-initialised linear map, to every token at
    the end of the block (off: no extra module, today's block exactly)."""

    def __init__(self, hidden_size, num_heads, mlp_ratio=4.0, mlp_norm_eps=1e-6, mlp="gelu", broadcast=False):
        super().__init__()
        self.norm1 = HookedLayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(hidden_size, num_heads)
        self.norm2 = HookedLayerNorm(hidden_size, elementwise_affine=False, eps=mlp_norm_eps)
        m = int(hidden_size * mlp_ratio)
        self.mlp = GluMlp(hidden_size, glu_hidden(hidden_size, m)) if mlp == "glu" else Mlp(hidden_size, m)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden_size, 6 * hidden_size, bias=True))
        self.broadcast = nn.Linear(hidden_size, hidden_size) if broadcast else None
        for name in ("resid_pre", "attn_out", "resid_mid", "mlp_out", "resid_post"):
            setattr(self, f"hook_{name}", HookPoint("token", "d_model"))
        for name in ADALN:
            setattr(self, f"hook_{name}", HookPoint("d_model"))
        self._adaln_hooks = tuple(getattr(self, f"hook_{name}") for name in ADALN)   # forward order, no lookups

    def forward(self, x, c):
        """x (B, T, D) residual stream, c (B, D) conditioning -> (B, T, D). hook_attn_out and
        hook_mlp_out are the gated sub-block outputs added to the stream."""
        mods = self.adaLN_modulation(c).chunk(6, dim=1)                    # 6 x (B, D)
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = [
            hook(m) for hook, m in zip(self._adaln_hooks, mods)]
        x = self.hook_resid_pre(x)
        x = x + self.hook_attn_out(gate_msa.unsqueeze(1) * self.attn(modulate(self.norm1(x), shift_msa, scale_msa)))
        x = self.hook_resid_mid(x)
        x = x + self.hook_mlp_out(gate_mlp.unsqueeze(1) * self.mlp(modulate(self.norm2(x), shift_mlp, scale_mlp)))
        if self.broadcast is not None:
            x = x + self.broadcast(x[:, -1:])                             # the register's state, to every token
        return self.hook_resid_post(x)                                    # (B, T, D)


class FinalLayer(nn.Module):
    """adaLN-modulated LayerNorm then a linear map to ph*pw*C_out values per token."""

    def __init__(self, hidden_size, patch_size, out_channels):
        super().__init__()
        ph, pw = patch_hw(patch_size)
        self.norm_final = HookedLayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.linear = nn.Linear(hidden_size, ph * pw * out_channels, bias=True)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden_size, 2 * hidden_size, bias=True))
        self.hook_shift, self.hook_scale = HookPoint("d_model"), HookPoint("d_model")
        self.hook_out = HookPoint("token", "d_out")

    def forward(self, x, c):
        shift, scale = self.adaLN_modulation(c).chunk(2, dim=1)
        x = modulate(self.norm_final(x), self.hook_shift(shift), self.hook_scale(scale))
        return self.hook_out(self.linear(x))                               # (B, T, p*p*C_out)


class DiT(nn.Module):
    """Unconditional DiT on (C, H, W) images; H and W must be multiples of the patch size.

    forward(x (B, C, H, W), t (B,), y=None) -> (B, C_out, H, W) with C_out = 2C when learn_sigma else C;
    y: (B,) label-table rows (None: row 0).

    patch_size: an int p (square p x p patches, DiT's own; every model before non-square patches existed)
    or a pair (ph, pw): patches of ph rows and pw columns, tokens in raster order over the
    (H / ph, W / pw) grid (e.g. (1, 4) on a 4x4 grid: one token per image row). A square patch is
    symmetric under transposing the image (with its patch kernels transposed, the halves of its hidden
    channels swapped and its output patch positions swapped, a network processes the transposed image
    exactly as the first processes the image; tests/test_dit_patch_shape.py); a non-square one is not
    (a token holds part of a row, never of a column).
    """

    def __init__(self, input_size=(6, 6), patch_size=2, in_channels=1, hidden_size=64, depth=4,
                 num_heads=4, mlp_ratio=4.0, learn_sigma=False, num_label_rows=1, time_freq_shift=0,
                 mlp_norm_eps=1e-6, mlp="gelu", global_token=False):
        super().__init__()
        H, W = (input_size, input_size) if isinstance(input_size, int) else tuple(input_size)
        ph, pw = patch_hw(patch_size)
        if H % ph or W % pw:
            raise ValueError(f"image {H}x{W} is not divisible by patch size {patch_size}")
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size {hidden_size} is not divisible by num_heads {num_heads}")
        patch_size = patch_size if not isinstance(patch_size, (list, tuple)) else (ph, pw)
        self.input_size, self.patch_size, self.in_channels = (H, W), patch_size, in_channels
        self.patch_shape = (ph, pw)
        self.out_channels = in_channels * 2 if learn_sigma else in_channels
        self.learn_sigma, self.num_heads = learn_sigma, num_heads
        self.grid = (H // ph, W // pw)
        self.x_embedder = PatchEmbed(patch_size, in_channels, hidden_size)
        self.t_embedder = TimestepEmbedder(hidden_size, freq_shift=time_freq_shift)
        self.y_embedder = LabelEmbedder(num_label_rows, hidden_size)
        n_tokens = self.grid[0] * self.grid[1]
        self.pos_embed = nn.Parameter(torch.zeros(1, n_tokens, hidden_size), requires_grad=False)
        if mlp not in ("gelu", "glu"):
            raise ValueError(f"mlp must be 'gelu' or 'glu', got {mlp!r}")
        self.blocks = nn.ModuleList([DiTBlock(hidden_size, num_heads, mlp_ratio, mlp_norm_eps, mlp, bool(global_token))
                                     for _ in range(depth)])
        self.final_layer = FinalLayer(hidden_size, patch_size, self.out_channels)
        self.hook_embed, self.hook_cond = HookPoint("token", "d_model"), HookPoint("d_model")
        self.initialize_weights()
        # a learned global register token appended after the image tokens (off: no parameter at all)
        self.register = nn.Parameter(0.02 * torch.randn(1, 1, hidden_size)) if global_token else None
        fast_lookup(self)

    def initialize_weights(self):
        """Xavier linears, fixed sin-cos positions, zero adaLN gates and output (adaLN-Zero)."""
        def _basic_init(module):
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)
        self.apply(_basic_init)
        pos = sincos_2d(self.pos_embed.shape[-1], *self.grid)
        self.pos_embed.data.copy_(torch.from_numpy(pos).float().unsqueeze(0))
        w = self.x_embedder.proj.weight.data
        nn.init.xavier_uniform_(w.view(w.shape[0], -1))
        nn.init.zeros_(self.x_embedder.proj.bias)
        nn.init.normal_(self.y_embedder.embedding_table.weight, std=0.02)
        nn.init.normal_(self.t_embedder.mlp[0].weight, std=0.02)
        nn.init.normal_(self.t_embedder.mlp[2].weight, std=0.02)
        for block in self.blocks:
            nn.init.zeros_(block.adaLN_modulation[-1].weight)
            nn.init.zeros_(block.adaLN_modulation[-1].bias)
            if block.broadcast is not None:   # zero: a new register starts as a no-op
                nn.init.zeros_(block.broadcast.weight)
                nn.init.zeros_(block.broadcast.bias)
        for layer in (self.final_layer.adaLN_modulation[-1], self.final_layer.linear):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    def unpatchify(self, x):
        """(B, T, ph*pw*C_out) -> (B, C_out, H, W); per-token values are ordered (p, q, c): patch row p,
        patch column q, channel c."""
        B, (ph, pw), c = x.shape[0], self.patch_shape, self.out_channels
        h, w = self.grid
        x = x.reshape(B, h, w, ph, pw, c)
        x = torch.einsum("nhwpqc->nchpwq", x)
        return x.reshape(B, c, h * ph, w * pw)

    def forward(self, x, t, y=None):
        x = self.hook_embed(self.x_embedder(x)) + self.pos_embed   # (B, T, D), T = H*W / (ph*pw)
        c = self.hook_cond(self.t_embedder(t) + self.y_embedder(x.shape[0], y))   # (B, D)
        if self.register is not None:
            x = torch.cat([x, self.register.expand(x.shape[0], -1, -1)], dim=1)   # (B, T+1, D)
        for block in self.blocks:
            x = block(x, c)                                      # (B, T[+1], D)
        if self.register is not None:
            x = x[:, :-1]                                        # (B, T, D): the register is not an output
        x = self.final_layer(x, c)                               # (B, T, p*p*C_out)
        return self.unpatchify(x)                                # (B, C_out, H, W)


#################################################################################
#                                  DiT configs                                   #
#################################################################################

DIT_SIZES = {
    "tiny": dict(hidden_size=64, depth=4, num_heads=4),
    "small": dict(hidden_size=128, depth=6, num_heads=4),
    "base": dict(hidden_size=256, depth=8, num_heads=8),
}


def DiT_tiny(**kw):
    return DiT(**{**DIT_SIZES["tiny"], **kw})


def DiT_small(**kw):
    return DiT(**{**DIT_SIZES["small"], **kw})


def DiT_base(**kw):
    return DiT(**{**DIT_SIZES["base"], **kw})


DiT_models = {"tiny": DiT_tiny, "small": DiT_small, "base": DiT_base}


def dit_from_config(arch):
    """Build a DiT from a JSON-able dict (keys as in DiT.__init__ plus an optional `size` preset)."""
    arch = dict(arch)
    size = arch.pop("size", None)
    base = dict(DIT_SIZES[size]) if size else {}
    base.update({k: v for k, v in arch.items() if v is not None})
    return DiT(**base)
