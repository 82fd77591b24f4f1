"""Denoisers from the user's own code: `--denoiser MODULE:FUNCTION` or `--denoiser FILE.py:FUNCTION`.

    def make(step):            # a denoiser for a training step: D(x (B, D), sigma (B,)) -> (B, D)
        return MyModel.load(f"ckpt/{step}.pt")
    def make():                # or, without arguments: one denoiser (step 0) or a mapping {step: D}
        return {0: D0, 1000: D1000}

`denoiser_series` imports the module (which runs its code: only with trust=True / --trust), finds
the callable and wraps what it gives as a series the analyses take like a run directory's: steps,
`denoiser(step, device)`, the data. A function of the step is called lazily, one step at a time,
for the steps given. Stores of such a series resume by each step's model identity (weights of a
module and its fingerprint, else the fingerprint alone; `scoreprobe.sweep.identity`). The fingerprint
is taken on one call when a step is identified: a function whose denoiser changes on later calls
(state it keeps, a file it rereads) is not seen to change, and a `model_id` (API) is taken at its
word: two functions given one model_id are one model.
"""
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Mapping
from pathlib import Path

from scoreprobe.errors import ConfigError, first_line
from scoreprobe.limits import check_bool

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


class DenoiserSeries:
    """The steps of user code as a series: `steps`, `denoiser(step, device)`, `dataset`, `rule`.

    make: the user's callable; steps: the steps to call it with (a function of the step) or None
    (it is called once, without arguments, for a denoiser or a {step: denoiser} mapping); spec:
    how the user named it, recorded in the store's config (the file's name, not its folder)."""
    kind, arch = "dit", None

    def __init__(self, make, dataset, spec, steps=None):
        self.dataset, self.rule, self.path = dataset, dataset.rule, Path(str(spec))   # path: what messages show
        where, _, name = str(spec).rpartition(":")
        self.config = {"denoiser": f"{Path(where).name if where.endswith('.py') else where}:{name}"}
        if steps is not None:
            self._make, self.steps = make, sorted({int(s) for s in steps})
            return
        made = make()
        self._models = dict(made) if isinstance(made, Mapping) else {0: made}
        bad = [k for k, v in self._models.items() if not isinstance(k, int) or not callable(v)]
        if bad or not self._models:
            raise ConfigError(f"--denoiser {spec} returned {type(made).__name__}: expected a denoiser D(x, sigma) "
                              "or a mapping {step (int): denoiser}")
        self._make, self.steps = None, sorted(self._models)

    def __len__(self):
        return len(self.steps)

    def denoiser(self, step, device="cpu"):
        """The user's denoiser at `step` (a torch module is moved to `device` and put in eval mode)."""
        D = self._make(int(step)) if self._make is not None else self._models[int(step)]
        if not callable(D):
            raise ConfigError(f"--denoiser returned {type(D).__name__} for step {step}, not a denoiser D(x, sigma)")
        if hasattr(D, "to") and hasattr(D, "eval"):
            D = D.to(device).eval()
        return D


def denoiser_series(spec, dataset, steps=None, trust=False):
    """A DenoiserSeries of the callable named by `spec` (see `load_callable`) with `dataset` (a
    Dataset). A function of the step needs `steps` (ConfigError without them)."""
    fn = load_callable(spec, trust)
    if takes_step(fn):
        if not steps:
            raise ConfigError(f"--denoiser {spec} is a function of the step: name the steps with --steps S1,S2,...")
        return DenoiserSeries(fn, dataset, spec, steps)
    return DenoiserSeries(fn, dataset, spec)
