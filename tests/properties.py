"""The property-based harness over the public API (issue 76 item 3): hostile values, one argument at a time, and the
class of what each call did. Used by tests/test_properties.py (asserts) and `python -m tests.property_targets N` (a census);
the targets live in tests/property_targets.py.

A *target* is one public call with valid arguments (tiny: a 4x4 parity rule, 8 training images) and, per argument
it names (a *slot*), a strategy of hostile values: NaN, ±inf, ±0, huge and tiny floats, ints and bools where floats
belong, strings, None, empty and mismatched shapes, wrong dtypes, numpy where torch belongs and back. Hypothesis
picks a slot and a value; the call runs under a memory ceiling and an alarm, and ends in one class (`CLASSES`):

    clean_error      a ScoreprobeError, or a ValueError / TypeError raised by scoreprobe's own code (its innermost
                     frame is in the package), with a one-line message of at most MAX_MESSAGE characters
    undefined_kept   the value held NaN and the result keeps it undefined (the target's `undefined` check: NaN
                     where the input was, an error-free "no estimate", never a finite number read from it)
    ok               a defined value, a result
    traceback        any other exception (an AttributeError, an IndexError, a ValueError raised inside numpy or
                     torch, a message spanning lines or none)
    silent_wrong     the value held NaN and the result reads it as a number (the `undefined` check fails)
    hang             the call ran past HANG_S seconds
    allocation       the call asked for more than ALLOC_BYTES beyond what the process held (MemoryError under the
                     ceiling, RLIMIT_AS): scoreprobe.limits should have refused it before allocating

The invariants (test_properties.py): every call ends in clean_error, undefined_kept or ok."""
import contextlib
import math
import resource
import signal
import sys
import traceback
import warnings
from pathlib import Path

import numpy as np
import torch
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

import scoreprobe as sp
from scoreprobe.errors import ScoreprobeError

PACKAGE = str(Path(sp.__file__).resolve().parent)
CLASSES = ("clean_error", "undefined_kept", "ok", "traceback", "silent_wrong", "hang", "allocation")
GOOD = {"clean_error", "undefined_kept", "ok"}
HANG_S = 20
ALLOC_BYTES = 3 << 30     # over the largest limit a call may allocate (MAX_ROWS_BYTES, MAX_GRID_BYTES: 2 GiB)
MAX_MESSAGE = 1000
NAN, INF = math.nan, math.inf

# ---------------------------------------------------------------------------------------------
# Hostile values
# ---------------------------------------------------------------------------------------------

SPECIAL = [NAN, INF, -INF, 0.0, -0.0, 1e308, -1e308, 5e-324, 1e-300, 1e30, -1.0, 0.5, 10.9, 2**63, 2**64, -1, 0,
           1, 3, True, False, None, "", "1", "nan", b"\x00", np.float64(NAN), np.int64(-1), np.bool_(True)]


def scalars():
    """A hostile scalar: a special value, any float (NaN, inf included) or any integer."""
    return st.one_of(st.sampled_from(SPECIAL), st.floats(allow_nan=True, allow_infinity=True),
                     st.integers(-2**70, 2**70))


def counts():
    """A hostile count (a size, a number of steps, a resolution): below 1, bools, fractions, strings, None, and
    far past any limit; never a legal but merely large value (that is work asked for, not bad input)."""
    return st.one_of(st.sampled_from([0, -1, 1, 2, 2.5, 3.0, NAN, INF, -INF, True, False, None, "3", 2**31, 2**63,
                                      2**64, 10**13, np.int64(2), np.float64(2.0)]),
                     st.integers(-2**70, 0), st.integers(10**7, 2**70))


DTYPES = [np.float64, np.float32, np.float16, np.int64, np.uint8, np.bool_, np.complex128, object]


@st.composite
def arrays(draw, shape, torch_ok=True, fill=None):
    """A hostile array for an argument whose valid form has `shape`: the valid values (`fill`, default normal
    draws) with some entries replaced by special floats, another shape (empty, one more or less along an axis,
    one dimension more or less), another dtype, a list, a numpy array where a tensor belongs and back."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    kind = draw(st.sampled_from(["specials", "shape", "dtype", "container", "empty", "scalar"]))
    base = rng.standard_normal(shape) if fill is None else np.array(fill(rng, shape), dtype=np.float64)
    if kind == "specials":
        flat = base.reshape(-1).copy()
        for _ in range(draw(st.integers(1, 3))):
            if flat.size:
                flat[draw(st.integers(0, flat.size - 1))] = draw(st.sampled_from([NAN, INF, -INF, -0.0, 1e308, 5e-324]))
        base = flat.reshape(shape)
    elif kind == "shape":
        axis = draw(st.integers(0, max(len(shape) - 1, 0)))
        new = list(shape) or [1]
        new[axis] = max(0, new[axis] + draw(st.sampled_from([-1, 1, 5])))
        new = draw(st.sampled_from([new, new + [2], new[1:] or [0]]))
        base = rng.standard_normal(new)
    elif kind == "empty":
        base = np.zeros((0,) + tuple(shape[1:]))
    elif kind == "scalar":
        return draw(scalars())
    dtype = draw(st.sampled_from(DTYPES)) if kind == "dtype" else np.float64
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = base.astype(dtype)
    if kind == "container":
        return draw(st.sampled_from([base.tolist(), base, str(base.tolist())[:40]]))
    as_tensor = torch_ok and draw(st.booleans()) and dtype is not object
    return torch.from_numpy(np.ascontiguousarray(base)) if as_tensor else base


def integer(value):
    """Whether a value is an integer (python, numpy, a 0-d integer array or tensor), not a bool or a float."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        if getattr(value, "dtype", None) is not None and "int" not in str(value.dtype):
            return False
        value = value.item()
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def has_nan(value):
    """Whether a value holds a NaN anywhere (a float, an array, a tensor, a list of them)."""
    if isinstance(value, (float, np.floating)):
        return math.isnan(value)
    if torch.is_tensor(value):
        return bool(value.is_floating_point() and torch.isnan(value).any())
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return any(has_nan(v) for v in value.reshape(-1))
        return bool(np.issubdtype(value.dtype, np.inexact) and np.isnan(value).any())
    if isinstance(value, (list, tuple)):
        return any(has_nan(v) for v in value)
    return False


def nan_rows(value, n):
    """(n,) bool: the rows of an (n, ...) value (or a scalar / (n,) σ) that hold NaN."""
    if torch.is_tensor(value):
        value = value.detach().double().numpy() if value.is_floating_point() else value.numpy()
    a = np.asarray(value, dtype=float) if not isinstance(value, np.ndarray) or value.dtype != object else None
    if a is None:
        return np.zeros(n, bool)
    if a.ndim == 0 or a.size == 1:
        return np.full(n, bool(np.isnan(a.reshape(-1)[0])))
    return np.isnan(a.reshape(n, -1)).any(1)


def as_numpy(x):
    return x.detach().double().numpy() if torch.is_tensor(x) else np.asarray(x, dtype=float)


# ---------------------------------------------------------------------------------------------
# One attempt
# ---------------------------------------------------------------------------------------------

class _Hang(Exception):
    pass


@contextlib.contextmanager
def _alarm(seconds):
    def on_alarm(*_):
        raise _Hang
    main = hasattr(signal, "SIGALRM") and __import__("threading").current_thread() is __import__("threading").main_thread()
    if main:
        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        if main:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)


def _vm_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return None


@contextlib.contextmanager
def _ceiling(extra):
    """RLIMIT_AS at the address space held now + `extra` (Linux): a larger allocation fails as MemoryError."""
    held = _vm_bytes() if sys.platform.startswith("linux") else None
    if held is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (min(held + extra, hard) if hard != resource.RLIM_INFINITY else held + extra,
                                            hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _ours(exc):
    """Whether `exc` was raised by scoreprobe's own code (its innermost frame in the package)."""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and frames[-1].filename.startswith(PACKAGE)


def _clear(exc):
    msg = str(exc).strip()
    return bool(msg) and "\n" not in msg and len(msg) <= MAX_MESSAGE


def attempt(fn, undefined=None, value=None):
    """(class, detail) of fn() (see the module); `undefined(result) -> bool` judges a result when `value` holds NaN."""
    try:
        with _ceiling(ALLOC_BYTES), _alarm(HANG_S), warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            result = fn()
    except _Hang:
        return "hang", f"past {HANG_S} s"
    except MemoryError as e:
        return "allocation", f"MemoryError {str(e)[:80]}"
    except RecursionError as e:
        return "traceback", f"RecursionError: {str(e)[:200]}"
    except Exception as e:   # noqa: BLE001
        if "can't allocate memory" in str(e) or "not enough memory" in str(e):
            return "allocation", f"{type(e).__name__}: {str(e)[:120]}"
        clean = isinstance(e, ScoreprobeError) or (isinstance(e, (ValueError, TypeError)) and _ours(e))
        if clean and _clear(e):
            return "clean_error", f"{type(e).__name__}: {str(e)[:200]}"
        where = traceback.extract_tb(e.__traceback__)[-1]
        return "traceback", f"{type(e).__name__}: {str(e)[:200]} ({Path(where.filename).name}:{where.lineno})"
    if value is not None and has_nan(value) and undefined is not None:
        try:
            kept = undefined(result)
        except Exception as e:   # noqa: BLE001  (a result the check cannot read: not a kept NaN)
            return "silent_wrong", f"unreadable result: {type(e).__name__}: {e}"
        return ("undefined_kept", "") if kept else ("silent_wrong", f"NaN in, result {_short(result)}")
    return "ok", ""


def _short(result):
    text = repr(result)
    return text if len(text) < 200 else text[:197] + "..."


class Target:
    """One public call: `call(**kw)` with the valid keyword arguments `valid` (a dict, or a callable making one),
    `slots` {argument: strategy of hostile values}, and `undefined(kw, result) -> bool` judging a result when the
    hostile value holds NaN (None: a result from NaN input is fine, e.g. where NaN is documented as "not reached")."""

    def __init__(self, name, call, valid, slots, undefined=None, accepts=None):
        self.name, self.call, self.valid, self.slots, self.undefined = name, call, valid, slots, undefined
        self.accepts = accepts or {}

    def run(self, slot, value):
        """(class, detail) of the call with `value` in `slot`; a value taken (no error) that `accepts[slot]` says
        has no meaning there (10.9 as a training step) is silent_wrong: it was read as another value."""
        kw = dict(self.valid() if callable(self.valid) else self.valid)
        kw[slot] = value
        check = None if self.undefined is None else (lambda result: self.undefined(slot, kw, result))
        cls, detail = attempt(lambda: self.call(**kw), check, value)
        if cls == "ok" and slot in self.accepts and not self.accepts[slot](value):
            return "silent_wrong", f"taken as a value it is not: {_short(value)[:60]}"
        return cls, detail


# ---------------------------------------------------------------------------------------------
# Drawing attempts
# ---------------------------------------------------------------------------------------------

def explore(target, n_examples, record):
    """Draw `n_examples` (slot, hostile value) pairs for `target` with a fixed seed; record(slot, value, cls, detail)."""
    @settings(max_examples=n_examples, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def draw(data):
        slot = data.draw(st.sampled_from(sorted(target.slots)), label="slot")
        value = data.draw(target.slots[slot], label="value")
        cls, detail = target.run(slot, value)
        record(slot, value, cls, detail)
    draw()
