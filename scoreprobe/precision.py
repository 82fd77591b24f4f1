"""Reduced-precision network evaluations: a probe run under `torch.autocast`.

`autocast="bf16"` (or "fp16") evaluates the network's matrix products (linear layers, attention)
in that dtype. Everything else keeps the probe's dtype (float32 by default): autocast only changes
the operators on its lists, and `ode.integrate` casts every denoiser output back, so the ODE state,
the Heun arithmetic and the classification of endpoints are unchanged. A store records the setting
in its config, so a float32 store is never extended with bf16 results. How often the endpoints
agree with float32: `bench/bench_basins.py --bf16` and tests/test_precision.py.
"""
import functools

import torch

from scoreprobe.errors import ConfigError
from scoreprobe.ode import resolve_device

AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}


def check_autocast(autocast):
    """`autocast` if it is None or a key of AUTOCAST, else ConfigError."""
    if autocast is not None and autocast not in AUTOCAST:
        raise ConfigError(f"autocast must be one of {', '.join(AUTOCAST)} or None, got {autocast!r}")
    return autocast


def with_autocast(probe, config, autocast, device):
    """(probe, config) for a probe function model -> Dataset: unchanged when autocast is None, else a
    probe that runs under torch.autocast(<device type>, AUTOCAST[autocast]) (keeping its attributes,
    such as `stackable`) and the config with "autocast" set. device: where the network runs."""
    if check_autocast(autocast) is None:
        return probe, config
    device_type = resolve_device("auto" if device is None else device).type

    @functools.wraps(probe)
    def run(model):
        with torch.autocast(device_type, dtype=AUTOCAST[autocast]):
            return probe(model)
    return run, {**config, "autocast": autocast}
