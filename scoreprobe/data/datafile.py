"""Checks of a dataset .npz before and after loading it: headers (without decompressing), limits, distinct items.

    headers = npz_headers(path, DataError)          # {key: (shape, dtype)} from the .npy headers alone
    check_bit_headers(path, headers, n_bits)        # train / heldout declared (N, n_bits) ints within limits
    check_distinct(path, train, heldout)            # no duplicates, no item in both sets

data.load_dataset runs them; the limits are in scoreprobe.limits.
"""
import math
import zipfile
import zlib

import numpy as np

from scoreprobe.errors import DataError
from scoreprobe.limits import MAX_DATASET_BYTES, MAX_ITEMS
from scoreprobe.data.rules import rule_from_spec


# ---------------------------------------------------------------------------------------------
# .npz headers, read without loading the arrays
# ---------------------------------------------------------------------------------------------

def npz_headers(path, error):
    """{key: (shape, dtype)} of the .npy members of an .npz file, from their headers alone.

    Nothing is decompressed beyond each member's header, so a small file declaring a huge array
    costs nothing. `error` (an exception class) for a missing, non-zip, or inconsistent file, for
    members that are not .npy arrays, and for object arrays (they would need unpickling).
    """
    from numpy.lib import format as npy

    readers = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}
    try:
        with zipfile.ZipFile(path) as zf:
            out = {}
            for info in zf.infolist():
                key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                with zf.open(info) as f:
                    version = npy.read_magic(f)
                    if version not in readers:
                        raise error(f"{path}: member {key!r} has .npy format version {version}, not 1.0 or 2.0")
                    shape, _, dtype = readers[version](f)
                if dtype.hasobject:
                    raise error(f"{path}: member {key!r} holds Python objects (dtype {dtype}); "
                                "scoreprobe reads only plain numeric and string arrays")
                if math.prod(shape) * dtype.itemsize > info.file_size:
                    raise error(f"{path}: member {key!r} declares {shape} {dtype} but stores only "
                                f"{info.file_size} bytes (truncated or forged header)")
                out[key] = (tuple(shape), np.dtype(dtype))
            return out
    except error:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError, KeyError) as e:
        raise error(f"{path} is not a readable .npz file ({type(e).__name__}: {' '.join(str(e).split())[:120]})") from None


def stored_rule(path, headers):
    """The Rule stored in the npz (None when absent), after checking the headers of rule and seed."""
    for key, kinds, what in (("rule", "U", "a JSON string"), ("seed", "iu", "an integer")):
        if key in headers and (headers[key][0] != () or headers[key][1].kind not in kinds
                               or headers[key][1].itemsize > 1 << 16):
            raise DataError(f"{path}: {key!r} must be {what} scalar, got {headers[key][1]} {headers[key][0]}")
    if "rule" not in headers:
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            text = str(z["rule"])
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise DataError(f"{path}: the stored rule is unreadable ({type(e).__name__})") from None
    return rule_from_spec(text)


def check_bit_headers(path, headers, n_bits):
    """DataError unless train and heldout are declared (N, n_bits) integer arrays within the limits."""
    missing = {"train", "heldout"} - set(headers)
    if missing:
        raise DataError(f"{path} lacks the keys {sorted(missing)} (found {sorted(headers)})")
    total = 0
    for key in ("train", "heldout"):
        shape, dtype = headers[key]
        if dtype.kind not in "biu" or len(shape) != 2 or shape[1] != n_bits:
            raise DataError(f"{path}: {key} must be an (N, {n_bits}) array of 0/1 integers, "
                            f"its header declares {dtype} {shape}")
        if shape[0] > MAX_ITEMS:
            raise DataError(f"{path}: {key} declares {shape[0]} items, more than the limit {MAX_ITEMS} "
                            "(scoreprobe.limits.MAX_ITEMS)")
        total += shape[0] * shape[1]
    if total > MAX_DATASET_BYTES:
        raise DataError(f"{path}: train + heldout hold {total} bits, more than the limit {MAX_DATASET_BYTES} "
                        "(scoreprobe.limits.MAX_DATASET_BYTES)")


def check_distinct(path, train, heldout):
    """DataError when train or heldout hold duplicated items or share an item."""
    both = np.concatenate([train, heldout])
    if len(both) == 0:
        return
    from scoreprobe.data.bitindex import pack_bits
    packed = np.ascontiguousarray(pack_bits(both))
    rows = packed.view(np.dtype((np.void, 8 * packed.shape[1])))[:, 0]
    _, first, inverse, counts = np.unique(rows, return_index=True, return_inverse=True, return_counts=True)
    dup = np.flatnonzero(counts[inverse.ravel()] > 1)
    if dup.size == 0:
        return
    n_tr = len(train)
    cross = np.flatnonzero((first[inverse.ravel()] < n_tr) & (np.arange(len(both)) >= n_tr))
    if cross.size:
        raise DataError(f"{path}: {cross.size} held-out items also occur in the training set "
                        f"(first: heldout[{cross[0] - n_tr}]); the two sets must be disjoint")
    name, i = ("train", dup[0]) if dup[0] < n_tr else ("heldout", dup[0] - n_tr)
    raise DataError(f"{path}: {dup.size - np.count_nonzero(counts > 1)} duplicated items "
                    f"(first: {name}[{i}]); items must be distinct")
