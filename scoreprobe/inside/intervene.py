"""Interventions as an API: hooks on named points, and ablations of sites.

    with sp.hooks(D, fwd_hooks=[("blocks.0.attn.hook_z", fn)]):      # fn(activation, name) -> tensor or None
        out, cache = sp.run_with_cache(D, x, 0.7)                    # cached *during* the intervention
    out = sp.run_with_hooks(D, x, 0.7, fwd_hooks=[("blocks.*.hook_mlp_out", zero)])
    ds = sp.ablate(D, x, 0.7, sites="head", how="mean")              # per site: the output's change

A hook is (name_or_filter, fn): a hook name, an fnmatch pattern ('blocks.*.attn.hook_z') or a predicate
name -> bool; fn(activation, name) returns the replacement, or None to leave it as it is. Several hooks on
one point run in the order given; a point that already has a function (an outer `hooks`, a cache) runs that
one first. Backward hooks fn(grad, name) -> grad or None see the gradient of the activation when the caller
runs `.backward()` on something computed from the output (the input is made to require grad).
"""
import contextlib

import numpy as np
import torch
import xarray as xr

from scoreprobe.errors import ConfigError
from scoreprobe.inside.cache import check_input, forward
from scoreprobe.inside.hooks import hook_points, installed, keepers, network_of, select
from scoreprobe.inside.sites import resolve_sites, with_atoms
from scoreprobe.limits import check_seed
from scoreprobe.models.hooked import checked

HOW = ("zero", "mean", "resample")


def _resolved(points, hooks_):
    """[(name, fn)] in the order given, patterns expanded; ConfigError for a malformed entry."""
    out = []
    for item in hooks_ or ():
        if not (isinstance(item, tuple) and len(item) == 2 and callable(item[1])) or item[0] is None:
            raise ConfigError(f"a hook is (name_or_filter, fn) with a name, a pattern or a predicate, got {item!r}")
        out += [(name, item[1]) for name in select(points, item[0])]
    return out


def _forward_fn(name, fns, bwd):
    """One hook function for a point: the user's forward functions in order, then the backward ones
    registered on the result (when it is in a graph)."""
    def fn(a):
        for f in fns:
            a = checked(name, a, f(a, name))
        if bwd and a.requires_grad:
            for g in bwd:
                a.register_hook(lambda grad, g=g: checked(name, grad, g(grad, name)))
        return a
    return fn


@contextlib.contextmanager
def hooks(D, fwd_hooks=(), bwd_hooks=()):
    """Install forward and backward hooks on the network inside D for the duration of the block (see the
    module docstring); composes with hooks already installed and with `run_with_cache` inside it."""
    net, _ = network_of(D)
    points = hook_points(net)
    fwd, bwd = _resolved(points, fwd_hooks), _resolved(points, bwd_hooks)
    by_name = {}
    for name, f in fwd:
        by_name.setdefault(name, ([], []))[0].append(f)
    for name, g in bwd:
        by_name.setdefault(name, ([], []))[1].append(g)
    with installed(net, {n: _forward_fn(n, f, g) for n, (f, g) in by_name.items()}, compose=True):
        yield


def run_with_hooks(D, x, sigma=None, fwd_hooks=(), bwd_hooks=()):
    """D(x, sigma) with the hooks installed (the GPT's logits (B, T, V) for a GPT, sigma None).

    x : (B, D) noisy signed images (DiT) or 0/1 bits (GPT). With bwd_hooks the output stays in the graph
    (x is made to require grad) so that `out.<metric>.backward()` reaches the backward hooks; otherwise it
    is computed without a graph. Returns the output tensor."""
    net, kind = network_of(D)
    x = check_input(D, kind, x)
    if bwd_hooks and kind == "dit":
        x = x.detach().requires_grad_(True)
    ctx = torch.enable_grad() if bwd_hooks else torch.no_grad()
    with ctx, hooks(D, fwd_hooks, bwd_hooks):
        return forward(D, net, kind, x, sigma)


# ---------------------------------------------------------------------------------------------
# Ablations
# ---------------------------------------------------------------------------------------------

def ablate(D, x, sigma=None, sites="head", how="zero", reference=None, direction=None, seed=0, mean_over=("sample",)):
    """Ablate each site in turn and measure what the output loses.

    Parameters
    ----------
    D : a denoiser wrapping a DiT, or a GPT (x then 0/1 bits, sigma None).
    x : (B, D) inputs. sites : as for `sp.patch` ("head", "sub", "block", "token", "all", labels such as
        'blocks.0.attn.hook_z[head=1]' or pairs ('blocks.0.attn.hook_z', 1)). how : "zero" (the entries set to 0),
        "mean" (to their mean over `reference`, every other index kept), "resample" (each row's entries taken from
        a row of `reference` drawn with `seed`).
    reference : what the mean / resample draws from (default: x itself): (R, D) inputs, run at the same σ; or
        activations already taken over a reference set, e.g. of a whole dataset: an ActivationCache
        (`sp.run_with_cache`, at the σ the caller chose) or {hook name: (R, ...) tensor} in the network's layout
        (`run_with_cache(..., return_type="dict")`), holding every hook the sites touch.
    mean_over : "mean" only: the axes averaged, "sample" (the reference rows, per position: the default) and any of
        the hook's own axes, e.g. ("sample", "token") for one mean over rows and positions.
    direction : (B, D) or (D,) optional: the metric ⟨D(x), direction⟩ per row (DiT); for a GPT the metric is
        the log-likelihood of x.

    Returns
    -------
    xarray.Dataset, dims (site, sample): `rel_change` ‖out − base‖ / ‖base‖, `effect` metric(ablated) −
    metric(base) (with a direction, or a GPT), `effect_mean` (site); `metric_base` (sample); coords as
    `sp.patch` (site, site_kind, site_layer). Undefined values stay NaN (a zero base norm)."""
    if how not in HOW:
        raise ConfigError(f"how must be one of {', '.join(HOW)}, got {how!r}")
    check_seed(seed)
    net, kind = network_of(D)
    x = check_input(D, kind, x)
    site_list = resolve_sites(net, sites)
    if not any(st.atoms for st in site_list):
        raise ConfigError(f"sites {sites!r} select nothing to ablate")
    names = sorted({at.hook for st in site_list for at in st.atoms})
    points = hook_points(net)
    means = _mean_axes(mean_over, how, names, points)
    given = _given_acts(reference, names) if how != "zero" else None
    ref = x if reference is None or given is not None or how == "zero" else check_input(D, kind, reference)
    with torch.no_grad():
        base = forward(D, net, kind, x, sigma)
        if how == "zero":
            ref_acts = {}
        else:
            ref_acts = given or _capture(D, net, kind, ref, _ref_sigma(sigma, len(ref), len(x)), names)
            _check_shapes(D, net, kind, x, sigma, names, ref_acts, points)
        n_ref = len(next(iter(ref_acts.values()))) if ref_acts else len(ref)
        rows = _rows(how, len(x), n_ref, seed)
        outs = [_ablated(D, net, kind, x, sigma, st, how, ref_acts, rows, means) for st in site_list]
    return _dataset(site_list, base, outs, _metric_fn(D, net, kind, x, direction))


def _mean_axes(mean_over, how, names, points):
    """{hook name: tuple of axes (0 = the reference rows) averaged} for "mean"; ConfigError for an unknown axis."""
    over = (mean_over,) if isinstance(mean_over, str) else tuple(mean_over)
    if "sample" not in over or len(set(over)) < len(over):
        raise ConfigError(f"mean_over names axes once each, 'sample' among them, got {mean_over!r}")
    if how != "mean" or over == ("sample",):
        return {n: (0,) for n in names}
    out = {}
    for n in names:
        p = points[n]
        bad = [a for a in over if a != "sample" and a not in p.dims]
        if bad or not p.batched:
            raise ConfigError(f"mean_over {over}: hook {n} has axes ('sample',) + {p.dims}, not {bad or ['sample']}")
        out[n] = tuple(0 if a == "sample" else 1 + p.dims.index(a) for a in over)
    return out


def _given_acts(reference, names):
    """{hook: tensor} from an ActivationCache or a dict of activations; None for inputs (or no reference)."""
    from scoreprobe.inside.activations import ActivationCache
    if isinstance(reference, ActivationCache):
        acts = {n: reference.raw(n) for n in names if n in reference._acts}
    elif isinstance(reference, dict):
        acts = {n: torch.as_tensor(reference[n]) for n in names if n in reference}
    else:
        return None
    missing = [n for n in names if n not in acts]
    if missing:
        raise ConfigError(f"reference activations lack {missing}: cache them (run_with_cache(..., names=...))")
    if len({len(a) for a in acts.values()}) != 1 or not len(next(iter(acts.values()))):
        raise ConfigError("reference activations must share one non-empty number of rows")
    return acts


def _check_shapes(D, net, kind, x, sigma, names, ref_acts, points):
    """ConfigError before any ablation where a reference activation's shape (past its rows) is not the hook's."""
    seen = _capture(D, net, kind, x[:1], sigma if sigma is None or torch.as_tensor(sigma).numel() == 1
                    else torch.as_tensor(sigma).reshape(-1)[:1], names)
    for n in names:
        want, got = seen[n].shape[points[n].batched:], ref_acts[n].shape[points[n].batched:]
        if tuple(want) != tuple(got):
            raise ConfigError(f"reference activation {n} has shape {tuple(ref_acts[n].shape)}; the hook's is "
                              f"(rows,) + {tuple(want)}")


def _ref_sigma(sigma, n_ref, n):
    """σ for the reference rows: the scalar, or the first n_ref of a per-row σ (the reference must match)."""
    if sigma is None or torch.as_tensor(sigma).numel() == 1:
        return sigma
    s = torch.as_tensor(sigma).reshape(-1)
    if n_ref != n:
        raise ConfigError("a per-row sigma needs a reference with as many rows as x (or a scalar sigma)")
    return s


def _rows(how, n, n_ref, seed):
    """For "resample": the reference row of each input row (seeded); None otherwise."""
    if how != "resample":
        return None
    return torch.as_tensor(np.random.default_rng(seed).integers(0, n_ref, n))


def _capture(D, net, kind, x, sigma, names):
    fns, kept = keepers(names)
    with installed(net, fns, compose=True):
        forward(D, net, kind, x, sigma)
    return kept


def _value(how, a, ref, rows, batched, axes=(0,)):
    """The replacement of a whole activation a (B, ...) (unbatched: (...)); axes: those "mean" averages."""
    if how == "zero":
        return torch.zeros_like(a)
    if not batched:
        return ref.to(a.dtype)
    if how == "mean":
        return ref.to(a.device).mean(axes, keepdim=True).expand_as(a).to(a.dtype)
    return ref[rows.to(ref.device)].to(a.device, a.dtype)


def _ablated(D, net, kind, x, sigma, site, how, ref_acts, rows, means):
    """D's output with the site's atoms replaced."""
    points = hook_points(net)
    by_hook = {}
    for at in site.atoms:
        by_hook.setdefault(at.hook, []).append(at)

    def fn_for(name, atoms):
        point = points[name]

        def fn(a):
            return with_atoms(a, _value(how, a, ref_acts.get(name), rows, point.batched, means[name]), point, atoms)
        return fn
    with installed(net, {h: fn_for(h, ats) for h, ats in by_hook.items()}, compose=True):
        return forward(D, net, kind, x, sigma)


def _metric_fn(D, net, kind, x, direction):
    """out -> (B,) metric, or None (no direction for a DiT)."""
    if kind == "gpt":
        tokens = net.bits_to_tokens(x).to(net.lm_head.weight.device)
        return lambda out: torch.log_softmax(out.float(), -1).gather(2, tokens[:, :, None])[:, :, 0].sum(1).double()
    if direction is None:
        return None
    w = torch.as_tensor(np.asarray(direction), dtype=torch.float64, device=x.device)
    w = w.expand(len(x), -1) if w.ndim == 1 else w
    if w.shape != x.shape or not torch.isfinite(w).all():
        raise ConfigError(f"direction must be finite, of shape {tuple(x.shape)} or ({x.shape[1]},)")
    return lambda out: (out.double() * w).sum(1)


def _dataset(site_list, base, outs, metric):
    flat = lambda t: t.reshape(len(t), -1).double()                           # noqa: E731
    norm = flat(base).norm(dim=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.stack([((flat(o) - flat(base)).norm(dim=1) / norm).cpu().numpy() for o in outs])   # (S, B)
    rel[:, (norm == 0).cpu().numpy()] = np.nan
    coords = {"site": [st.label for st in site_list], "site_kind": ("site", [st.kind for st in site_list]),
              "site_layer": ("site", [st.layer for st in site_list]), "sample": np.arange(len(base))}
    data = {"rel_change": (("site", "sample"), rel, {"units": "1", "long_name": "‖out − base‖ / ‖base‖"})}
    if metric is not None:
        m0 = metric(base)
        eff = np.stack([(metric(o) - m0).cpu().numpy() for o in outs])
        data.update(effect=(("site", "sample"), eff, {"long_name": "metric(ablated) − metric(base)"}),
                    effect_mean=("site", eff.mean(1)), metric_base=("sample", m0.cpu().numpy()))
    return xr.Dataset(data, coords=coords)
