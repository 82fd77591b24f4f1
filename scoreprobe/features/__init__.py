"""Features in a network's activations: sparse autoencoders, ground truth from the rule, and scores.

    sae.py        the SAE module (SAELens names: encode, decode, W_enc, W_dec, b_enc, b_dec)
    jumprelu.py   JumpReLU's straight-through estimators
    rows.py       activations as rows (n, d_in): a tensor, or one hook site of a cached Dataset / store
    train.py      train_sae (resumable from a checkpoint= file)
    disk.py       save_sae / load_sae (SAELens's folder layout) and the training state
    sweep.py      sae_sweep: one SAE per (site, step, σ) of a cached store, scored, resumable
    top.py        top_activating: each latent's top-activating rows (ties by row index; a dead latent: -1)
    synthetic.py  a planted dictionary (known directions, sparse codes) for validation

Definitions and the validation numbers: docs/features.md.
"""
