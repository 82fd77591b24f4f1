"""Probes: pure functions (denoiser or series, inputs) -> xarray.Dataset.

Each probe module defines its analyses; given a single denoiser they return a Dataset without a
`step` dimension, given a series or a {step: denoiser} mapping they map over the steps through
`scoreprobe.sweep` (optionally writing a zarr store). Import them from `scoreprobe` directly.

Probes measure; they import nothing from `scoreprobe.stats`, which infers from what they measured (τ,
pooled intervals, tests). A public function that does both (`sp.clocks`) composes them in `stats`.
"""
