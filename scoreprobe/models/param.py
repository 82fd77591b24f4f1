"""Parameterizations: how a raw network's output becomes the denoiser D(x, σ) of scoreprobe's contract.

scoreprobe works in the variance-exploding convention x = y + σ·ε (y the clean signed image), and D is
the posterior mean E[y | x]. A network trained another way is wrapped so that it obeys the same
contract (formulas and sources in docs/checkpoints.md):

    edm       D = c_skip·x + c_out·F(c_in·x, time_scale·ln σ/4)            (Karras et al. 2022, Table 1)
    ddpm_eps  D = x − σ·ε(x_t, t)                                           (Ho et al. 2020, eq. 4 / 11)
    v         D = x/(1+σ²) − σ/√(1+σ²)·v(x_t, t)                           (Salimans & Ho 2022, §4)
    x0        D = x̂₀(x_t, t)
    with x_t = x/√(1+σ²) and t the continuous timestep of σ on the VP schedule (models.schedules).

    D = make_denoiser(net, (1, 6, 6), "ddpm_eps", schedule=VPSchedule("linear"), label=1000)

Only the first C output channels are used: the learned-variance channels of `learn_sigma` models are
dropped (they do not enter the posterior mean).
"""
import math

import torch
import torch.nn as nn

from scoreprobe.errors import ConfigError
from scoreprobe.models.edm import EDMDenoiser, ImageDenoiser
from scoreprobe.models.schedules import VPSchedule

PARAMETERIZATIONS = ("edm", "ddpm_eps", "v", "x0")
VP_PARAMETERIZATIONS = ("ddpm_eps", "v", "x0")
EDM_ONLY = ("sigma_data", "time_scale")           # settings that only the edm parameterization uses
VP_ONLY = ("schedule", "num_timesteps")           # settings that only ddpm_eps / v / x0 use


def check_parameterization(name):
    """The name itself, or ConfigError listing the known ones."""
    if name not in PARAMETERIZATIONS:
        raise ConfigError(f"unknown parameterization {name!r}; known: {', '.join(PARAMETERIZATIONS)}")
    return name


class VPDenoiser(ImageDenoiser):
    """Denoiser around a network trained on a discrete VP schedule (DDPM ε, v or x0 prediction).

    net:         module mapping (x_t (B, C, H, W), t (B,)[, y (B,)]) -> (B, C_out, H, W); the first C
                 output channels are the prediction.
    image_shape: (C, H, W); D = C*H*W.
    prediction:  "ddpm_eps" | "v" | "x0".
    schedule:    models.schedules.VPSchedule the network was trained on.
    label:       label-table row passed to net as y, or None to call net(x_t, t) alone.
    `sigma_data` is None: such a network has no σ_data (the DSM probe then uses its argument or 1.0).
    """
    sigma_data = None

    def __init__(self, net, image_shape, prediction, schedule=None, label=None):
        if prediction not in VP_PARAMETERIZATIONS:
            raise ConfigError(f"VPDenoiser takes one of {VP_PARAMETERIZATIONS}, got {prediction!r}")
        super().__init__(net, image_shape, label)
        self.parameterization = prediction
        self.schedule = schedule if schedule is not None else VPSchedule()

    def extra_repr(self):
        return self._describe([f"parameterization={self.parameterization}",
                               f"schedule={self.schedule.describe()}"])

    def forward(self, x, sigma):
        """x: (B, D) float, sigma: (B,) or scalar -> (B, D) in x's dtype."""
        x32, sigma = self._inputs(x, sigma)                              # (B, D), (B,)
        B, s = x.shape[0], sigma[:, None]                                # s: (B, 1)
        sqrt_ab = 1 / (1 + s ** 2).sqrt()                                # √ᾱ, (B, 1)
        x_t = (sqrt_ab * x32).view(B, *self.image_shape)                 # (B, C, H, W)
        out = self._net(x_t, self.schedule.t_of_sigma(sigma)).reshape(B, -1)   # (B, D)
        if self.parameterization == "ddpm_eps":
            D = x32 - s * out
        elif self.parameterization == "v":
            D = sqrt_ab ** 2 * x32 - s * sqrt_ab * out
        else:
            D = out
        return D.to(x.dtype)                                             # (B, D)


def make_denoiser(net, image_shape, parameterization, *, sigma_data=None, time_scale=1.0, schedule=None,
                  label=None):
    """The wrapper of `parameterization` around `net`: EDMDenoiser or VPDenoiser (shapes as theirs).

    sigma_data and time_scale are used by "edm" only (sigma_data required there); schedule by the
    VP parameterizations only (default VPSchedule("linear", 1000)).
    """
    check_parameterization(parameterization)
    if parameterization == "edm":
        if sigma_data is None:
            raise ConfigError("parameterization 'edm' needs sigma_data")
        return EDMDenoiser(net, image_shape, sigma_data=sigma_data, time_scale=time_scale, label=label)
    return VPDenoiser(net, image_shape, parameterization, schedule=schedule, label=label)


class ModuleDenoiser(nn.Module):
    """Denoiser around an EDM-style network that already returns D: net(x (B, C, H, W), σ (B,), class_labels).

    NVlabs/edm's EDMPrecond / VPPrecond / VEPrecond / iDDPMPrecond all return the VE-convention
    posterior mean, so no conversion is applied. label: None (net.label_dim == 0 or unconditional),
    an int (one-hot class label of width net.label_dim) or "null" (the all-zero label, which
    NVlabs/edm feeds for dropped labels). `sigma_data` is the network's own (None when it has none).
    """
    parameterization = "edm"

    def __init__(self, net, image_shape, label=None):
        super().__init__()
        self.net = net
        self.image_shape = tuple(int(s) for s in image_shape)
        self.dim = math.prod(self.image_shape)
        sd = getattr(net, "sigma_data", None)
        self.sigma_data = None if sd is None else float(sd)
        self.label_dim = int(getattr(net, "label_dim", 0) or 0)
        self.label = label
        self.info = {}

    def extra_repr(self):
        parts = [f"parameterization=edm (the network's own D), sigma_data={self.sigma_data}"]
        if self.label is not None:
            parts.append(f"label={self.label}")
        return ", ".join(parts + [f"{k}={v}" for k, v in self.info.items()])

    def _class_labels(self, B, device):
        if self.label_dim == 0 or self.label is None:
            return None
        labels = torch.zeros(B, self.label_dim, device=device)          # (B, label_dim)
        if self.label != "null":
            labels[:, int(self.label)] = 1
        return labels

    def forward(self, x, sigma):
        """x: (B, D), sigma: (B,) or scalar -> (B, D) in x's dtype."""
        sigma = torch.as_tensor(sigma, dtype=torch.float32, device=x.device).reshape(-1).expand(x.shape[0])
        labels = self._class_labels(x.shape[0], x.device)
        out = self.net(x.float().reshape(-1, *self.image_shape), sigma, class_labels=labels)  # (B, C, H, W)
        return out.reshape(x.shape[0], self.dim).to(x.dtype)
