"""Typed errors. The CLI turns each into one line on stderr and exit code 2."""


class ScoreprobeError(Exception):
    """Base class of every error scoreprobe raises on purpose."""


class ConfigError(ScoreprobeError, ValueError):
    """A setting or argument is invalid (wrong G, k out of range, unknown option...)."""


class DataError(ScoreprobeError, ValueError):
    """Input data are malformed (bits not 0/1, wrong width, NaN outputs...)."""


class CheckpointError(ScoreprobeError):
    """A checkpoint or run directory cannot be read safely or is inconsistent."""


class StoreError(ScoreprobeError):
    """A zarr store cannot be written or does not match the requested analysis."""
