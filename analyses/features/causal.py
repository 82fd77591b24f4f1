"""The causal check: do the SAE latents best matched to the parity groups matter for the rule when sampling?

    python analyses/features --causal            # the last checkpoint, one site, 256 samples: ~3 min here
    python analyses/features --causal --from-results

At one checkpoint and site, one TopK SAE (the study's settings, seed 0) is trained on the study's rows at σ; for
each parity group the latent with the best F1 for 'group j odd' is taken (the matched set, duplicates merged).
`sp.sample` (the PF-ODE, fixed seed: the same starting noise in every arm, so arms are paired sample by sample)
runs with the matched latents ablated (`sp.latent_hook`: their decoded part removed, the SAE's reconstruction
error kept) while σ is in [σ/2, 2σ] around the SAE's training σ, against `n_random` sets of as many latents drawn
at random from the other live latents (the control), and against no intervention (the floor of change: 0).
Readings per arm: rule accuracy (share of valid samples) and copy share (valid_memorized), their change against
no intervention, and the matched set's rank among the random sets by |change in rule accuracy|
(p = (1 + #random sets at least as large) / (n_random + 1); its smallest attainable value 1 / (n_random + 1)).
A latent that carries a parity group should lower the rule accuracy more than random latents do.
"""
import numpy as np
import torch

import scoreprobe as sp
from scoreprobe.data.datasets import STATE_CODES

CAUSAL = {"cpu": dict(step=36000, site="blocks.2.hook_resid_post", n_samples=256, n_random=8, seed=0),
          "smoke": dict(step=36000, site="blocks.3.hook_resid_post", n_samples=16, n_random=2, seed=0)}


def matched_latents(scores, n_groups):
    """The latents with the best F1 for each 'group j odd' (unique, in group order) and their F1s."""
    best = scores.best_latent.sel(feature=[f"group{j}=odd" for j in range(n_groups)]).values
    f1 = scores.best_f1.sel(feature=[f"group{j}=odd" for j in range(n_groups)]).values
    keep = [int(b) for b, f in zip(best, f1) if b >= 0 and np.isfinite(f)]
    return list(dict.fromkeys(keep)), [float(f) for f in f1]


def _readings(x, dataset, rule):
    state = sp.classify(x, dataset, rule)["state"]
    valid = np.isin(state, [STATE_CODES[s] for s in ("valid_novel", "valid_heldout", "valid_memorized")])
    return dict(rule_accuracy=float(valid.mean()), copy_share=float((state == STATE_CODES["valid_memorized"]).mean()))


def causal_check(series, cfg, clean, x, causal):
    """The readings of every arm (see the module docstring) as a dict ready for JSON."""
    D = series.denoiser(causal["step"])
    site, sigma = causal["site"], cfg["sigma"]
    _, cache = sp.run_with_cache(D, x, sigma, names=[site])
    truth = sp.rule_features(series.rule, sp.to_bits(x).numpy(), clean=clean, train=series.dataset.train)
    n_groups = int((truth.kind == "group").sum()) // 2
    sae = sp.train_sae(cache, cfg["d_sae"], site=site, k=cfg["k"], steps=cfg["sae_steps"], seed=0, progress=False)
    scores = sp.sae_scores(sae, cache, truth, site=site)
    matched, f1 = matched_latents(scores, n_groups)
    live = [i for i in np.flatnonzero(_fired(sae, cache, site)).tolist() if i not in matched]
    rng = np.random.default_rng(causal["seed"])
    randoms = [sorted(rng.choice(live, len(matched), replace=False).tolist()) for _ in range(causal["n_random"])]
    window = (sigma / 2, 2 * sigma)

    def arm(latents):
        hooks = None if latents is None else [(site, sp.latent_hook(sae, latents, how="ablate"))]
        out = sp.sample(D, causal["n_samples"], causal["seed"], fwd_hooks=hooks,
                        sigma_window=None if hooks is None else window, progress=False)
        return _readings(out, series.dataset, series.rule)
    base = arm(None)
    arms = [dict(kind="matched", latents=matched, **arm(matched))]
    arms += [dict(kind="random", latents=r, **arm(r)) for r in randoms]
    for a in arms:
        a["d_rule_accuracy"] = a["rule_accuracy"] - base["rule_accuracy"]
        a["d_copy_share"] = a["copy_share"] - base["copy_share"]
    m = abs(arms[0]["d_rule_accuracy"])
    at_least = sum(abs(a["d_rule_accuracy"]) >= m for a in arms[1:])
    return dict(causal, sigma=sigma, window=list(window), matched_f1=f1, base=base, arms=arms,
                p_rank=(1 + at_least) / (len(arms)), p_min=1 / len(arms))


def _fired(sae, cache, site):
    """(d_sae,) bool: the latents active on at least one of the site's rows (encoded once)."""
    from scoreprobe.features.rows import site_rows
    with torch.no_grad():
        f = sae.encode(torch.as_tensor(site_rows(cache, site).values))              # (n, d_sae)
    return (f > 0).any(0).numpy()


def causal_md(c):
    """The causal check's markdown section."""
    lines = ["## Causal check: ablating the matched latents while sampling", "",
             f"Step {c['step']}, {c['site']}, {c['n_samples']} samples (PF-ODE, seed {c['seed']}, the same noise in "
             f"every arm), latents ablated while σ ∈ [{c['window'][0]:g}, {c['window'][1]:g}]. Matched: the best-F1 "
             "latent of each 'group j odd' (F1 of the matched latents: "
             f"{min(c['matched_f1']):.2f}–{max(c['matched_f1']):.2f}); random: as many other live latents, "
             f"{len(c['arms']) - 1} draws. No intervention: rule accuracy {c['base']['rule_accuracy']:.3f}, copy "
             f"share {c['base']['copy_share']:.3f}.", "",
             "| arm | latents | rule accuracy | Δ | copy share | Δ |", "|---|---:|---:|---:|---:|---:|"]
    for a in c["arms"]:
        lines.append(f"| {a['kind']} | {len(a['latents'])} | {a['rule_accuracy']:.3f} | {a['d_rule_accuracy']:+.3f} | "
                     f"{a['copy_share']:.3f} | {a['d_copy_share']:+.3f} |")
    lines += ["", f"The matched set's |Δ rule accuracy| ranks with p = {c['p_rank']:.3f} among the random sets "
              f"(smallest attainable {c['p_min']:.3f}: {len(c['arms']) - 1} random sets). One SAE seed, one sample "
              "seed: no interval over either.", ""]
    return "\n".join(lines)
