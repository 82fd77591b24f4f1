"""Reading checkpoint files safely, whatever their container: safetensors, torch zip, legacy torch, pickle.

    obj, meta, container = read_file("model.safetensors")   # meta: safetensors __metadata__ (or {})
    side = read_side_files("run/0050000.pt")                # [(name, dict)] from args.json / config.json

The container is sniffed from the bytes, never from the extension. Without `trust` nothing is
unpickled beyond tensors, plain containers and argparse.Namespace (`torch.load(weights_only=True)`);
safetensors files never run code. safetensors is an optional dependency (`pip install safetensors`).
"""
import argparse
import json
import os
import pickle
import re
import stat
import struct
import warnings
import zipfile
import zlib
from pathlib import Path

import torch

from scoreprobe.errors import CheckpointError, TrustWarning, first_line, user_stacklevel
from scoreprobe.limits import MAX_JSON_DEPTH, MAX_SIDE_BYTES, check_bool, json_depth


SIDE_FILES = ("args.json", "config.json")
_MAX_HEADER = 100_000_000          # safetensors' own limit on the JSON header


def _check_path(path):
    if path.is_dir():
        if (path / "run.json").is_file():
            raise CheckpointError(f"{path} is a run directory; load it with load_series(path)")
        raise CheckpointError(f"{path} is a directory without run.json, not a run directory or checkpoint file")
    if not path.is_file():
        raise CheckpointError(f"no checkpoint file at {path}")
    if path.stat().st_size == 0:
        raise CheckpointError(f"{path} is empty")


def is_safetensors(path):
    """True when the bytes look like safetensors: an 8-byte little-endian header size, then a JSON object."""
    size = Path(path).stat().st_size
    with open(path, "rb") as f:
        head = f.read(9)
    if len(head) < 9:
        return False
    n = struct.unpack("<Q", head[:8])[0]
    return 2 <= n <= min(_MAX_HEADER, size - 8) and head[8:9] == b"{"


def read_safetensors(path):
    """(state_dict of CPU tensors, metadata dict) of a safetensors file; CheckpointError without the package."""
    try:
        from safetensors import safe_open
    except ImportError:
        raise CheckpointError(f"{path} is a safetensors file; reading it needs the 'safetensors' package: "
                              "pip install safetensors (or pip install 'scoreprobe[safetensors]')") from None
    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            meta = dict(f.metadata() or {})
            sd = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as e:  # bad header, truncated data, unknown dtype
        raise CheckpointError(f"{path} is not a readable safetensors file: {first_line(e)}") from None
    return sd, meta


def read_file(path, trust=False):
    """(object, safetensors metadata or {}, container name) of one checkpoint file."""
    path = Path(path)
    trust = check_bool(trust, "trust")
    _check_path(path)
    if is_safetensors(path):
        sd, meta = read_safetensors(path)
        return sd, meta, "safetensors"
    return _read_torch(path, trust), {}, "torch"


def check_zip_crc(path):
    """CheckpointError when a zip container (torch's format) has a member whose CRC-32 does not match.

    torch.load does not verify CRCs, so a bit flip in the stored tensors would load silently.
    """
    try:
        with zipfile.ZipFile(path) as zf:
            bad = zf.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error) as e:
        raise CheckpointError(f"{path} is a corrupt zip container: {first_line(e)}") from None
    if bad is not None:
        raise CheckpointError(f"{path} is corrupt: the CRC-32 of its member {bad!r} does not match its data")


def _read_torch(path, trust):
    """torch.load with weights_only=True (argparse.Namespace allowed); with trust, fall back to full unpickling."""
    if zipfile.is_zipfile(path):
        check_zip_crc(path)
    try:
        with torch.serialization.safe_globals([argparse.Namespace]), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*pickle protocol", category=UserWarning)
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        if trust:
            return _read_trusted(path)
        m = re.search(r"GLOBAL ([\w.]+)", str(e))
        with open(path, "rb") as f:
            is_pickle = f.read(1) == b"\x80" and not zipfile.is_zipfile(path)
        if m or is_pickle:
            what = f"Python objects beyond tensors ({m.group(1)})" if m else "a plain Python pickle"
            raise CheckpointError(f"{path} holds {what}; loading it needs code execution. Pass trust=True "
                                  "(CLI: --trust) only for files you trust") from None
        raise _unreadable(path, "corrupt?", e) from None
    except Exception as e:  # truncated zip (RuntimeError), EOFError, bad headers, ...
        raise _unreadable(path, "truncated or corrupt?", e) from None


def _unreadable(path, guess, e):
    """The CheckpointError of a file torch.load cannot read; a text file (whichever way unpickling it failed)
    is named as such."""
    if _is_text(path):
        return CheckpointError(f"{path} is a text file, not a checkpoint: scoreprobe reads torch files (.pt, .pth, "
                               ".ckpt), safetensors files, diffusers folders and run directories")
    return CheckpointError(f"{path} is not a readable checkpoint ({guess}): {first_line(e)}")


def _is_text(path, n=4096):
    """True when the first n bytes of `path` decode as UTF-8 without NUL bytes (a script, JSON, a README)."""
    with open(path, "rb") as f:
        head = f.read(n)
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:   # a multi-byte character cut at n bytes still reads as text
        if e.start < len(head) - 3:
            return False
    return bool(head) and b"\x00" not in head


def _read_trusted(path):
    """Full unpickling (runs code from the file): torch zip files via torch.load, others via pickle."""
    warnings.warn(f"loading {path} with trust=True: code stored in the file may run", TrustWarning,
                  stacklevel=user_stacklevel())
    try:
        if zipfile.is_zipfile(path):
            return torch.load(path, map_location="cpu", weights_only=False)
        with open(path, "rb") as f:
            obj = pickle.load(f)
        if isinstance(obj, int) and obj == torch.serialization.MAGIC_NUMBER:  # legacy torch.save format
            return torch.load(path, map_location="cpu", weights_only=False)
        return obj
    except ModuleNotFoundError as e:
        hint = " (an NVlabs/edm pickle: put the edm repository on PYTHONPATH)" if e.name in (
            "torch_utils", "dnnlib", "training") else ""
        raise CheckpointError(f"{path} needs the Python module {e.name!r} to load{hint}; "
                              "make it importable") from None
    except Exception as e:
        raise CheckpointError(f"could not load {path} even with trust=True: {first_line(e)}") from None


def read_json(path):
    """A JSON object from `path` (a regular file of at most MAX_SIDE_BYTES, nested at most MAX_JSON_DEPTH
    levels); CheckpointError when larger, deeper, unreadable or not an object."""
    path = Path(path)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):   # a FIFO would block, /dev/zero never end
            raise CheckpointError(f"{path} is not a regular file")
        with open(path, "rb") as f:
            raw = f.read(MAX_SIDE_BYTES + 1)
        if len(raw) > MAX_SIDE_BYTES:
            raise CheckpointError(f"{path} is larger than {MAX_SIDE_BYTES} bytes (scoreprobe.limits.MAX_SIDE_BYTES)")
        obj = json.loads(raw.decode())
    except RecursionError:
        raise CheckpointError(f"{path} is nested deeper than {MAX_JSON_DEPTH} levels "
                              "(scoreprobe.limits.MAX_JSON_DEPTH)") from None
    except (OSError, ValueError) as e:   # ValueError: JSON and UTF-8 errors
        raise CheckpointError(f"{path} is not readable JSON: {first_line(e)}") from None
    if json_depth(obj) > MAX_JSON_DEPTH:
        raise CheckpointError(f"{path} is nested deeper than {MAX_JSON_DEPTH} levels (scoreprobe.limits.MAX_JSON_DEPTH)")
    if not isinstance(obj, dict):
        raise CheckpointError(f"{path} holds a JSON {type(obj).__name__}, expected an object")
    return obj


def read_side_files(path):
    """[(file name, dict)] for args.json / config.json in the folder of checkpoint `path` (when present)."""
    folder = Path(path).parent
    return [(name, read_json(folder / name)) for name in SIDE_FILES if (folder / name).exists()]   # FIFOs refused
