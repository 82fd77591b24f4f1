"""How well AtP and AtP* rank the sites that real patching ranks, over noise draws (issue 55 item 6).

The shipped series (`checkpoints/parity-default`) at its last checkpoint and one mid checkpoint; 16 rule and 16
copy pairs (scoreprobe.probes.circuits: rule_pairs with the group mates' direction, copy_pairs); σ 0.3 / 0.7 /
1.5; 5 noise draws (patch seed = 10·draw + 1 for copy pairs, + 2 for rule pairs). Sites: the default grid (64:
blocks, sub-blocks, heads, tokens) and the queries and keys of every head (32), where AtP*'s QK fix applies.

Per draw, each method's estimate of every site's Σ_pairs (m(patched) − m(corrupt)) is compared with real
patching by the Spearman correlation over sites. Numerators, not pooled effects: the ranking of Σ numerators is
the ranking of the pooled effect where that is defined (one positive or negative scale), and stays defined where
the pairs' contrasts have mixed sign (late copy pairs) and the pooled effect is NaN. Methods:

    AtP        the joint first-order estimate (scoreprobe.inside.atp), signed
    AtP*       with the exact softmax for q/k sites (on the grid's 64 sites it is AtP itself), signed
    GradDrop   AtP*'s (1/(L−1)) Σ_ℓ |I_ℓ| per pair, summed over pairs, against |Σ numerator| (a magnitude)

and, for the 4 block sites (attention + MLP together), the joint estimate's error against the sum of the two
sub-block estimates (the old double-counting rule), in units of the mean |contrast|.

    python analyses/atp_agreement                  # ≈ 2 min on one core: analyses/results/atp_agreement.{json,md}
    python analyses/atp_agreement --from-results   # rewrite the .md from the .json (byte-identical)
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from analyses.atp_agreement.attribution_agreement import agreement, attribution_sums, block_errors

HERE = Path(__file__).resolve().parent
STEPS = (2876, 36000)
SIGMAS = (0.3, 0.7, 1.5)
DRAWS = 5
N_PAIRS = 16
OFFSET = {"copy": 1, "rule": 2}
METHODS = ("AtP", "AtP*", "|AtP|", "GradDrop")


def pairs(series, n):
    """{"rule": (clean, corrupt, direction), "copy": (clean, corrupt, None)}."""
    from scoreprobe.probes.circuits import copy_pairs, rule_pairs
    c, r, w, _ = rule_pairs(series.dataset, series.rule, n, 0)
    return {"rule": (c, r, w), "copy": (*copy_pairs(series.dataset, n), None)}


def measure(log=print):
    import scoreprobe as sp
    from scoreprobe.inside.sites import qk_sites, site_grid
    series = sp.load_series()
    net = series.denoiser(STEPS[-1]).net
    grid, qk = [s.label for s in site_grid(net)], qk_sites(net)
    kinds = pairs(series, N_PAIRS)
    rows, t0 = [], time.time()
    for step in STEPS:
        D = series.denoiser(step)
        for kind, pair in kinds.items():
            for sigma in SIGMAS:
                for draw in range(DRAWS):
                    rows.append({"step": step, "kind": kind, "sigma": sigma, "draw": draw,
                                 **attribution_sums(D, pair[0], pair[1], sigma, grid + qk, direction=pair[2],
                                                    seed=10 * draw + OFFSET[kind])})
        log(f"step {step}: {time.time() - t0:.0f} s")
    return {"series": "checkpoints/parity-default", "steps": list(STEPS), "sigmas": list(SIGMAS), "draws": DRAWS,
            "n_pairs": N_PAIRS, "grid": grid, "qk": qk, "rows": rows, "seconds": round(time.time() - t0, 1)}


def _fmt(values):
    v = np.asarray(values, float)
    if not np.isfinite(v).all():
        return f"undefined in {int((~np.isfinite(v)).sum())} of {v.size}"
    return f"{v.min():.2f} / {np.median(v):.2f} / {v.max():.2f}"


def markdown(doc):
    agree = agreement(doc)
    lines = [
        "# AtP and AtP* against real patching, over noise draws",
        "",
        f"`python analyses/atp_agreement` (analyses/atp_agreement/run.py): {doc['series']}, checkpoints "
        f"{', '.join(map(str, doc['steps']))}; {doc['n_pairs']} rule and {doc['n_pairs']} copy pairs; "
        f"σ {' / '.join(f'{s:g}' for s in doc['sigmas'])}; {doc['draws']} noise draws. Spearman correlation over "
        f"sites between each method's estimate of Σ_pairs (m(patched) − m(corrupt)) and real patching's, per draw: "
        f"**min / median / max over the {doc['draws']} draws**. `grid`: the {len(doc['grid'])} default sites "
        f"(blocks, sub-blocks, heads' z, tokens entering a block), where AtP* is AtP (no q/k site); `q/k`: the "
        f"{len(doc['qk'])} query and key sites of the heads, where AtP* recomputes the softmax. AtP and AtP* are "
        "signed; `|AtP|` and `GradDrop` (AtP*'s (1/(L−1)) Σ_ℓ |I_ℓ|) rank magnitudes, against |Σ numerator| of "
        "patching. On the grid AtP* equals AtP (the QK fix touches only q/k sites).",
        "",
        "| step | pairs | σ | sites | AtP | AtP* | \\|AtP\\| | GradDrop |",
        "|---:|---|---:|---|---|---|---|---|",
    ]
    for (step, kind, sigma, part), cell in agree.items():
        lines.append(f"| {step} | {kind} | {sigma:g} | {part} | " + " | ".join(_fmt(cell[m]) for m in METHODS) + " |")
    lines += ["", "Block sites (attention + MLP of one block): mean over σ, draws and the 4 blocks of |estimate − "
              "exact| / Σ_pairs |contrast|, for the joint estimate (one backward with both atoms cut) and for the "
              "sum of the two sub-block estimates (which counts the attention's path through the MLP twice).", "",
              "| step | pairs | joint AtP | per-atom sum |", "|---:|---|---:|---:|"]
    for (step, kind), (joint, summed) in block_errors(doc).items():
        lines.append(f"| {step} | {kind} | {joint:.3f} | {summed:.3f} |")
    lines += ["", f"Measured in {doc['seconds']:g} s (one thread)."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--from-results", action="store_true", help="rewrite the .md from the .json")
    p.add_argument("--out", default=None, help="results folder (default analyses/results)")
    a = p.parse_args(argv)
    from scoreprobe.atomic import atomic_write_text
    out = Path(a.out or HERE.parent / "results")
    out.mkdir(parents=True, exist_ok=True)
    if not a.from_results:
        import torch
        torch.set_num_threads(1)
        atomic_write_text(out / "atp_agreement.json", json.dumps(measure(), indent=1))
    doc = json.loads((out / "atp_agreement.json").read_text())
    atomic_write_text(out / "atp_agreement.md", markdown(doc))
    print(f"wrote {out / 'atp_agreement'}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
