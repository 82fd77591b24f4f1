"""Benchmark: DSM loss by σ with a paired noise bank (scoreprobe) vs the usual fresh-noise estimate.

The usual way to compare a model's denoising loss on training vs held-out items draws fresh
noise for every item and every checkpoint (`torch.randn_like(x)` inside the loss). scoreprobe's
`dsm_by_sigma` draws one bank keyed by (position in split, noise index): the j-th training and
j-th held-out item, and every checkpoint, see the same ε. This script measures, over repeated
seeds, the spread (std) of two quantities both estimators target:

  gap   = mean held-out loss − mean training loss at one σ and one checkpoint,
  delta = the change of the mean training loss between two checkpoints at one σ,

for a denoiser halfway between the memorizer and the rule oracle, and the throughput of
`dsm_losses` (denoiser rows per second). Then the speed of `dsm_losses` on the shipped network
against the loop people write: for each σ, for each item, D on that item's noise draws (the same
losses, checked). Run: `python bench/bench_dsm.py [--seeds 8] [--loop-items 16]`.
"""
import argparse
import time

import numpy as np
import torch

import scoreprobe as sp
from scoreprobe.probes.dsm import NOISE_STRIDE, dsm_by_sigma, dsm_losses


class Blend:
    """a·memorizer + (1 − a)·rule oracle: a stand-in for a checkpoint part-way to memorization."""

    def __init__(self, mem, gen, a):
        self.mem, self.gen, self.a = mem, gen, a

    def __call__(self, x, sigma):
        return self.a * self.mem(x, sigma) + (1 - self.a) * self.gen(x, sigma)


def naive_losses(D, bits, sigmas, n_noise, seed):
    """Fresh-noise estimate: (n_sigma, S) mean over n_noise draws of ‖D(x+σε,σ) − x‖²/D."""
    g = torch.Generator().manual_seed(seed)
    x = sp.to_signed(torch.as_tensor(bits))                                     # (S, D)
    out = np.empty((len(sigmas), len(bits)))
    for j, s in enumerate(sigmas):
        xs = x.repeat(n_noise, 1)                                               # (K*S, D)
        sig = torch.full((len(xs),), float(s))
        err = ((D(xs + sig[:, None] * torch.randn(xs.shape, generator=g), sig) - xs) ** 2).mean(1)
        out[j] = err.reshape(n_noise, len(bits)).mean(0).numpy()
    return out


def spread(args, data, models, sigmas):
    """std over seeds of the gap and of the checkpoint-to-checkpoint delta, for both estimators."""
    n = args.n_items
    bits = np.concatenate([data.train[:n], data.heldout[:n]])
    tr = np.arange(2 * n) < n
    res = {"paired": ([], []), "fresh": ([], [])}
    for seed in range(args.seeds):
        ds = dsm_by_sigma(dict(enumerate(models)), sigmas=sigmas, n_noise=args.n_noise, n_train=n, n_heldout=n,
                          seed=seed, dataset=data, oracles=False, progress=False)
        loss = ds.loss.values                                                   # (2, n_sigma, S)
        res["paired"][0].append(ds.gap.values[0])
        res["paired"][1].append(loss[1][:, tr].mean(1) - loss[0][:, tr].mean(1))
        fresh = [naive_losses(m, bits, sigmas, args.n_noise, 1000 * seed + i) for i, m in enumerate(models)]
        res["fresh"][0].append(fresh[0][:, ~tr].mean(1) - fresh[0][:, tr].mean(1))
        res["fresh"][1].append(fresh[1][:, tr].mean(1) - fresh[0][:, tr].mean(1))
    return {k: (np.std(g, axis=0, ddof=1), np.std(d, axis=0, ddof=1), np.mean(g, axis=0))
            for k, (g, d) in res.items()}


def _ratio(a, b):
    return f"{a / b:6.2f}" if b > 1e-9 else f"{'-':>6s}"


def throughput(D, data, n_rows):
    sig = np.geomspace(0.002, 80, 40)
    n_items = max(1, n_rows // (40 * 8))
    t = time.perf_counter()
    dsm_losses(D, data.train[:n_items], np.arange(n_items), sig, n_noise=8)
    return n_items * 40 * 8 / (time.perf_counter() - t)


def loop_losses(D, bits, sigmas, n_noise, seed):
    """The per-σ, per-item Python loop, on dsm_losses' own noise bank: (n_sigma, S)."""
    x = sp.to_signed(torch.as_tensor(bits))                                     # (S, D)
    keys = (np.arange(len(bits))[:, None] * NOISE_STRIDE + np.arange(n_noise)).reshape(-1)   # as dsm_losses keys them
    eps = sp.randn_per_sample(seed, keys, x.shape[1]).reshape(len(bits), n_noise, -1)    # (S, K, D)
    out = np.empty((len(sigmas), len(bits)))
    with torch.inference_mode():
        for j, s in enumerate(sigmas):
            for i in range(len(bits)):
                xs = x[i].expand(n_noise, -1)                                   # (K, D)
                sig = torch.full((n_noise,), float(s))
                out[j, i] = float(((D(xs + sig[:, None] * eps[i], sig) - xs) ** 2).mean())
    return out


def loop_vs_batched(n_items, n_noise=8):
    """Seconds of the Python loop and of dsm_losses on the shipped network, and their max difference."""
    series = sp.load_series()
    D = series.denoiser(series.steps[-1])
    bits, sig = series.dataset.train[:n_items], np.geomspace(0.002, 80, 40)
    t = time.perf_counter()
    ref = loop_losses(D, bits, sig, n_noise, seed=0)
    t_loop = time.perf_counter() - t
    t = time.perf_counter()
    ours = dsm_losses(D, bits, np.arange(n_items), sig, n_noise=n_noise, seed=0, progress=False)
    return t_loop, time.perf_counter() - t, float(np.abs(ours - ref).max())


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=8)
    p.add_argument("--n-items", type=int, default=64, help="training and held-out items each")
    p.add_argument("--n-noise", type=int, default=4)
    p.add_argument("--n-train", type=int, default=256, help="training-set size of the memorizer")
    p.add_argument("--loop-items", type=int, default=16, help="items of the loop-vs-batched timing (40 σ, 8 draws)")
    a = p.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    rule = sp.Parity(G=3, shape=(6, 6))
    data = sp.make_dataset(rule, n_train=a.n_train, n_heldout=max(a.n_items, 64), seed=0)
    mem, gen = sp.EmpiricalDenoiser(data.train), sp.RuleDenoiser(rule)
    sigmas = np.array([0.3, 0.6, 1.0, 2.0])
    t = time.perf_counter()
    r = spread(a, data, [Blend(mem, gen, 0.5), Blend(mem, gen, 0.6)], sigmas)
    print(f"Parity G=3 6x6, N={a.n_train}; {a.n_items}+{a.n_items} items, {a.n_noise} noise draws, "
          f"{a.seeds} seeds; denoiser 0.5·memorizer + 0.5·rule oracle (delta: vs 0.6·memorizer)")
    print(f"{'sigma':>6s} {'gap':>8s} {'std gap paired':>15s} {'fresh':>8s} {'ratio':>6s}"
          f" {'std delta paired':>17s} {'fresh':>8s} {'ratio':>6s}")
    for j, s in enumerate(sigmas):
        gp, dp, gm = (v[j] for v in r["paired"])
        gf, df, _ = (v[j] for v in r["fresh"])
        print(f"{s:6.2f} {gm:8.4f} {gp:15.5f} {gf:8.5f} {_ratio(gf, gp)} {dp:17.5f} {df:8.5f} {_ratio(df, dp)}")
    print(f"(variance study took {time.perf_counter() - t:.1f} s)")
    for name, D in (("memorizer", mem), ("rule oracle", gen)):
        print(f"dsm_losses throughput, {name}: {throughput(D, data, 20_000):,.0f} rows/s")
    t_loop, t_ours, diff = loop_vs_batched(a.loop_items)
    print(f"shipped network, {a.loop_items} items x 40 σ x 8 draws: per-σ per-item loop {t_loop:.2f} s, "
          f"dsm_losses {t_ours:.2f} s (max |difference| {diff:.1e})")
    print(f"ratios: loop/dsm_losses {t_loop / t_ours:.1f}x")


if __name__ == "__main__":
    main()
