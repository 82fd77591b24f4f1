"""Typed errors. The CLI turns each into one line on stderr and exit code 2."""
import re


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


class ScoreprobeWarning(UserWarning):
    """Base class of the warnings scoreprobe issues for things a user must act on."""


class NonFiniteWarning(ScoreprobeWarning):
    """A model produced NaN/inf values; they are counted and excluded as documented."""


class ResolutionWarning(ScoreprobeWarning):
    """Checkpoints are too sparse (or a series too short) to place a clock's crossing precisely."""


class StoreDamageWarning(ScoreprobeWarning):
    """A store's data no longer match their checksums (deleted or overwritten chunk files)."""


def first_line(e):
    """'Type: first sentence' of an exception, at most ~200 characters."""
    text = str(e).strip()
    inner = re.search(r"WeightsUnpickler error:\s*([^\n]+)", text)  # torch's long weights_only message
    text = inner.group(1) if inner else (text.splitlines() or [""])[0]
    text = text.split(". ")[0][:200]
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
