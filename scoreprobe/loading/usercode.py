"""Denoisers from the user's own code: `--denoiser MODULE:FUNCTION` or `--denoiser FILE.py:FUNCTION`.

    def make(step):            # a denoiser for a training step: D(x (B, D), sigma (B,)) -> (B, D)
        return MyModel.load(f"ckpt/{step}.pt")
    def make():                # or, without arguments: one denoiser (step 0) or a mapping {step: D}
        return {0: D0, 1000: D1000}

`denoiser_series` imports the module (which runs its code: only with trust=True / --trust), finds
the callable and wraps what it gives as a series the analyses take like a run directory's: steps,
`denoiser(step, device)`, the data. A function of the step is called lazily, one step at a time,
for the steps given. Every step is checked before any is measured (an int in [0, MAX_STEP], bools
refused), and each denoiser is called through `GuardedDenoiser`: on copies of x and σ (an in-place
change of x cannot reach the integrator), its output checked (a real floating tensor of x's shape),
anything it raises -- SystemExit included -- one ConfigError naming the step, and with `timeout` a
bound in seconds on each call. Stores of such a series resume by each step's model identity (weights of a
module and its fingerprint, else the fingerprint alone; `scoreprobe.sweep.identity`). The fingerprint
is taken on one call when a step is identified: a function whose denoiser changes on later calls
(state it keeps, a file it rereads) is not seen to change, and a `model_id` (API) is taken at its
word: two functions given one model_id are one model.
"""
import contextlib
import importlib
import importlib.util
import inspect
import signal
import sys
import threading
import warnings
from collections.abc import Mapping
from pathlib import Path

from scoreprobe.errors import ConfigError, ScoreprobeWarning, first_line
from scoreprobe.limits import MAX_STEP, check_bool, check_int, check_positive

TRUST_NEEDED = "--denoiser runs your Python code: add --trust to allow it (trust=True in the API)"


def load_callable(spec, trust=False):
    """The object named by 'MODULE:NAME' (importable; the current folder is searched first) or
    'PATH.py:NAME'. ConfigError without `trust`, for a bad spec, an import that fails, or a NAME
    that is missing or not callable."""
    if not check_bool(trust, "trust"):
        raise ConfigError(TRUST_NEEDED)
    where, sep, name = str(spec).rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise ConfigError(f"--denoiser expects MODULE:FUNCTION or PATH.py:FUNCTION, got {spec!r}")
    try:
        module = _import_file(where) if where.endswith(".py") else _import_module(where)
    except ConfigError:
        raise
    except BaseException as e:   # the user's module may raise anything while it is imported
        if isinstance(e, KeyboardInterrupt):
            raise
        raise ConfigError(f"--denoiser {spec}: importing {where} failed ({first_line(e)})") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ConfigError(f"--denoiser {spec}: {where} has no callable {name!r}")
    return fn


def _import_file(path):
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--denoiser: no Python file at {path}")
    spec = importlib.util.spec_from_file_location(f"scoreprobe_user_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _import_module(name):
    sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(Path.cwd()))


def takes_step(fn):
    """True when `fn` needs one positional argument (the step); False when it needs none."""
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return False
    if len(params) > 1:
        raise ConfigError(f"--denoiser {getattr(fn, '__name__', fn)} must take no argument or one (the step), "
                          f"takes {len(params)}")
    return len(params) == 1


MAX_TIMEOUT = 1e6   # seconds: the largest per-call timeout


class _Timeout(BaseException):
    """Raised by the alarm of `_deadline` inside the user's denoiser."""


def _user_call(fn, what, *args):
    """fn(*args) for user code: anything it raises but KeyboardInterrupt (SystemExit too) is one ConfigError."""
    try:
        return fn(*args)
    except (KeyboardInterrupt, _Timeout):
        raise
    except BaseException as e:   # noqa: BLE001  the user's code may raise anything, exit included
        if isinstance(e, ConfigError) and str(e).startswith("--denoiser"):
            raise
        raise ConfigError(f"--denoiser {what} raised {first_line(e)}") from None


_WARNED_THREAD = []


@contextlib.contextmanager
def _deadline(seconds):
    """Raise _Timeout in the main thread after `seconds` (SIGALRM; None: no bound). Off the main thread
    (a dask worker's) the bound cannot be set: one ScoreprobeWarning says so."""
    if seconds is None:
        yield
        return
    if threading.current_thread() is not threading.main_thread():
        if not _WARNED_THREAD:
            _WARNED_THREAD.append(True)
            warnings.warn("--denoiser-timeout is enforced in the main thread only; this denoiser runs in another "
                          "(a dask worker) without a bound", ScoreprobeWarning, stacklevel=3)
        yield
        return

    def fire(signum, frame):
        raise _Timeout
    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


class GuardedDenoiser:
    """The user's denoiser D of one step, called safely: D(x.clone(), σ.clone()) under the per-call
    `timeout` (seconds, or None), its output checked. ConfigError naming `spec` and `step` when D
    raises (SystemExit included), runs out of time or returns anything but a real floating tensor of
    x's shape. `__wrapped__` is D (a module's weights identify the step); other attributes are D's."""
    fingerprint_outputs = True   # scoreprobe.sweep.identity: fingerprint this callable, not only D's weights

    def __init__(self, D, step, spec, timeout=None):
        self.__wrapped__, self.step, self.spec, self.timeout = D, int(step), str(spec), timeout

    def __getattr__(self, name):
        if name.startswith("__") or name == "__wrapped__":
            raise AttributeError(name)
        return getattr(self.__dict__["__wrapped__"], name)

    @property
    def device(self):
        """D's device: its `device`, a module's first parameter's, else None."""
        D = self.__wrapped__
        if getattr(D, "device", None) is not None:
            return D.device
        params = getattr(D, "parameters", None)
        for p in (params() if callable(params) else ()):
            return p.device
        return None

    def __call__(self, x, sigma):
        import torch
        where = f"{self.spec}: the denoiser of step {self.step}"
        try:
            with _deadline(self.timeout):
                out = _user_call(self.__wrapped__, where, x.clone(), sigma.clone())
        except _Timeout:
            raise ConfigError(f"--denoiser {where} took more than {self.timeout:g} s (--denoiser-timeout) on "
                              f"{len(x)} rows") from None
        if not torch.is_tensor(out):
            raise ConfigError(f"--denoiser {where} returned {type(out).__name__}, not a tensor (B, D)")
        if not out.is_floating_point():
            raise ConfigError(f"--denoiser {where} returned a {str(out.dtype).replace('torch.', '')} tensor; a "
                              "denoiser returns real floating-point estimates of the clean image")
        if tuple(out.shape) != tuple(x.shape):
            raise ConfigError(f"--denoiser {where} returned shape {tuple(out.shape)} for input {tuple(x.shape)}")
        return out


def check_timeout(timeout):
    """None, or a positive number of seconds up to MAX_TIMEOUT (ConfigError otherwise)."""
    return None if timeout is None else check_positive(timeout, "the denoiser timeout (seconds)", MAX_TIMEOUT)


class DenoiserSeries:
    """The steps of user code as a series: `steps`, `denoiser(step, device)`, `dataset`, `rule`.

    make: the user's callable; steps: the steps to call it with (a function of the step) or None
    (it is called once, without arguments, for a denoiser or a {step: denoiser} mapping); spec:
    how the user named it, recorded in the store's config (the file's name, not its folder).
    `DenoiserSeries.of(models, dataset)` wraps denoisers given from Python (sp.report)."""
    kind, arch = "dit", None     # kind: analysed as a denoiser (PF-ODE), like a DiT series
    kind_label = "your denoiser"  # what headers and the report call it

    def __init__(self, make, dataset, spec, steps=None, timeout=None):
        self.dataset, self.rule, self.path = dataset, dataset.rule, Path(str(spec))   # path: what messages show
        self.spec, self.timeout = str(spec), check_timeout(timeout)
        where, _, name = str(spec).rpartition(":")
        self.config = {"denoiser": f"{Path(where).name if where.endswith('.py') else where}:{name}"}
        self.meta, self.origin = {}, "--denoiser"
        if steps is not None:
            self._make, self.steps = make, sorted({_check_step(s, spec) for s in steps})
            return
        made = _user_call(make, f"{spec}", )
        self._models = dict(made) if isinstance(made, Mapping) else {0: made}
        bad = [k for k, v in self._models.items() if not callable(v)]
        if bad or not self._models:
            raise ConfigError(f"--denoiser {spec} returned {type(made).__name__}: expected a denoiser D(x, sigma) "
                              "or a mapping {step (int): denoiser}")
        self._make, self.steps = None, sorted(_check_step(s, spec) for s in self._models)

    @classmethod
    def of(cls, models, dataset):
        """The series of denoisers given from Python: a {step: D} mapping or one D (step 0); named by
        their classes (e.g. 'python:EmpiricalDenoiser,RuleDenoiser'); each step's model identity
        (`scoreprobe.sweep.identity`) tells stores of other models apart."""
        made = dict(models) if isinstance(models, Mapping) else {0: models}
        names = sorted({type(D).__name__ for D in made.values()})
        series = cls(lambda: made, dataset, f"python:{'_'.join(names)}" if names else "python:none")
        series.origin = "python"
        return series

    def __len__(self):
        return len(self.steps)

    def describe(self):
        """Facts for the report's series section (as CheckpointSeries.describe): dict of plain values."""
        first = self._models[self.steps[0]] if self._make is None and self.steps else None   # (no user code runs)
        n_params = sum(p.numel() for p in first.parameters()) if hasattr(first, "parameters") else None
        how = ("--denoiser " + self.config["denoiser"] + " (your code)" if self.origin == "--denoiser"
               else "denoisers given from Python (sp.report)")
        return {"path": str(self.path), "kind": self.kind_label, "rule": self.rule, "n_train": len(self.dataset.train),
                "n_heldout": len(self.dataset.heldout), "image_shape": list(self.rule.image_shape), "arch": None,
                "n_params": n_params or None, "steps": self.steps, "planned_steps": None, "config": self.config,
                "model": how,
                "parameterization_how": "the denoiser contract D(x, σ) = E[y | x], x = y + σ·ε (as given)"}

    def denoiser(self, step, device="cpu"):
        """The user's denoiser at `step` (a torch module is moved to `device` and put in eval mode)."""
        step = int(step)
        D = _user_call(self._make, f"{self.spec} at step {step}", step) if self._make is not None else self._models[step]
        if not callable(D):
            raise ConfigError(f"--denoiser returned {type(D).__name__} for step {step}, not a denoiser D(x, sigma)")
        if hasattr(D, "to") and hasattr(D, "eval"):
            D = _user_call(lambda: D.to(device).eval(), f"{self.spec} at step {step} (moving it to {device})")
        return GuardedDenoiser(D, step, self.spec, self.timeout)


def _check_step(step, spec):
    """A step of the user's series: an int in [0, MAX_STEP] (a bool is refused, not read as 0 or 1)."""
    return check_int(step, f"--denoiser {spec}: a step", 0, MAX_STEP)


def denoiser_series(spec, dataset, steps=None, trust=False, timeout=None):
    """A DenoiserSeries of the callable named by `spec` (see `load_callable`) with `dataset` (a
    Dataset). A function of the step needs `steps` (ConfigError without them). timeout: seconds each
    call of a denoiser may take (None: no bound; `GuardedDenoiser`; enforced in the main thread)."""
    timeout = check_timeout(timeout)
    fn = load_callable(spec, trust)
    if takes_step(fn):
        if not steps:
            raise ConfigError(f"--denoiser {spec} is a function of the step: name the steps with --steps S1,S2,...")
        return DenoiserSeries(fn, dataset, spec, steps, timeout)
    return DenoiserSeries(fn, dataset, spec, timeout=timeout)
