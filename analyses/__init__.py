"""The studies, one folder each, every one a script through the public API (run from the repository root):

    python analyses/two_clocks        τ_rule and τ_mem over G and N (the two clocks)
    python analyses/scaling           the scaling claims as evidence (presets, exports, tables, figures)
    python analyses/mechanism         basins, retention and the DSM split over training
    python analyses/remedies          architectural and curriculum remedies for large G
    python analyses/gpt_clocks        the two clocks of an autoregressive GPT on the same data
    python analyses/sampler_clocks    how the clocks depend on the sampler

`python -m analyses.<study>` does the same. `grid.py` holds what the studies share (training runs in
parallel, measured clocks, extrapolation); results go to analyses/results/.
"""
