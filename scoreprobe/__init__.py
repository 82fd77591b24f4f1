"""scoreprobe: when does a diffusion model learn the rule, and when does it start copying?

The public API is re-exported here; nothing is defined in this file.
"""
import logging as _logging
import os as _os
import sys as _sys

# Tiny models on a few shared cores: OpenMP worker threads that spin while waiting make torch
# up to ~10x slower when another process holds a core. Passive waiting costs nothing measurable
# here; it only applies when torch is not imported yet, and an explicit setting wins.
if "torch" not in _sys.modules:
    _os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

_logging.getLogger(__name__).addHandler(_logging.NullHandler())

# The public API: name -> module that defines it. Imported on first use (PEP 562), so that
# `import scoreprobe` and the CLI's start-up (`scoreprobe --help`) do not pay for torch, scipy and
# xarray until a name that needs them is touched.
_API = {
    "scoreprobe.errors": "CheckpointError ConfigError DataError ScoreprobeError StoreError ScoreprobeWarning "
                         "NonFiniteWarning ResolutionWarning SettingWarning StoreDamageWarning StoreRepairWarning "
                         "TrustWarning",
    "scoreprobe.data.rules": "ExactK LatinSquare Parity RowK Sudoku rule_from_spec",
    "scoreprobe.data.datasets": "Dataset load_dataset make_dataset to_bits to_signed transposed_dataset",
    "scoreprobe.data.bitindex": "BitIndex",
    "scoreprobe.oracles": "EmpiricalDenoiser GaussianDenoiser LocalDenoiser RuleDenoiser",
    "scoreprobe.ode": "edm_sigmas integrate randn_per_sample",
    "scoreprobe.ode.samplers": "Sampler sample",
    "scoreprobe.probes.dsm": "dsm_by_sigma",
    "scoreprobe.stats.dsm_stats": "dsm_summary",
    "scoreprobe.store": "open_store written_steps",
    "scoreprobe.sweep": "sweep",
    "scoreprobe.stats.clocks": "clocks",
    "scoreprobe.stats.taus": "fit_power_law tau_summary window_status",
    "scoreprobe.stats.thresholds": "pool_taus taus",
    "scoreprobe.stats.seeds": "pool_ratio pool_seeds pool_windows seed_fit tau_draws",
    "scoreprobe.stats.abruptness": "abruptness",
    "scoreprobe.stats.tidy": "summary with_taus",
    "scoreprobe.stats.compare": "compare",
    "scoreprobe.stats.families": "family_taus",
    "scoreprobe.slices": "Plane auto_plane classify plane_from_spec",
    "scoreprobe.probes.field": "score_field",
    "scoreprobe.probes.basins": "basins",
    "scoreprobe.probes.retention": "retention",
    "scoreprobe.probes.decompose": "decompose",
    "scoreprobe.stats.decompose_calls": "best_oracle best_patch decompose_summary mixture_weights",
    "scoreprobe.probes.crossover": "crossover",
    "scoreprobe.probes.oracle_samples": "oracle_samples pixel_classes",
    "scoreprobe.probes.disjoint": "disjoint_agreement",
    "scoreprobe.viz": "animate_basins plot_basins plot_dsm plot_dsm_gap plot_field plot_field_panels "
                      "plot_retention plot_clocks plot_states",
    "scoreprobe.loading.series": "CheckpointSeries load_checkpoint load_series series_from_files",
    "scoreprobe.loading.sources": "open_source",
    "scoreprobe.training.ensemble": "train_ensemble",
    "scoreprobe.training.monitor": "Monitor",
    "scoreprobe.reports": "report",
    "scoreprobe.reports.compare_page": "compare_report",
    "scoreprobe.inside": "patch patch_ode run_with_cache",
    "scoreprobe.inside.activations": "ActivationCache",
    "scoreprobe.models.hooked": "SigmaWindowHooks",
    "scoreprobe.inside.intervene": "ablate hooks run_with_hooks",
    "scoreprobe.inside.attribution": "direct_attribution",
    "scoreprobe.inside.paths": "path_patch",
    "scoreprobe.inside.stream": "cache_series",
    "scoreprobe.probes.circuits": "circuits",
    "scoreprobe.stats.verdict": "verdict",
    "scoreprobe.viz.circuits": "plot_circuits",
    "scoreprobe.studies.grid": "Grid",
    "scoreprobe.features.sae": "SAE",
    "scoreprobe.features.disk": "save_sae load_sae",
    "scoreprobe.features.train": "train_sae",
    "scoreprobe.features.scores": "sae_scores",
    "scoreprobe.features.sweep": "sae_sweep",
    "scoreprobe.features.truth": "probe_directions rule_features",
    "scoreprobe.features.steer": "latent_hook",
    "scoreprobe.features.synthetic": "planted_dictionary",
    "scoreprobe.features.top": "best_latents top_activating",
    "scoreprobe.viz.features": "plot_top_activating",
}
_WHERE = {name: module for module, names in _API.items() for name in names.split()}
__all__ = sorted(_WHERE)
__version__ = "0.1.0"


def __getattr__(name):
    import importlib
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value           # later lookups skip this function
        return value
    try:                                   # submodules: sp.data, sp.probes, ...
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
