"""Interventions on SAE latents: a hook that ablates or steers chosen latents at the SAE's site.

    fn = latent_hook(sae, [12], how="ablate")
    out = sp.run_with_hooks(D, x, 0.7, fwd_hooks=[("blocks.2.hook_resid_post", fn)])
    with sp.hooks(D, fwd_hooks=[("blocks.2.hook_resid_post", fn)]):
        samples = sp.sample(D, 256, seed=0)                 # the intervention at every step of the sampler

The activation (B, *dims) is flattened per row as `site_rows` flattens it (its d_in must be the SAE's),
encoded, and changed by the chosen latents' decoded contributions only, so the SAE's reconstruction error
stays in the activation:
    ablate   a − Σ_l f_l(a)·W_dec[l]              (the latents' part of the reconstruction removed)
    steer    a + scale·Σ_l W_dec[l]               (the latents' directions added)
"""
import torch

from scoreprobe.errors import ConfigError, DataError

HOW = ("ablate", "steer")


def latent_hook(sae, latents, how="ablate", scale=1.0):
    """A forward hook fn(activation, name) -> activation for sp.hooks / sp.run_with_hooks (module docstring).

    latents : latent indices (ints in [0, d_sae)); how : "ablate" or "steer"; scale : steer's multiple."""
    if how not in HOW:
        raise ConfigError(f"how must be one of {', '.join(HOW)}, got {how!r}")
    idx = torch.as_tensor(list(latents) if not isinstance(latents, int) else [latents], dtype=torch.long)
    if idx.numel() == 0 or idx.min() < 0 or idx.max() >= sae.d_sae:
        raise ConfigError(f"latents must be indices in [0, {sae.d_sae}), got {latents!r}")

    def fn(a, name):
        flat = a.reshape(a.shape[0], -1)                                    # (B, d_in)
        if flat.shape[1] != sae.d_in:
            raise DataError(f"{name}: the activation has {flat.shape[1]} values per row, the SAE's d_in is "
                            f"{sae.d_in}")
        W = sae.W_dec.detach()[idx].to(flat)                                       # (L, d_in)
        if how == "ablate":
            with torch.no_grad():
                f = sae.to(flat.device).encode(flat.float())[:, idx].to(flat)   # (B, L)
            return (flat - f @ W).reshape(a.shape)
        return (flat + scale * W.sum(0)).reshape(a.shape)
    return fn
