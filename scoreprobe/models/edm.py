"""EDM preconditioning (Karras et al. 2022) around an image network, and the DSM loss.

`EDMDenoiser(net, image_shape, sigma_data)` implements the scoreprobe denoiser contract
D(x (B, D), sigma (B,)) -> (B, D) on flattened signed images:

    D(x, σ) = c_skip(σ) x + c_out(σ) F(c_in(σ) x, c_noise(σ))
    c_skip = σd² / (σ² + σd²)    c_out = σ σd / sqrt(σ² + σd²)
    c_in   = 1 / sqrt(σ² + σd²)   c_noise = time_scale · ln(σ) / 4

`sigma_data` and `time_scale` are stored with the model (run.json / checkpoint), never hard-coded.
`label` (a label-table row, or None for the network's default) is passed to the network as y.
Other parameterizations (DDPM ε, v, x0 on a VP schedule) are in `models.param`.
"""
import math

import torch
import torch.nn as nn

from scoreprobe.models.hooked import HookedModel

P_MEAN, P_STD = -1.2, 1.2


class ImageDenoiser(HookedModel, nn.Module):
    """Base of the denoiser wrappers: flattened (B, D) images in, the network on (B, C, H, W).

    net: the wrapped network; image_shape: (C, H, W), D = C*H*W; label: label-table row passed to
    net as y (B,), or None to call net(x, t) alone. `info` holds what the loader decided (weights,
    sources); it is shown by repr().
    """

    def __init__(self, net, image_shape, label=None):
        super().__init__()
        self.net = net
        self.image_shape = tuple(int(s) for s in image_shape)
        self.dim = math.prod(self.image_shape)
        self.label = None if label is None else int(label)
        self.info = {}

    def _describe(self, parts):
        if self.label is not None:
            parts.append(f"label={self.label}")
        return ", ".join(parts + [f"{k}={v}" for k, v in self.info.items()])

    def _inputs(self, x, sigma):
        """Checked x (B, D) as float32 and sigma broadcast to (B,) float32."""
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"expected x of shape (B, {self.dim}), got {tuple(x.shape)}")
        sigma = torch.as_tensor(sigma, dtype=torch.float32, device=x.device).reshape(-1)
        if sigma.numel() not in (1, x.shape[0]):
            raise ValueError(f"sigma must be one noise level or one per row of x ({x.shape[0]}), got {sigma.numel()}")
        return x.float(), sigma.expand(x.shape[0]) if sigma.numel() == 1 else sigma

    def _net(self, inp, t):
        """net(inp (B, C, H, W), t (B,)[, label rows]) -> its first C output channels, (B, C, H, W)."""
        if self.label is None:
            return self.net(inp, t)[:, :self.image_shape[0]]
        rows = torch.full((inp.shape[0],), self.label, dtype=torch.long, device=inp.device)
        return self.net(inp, t, rows)[:, :self.image_shape[0]]


class EDMDenoiser(ImageDenoiser):
    """EDM-preconditioned denoiser over flattened images.

    net:         module mapping ((B, C, H, W), c_noise (B,)) -> (B, C_out, H, W); the first C
                 output channels are the prediction (DiT with learn_sigma has C_out = 2C).
    image_shape: (C, H, W) of the images; D = C*H*W.
    sigma_data:  expected standard deviation of the training data (1.0 for ±1 bits).
    time_scale:  multiplies c_noise = ln(σ)/4 before the timestep embedder (1.0 for foreign checkpoints).
    label:       label-table row passed to net as y (B,), or None to call net(x, c_noise) alone.
    """
    parameterization = "edm"

    def __init__(self, net, image_shape, sigma_data=1.0, time_scale=1.0, label=None):
        super().__init__(net, image_shape, label)
        self.sigma_data = float(sigma_data)
        self.time_scale = float(time_scale)

    def extra_repr(self):
        return self._describe([f"parameterization=edm, sigma_data={self.sigma_data:g}, time_scale={self.time_scale:g}"])

    def forward(self, x, sigma):
        """x: (B, D) float, sigma: (B,) or scalar -> (B, D) in x's dtype."""
        x32, sigma = self._inputs(x, sigma)                             # (B, D), (B,)
        s = sigma[:, None]                                              # (B, 1)
        sd2 = self.sigma_data ** 2
        c_skip = sd2 / (s ** 2 + sd2)
        c_out = s * self.sigma_data / (s ** 2 + sd2).sqrt()
        c_in = 1 / (s ** 2 + sd2).sqrt()
        c_noise = self.time_scale * sigma.log() / 4                     # (B,)
        F_x = self._net((c_in * x32).view(-1, *self.image_shape), c_noise)   # (B, C, H, W)
        return (c_skip * x32 + c_out * F_x.reshape(x.shape[0], -1)).to(x.dtype)     # (B, D)

    def loss_weight(self, sigma):
        """EDM weight λ(σ) = (σ² + σd²) / (σ σd)²."""
        return (sigma ** 2 + self.sigma_data ** 2) / (sigma * self.sigma_data) ** 2


def sample_sigmas(n, generator=None, device="cpu", p_mean=P_MEAN, p_std=P_STD):
    """Training noise levels: ln σ ~ Normal(p_mean, p_std), shape (n,)."""
    z = torch.randn(n, generator=generator, device=device)
    return (z * p_std + p_mean).exp()


def dsm_loss(denoiser, y, sigma, noise):
    """EDM-weighted denoising score-matching loss per sample.

    y: (B, D) clean signed images; sigma: (B,); noise: (B, D) standard normal.
    Returns (B,): λ(σ) · mean_i (D(y + σ n, σ)_i − y_i)².
    """
    denoised = denoiser(y + sigma[:, None] * noise, sigma)             # (B, D)
    return denoiser.loss_weight(sigma) * ((denoised - y) ** 2).mean(dim=1)
