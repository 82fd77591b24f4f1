"""Compact exports (.npz) read without trusting them: `scoreprobe compare`, `sp.compare` and every analyses/
reader go through here.

`read_npz` checks the file from its headers alone before loading anything: a zip archive of .npy members, no
object arrays (nothing is unpickled), and declared sizes that fit MAX_EXPORT_BYTES in all (a 1 KB file whose
header claims 931 GiB is refused before any allocation). `check_clocks` then checks the clocks fields every
reader builds a Dataset from: steps integers, one per checkpoint, strictly increasing (an unsorted or repeated
step is refused, not sorted on read: our exporters write them sorted, so disorder means the file was edited
or damaged); states integers of the known codes (scoreprobe.data.STATES), one row per step; novel_oracle one
finite number. Every refusal is one DataError naming the file and the field.
"""
import math
import zipfile
import zlib

import numpy as np
from numpy.lib import format as npformat

from scoreprobe.data.datasets import STATE_CODES
from scoreprobe.errors import DataError
from scoreprobe.limits import MAX_EXPORT_BYTES

_HEADERS = {(1, 0): npformat.read_array_header_1_0, (2, 0): npformat.read_array_header_2_0}


def npz_headers(path):
    """{field: (shape, dtype)} of the .npz at `path`, from the members' headers alone (nothing loaded)."""
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise DataError(f"{path} is not an .npz file (a zip archive of arrays): {e}") from None
    out, total = {}, 0
    with zf:
        for info in zf.infolist():
            field = info.filename.removesuffix(".npy")
            shape, dtype = _header(path, zf, info, field)
            if dtype.hasobject:
                raise DataError(f"{path}: field {field!r} holds Python objects ({dtype}); exports hold plain arrays")
            total += math.prod(shape) * dtype.itemsize
            if total > MAX_EXPORT_BYTES:
                raise DataError(f"{path}: field {field!r} declares shape {shape} of {dtype}: the arrays would take "
                                f"{total} bytes, over the {MAX_EXPORT_BYTES >> 20} MiB limit (scoreprobe.limits)")
            out[field] = (shape, dtype)
        _check_crc(path, zf)
    return out


def _check_crc(path, zf):
    """Every member read whole against its CRC (np.load reads a member's declared bytes only and never
    reaches the check: a flipped byte would pass)."""
    try:
        bad = zf.testzip()
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise DataError(f"cannot read the export {path} (truncated or damaged?): {e}") from None
    if bad is not None:
        raise DataError(f"{path}: field {bad.removesuffix('.npy')!r} is damaged (its CRC does not match)")


def _header(path, zf, info, field):
    try:
        with zf.open(info) as f:
            read = _HEADERS.get(npformat.read_magic(f))
            if read is None:
                raise ValueError("an .npy format version this reader does not take")
            shape, _, dtype = read(f)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError) as e:
        raise DataError(f"{path}: field {field!r} is not a readable .npy array: {e}") from None
    return shape, dtype


def read_npz(path):
    """{field: array} of the .npz at `path`, loaded only after `npz_headers` accepted it."""
    npz_headers(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise DataError(f"cannot read the export {path} (truncated or damaged?): {e}") from None


def field(path, arrays, name, kind=None, ndim=None):
    """arrays[name], checked: present; kind "int" (integer dtype), "real" (integer or float) or "text" (a str
    scalar); ndim its number of dimensions."""
    if name not in arrays:
        raise DataError(f"{path}: field {name!r} is missing")
    a = arrays[name]
    ok = {None: True, "int": np.issubdtype(a.dtype, np.integer) and a.dtype != bool,
          "real": (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)) and a.dtype != bool,
          "text": a.dtype.kind == "U" and a.ndim == 0}[kind]
    if not ok:
        raise DataError(f"{path}: field {name!r} must be {kind}, got {a.dtype}")
    if ndim is not None and a.ndim != ndim:
        raise DataError(f"{path}: field {name!r} must have {ndim} dimension(s), got shape {a.shape}")
    return a


def check_clocks(path, arrays, step="step", state="state", oracle="novel_oracle"):
    """(steps (S,) int64, states (S, n) int8, novel_oracle float) of an export, every check of the module
    docstring passed (field names as the export calls them)."""
    steps = field(path, arrays, step, "int", 1).astype(np.int64)
    if steps.size == 0 or steps.min() < 0:
        raise DataError(f"{path}: field {step!r} must hold at least one step, none negative")
    bad = np.flatnonzero(np.diff(steps) <= 0)
    if bad.size:
        i = int(bad[0])
        raise DataError(f"{path}: field {step!r} is not strictly increasing ({steps[i]} then {steps[i + 1]} at "
                        f"index {i + 1}): steps must be sorted and unique")
    states = field(path, arrays, state, "int", 2)
    if states.shape[0] != steps.size or states.shape[1] < 1:
        raise DataError(f"{path}: field {state!r} has shape {states.shape}; expected ({steps.size}, samples ≥ 1), "
                        f"one row per step")
    unknown = np.setdiff1d(np.unique(states), sorted(STATE_CODES.values()))
    if unknown.size:
        raise DataError(f"{path}: field {state!r} holds unknown state codes {unknown[:5].tolist()} (known: "
                        f"{sorted(STATE_CODES.values())})")
    value = field(path, arrays, oracle, "real", 0)
    if not np.isfinite(value):
        raise DataError(f"{path}: field {oracle!r} must be a finite number, got {value}")
    return steps, states.astype(np.int8), float(value)
