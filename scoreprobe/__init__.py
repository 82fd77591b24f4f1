"""scoreprobe: when does a diffusion model learn the rule, and when does it start copying?

The public API is re-exported here; nothing is defined in this file.
"""
import logging as _logging

_logging.getLogger(__name__).addHandler(_logging.NullHandler())

from scoreprobe.errors import CheckpointError, ConfigError, DataError, ScoreprobeError, StoreError  # noqa: E402,F401

__version__ = "0.1.0"
