"""How well attribution patching (AtP) ranks the sites that real patching ranks (issue #37): the shipped
series at its last checkpoint, all 64 sites, 16 rule and 16 copy pairs (scoreprobe.probes.circuits),
σ 0.3 / 0.7 / 1.5. Prints the Spearman correlation of the pooled effects over sites, how many of the
top 5 by patching are in the top 10 by AtP (what a prefilter needs) and the largest |AtP − patching|.

    PYTHONPATH=$PWD python bench/bench_atp.py
"""
import numpy as np
import torch
from scipy.stats import spearmanr

import scoreprobe as sp
from scoreprobe.probes.circuits import copy_pairs, rule_pairs


def main():
    torch.set_num_threads(1)
    series = sp.load_series()
    D = series.denoiser(series.steps[-1])
    c, r, w, _ = rule_pairs(series.dataset, series.rule, 16, 0)
    kinds = {"rule": (c, r, w), "copy": (*copy_pairs(series.dataset, 16), None)}
    print("| pairs | σ | Spearman (64 sites) | top 5 by patching in top 10 by AtP | max abs(AtP − patching) |")
    print("|---|---:|---:|---:|---:|")
    for name, (clean, corrupt, direction) in kinds.items():
        for sigma in (0.3, 0.7, 1.5):
            ds = sp.patch(D, clean, corrupt, sigma, sites="all", method="both", direction=direction)
            e, a = ds.effect_pooled.values, ds.effect_atp_pooled.values
            hit = len(set(np.argsort(-e)[:5]) & set(np.argsort(-a)[:10]))
            print(f"| {name} | {sigma:g} | {spearmanr(e, a).statistic:.3f} | {hit} / 5 | {np.abs(e - a).max():.2f} |")


if __name__ == "__main__":
    main()
