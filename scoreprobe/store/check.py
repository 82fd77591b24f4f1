"""Checksums of a store's chunk files: one digest per (step, array), one per step-free array.

Every step-dependent array has `step` as its first dimension and one chunk per step, so the data
of step i of array `a` is exactly one file, `a/c/i/0/...`. Its BLAKE2b digest is taken right after
the write and kept in the store's commit record; verifying reads the raw files (no decoding), so
a deleted chunk (which zarr would silently read back as fill values) or overwritten bytes are
found before they are trusted.
"""
import hashlib
from pathlib import Path

MISSING = "missing"


def _digest(data):
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _file_digest(file):
    try:
        return _digest(Path(file).read_bytes())
    except FileNotFoundError:
        return MISSING


def _separator(meta):
    return ((meta.get("chunk_key_encoding") or {}).get("configuration") or {}).get("separator", "/")


def step_chunk(root, name, meta, index):
    """Path of the chunk file holding step `index` of array `name` (step first, one chunk per step)."""
    key = _separator(meta).join(["c", str(index)] + ["0"] * (len(meta["shape"]) - 1))
    return Path(root) / name / key


def step_digests(root, metas, step_arrays, index):
    """{array: digest} of step `index` for the step-dependent arrays named in `step_arrays`."""
    return {name: _file_digest(step_chunk(root, name, metas[name], index)) for name in sorted(step_arrays)}


def static_digests(root, names):
    """{array: digest over all its chunk files} for the step-free arrays `names`."""
    out = {}
    for name in sorted(names):
        h = hashlib.blake2b(digest_size=16)
        base = Path(root) / name
        for f in sorted(p for p in base.rglob("*") if p.is_file() and p.name != "zarr.json"):
            h.update(str(f.relative_to(base)).encode() + b"\0" + f.read_bytes())
        out[name] = h.hexdigest()
    return out


def damaged_steps(root, metas, step_arrays, digests):
    """{index: [arrays]} of committed steps whose chunk files no longer match their digests.

    `digests` is the record's list (one dict per committed step, None for a step written before
    checksums existed, which is not checked)."""
    bad = {}
    for i, want in enumerate(digests):
        if not want:
            continue
        have = step_digests(root, metas, want.keys() & set(step_arrays), i)
        wrong = sorted(k for k in have if have[k] != want[k])
        if wrong:
            bad[i] = wrong
    return bad


def damaged_static(root, digests):
    """Names of step-free arrays whose chunk files no longer match the record."""
    if not digests:
        return []
    have = static_digests(root, digests.keys())
    return sorted(k for k in digests if have[k] != digests[k])
