"""Typed errors. The CLI turns each into one line on stderr and exit code 2."""
import re
import sys


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


class WorkerError(ScoreprobeError):
    """A step could not be computed on a dask worker: its task raised, its worker died every time it
    ran it, or the cluster went away (`scoreprobe.sweep.dask_wait` gives the bounds)."""


# Appended to the errors for a checkpoint layout scoreprobe cannot read: what to do instead.
OTHER_MODELS = ("scoreprobe reads its own runs, facebookresearch/DiT, diffusers DiT and NVlabs/edm networks; "
                "for any other model pass --denoiser MODULE:FUNCTION --trust (CLI) or the denoiser D(x, sigma) "
                "itself to the API (README: bring your own denoiser)")


class ScoreprobeWarning(UserWarning):
    """Base class of the warnings scoreprobe issues for things a user must act on."""


class NonFiniteWarning(ScoreprobeWarning):
    """A model produced NaN/inf values; they are counted and excluded as documented."""


class ResolutionWarning(ScoreprobeWarning):
    """Checkpoints are too sparse (or a series too short) to place a clock's crossing precisely."""


class StoreDamageWarning(ScoreprobeWarning):
    """A store's data no longer match their checksums (deleted or overwritten chunk files)."""


class StoreRepairWarning(ScoreprobeWarning):
    """A store an interrupted run left was repaired, cleaned up or resumed (its committed steps are kept)."""


class TrustWarning(ScoreprobeWarning):
    """A file is unpickled with trust=True: code stored in it may run."""


class SettingWarning(ScoreprobeWarning):
    """An argument is ignored, or a requested part of a result cannot be computed for these inputs."""


class StepGuessWarning(ScoreprobeWarning):
    """The training steps of checkpoint files were read from their names by the default rule."""


def user_stacklevel():
    """`stacklevel` for warnings.warn, called in the function that warns, that attributes the warning
    to the first caller outside the scoreprobe package (the user's script, notebook cell or test)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == "scoreprobe":
        frame, level = frame.f_back, level + 1
    return level


def first_line(e):
    """'Type: first sentence' of an exception, at most ~200 characters."""
    text = str(e).strip()
    inner = re.search(r"WeightsUnpickler error:\s*([^\n]+)", text)  # torch's long weights_only message
    text = inner.group(1) if inner else (text.splitlines() or [""])[0]
    text = text.split(". ")[0][:200]
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
