"""Parameterizations against references written out here from the published formulas.

Schedules: Ho et al. 2020 (linear β, T = 1000), Nichol & Dhariwal 2021 eq. 17 (cosine). DDPM x̂₀:
Ho et al. eq. 15, x̂₀ = (x_t − √(1−ᾱ_t)·ε)/√ᾱ_t. v: Salimans & Ho 2022 §4, x̂₀ = √ᾱ·x_t − √(1−ᾱ)·v.
EDM: Karras et al. 2022 Table 1. The VE ↔ VP link (x = y + σε, σ = √((1−ᾱ)/ᾱ), x_t = x/√(1+σ²)) is
checked end to end with exact oracle networks: wrapped, they must give the exact posterior mean.
"""
import math

import numpy as np
import pytest
import torch

from scoreprobe.data.datasets import make_dataset, to_signed
from scoreprobe.errors import ConfigError
from scoreprobe.models.dit import DiT, timestep_embedding
from scoreprobe.models.param import VPDenoiser, make_denoiser
from scoreprobe.models.schedules import VPSchedule
from scoreprobe.oracles import EmpiricalDenoiser
from scoreprobe.data.rules import Parity


def ref_alpha_bar(name, T=1000):
    """ᾱ_t, t = 0..T−1, written from the papers (plain Python floats)."""
    if name == "linear":
        betas = [1e-4 * 1000 / T + i * (0.02 - 1e-4) * (1000 / T) / (T - 1) for i in range(T)]
    else:
        f = lambda u: math.cos((u + 0.008) / 1.008 * math.pi / 2) ** 2          # noqa: E731
        betas = [min(1 - f((i + 1) / T) / f(i / T), 0.999) for i in range(T)]
    out, prod = [], 1.0
    for b in betas:
        prod *= 1 - b
        out.append(prod)
    return out


def ref_t(sigma, alpha_bar):
    """Continuous timestep: linear in ln σ between neighbouring table entries, clamped at the ends."""
    logs = [math.log(math.sqrt((1 - a) / a)) for a in alpha_bar]
    ls = math.log(sigma)
    if ls <= logs[0]:
        return 0.0
    if ls >= logs[-1]:
        return float(len(logs) - 1)
    i = max(j for j in range(len(logs)) if logs[j] <= ls)
    return i + (ls - logs[i]) / (logs[i + 1] - logs[i]) if i + 1 < len(logs) else float(i)


def ref_x0(net, x, sigma, kind, alpha_bar, C=1, label=None):
    """x̂₀ of the raw network at each row's σ, as DDPM/v/x0 samplers compute it. x (B, D), sigma list."""
    rows = []
    for b, s in enumerate(sigma):
        ab = 1 / (1 + s * s)                                   # ᾱ of this σ (exactly the table's at table levels)
        x_t = math.sqrt(ab) * x[b:b + 1]                      # (1, D)
        t = torch.tensor([ref_t(s, alpha_bar)])
        y = None if label is None else torch.tensor([label])
        out = net(x_t.view(1, C, 6, 6), t, y)[:, :C].reshape(1, -1)   # (1, D)
        if kind == "ddpm_eps":
            rows.append((x_t - math.sqrt(1 - ab) * out) / math.sqrt(ab))
        elif kind == "v":
            rows.append(math.sqrt(ab) * x_t - math.sqrt(1 - ab) * out)
        else:
            rows.append(out)
    return torch.cat(rows)


def tiny_dit(seed=0, learn_sigma=True, rows=1):
    torch.manual_seed(seed)
    net = DiT(input_size=(6, 6), patch_size=2, in_channels=1, hidden_size=24, depth=2, num_heads=4,
              learn_sigma=learn_sigma, num_label_rows=rows)
    with torch.no_grad():
        for p in net.parameters():
            if p.requires_grad:
                p.copy_(torch.randn_like(p) * 0.2)
    return net.eval()


@pytest.mark.parametrize("name", ["linear", "cosine"])
def test_schedules_follow_the_papers(name):
    s = VPSchedule(name)
    np.testing.assert_allclose(s.alpha_bar(), ref_alpha_bar(name), rtol=1e-12)
    np.testing.assert_allclose(s.sigmas(), np.sqrt((1 - s.alpha_bar()) / s.alpha_bar()), rtol=1e-12)
    if name == "linear":
        assert s.betas()[0] == 1e-4 and abs(s.betas()[-1] - 0.02) < 1e-15
        assert abs(s.sigmas()[0] - math.sqrt(1e-4 / (1 - 1e-4))) < 1e-12
    else:   # without the 0.999 clip, ᾱ_t = f(t)/f(0) with t = index + 1 (eq. 17)
        f = lambda u: math.cos((u + 0.008) / 1.008 * math.pi / 2) ** 2      # noqa: E731
        np.testing.assert_allclose(s.alpha_bar()[:900], [f((i + 1) / 1000) / f(0) for i in range(900)], rtol=1e-9)


@pytest.mark.parametrize("name", ["linear", "cosine"])
def test_continuous_timesteps_interpolate_ln_sigma_and_clamp(name):
    s = VPSchedule(name)
    table = s.sigmas()
    idx = [0, 1, 17, 250, 500, 998, 999]
    t = s.t_of_sigma(torch.tensor(table[idx], dtype=torch.float64))
    np.testing.assert_allclose(t.numpy(), idx, atol=2e-4)
    between = np.sqrt(table[[3, 400, 997]] * table[[4, 401, 998]])          # geometric midpoints
    ab = s.alpha_bar()
    want = [ref_t(v, ab) for v in between]
    np.testing.assert_allclose(s.t_of_sigma(torch.tensor(between)).numpy(), want, atol=1e-4)
    np.testing.assert_allclose(want, [3.5, 400.5, 997.5], atol=1e-9)
    ends = s.t_of_sigma(torch.tensor([1e-4, table[0] * 0.5, table[-1] * 2, 1e5]))
    assert ends.tolist() == [0.0, 0.0, 999.0, 999.0]


@pytest.mark.parametrize("kind", ["ddpm_eps", "v", "x0"])
@pytest.mark.parametrize("name", ["linear", "cosine"])
def test_vp_parameterizations_match_the_written_reference(kind, name):
    net, schedule = tiny_dit(), VPSchedule(name)
    D = VPDenoiser(net, (1, 6, 6), kind, schedule)
    table = schedule.sigmas()
    sigma = [*table[[0, 40, 300, 600, 999]], *np.sqrt(table[[10, 500]] * table[[11, 501]]), 0.65, 1.24, 3.0]
    x = torch.randn(len(sigma), 36, generator=torch.Generator().manual_seed(1)) * 2
    with torch.no_grad():
        got = D(x, torch.tensor(sigma, dtype=torch.float32))
        want = ref_x0(net, x, [float(np.float32(s)) for s in sigma], kind, ref_alpha_bar(name))
    torch.testing.assert_close(got, want, atol=2e-4, rtol=1e-4)


def test_learned_sigma_channels_and_labels():
    net = tiny_dit(rows=3)
    x, s = torch.randn(4, 36), torch.tensor([0.1, 0.5, 1.0, 4.0])
    with torch.no_grad():
        for label in (None, 0, 2):
            got = VPDenoiser(net, (1, 6, 6), "ddpm_eps", label=label)(x, s)
            want = ref_x0(net, x, s.tolist(), "ddpm_eps", ref_alpha_bar("linear"), label=label)
            torch.testing.assert_close(got, want, atol=2e-4, rtol=1e-4)
        assert not torch.allclose(VPDenoiser(net, (1, 6, 6), "ddpm_eps", label=2)(x, s),
                                  VPDenoiser(net, (1, 6, 6), "ddpm_eps", label=0)(x, s))


def test_edm_matches_table_1():
    net = tiny_dit(rows=2)
    D = make_denoiser(net, (1, 6, 6), "edm", sigma_data=0.5, time_scale=1.0, label=1)
    x, s = torch.randn(5, 36), torch.tensor([0.002, 0.3, 1.0, 5.0, 80.0])
    sd = 0.5
    c_skip = sd ** 2 / (s ** 2 + sd ** 2)
    c_out = s * sd / (s ** 2 + sd ** 2).sqrt()
    c_in = 1 / (sd ** 2 + s ** 2).sqrt()
    with torch.no_grad():
        F = net((c_in[:, None] * x).view(5, 1, 6, 6), s.log() / 4, torch.ones(5, dtype=torch.long))[:, :1]
        want = c_skip[:, None] * x + c_out[:, None] * F.reshape(5, -1)
        torch.testing.assert_close(D(x, s), want, atol=1e-6, rtol=1e-5)
    assert D.sigma_data == 0.5 and D.parameterization == "edm"
    with pytest.raises(ConfigError, match="sigma_data"):
        make_denoiser(net, (1, 6, 6), "edm")
    with pytest.raises(ConfigError, match="parameterization"):
        make_denoiser(net, (1, 6, 6), "eps")


class OracleNet(torch.nn.Module):
    """The exact ε / v / x0 predictor of a finite data set, in VP coordinates at integer timesteps."""

    def __init__(self, bits, kind, schedule):
        super().__init__()
        self.emp, self.kind = EmpiricalDenoiser(bits), kind
        self.alpha_bar = torch.from_numpy(schedule.alpha_bar())

    def forward(self, x_t, t):
        assert torch.allclose(t, t.round(), atol=1e-3), "the oracle only knows table timesteps"
        ab = self.alpha_bar[t.round().long()][:, None].double()          # (B, 1)
        xt = x_t.reshape(x_t.shape[0], -1).double()
        sigma = ((1 - ab) / ab).sqrt()
        y = self.emp(xt / ab.sqrt(), sigma[:, 0])                        # E[y | x_t], (B, D)
        eps = (xt - ab.sqrt() * y) / (1 - ab).sqrt()
        out = {"ddpm_eps": eps, "v": ab.sqrt() * eps - (1 - ab).sqrt() * y, "x0": y}[self.kind]
        return out.float().view_as(x_t)


@pytest.mark.parametrize("kind", ["ddpm_eps", "v", "x0"])
def test_oracle_networks_give_the_exact_posterior_mean(kind):
    """Wrapping the exact VP predictor must give the exact VE denoiser: the conventions agree."""
    data = make_dataset(Parity(2, shape=(6, 6)), 12, 4, seed=0)
    schedule = VPSchedule("linear")
    D = VPDenoiser(OracleNet(data.train, kind, schedule), (1, 6, 6), kind, schedule)
    exact = EmpiricalDenoiser(data.train)
    idx = [5, 60, 150, 300, 700]
    sigma = torch.tensor(schedule.sigmas()[idx], dtype=torch.float32)
    y = to_signed(torch.as_tensor(data.train[:5]))
    x = y + sigma[:, None] * torch.randn(5, 36, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(D(x, sigma), exact(x, sigma).float(), atol=2e-4, rtol=1e-4)


def test_diffusers_timestep_frequencies():
    t = torch.tensor([0.0, 3.0, 999.0])
    half = 128
    freqs = np.exp(-math.log(10000) * np.arange(half) / (half - 1))
    want = np.concatenate([np.cos(t.numpy()[:, None] * freqs), np.sin(t.numpy()[:, None] * freqs)], axis=1)
    np.testing.assert_allclose(timestep_embedding(t, 256, freq_shift=1).numpy(), want, atol=2e-4)
