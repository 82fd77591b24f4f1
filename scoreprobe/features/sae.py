"""A sparse autoencoder with SAELens's names and conventions (v6): encode, decode, W_enc, W_dec, b_enc, b_dec.

    f = sae.encode(x)          # (n, d_sae) latent activations, >= 0
    x_hat = sae.decode(f)      # (n, d_in)
    sae(x) == sae.decode(sae.encode(x))

Conventions (as SAELens's `SAE` classes): `W_enc` (d_in, d_sae), `W_dec` (d_sae, d_in) with unit-norm rows,
`b_dec` subtracted from the input before the encoder (`apply_b_dec_to_input`), `b_enc` (d_sae,). The
activation by architecture (`arch`):

    standard    relu(h)                                   h = (x − b_dec) W_enc + b_enc (trained with an L1 penalty)
    topk        the k largest entries of h per row, relu'd, the others 0
    batchtopk   training: the k·B largest relu(h) over the batch; inference: relu(h)·[h > threshold] with one
                scalar threshold (the running mean of the smallest activation kept in training, as SAELens)
    jumprelu    h·[h > θ] per latent, θ = `threshold` (d_sae,) > 0 (Rajamanoharan et al. 2024)

The module holds no training state: `scoreprobe.features.train` trains it.
"""
import torch
import torch.nn as nn

from scoreprobe.errors import ConfigError

ARCHS = ("standard", "topk", "batchtopk", "jumprelu")


class SAE(nn.Module):
    """A sparse autoencoder (d_in -> d_sae -> d_in); see the module docstring.

    arch : one of ARCHS; k : active latents per row (topk, batchtopk: mean per row)."""

    def __init__(self, d_in, d_sae, arch="topk", k=None):
        super().__init__()
        if arch not in ARCHS:
            raise ConfigError(f"arch must be one of {', '.join(ARCHS)}, got {arch!r}")
        if arch in ("topk", "batchtopk") and not (isinstance(k, int) and 1 <= k <= d_sae):
            raise ConfigError(f"arch {arch!r} needs an integer k in [1, d_sae = {d_sae}], got {k!r}")
        self.d_in, self.d_sae, self.arch, self.k = int(d_in), int(d_sae), arch, k
        self.W_enc = nn.Parameter(torch.zeros(d_in, d_sae))
        self.b_enc = nn.Parameter(torch.zeros(d_sae))
        self.W_dec = nn.Parameter(torch.zeros(d_sae, d_in))
        self.b_dec = nn.Parameter(torch.zeros(d_in))
        # jumprelu: one θ per latent; batchtopk: one scalar θ for inference (set while training)
        self.register_buffer("threshold", torch.zeros(d_sae if arch == "jumprelu" else 1))

    def extra_repr(self):
        return f"d_in={self.d_in}, d_sae={self.d_sae}, arch={self.arch!r}, k={self.k}"

    def hidden_pre(self, x):
        """x (n, d_in) -> h (n, d_sae): the encoder's pre-activation, b_dec subtracted from the input first."""
        return (x - self.b_dec) @ self.W_enc + self.b_enc

    def activation(self, h, batch=False):
        """h (n, d_sae) -> f (n, d_sae) >= 0. batch=True: BatchTopK's training form (top k·n over the batch)."""
        if self.arch == "standard":
            return torch.relu(h)
        if self.arch == "topk":
            top = torch.topk(h, self.k, dim=-1)
            return torch.zeros_like(h).scatter(-1, top.indices, torch.relu(top.values))
        if self.arch == "batchtopk" and batch:
            flat = torch.relu(h).flatten()
            top = torch.topk(flat, min(self.k * h.shape[0], flat.numel()))
            return torch.zeros_like(flat).scatter(-1, top.indices, top.values).reshape(h.shape)
        return torch.relu(h) * (h > self.threshold)          # jumprelu; batchtopk at inference

    def encode(self, x):
        """x (n, d_in) -> latent activations (n, d_sae), >= 0 (inference form for every arch)."""
        return self.activation(self.hidden_pre(x))

    def decode(self, f):
        """f (n, d_sae) -> x_hat (n, d_in) = f W_dec + b_dec."""
        return f @ self.W_dec + self.b_dec

    def forward(self, x):
        return self.decode(self.encode(x))

    @torch.no_grad()
    def normalize_decoder(self):
        """Rescale W_dec's rows to unit norm (a zero row stays zero)."""
        norm = self.W_dec.norm(dim=1, keepdim=True)
        self.W_dec.div_(torch.where(norm > 0, norm, torch.ones_like(norm)))
