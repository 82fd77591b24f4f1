"""The store part of the abuse corpus (issue 21, item 7; used by tests/test_store_faults.py and
tests/test_cli_errors.py): breakers of a complete store folder `p`, and --out values the system
will not take."""
import shutil


def _rm_arrays(*names):
    def fix(p):
        for name in names:
            shutil.rmtree(p / name)
    return fix


STORE_CASES = [   # (name, breaker, steps the rerun recomputes): it repairs the store and equals an undamaged run
    ("step-array folder deleted", _rm_arrays("loss"), 5),
    ("coordinate folder deleted", _rm_arrays("sigma"), 1),          # rewritten from one recomputed step
    ("step-coordinate folder deleted", _rm_arrays("step"), 5),
    ("three array folders deleted", _rm_arrays("loss", "sigma", "state"), 5),
    ("array metadata deleted", lambda p: (p / "loss" / "zarr.json").unlink(), 0),   # no data lost
    ("array folder replaced by an empty one", lambda p: (_rm_arrays("acc")(p), (p / "acc").mkdir()), 5),
]

# --out values the system will not take: each is one StoreError (API) or one usage line (CLI), exit 2
SPECIAL_OUTS = ["/proc/x.zarr", "/proc/self/x.zarr", "/proc/sys/x.zarr", "/sys/x.zarr", "/dev/null", "/dev/full"]
