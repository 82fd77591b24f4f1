"""Hook points by TransformerLens-style name, and hooks that stay on a model (TransformerLens's `add_hook`).

    points = hook_points(net)                       # {"blocks.0.attn.hook_z": HookPoint, ...}
    D.add_hook("blocks.0.attn.hook_z", fn)          # fn(activation, name) -> replacement or None; stays
    D.reset_hooks()                                 # every hook added with add_hook removed
    with D.hooks(fwd_hooks=[("blocks.*.hook_mlp_out", fn)]):
        out = D(x, sigma)                           # the hooks only inside the block

A persistent hook is a torch forward hook on the hook point (`register_forward_hook`), so it also runs inside
`sp.run_with_hooks`, `sp.patch`, a cache (before the hooks those install: docs/inside.md) and under nnsight.
"""
import contextlib
import fnmatch
import weakref

import torch

from scoreprobe.errors import ConfigError
from scoreprobe.models.hookpoint import HookPoint

_RENAME = (("transformer.h.", "blocks."), ("final_layer.", "final."), ("transformer.ln_f.", "final.ln_f."))
_POINTS = weakref.WeakKeyDictionary()


def public_name(path):
    """Module path -> hook name: GPT's `transformer.h.` and DiT's `final_layer.` become `blocks.`/`final.`;
    GPT's top-level `hook_out` is `final.hook_out`."""
    for old, new in _RENAME:
        if path.startswith(old):
            return new + path[len(old):]
    return "final.hook_out" if path == "hook_out" else path


def hook_points(net):
    """{hook name: HookPoint} of a DiT or GPT, in order of definition (remembered per network)."""
    points = _POINTS.get(net)
    if points is None:
        points = {public_name(path): m for path, m in net.named_modules() if isinstance(m, HookPoint)}
        _POINTS[net] = points
    return points


def select(points, names=None):
    """The hook names chosen by `names`: None = all; a string or list of names or fnmatch patterns
    ('blocks.*.attn.hook_pattern'); or a predicate name -> bool. ConfigError when a name, a pattern or the
    predicate matches nothing (a silent no-op otherwise), or when the predicate raises."""
    if names is None:
        return list(points)
    if callable(names):
        try:
            chosen = [n for n in points if names(n)]
        except Exception as e:                     # noqa: BLE001 (the user's predicate: named, not a traceback)
            raise ConfigError(f"the hook filter {names!r} raised {type(e).__name__}: {e}") from e
        if not chosen:
            raise ConfigError(f"the hook filter {getattr(names, '__name__', names)!r} matches no hook point; names "
                              "look like 'blocks.0.attn.hook_pattern' (see docs/inside.md)")
        return chosen
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"hook names are strings, fnmatch patterns or a predicate, got {names!r}")
    chosen = []
    for pat in names:
        found = [n for n in points if fnmatch.fnmatchcase(n, pat)]
        if not found:
            raise ConfigError(f"no hook point matches {pat!r}; names look like "
                              "'blocks.0.attn.hook_pattern' (see docs/inside.md)")
        chosen += [n for n in found if n not in chosen]
    return [n for n in points if n in chosen]


def checked(name, a, new):
    """A hook's return value for activation a: None (a kept) or a tensor of a's shape, dtype and device. ConfigError
    otherwise: a wrong shape would broadcast, an integer dtype truncate, silently."""
    if new is None:
        return a
    if not isinstance(new, torch.Tensor):
        raise ConfigError(f"the hook on {name!r} returned {type(new).__name__}; a hook returns a tensor or None")
    if new.shape != a.shape or new.dtype != a.dtype or new.device != a.device:
        raise ConfigError(f"the hook on {name!r} returned {new.dtype} {tuple(new.shape)} on {new.device}; the "
                          f"activation is {a.dtype} {tuple(a.shape)} on {a.device}: return one like it (e.g. .to(a.dtype))")
    return new


def _torch_hook(fn, name, direction):
    """A torch forward hook running fn(activation, name) (fwd), or registering fn(grad, name) on the output (bwd)."""
    if direction == "fwd":
        return lambda module, inputs, output: checked(name, output, fn(output, name))

    def bwd(module, inputs, output):
        if output.requires_grad:
            output.register_hook(lambda grad: checked(name, grad, fn(grad, name)))
    return bwd


class HookedModel:
    """Mixin for a DiT denoiser wrapper and the GPT: `add_hook`, `reset_hooks`, `hooks` (TransformerLens's names).
    `_hooked_net()` is the module holding the hook points."""

    def _hooked_net(self):
        net = getattr(self, "net", self)
        if not hook_points(net):
            raise ConfigError(f"{type(net).__name__} has no hook points: add_hook needs a scoreprobe DiT or GPT")
        return net

    def add_hook(self, name, fn, dir="fwd"):             # noqa: A002 (TransformerLens's keyword)
        """Keep fn(activation, name) -> replacement or None on every hook point `name` selects (a name, an fnmatch
        pattern or a predicate, as run_with_hooks) until `reset_hooks()`; dir "bwd": fn(grad, name) on the
        gradient. Returns the torch handles."""
        if dir not in ("fwd", "bwd"):
            raise ConfigError(f"dir must be 'fwd' or 'bwd', got {dir!r}")
        if not callable(fn):
            raise ConfigError(f"a hook function must be callable, got {fn!r}")
        points = hook_points(self._hooked_net())
        handles = [points[n].register_forward_hook(_torch_hook(fn, n, dir)) for n in select(points, name)]
        self.__dict__.setdefault("_persistent_hooks", []).extend(handles)
        return handles

    def reset_hooks(self):
        """Remove every hook added with add_hook (and by `hooks` blocks left open by an error)."""
        for handle in self.__dict__.pop("_persistent_hooks", []):
            handle.remove()

    @contextlib.contextmanager
    def hooks(self, fwd_hooks=(), bwd_hooks=()):
        """add_hook for each (name_or_filter, fn) for the duration of the block; removed on exit (also on error)."""
        handles = []
        try:
            for hooks_, direction in ((fwd_hooks, "fwd"), (bwd_hooks, "bwd")):
                for item in hooks_ or ():
                    if not (isinstance(item, tuple) and len(item) == 2):
                        raise ConfigError(f"a hook is (name_or_filter, fn), got {item!r}")
                    handles += self.add_hook(item[0], item[1], dir=direction)
            yield self
        finally:
            for h in handles:
                h.remove()
            kept = self.__dict__.get("_persistent_hooks", [])
            self.__dict__["_persistent_hooks"] = [h for h in kept if h not in handles]


class SigmaWindowHooks(torch.nn.Module):
    """A denoiser that runs `base` with forward hooks while σ is in [lo, hi] (both ends included) and plain outside:
    an intervention over a σ window of a sampling loop, a basin map or any analysis taking a denoiser.

    Rows of one call with σ inside and outside the window are run apart (each row sees exactly one of the two)."""

    def __init__(self, base, fwd_hooks, sigma_window=None):
        super().__init__()
        if not isinstance(base, HookedModel):
            raise ConfigError(f"{type(base).__name__} has no hook points: fwd_hooks need a scoreprobe denoiser "
                              "(series.denoiser(step), load_checkpoint(...))")
        self.base, self.fwd_hooks = base, list(fwd_hooks)
        self.lo, self.hi = _window(sigma_window)
        with base.hooks(fwd_hooks=self.fwd_hooks):          # names, patterns and predicates checked now
            pass

    @property
    def dim(self):
        return self.base.dim

    def forward(self, x, sigma):
        """x (B, D), sigma scalar or (B,) -> (B, D)."""
        s = torch.as_tensor(sigma, dtype=torch.float64, device=x.device).reshape(-1).expand(len(x))
        inside = (s >= self.lo) & (s <= self.hi)                            # (B,)
        if not inside.any():
            return self.base(x, sigma)
        sig = torch.as_tensor(sigma, device=x.device)
        per_row = sig.numel() > 1
        with self.base.hooks(fwd_hooks=self.fwd_hooks):
            if inside.all():
                return self.base(x, sigma)
            hooked = self.base(x[inside], sig.reshape(-1)[inside] if per_row else sigma)
        out = self.base(x[~inside], sig.reshape(-1)[~inside] if per_row else sigma)
        full = torch.empty((len(x),) + tuple(out.shape[1:]), dtype=out.dtype, device=out.device)
        full[inside], full[~inside] = hooked, out
        return full


def _window(sigma_window):
    """(lo, hi) floats with 0 <= lo <= hi (inf allowed): None is every σ."""
    if sigma_window is None:
        return 0.0, float("inf")
    try:
        lo, hi = (float(v) for v in sigma_window)
    except (TypeError, ValueError):
        raise ConfigError(f"sigma_window is (lo, hi), two numbers, got {sigma_window!r}") from None
    if isinstance(sigma_window, str) or not (0 <= lo <= hi):
        raise ConfigError(f"sigma_window needs 0 <= lo <= hi (not NaN), got {sigma_window!r}")
    return lo, hi


def windowed_probe(probe, config, fwd_hooks=None, sigma_window=None, out=None):
    """(probe, config) for a probe function denoiser -> Dataset (basins, clocks): with `fwd_hooks`, a probe that runs
    the given one on SigmaWindowHooks(denoiser, fwd_hooks, sigma_window) (one checkpoint at a time, no stack) and the
    config with "interventions" (the hook names and the window) set; unchanged without hooks. ConfigError, before any
    work: a window without hooks, a malformed hook or window, or `out=` (a store cannot identify hook functions)."""
    if fwd_hooks is None:
        if sigma_window is not None:
            raise ConfigError("sigma_window= needs fwd_hooks= (the hooks to apply inside the window)")
        return probe, config
    lo, hi = _window(sigma_window)
    hooks_ = list(fwd_hooks) if isinstance(fwd_hooks, (list, tuple)) else None
    if not hooks_ or not all(isinstance(h, tuple) and len(h) == 2 and callable(h[1]) for h in hooks_):
        raise ConfigError(f"fwd_hooks is a non-empty list of (name_or_filter, fn), got {fwd_hooks!r}")
    if out is not None:
        raise ConfigError("fwd_hooks= runs in memory: a store cannot identify hook functions (leave out= unset)")

    def hooked(D):
        return probe(SigmaWindowHooks(D, hooks_, (lo, hi)))
    hooked.stackable, hooked.n_bits = False, getattr(probe, "n_bits", None)
    names = [h[0] if isinstance(h[0], str) else getattr(h[0], "__name__", repr(h[0])) for h in hooks_]
    window = [lo, hi if hi < float("inf") else "inf"]
    return hooked, {**config, "interventions": {"fwd_hooks": names, "sigma_window": window}}
