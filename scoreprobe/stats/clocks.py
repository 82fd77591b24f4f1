"""`sp.clocks`: the clock curves of a training run with τ_rule, τ_novel, τ_mem and the window read off them.

The composition one layer above the probes: `scoreprobe.probes.clocks.measure_clocks` samples and
classifies every checkpoint (measurement), `scoreprobe.stats.taus.tau_summary` reads the τ with bootstrap
CIs (inference) and `scoreprobe.stats.tidy.with_taus` puts them in data variables. The data flow one way,
probes → stats: the probe imports nothing from here.
"""
from scoreprobe import store
from scoreprobe.defaults import DEFAULT_N_STEPS, MEM_THRESHOLD, RULE_THRESHOLD
from scoreprobe.probes.clocks import measure_clocks
from scoreprobe.stats.taus import tau_summary
from scoreprobe.stats.tidy import with_taus
from scoreprobe.sweep import is_multi


def clocks(series_or_mapping, n_samples=1000, seed=0, n_steps=DEFAULT_N_STEPS, device=None, dataset=None, rule=None,
           keep_bits=False, out=None, chunk_size=None, steps=None, rule_threshold=RULE_THRESHOLD,
           mem_threshold=MEM_THRESHOLD, n_boot=1000, progress=None, overwrite=False, models_per_pass=1,
           autocast=None, model_id=None, sampler=None, fwd_hooks=None, sigma_window=None):
    """The two clocks of a training run: sample every checkpoint with the same seed, classify, read τ.

    Parameters
    ----------
    series_or_mapping, n_samples, seed, n_steps, device, dataset, rule, keep_bits, out, chunk_size, steps,
    progress, overwrite, models_per_pass, autocast, model_id, sampler, fwd_hooks, sigma_window :
        as for `scoreprobe.probes.clocks.measure_clocks` (a single denoiser: no `step` dim, no τ).
    rule_threshold, mem_threshold, n_boot : see `scoreprobe.stats.taus.tau_summary` (τ_novel's threshold
        is rule_threshold × `novel_oracle`).

    Returns
    -------
    xarray.Dataset: `measure_clocks`' Dataset (dims (step, sample[, bit])) whose attrs hold, over steps, also
    everything `tau_summary` returns (τ with CIs, the window; written to `out` too), and the τ, CIs and window
    as () / (bound,) data variables as well (`with_taus`: xr.concat over runs keeps them).
    """
    ds = measure_clocks(series_or_mapping, n_samples=n_samples, seed=seed, n_steps=n_steps, device=device,
                        dataset=dataset, rule=rule, keep_bits=keep_bits, out=out, chunk_size=chunk_size, steps=steps,
                        progress=progress, overwrite=overwrite, models_per_pass=models_per_pass, autocast=autocast,
                        model_id=model_id, sampler=sampler, fwd_hooks=fwd_hooks, sigma_window=sigma_window)
    if not is_multi(series_or_mapping):
        return ds
    attrs = tau_summary(ds, rule_threshold=rule_threshold, mem_threshold=mem_threshold, n_boot=n_boot)
    if out is not None:
        store.update_attrs(out, attrs)
    ds.attrs.update(attrs)
    return with_taus(ds)
