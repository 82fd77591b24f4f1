"""What a stored step measured: the identity of the model a sweep ran at that step.

Every step written to a store records one (see docs/definitions.md, "Which model a step measured"):

- `{"weights": sha, "outputs": [...]}` for a torch module with tensors: a SHA-256 (first 16 hex
  digits) of every tensor its forward can read -- its state_dict as loaded, its non-persistent
  buffers and tensors held as plain attributes (names, dtypes, shapes and bytes, sorted by name; the
  last two only where they exist, so the digest of a module without them is the one recorded before)
  -- and of the settings that turn the network into a denoiser (each submodule's class,
  parameterization, sigma_data, time_scale, label, image_shape, schedule); with the output
  fingerprint below, which catches what no digest can see (a plain attribute such as `self.gain`, code).
  A file re-saved with equal tensors gives the same digest; a file with other tensors never does. The
  file's name, size and path play no part. With `model_id=` a module is `{"weights", "model_id"}`
  (no fingerprint: for a module whose outputs are not reproducible, e.g. in reduced precision).
  Stores that recorded `{"weights"}` alone resume on the weights (`same`).
- `{"model_id": text}` for a callable without weights when the user names it (`model_id=`).
- `{"outputs": [32 numbers]}` otherwise: a behavioural fingerprint, D's outputs on a fixed probe
  batch (32 points x 4 sigmas, fixed seed), reduced to 8 fixed random (+-1) projections per sigma,
  rounded to 6 decimals; two fingerprints are the same model when no value differs by more than
  FINGERPRINT_TOL (1e-3). Compared within a tolerance, not hashed: a hash of rounded outputs
  breaks whenever float noise moves one of ~5000 values across a rounding boundary.
- None when none of these exists (no weights, no model_id, and D failed on the probe batch or its
  dimension is unknown): such a step is written, but a store holding it is never resumed.

Limits (docs/definitions.md, "Which model a step measured"): the fingerprint is taken on the one call
made when the step is identified -- a callable that behaves differently on later calls (state it
changes, a file it rereads) is not seen to change; a module whose behaviour depends on state outside
its tensors changes its identity only through the fingerprint, i.e. only where the probe batch shows
the change. A `model_id` is taken at its word: two callables given one model_id are one model.
"""
import contextlib
import hashlib
import json
import math

import numpy as np

from scoreprobe.errors import ConfigError

FINGERPRINT_SIGMAS = (0.1, 0.5, 1.0, 3.0)
FINGERPRINT_POINTS = 32
FINGERPRINT_PROJECTIONS = 8
FINGERPRINT_SEED = 20
FINGERPRINT_DECIMALS = 6
FINGERPRINT_TOL = 1e-3
SETTING_ATTRS = ("parameterization", "sigma_data", "time_scale", "label", "label_dim", "image_shape")


def model_identity(model, n_bits=None, model_id=None, device=None):
    """The identity of `model` (dict, see the module docstring) or None.

    model : what a sweep's loader returned (a denoiser, a GPT sampler, any callable).
    n_bits : D of the inputs, for the fingerprint of a callable without weights (default: the
        model's `dim`). model_id : the user's name for a callable without weights (ignored for a
        module with tensors: weights always identify it). device : tried for the probe batch when
        the model refuses CPU tensors."""
    digest = weights_digest(model)
    if digest is not None:
        if model_id is not None:
            return {"weights": digest, "model_id": str(model_id)}
        import torch
        outputs = isinstance(model, torch.nn.Module) or getattr(model, "fingerprint_outputs", False)   # not a sampler
        values = fingerprint(model, n_bits, device) if outputs else None
        return {"weights": digest} if values is None else {"weights": digest, "outputs": values}
    if model_id is not None:
        return {"model_id": str(model_id)}
    values = fingerprint(model, n_bits, device)
    return None if values is None else {"outputs": values}


def weights_digest(model):
    """SHA-256 (16 hex digits) of a module's tensors and denoiser settings; None without tensors. A
    wrapper naming its module in `__wrapped__` (clocks' AncestralSampler around a GPT) is that module."""
    import torch
    for _ in range(8):   # a bounded unwrap (functools.wraps chains end in a plain function)
        if isinstance(model, torch.nn.Module) or getattr(model, "__wrapped__", None) is None:
            break
        model = model.__wrapped__
    if not isinstance(model, torch.nn.Module):
        return None
    state = model.state_dict()
    extra = _unsaved_tensors(model, state)
    if not state and not extra:
        return None
    h = hashlib.sha256()
    for name, t in [*((n, state[n]) for n in sorted(state)), *sorted(extra.items())]:
        t = t.detach()
        h.update(json.dumps([name, str(t.dtype), list(t.shape)]).encode())
        h.update(t.reshape(-1).contiguous().cpu().view(torch.uint8).numpy().tobytes())
    h.update(json.dumps(_settings(model), sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def _unsaved_tensors(model, state):
    """{name: tensor} the forward can read that the state_dict leaves out: non-persistent buffers
    ('buffer:NAME') and tensors held as plain attributes of a submodule ('attribute:MODULE.NAME')."""
    import torch
    out = {f"buffer:{n}": b for n, b in model.named_buffers() if n not in state and b is not None}
    for mod_name, m in model.named_modules():
        for attr, value in vars(m).items():
            if torch.is_tensor(value) and not isinstance(value, torch.nn.Parameter):
                out[f"attribute:{mod_name + '.' if mod_name else ''}{attr}"] = value
    return out


def _settings(model):
    """{submodule name: {class, settings}}: what maps the tensors to a denoiser besides the tensors."""
    out = {}
    for name, m in model.named_modules():
        s = {"class": type(m).__qualname__}
        for attr in SETTING_ATTRS:
            value = getattr(m, attr, None)
            if isinstance(value, (str, int, float, bool, tuple)):
                s[attr] = list(value) if isinstance(value, tuple) else value
        schedule = getattr(m, "schedule", None)
        if hasattr(schedule, "describe"):
            s["schedule"] = schedule.describe()
        out[name] = s
    return out


def probe_batch(n_bits):
    """The fixed fingerprint inputs: x (S*P, D) float32 = v + sigma*n around P random vertices v,
    sigma (S*P,) float32, S = len(FINGERPRINT_SIGMAS), rows grouped by sigma."""
    import torch
    rng = np.random.default_rng(FINGERPRINT_SEED)
    v = rng.integers(0, 2, size=(FINGERPRINT_POINTS, n_bits)) * 2.0 - 1.0            # (P, D)
    noise = rng.standard_normal((len(FINGERPRINT_SIGMAS), FINGERPRINT_POINTS, n_bits))  # (S, P, D)
    sig = np.asarray(FINGERPRINT_SIGMAS)[:, None, None]                                # (S, 1, 1)
    x = (v[None] + sig * noise).reshape(-1, n_bits)                                    # (S*P, D)
    sigma = np.repeat(np.asarray(FINGERPRINT_SIGMAS), FINGERPRINT_POINTS)              # (S*P,)
    return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(sigma.astype(np.float32))


def project(out, n_bits):
    """(S*P, D) outputs -> the S*K fingerprint values: per sigma, K fixed +-1 projections / sqrt(P*D)."""
    rng = np.random.default_rng(FINGERPRINT_SEED + 1)
    r = rng.integers(0, 2, size=(FINGERPRINT_PROJECTIONS, FINGERPRINT_POINTS, n_bits)) * 2.0 - 1.0  # (K, P, D)
    out = np.asarray(out, dtype=np.float64).reshape(len(FINGERPRINT_SIGMAS), FINGERPRINT_POINTS, n_bits)
    f = np.einsum("spd,kpd->sk", out, r) / math.sqrt(FINGERPRINT_POINTS * n_bits)    # (S, K)
    return np.round(f, FINGERPRINT_DECIMALS).ravel()


def fingerprint(model, n_bits=None, device=None):
    """list of S*K floats (see `project`), or None when `model` cannot be evaluated on the probe batch."""
    import torch
    n_bits = n_bits or getattr(model, "dim", None) or getattr(model, "n_bits", None)
    if not n_bits or not callable(model):
        return None
    x, sigma = probe_batch(int(n_bits))
    for dev in dict.fromkeys(["cpu", *([str(device)] if device else [])]):
        try:
            with side_effect_free(model):
                out = model(x.to(dev), sigma.to(dev))
            out = torch.as_tensor(out).detach().to("cpu", torch.float64).numpy()
        except Exception:   # a user's function may fail in any way: no fingerprint, try the next device
            continue
        if out.shape == tuple(x.shape) and np.isfinite(out).all():
            return project(out, int(n_bits)).tolist()
    return None


@contextlib.contextmanager
def side_effect_free(model):
    """The fingerprint's call leaves the caller's training untouched: no gradients, modules in eval mode
    (no dropout, no batch-norm update; their modes restored) and the global torch random streams
    saved and restored (a training loop's next draws are those it would have made)."""
    import torch
    modules = [m for m in (model, getattr(model, "__wrapped__", None)) if isinstance(m, torch.nn.Module)]
    modes = [m.training for m in modules]
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices), torch.no_grad():
        for m in modules:
            m.eval()
        try:
            yield
        finally:
            for m, mode in zip(modules, modes):
                m.train(mode)


def describe(identity):
    """Short text of an identity for messages."""
    if not identity:
        return "no identity (no weights, no model_id, no fingerprint)"
    parts = [f"weights {identity['weights']}"] if "weights" in identity else []
    if "model_id" in identity:
        parts.append(f"model_id {identity['model_id']!r}")
    if "outputs" in identity:
        parts.append(f"outputs fingerprint {_short(identity.get('outputs'))}")
    return ", ".join(parts)


def _short(values):
    return "[" + ", ".join(f"{v:.4f}" for v in (values or [])[:3]) + ", ...]"


def same(old, new):
    """True when the identities name the same model (fingerprints: within FINGERPRINT_TOL). Two with
    weights: equal weights, and every other part both record equal (a store that recorded the weights
    alone, written before modules were fingerprinted, resumes on them)."""
    if old is None or new is None:
        return False
    if "weights" in old and "weights" in new:
        return old["weights"] == new["weights"] and all(same({k: old[k]}, {k: new[k]}) for k in set(old) & set(new)
                                                        if k != "weights")
    if set(old) != set(new):
        return False
    if "outputs" in new:
        a, b = np.asarray(old["outputs"], dtype=float), np.asarray(new["outputs"], dtype=float)
        return a.shape == b.shape and bool(np.all(np.abs(a - b) <= FINGERPRINT_TOL))
    return old == new


class Identifier:
    """Picklable (it travels to dask workers with a step's task): identity(model, step) of the model
    loaded for `step`, with the sweep's n_bits, per-step model_id {step: str} and device."""

    def __init__(self, n_bits=None, model_ids=None, device=None):
        self.n_bits, self.model_ids, self.device = n_bits, dict(model_ids or {}), device

    def __call__(self, model, step):
        return model_identity(model, self.n_bits, self.model_ids.get(int(step)), self.device)


def model_ids(model_id, steps):
    """{step: str} from sweep's model_id= (None, a str for every step, or a {step: str} mapping)."""
    if model_id is None:
        return {}
    if isinstance(model_id, str):
        return {int(s): model_id for s in steps}
    if isinstance(model_id, dict):
        missing = sorted(set(int(s) for s in steps) - {int(k) for k in model_id})
        if missing:
            raise ConfigError(f"model_id= names no model for steps {missing[:5]}; give a str or one per step")
        return {int(k): str(v) for k, v in model_id.items()}
    raise ConfigError(f"model_id= must be a str or a {{step: str}} mapping, got {type(model_id).__name__}")
