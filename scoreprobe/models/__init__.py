"""Networks: DiT (EDM-preconditioned denoiser) and a small autoregressive GPT."""
