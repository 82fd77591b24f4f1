"""Loading checkpoints as people have them.

    series.py         run directories (`load_series`), files as a series, `load_checkpoint`
    sources.py        SOURCES as people name them: a run directory, files, a glob, a steps file
    formats.py        reading a file safely: safetensors, torch zip, legacy torch, pickle; side files
    weights.py        which weights to take: EMA or raw, wherever the training tools put them
    foreign.py        the architecture of other people's DiT weights
    diffusers_dit.py  diffusers' DiTTransformer2DModel folders, without diffusers
    settings.py       settings of a file, where each came from, and the parameterization they imply
    plan.py           what to build from one file: weights, architecture, parameterization, label

Import the public names from `scoreprobe` directly.
"""
