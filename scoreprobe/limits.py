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

`warn_nonfinite` is the one place that words the NonFiniteWarning with its count.
"""
import math
import numbers
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


def check_int(value, name, lo, hi, error=ConfigError):
    """A python int in [lo, hi] (bools and floats refused); `error` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise error(f"{name} must be an integer, got {_short(value)}")
    value = int(value)
    if not lo <= value <= hi:
        raise error(f"{name}={value} is out of range [{lo}, {hi}] (limits in scoreprobe.limits)")
    return value


def check_positive(value, name, hi=math.inf, error=ConfigError):
    """A finite float in (0, hi]; `error` otherwise (sigma_data, time_scale, mlp_ratio)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise error(f"{name} must be a number, got {_short(value)}")
    value = float(value)
    if not (math.isfinite(value) and 0 < value <= hi):
        raise error(f"{name} must be positive and finite{f' (at most {hi:g})' if hi < math.inf else ''}, "
                    f"got {value!r}")
    return value


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
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."

