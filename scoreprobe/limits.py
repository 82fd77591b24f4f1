"""Documented limits on what scoreprobe reads, and the checks that enforce them before any allocation.

Every number that a file or an option can make large is checked against one of these limits
before scoreprobe allocates memory or loops over it, so a small hostile file fails in well
under a second with a typed error (ConfigError / DataError / CheckpointError) instead of
eating memory or time. The limits (raise them here if a real use needs more):

    MAX_JSON_BYTES     1 MiB      size of run.json
    MAX_JSON_DEPTH     32         nesting depth of run.json
    MAX_BITS           16384      bits per image D = C*H*W of a rule (Parity/ExactK/RowK shapes)
    MAX_ITEMS          2**22      rows of the train or the held-out set in dataset.npz
    MAX_DATASET_BYTES  512 MiB    uncompressed size of the train + held-out bits (rows * D bytes)
    MAX_STEP           10**12     a training step (checkpoint file names and stored steps)
    MAX_HIDDEN         8192       DiT hidden_size / GPT n_embd
    MAX_DEPTH          256        DiT depth / GPT n_layer
    MAX_LABEL_ROWS     100000     rows of a DiT label table
    MAX_MLP_RATIO      64         DiT / GPT MLP width over hidden size
    MAX_PARAMS         2 * 10**9  parameters a declared architecture may have (about 8 GB float32)
    MAX_TIMESTEPS      10**6      num_timesteps of a VP (DDPM) schedule
    MAX_GRID_RES       4096       grid points per axis of a plane grid (--res)
    MAX_GRID_BYTES     2 GiB      memory of a plane grid: res**2 * D * 8 bytes (float64 points)
    MAX_FRAME_PX       4096       pixels per side of an animation frame (size * dpi)
    MAX_SEED           2**63 - 1  every seed (a larger one would wrap onto a smaller one's draws)
    MAX_SIGMA          10**4      a noise level σ given by the user (EDM's σ_max is 80)
    FPS_RANGE          0.01..1000 frames per second of an animation
    MAX_ODE_STEPS      10**4      PF-ODE steps (--n-steps)
    MAX_SAMPLES        10**6      samples / rows per checkpoint (clocks --n-samples, dsm --n-noise x items)
    MAX_ROWS_BYTES     2 GiB      memory of those rows: n * D * 8 bytes
    MAX_SIGMAS         10**4      noise levels of one DSM curve (--sigmas)
    MAX_ENSEMBLE       256        members of one ensemble (train --ensemble)
    MAX_BATCH          65536      training minibatch rows (batch_size)
    MAX_TRAIN_BYTES    16 GiB     activations of a training step, estimated before the model is built
                                  (models.build.check_training_size)
    MAX_SIDE_BYTES     1 MiB      size of a side args.json / config.json / scheduler_config.json
    MAX_STEPS_FILE_BYTES 1 MiB    size of a steps file (regular files only)
    MAX_PAGE_BYTES     64 MiB     a report page (estimated from its sizes before computing, checked before writing)
    MAX_STORE_META_BYTES 32 MiB   a store's zarr.json (attributes, commit record) that a report reads
    MAX_LOG_BYTES      64 MiB     a train_log.jsonl that plot-log reads
    MAX_LOG_LINE_BYTES 64 KiB     one line of it (longer lines are skipped and counted)
    MAX_BOOT           100000     bootstrap resamples (n_boot, --n-boot) of τ and its differences
    MAX_MONITOR_STEPS  100000     steps a Monitor is given to measure at (steps=)
    MAX_PANELS         4096       panels of one sample gallery (plot_gallery)
    MAX_CACHE_BYTES    2 GiB      activations one run_with_cache / patch keeps (measured on one row, times
                                  the rows, before the batch runs)
    MAX_EXPORT_BYTES   256 MiB    the arrays of one compact export (.npz), as their headers declare them
                                  (checked before any is loaded)
    MAX_GRID_CELLS     10000      cells (training runs) of a studies.Grid: the product of its axes' lengths
    MAX_LOG_VALUE      1000       |ln τ|, |ln budget| and the covariates of a censored mean or fit (stats.censored):
                                  τ <= MAX_STEP is ln 27.6, and sums of squares of larger values overflow
    MAX_EXPANSION      8          bytes a checkpoint's weights take in memory over the file's bytes
                                  (zero-stride views declare storage the file does not hold); the
                                  environment variable SCOREPROBE_MAX_EXPANSION overrides it

`warn_nonfinite` is the one place that words the NonFiniteWarning with its count.
"""
import math
import numbers
import os
import warnings

from scoreprobe.errors import ConfigError, NonFiniteWarning

MAX_JSON_BYTES = 1 << 20
MAX_JSON_DEPTH = 32
MAX_BITS = 16384
MAX_ITEMS = 1 << 22
MAX_DATASET_BYTES = 512 << 20
MAX_STEP = 10**12
MAX_HIDDEN = 8192
MAX_DEPTH = 256
MAX_LABEL_ROWS = 100_000
MAX_MLP_RATIO = 64
MAX_PARAMS = 2 * 10**9
MAX_TIMESTEPS = 10**6
MAX_GRID_RES = 4096
MAX_GRID_BYTES = 2 << 30
MAX_FRAME_PX = 4096
MAX_SEED = 2**63 - 1
MAX_SIGMA = 1e4
FPS_RANGE = (0.01, 1000.0)
MAX_ODE_STEPS = 10**4
MAX_SAMPLES = 10**6
MAX_ROWS_BYTES = 2 << 30
MAX_SIGMAS = 10**4
MAX_ENSEMBLE = 256
MAX_BATCH = 1 << 16
MAX_TRAIN_BYTES = 16 << 30
MAX_SIDE_BYTES = 1 << 20
MAX_STEPS_FILE_BYTES = 1 << 20
MAX_EXPANSION = 8
MAX_PAGE_BYTES = 64 << 20
MAX_EXPORT_BYTES = 256 << 20
MAX_BOOT = 100_000
MAX_MONITOR_STEPS = 100_000
MAX_PANELS = 4096
MAX_CACHE_BYTES = 2 << 30
MAX_STORE_META_BYTES = 32 << 20
MAX_LOG_BYTES = 64 << 20
MAX_LOG_LINE_BYTES = 64 << 10
MAX_LOG_VALUE = 1000.0
MAX_GRID_CELLS = 10_000
EXPANSION_ENV = "SCOREPROBE_MAX_EXPANSION"


def check_int(value, name, lo, hi, error=ConfigError):
    """A python int in [lo, hi] (bools and floats refused); `error` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise error(f"{name} must be an integer, got {_short(value)}")
    value = int(value)
    if not lo <= value <= hi:
        raise error(f"{name}={value} is out of range [{lo}, {hi}] (limits in scoreprobe.limits)")
    return value


def check_bool(value, name, error=ConfigError):
    """A real bool (numpy's included): the strings "false" / "no" / "0", numbers and None are refused."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    raise error(f"{name} must be True or False, got {_short(value)} ({type(value).__name__})")


def check_whole(value, name, lo, hi, error=ConfigError):
    """A whole number in [lo, hi] as an int: a python or numpy integer, a 0-d integer tensor or array, or a float
    with no fractional part (10.0); bools, NaN, ±inf, 10.9 and strings are refused (never truncated)."""
    if hasattr(value, "ndim") and getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        value = value.item()                                    # a 0-d torch tensor or numpy array
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, numbers.Integral)) \
            and type(value).__name__ != "bool_":
        if not (math.isfinite(float(value)) and float(value).is_integer()):
            raise error(f"{name} must be a whole number, got {_short(value)}")
        value = int(value)
    return check_int(value, name, lo, hi, error)


def check_flags(values, name, error=ConfigError):
    """A (N,) numpy bool array of `values`, each a real bool (numpy's included) or the integer 0 or 1; a string
    "False", a NaN, a float, another number or None is refused (np.asarray(..., dtype=bool) reads every one of them
    but 0 as True)."""
    import numpy as np
    flags = np.asarray(values, dtype=object).reshape(-1)
    bad = [f for f in flags if not (isinstance(f, bool) or type(f).__name__ == "bool_"
                                    or (isinstance(f, numbers.Integral) and f in (0, 1)))]
    if bad:
        raise error(f"{name} must hold True or False (or 0 / 1), got {_short(bad[0])} ({type(bad[0]).__name__})")
    return flags.astype(bool)


def check_seed(value, name="seed", error=ConfigError):
    """A seed: an int in [0, MAX_SEED] (2**64 and above would wrap onto the draws of a smaller seed)."""
    return check_int(value, name, 0, MAX_SEED, error)


def check_real(value, name, lo=-math.inf, hi=math.inf, error=ConfigError):
    """A finite float in [lo, hi] (bools and strings refused); `error` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise error(f"{name} must be a number, got {_short(value)}")
    value = float(value)
    if not (math.isfinite(value) and lo <= value <= hi):
        raise error(f"{name} must be a finite number in [{lo:g}, {hi:g}], got {value!r}")
    return value


def check_rows(n, dim, name, error=ConfigError):
    """n rows of dim float64 values: n in [1, MAX_SAMPLES] and n * dim * 8 bytes within MAX_ROWS_BYTES."""
    n = check_int(n, name, 1, MAX_SAMPLES, error)
    if n * int(dim) * 8 > MAX_ROWS_BYTES:
        raise error(f"{name}={n} rows of {dim} values need {n * int(dim) * 8 / 2**30:.1f} GiB (limit "
                    f"{MAX_ROWS_BYTES / 2**30:.0f} GiB, scoreprobe.limits.MAX_ROWS_BYTES)")
    return n


def max_expansion(error=ConfigError):
    """MAX_EXPANSION, or the number in $SCOREPROBE_MAX_EXPANSION (the explicit override)."""
    text = os.environ.get(EXPANSION_ENV)
    if text is None:
        return MAX_EXPANSION
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value >= 1):
        raise error(f"${EXPANSION_ENV}={text[:40]!r} must be a number >= 1")
    return value


def check_expansion(n_bytes, file_bytes, what, error):
    """`error` when tensors taking n_bytes in memory come from files of file_bytes: more than
    max_expansion() times the files (plus 1 MiB) means storage the file does not hold (zero-stride
    views), refused before anything is allocated unless the user raises the limit."""
    limit = max_expansion()   # a malformed override is a ConfigError
    if n_bytes > limit * file_bytes + (1 << 20):
        raise error(f"{what}: its tensors take {n_bytes / 2**20:.1f} MiB in memory but the file holds only "
                    f"{file_bytes / 2**20:.2f} MiB (more than {limit:g}x: expanded or zero-stride views); "
                    f"set {EXPANSION_ENV}=N to allow N times the file size (scoreprobe.limits.MAX_EXPANSION)")


def check_positive(value, name, hi=math.inf, error=ConfigError):
    """A finite float in (0, hi]; `error` otherwise (sigma_data, time_scale, mlp_ratio)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise error(f"{name} must be a number, got {_short(value)}")
    value = float(value)
    if not (math.isfinite(value) and 0 < value <= hi):
        raise error(f"{name} must be positive and finite{f' (at most {hi:g})' if hi < math.inf else ''}, "
                    f"got {value!r}")
    return value


def check_dataset_size(n_train, n_heldout, n_bits, where="the dataset"):
    """DataError, before anything is drawn or read, past MAX_ITEMS rows per split or MAX_DATASET_BYTES in all."""
    from scoreprobe.errors import DataError
    for name, n in (("n_train", n_train), ("n_heldout", n_heldout)):
        if n > MAX_ITEMS:
            raise DataError(f"{where}: {name}={n} is more than the limit {MAX_ITEMS} (scoreprobe.limits.MAX_ITEMS)")
    need = (n_train + n_heldout) * n_bits
    if need > MAX_DATASET_BYTES:
        raise DataError(f"{where}: {n_train} + {n_heldout} images of {n_bits} bits need {need / 2**20:.0f} MiB, more "
                        f"than the limit {MAX_DATASET_BYTES >> 20} MiB (scoreprobe.limits.MAX_DATASET_BYTES)")


def json_depth(obj):
    """Nesting depth of a parsed JSON value (iterative: deep input cannot overflow the stack)."""
    deepest, todo = 0, [(obj, 1)]
    while todo:
        node, depth = todo.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, depth)
            if depth > MAX_JSON_DEPTH:
                return depth
            todo.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict) else node))
    return deepest


def check_grid(res, dim):
    """ConfigError when a res x res grid of dim-dimensional float64 points exceeds the limits."""
    res = int(res) if isinstance(res, float) and res.is_integer() else res
    res = check_int(res, "grid resolution", 2, MAX_GRID_RES)
    need = res * res * int(dim) * 8
    if need > MAX_GRID_BYTES:
        raise ConfigError(f"a {res}x{res} grid in {dim} dimensions needs {need / 2**30:.1f} GiB "
                          f"(limit {MAX_GRID_BYTES / 2**30:.0f} GiB, scoreprobe.limits.MAX_GRID_BYTES); "
                          "use a smaller resolution")
    return res


def warn_nonfinite(n_bad, n_total, what, consequence, stacklevel=3):
    """NonFiniteWarning '{n_bad} of {n_total} {what} are non-finite (NaN/inf): {consequence}' when n_bad > 0."""
    if n_bad:
        warnings.warn(f"{n_bad} of {n_total} {what} are non-finite (NaN/inf): {consequence}", NonFiniteWarning,
                      stacklevel=stacklevel)


def warn_nonfinite_rows(x, what, consequence):
    """warn_nonfinite for the rows of a (N, ...) tensor or array holding any NaN/inf; returns their count."""
    if hasattr(x, "detach"):
        import torch
        n_bad = int((~torch.isfinite(x.detach())).reshape(len(x), -1).any(dim=1).sum()) if len(x) else 0
    else:
        import numpy as np
        x = np.asarray(x)
        n_bad = int((~np.isfinite(x)).reshape(len(x), -1).any(axis=1).sum()) if len(x) else 0
    warn_nonfinite(n_bad, len(x), what, consequence, stacklevel=4)
    return n_bad


def _short(value):
    text = " ".join(repr(value).split())      # one line: an array's or a tensor's repr spans several
    return text if len(text) <= 60 else text[:57] + "..."

