"""Fault check of scoreprobe stores on a real full disk (issue #21): a tiny tmpfs, filled but for N KiB.

For each fill level a sweep writes a 5-step store onto the tmpfs; the disk fills up somewhere in
it (or not). Each attempt must end either complete or in one StoreError (never another
exception); then the filler is removed and the same sweep rerun, which must resume to a store
identical to one written on a roomy disk (history aside). Needs root (it mounts a tmpfs of
--size KiB at a temporary folder and unmounts it at the end), or --dir of a small file system you
mounted yourself.

    sudo python bench/full_disk.py                  # 256 KiB tmpfs, free space 0..136 KiB by 4
    python bench/full_disk.py --dir /mnt/tiny       # a small file system of your own

Prints one line per level and the counts; exit status 1 when any attempt was not clean.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import xarray as xr

from scoreprobe.errors import StoreError
from scoreprobe.sweep import sweep

STEPS = [0, 3, 10, 30, 100]


def probe(step):
    """A deterministic per-step slab (float with NaN, int) over two coordinates."""
    rng = np.random.default_rng(step)
    loss = rng.normal(size=(3, 64)).astype(np.float32)
    loss[0, 0] = np.nan
    return xr.Dataset({"loss": (("sigma", "sample"), loss), "state": (("sample",), rng.integers(0, 5, 64))},
                      coords={"sigma": [0.1, 1.0, 10.0], "sample": np.arange(64)})


def run(out):
    ds = sweep(probe, {s: s for s in STEPS}, out=out, config={"probe": "full-disk"}, progress=False)
    ds.attrs.pop("history", None)
    return ds


def fill(where, free_kib):
    """Leave about `free_kib` KiB free on the file system of `where`."""
    st = os.statvfs(where)
    with open(os.path.join(where, "filler"), "wb") as f:
        try:
            f.write(b"\0" * max(st.f_bavail * st.f_frsize - free_kib * 1024, 0))
        except OSError:   # already fuller than asked
            pass


def level(where, free_kib, ref):
    """(what the attempt did, whether the rerun equals `ref`) at one fill level."""
    for name in os.listdir(where):
        path = os.path.join(where, name)
        shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
    fill(where, free_kib)
    out = os.path.join(where, "a.zarr")
    try:
        run(out)
        what = "complete"
    except StoreError as e:
        what = f"StoreError: {str(e)[:90]}"
    except Exception as e:  # noqa: BLE001  (anything else is what this check counts)
        what = f"OTHER {type(e).__name__}: {e}"
    os.unlink(os.path.join(where, "filler"))
    return what, run(out).identical(ref)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=None, help="a small file system to fill (default: mount a tmpfs; root only)")
    ap.add_argument("--size", type=int, default=256, help="KiB of the tmpfs")
    ap.add_argument("--max-free", type=int, default=136, help="largest free space tried, KiB")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")   # repair warnings of the reruns are expected
    where, mounted = args.dir, False
    if where is None:
        where = tempfile.mkdtemp(prefix="full-disk-")
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={args.size}k", "tmpfs", where], check=True)
        mounted = True
    ref_dir = tempfile.mkdtemp(prefix="full-disk-ref-")
    counts = {"complete": 0, "StoreError": 0, "other": 0, "rerun equal": 0}
    try:
        ref = run(os.path.join(ref_dir, "ref.zarr"))
        for free in range(0, args.max_free + 1, 4):
            what, equal = level(where, free, ref)
            kind = "complete" if what == "complete" else "StoreError" if what.startswith("StoreError") else "other"
            counts[kind] += 1
            counts["rerun equal"] += equal
            print(f"free {free:4d} KiB: {what}; rerun equal: {equal}", flush=True)
    finally:
        if mounted:
            subprocess.run(["umount", where], check=False)
            os.rmdir(where)
        shutil.rmtree(ref_dir, ignore_errors=True)
    n = sum(counts[k] for k in ("complete", "StoreError", "other"))
    print(f"{n} fill levels: {counts['complete']} complete, {counts['StoreError']} one StoreError, "
          f"{counts['other']} other errors; rerun equal to the reference {counts['rerun equal']}/{n}")
    return 0 if counts["other"] == 0 and counts["rerun equal"] == n else 1


if __name__ == "__main__":
    sys.exit(main())
