"""Writes hooks_golden.npz: outputs of the DiT and GPT modules BEFORE hook points were added
(run once at commit fcb64e0, the parent of the hook-point commit). tests/test_inside_hooks.py checks
that today's modules, hooks installed or not, give these outputs bit for bit.

    PYTHONPATH=$PWD python tests/data/make_hooks_golden.py
"""
from pathlib import Path

import numpy as np
import torch

import scoreprobe as sp
from scoreprobe.models.dit import DiT
from scoreprobe.models.gpt import GPT, GPTConfig


def main():
    torch.set_num_threads(1)
    out = {}
    series = sp.load_series()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 36, generator=g) * 1.5                                  # (8, 36)
    sigma = torch.tensor([0.05, 0.2, 0.5, 1.0, 2.0, 5.0, 0.3, 1.5])          # (8,)
    out["dit_x"], out["dit_sigma"] = x.numpy(), sigma.numpy()
    for step in (2876, 36000):
        with torch.no_grad():
            out[f"dit_out_{step}"] = series.denoiser(step)(x, sigma).numpy()
    torch.manual_seed(1)
    net = DiT(hidden_size=16, depth=2, num_heads=2, mlp="glu", global_token=True)
    for p in net.parameters():                                              # adaLN-Zero: make every path live
        p.data.add_(0.05 * torch.randn_like(p))
    img = torch.randn(4, 1, 6, 6, generator=g)
    t = torch.tensor([0.1, 1.0, 10.0, 100.0])
    with torch.no_grad():
        out["glu_out"] = net(img, t).numpy()
    out["glu_img"], out["glu_t"] = img.numpy(), t.numpy()
    out.update({f"glu_sd.{k}": v.numpy() for k, v in net.state_dict().items()})
    torch.manual_seed(2)
    gpt = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=16))
    bits = torch.randint(0, 2, (4, 36), generator=g)
    with torch.no_grad():
        out["gpt_logp"] = gpt.log_prob(bits).numpy()
    out["gpt_bits"] = bits.numpy()
    out["gpt_sample"] = gpt.sample(3, seed=0)
    out.update({f"gpt_sd.{k}": v.numpy() for k, v in gpt.state_dict().items()})
    np.savez_compressed(Path(__file__).with_name("hooks_golden.npz"), **out)


if __name__ == "__main__":
    main()
