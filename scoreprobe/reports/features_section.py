"""The report's features section: each given SAE's best latents with their top-activating inputs.

    sp.report(out="report.html", saes=["saes/blocks.2.hook_resid_post/step36000_sigma0.7"])
    scoreprobe report --sae saes/blocks.2.hook_resid_post/step36000_sigma0.7

Per SAE folder (sp.save_sae; sp.sae_sweep(out_dir=) writes one per cell): the SAE is loaded (tensors only), and
its cfg.json's "scoreprobe" settings say where its rows came from: the site, the checkpoint step and σ (recorded
by sp.train_sae for rows of one (step, σ) cell of a cache_series store). The series' training items then
held-out items (N_ROWS rows) are noised once at σ (seed 0, per-row noise), run through that checkpoint's
denoiser (sp.run_with_cache), encoded, and scored against the rule's features (sp.rule_features, sp.sae_scores).
Shown: the SAE's explained variance, L0, dead latents and coverage on these rows, and its N_BEST latents with the
highest F1 for a parity-group feature (any feature where the rule has no groups) with their K_TOP top-activating
inputs (sp.top_activating), drawn by sp.plot_top_activating (clean item, noisy x). A folder that holds no SAE, an
SAE without a recorded site, step or σ, a step the series lacks, or rows of another width: the section names the
folder and the reason, and the page is written.
"""
import numpy as np
import torch

from scoreprobe.errors import ConfigError, ScoreprobeError
from scoreprobe.reports.safe import html, join

N_ROWS, N_BEST, K_TOP = 512, 3, 6


def features_payload(series, folders, *, n_rows=N_ROWS, n_best=N_BEST, k_top=K_TOP):
    """[one dict per folder]: site, step, sigma, scalars, latents [(latent, feature, f1, n_active)], png (base64);
    or {folder, problem} where it cannot be shown (module docstring)."""
    out = []
    for folder in folders:
        try:
            out.append(dict(folder=str(folder), **_one(series, folder, n_rows, n_best, k_top)))
        except (ScoreprobeError, OSError) as e:
            out.append(dict(folder=str(folder), problem=f"{type(e).__name__}: {e}"))
    return out


def _one(series, folder, n_rows, n_best, k_top):
    import scoreprobe as sp
    from scoreprobe.noise import randn_per_sample
    from scoreprobe.reports.payload import png
    sae = sp.load_sae(folder)
    cfg = sae.config
    site, step, sigma = cfg.get("site"), cfg.get("step"), cfg.get("sigma")
    if site is None or step is None or sigma is None:
        raise ConfigError("its cfg.json records no site, checkpoint step and σ (scoreprobe.site / .step / .sigma): "
                          "train it on one (step, σ) of a cache_series store, or add them")
    if int(step) not in series.steps:
        raise ConfigError(f"step {step} is not a checkpoint of this series")
    ds = series.dataset
    clean = np.concatenate([ds.train, ds.heldout])[:n_rows]
    x = torch.as_tensor(sp.to_signed(clean), dtype=torch.float32)
    x = x + float(sigma) * randn_per_sample(0, np.arange(len(clean)), clean.shape[1])
    _, cache = sp.run_with_cache(series.denoiser(int(step)), x, float(sigma), names=[site])
    truth = sp.rule_features(series.rule, sp.to_bits(x).numpy(), clean=clean, train=ds.train)
    scores = sp.sae_scores(sae, cache, truth, site=site)
    groups = any(str(f).startswith("group") for f in scores.feature.values)
    latents, feats, f1 = sp.best_latents(scores, n_best, prefix="group" if groups else "")
    tops = sp.top_activating(sae, cache, k=k_top, latents=latents, site=site)
    fig = sp.plot_top_activating(tops, clean, noisy=x.numpy(), scores=scores, image_shape=series.rule.image_shape[1:])
    return dict(site=site, step=int(step), sigma=float(sigma), n_rows=len(clean), d_sae=sae.d_sae, arch=sae.arch,
                explained_variance=float(scores.explained_variance), l0=float(scores.l0), dead=int(scores.dead),
                coverage=int(scores.coverage), n_defined=int(scores.n_defined), by="parity groups" if groups else
                "any feature", latents=[(int(a), str(b), float(c), int(tops.n_active.sel(latent=a)))
                                        for a, b, c in zip(latents, feats, f1)], png=png(fig, dpi=90))


def features_body(records):
    """The section's HTML (every value escaped by safe.html) from features_payload's records."""
    return join(_block(r) for r in records)


def _block(r):
    if "problem" in r:
        return html('<div class="store"><h4><code>{f}</code></h4><p class="note">not shown: {p}</p></div>',
                    f=r["folder"], p=r["problem"])
    rows = join(html("<tr><td>{l}</td><td>{f}</td><td>{v}</td><td>{n}</td></tr>", l=lat, f=feat, v=f"{f1:.2f}",
                     n=n) for lat, feat, f1, n in r["latents"])
    return html(
        '<div class="store"><h4>{site} — step {step}, σ {sigma} (<code>{folder}</code>)</h4>'
        "<p>{arch} SAE, {d_sae} latents, on {n_rows} inputs (training items, then held-out, noised once at σ): "
        "explained variance {ev}, L0 {l0}, dead {dead}, coverage {cov} of {nd} features (F1 ≥ 0.8). Its best "
        "latents by F1 for {by}:</p>"
        '<table class="kv"><tr><th>latent</th><th>best feature</th><th>F1</th><th>active on rows</th></tr>{rows}'
        '</table><div class="figs"><img alt="top-activating inputs" src="data:image/png;base64,{png}"></div></div>',
        site=r["site"], step=r["step"], sigma=f"{r['sigma']:g}", folder=r["folder"], arch=r["arch"],
        d_sae=r["d_sae"], n_rows=r["n_rows"], ev=f"{r['explained_variance']:.3f}", l0=f"{r['l0']:.1f}",
        dead=r["dead"], cov=r["coverage"], nd=r["n_defined"], by=r["by"], rows=rows, png=r["png"])

