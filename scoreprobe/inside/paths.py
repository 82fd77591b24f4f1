"""Path patching (Wang et al. 2023; Goldowsky-Dill et al. 2023): how much of a sender's effect reaches the
output *through one receiver*.

For a clean / corrupt pair at one σ (the inputs and metric of `sp.patch`; for a GPT, teacher-forced bits and
its logit metric, inside/gpt_patch.py):

1. run the corrupt input with the sender's activation taken from the clean run and every other head and MLP
   output (`hook_z` of each head, `hook_mlp_out` of each block) frozen at its corrupt value, and record the
   receiver's input: for a head receiver its queries, keys and values (`hook_q`/`hook_k`/`hook_v`, the head's
   slice; `which=` picks some), for an MLP receiver its first layer's output (`mlp.hook_pre`), for "final"
   the network's output (`final.hook_out`, i.e. the sender's direct path);
2. run the corrupt input again with only the receiver's input replaced by the recorded one, everything after
   it recomputed, and read the metric.

effect = (m(2) − m_corrupt) / (m(clean*) − m_corrupt), as `sp.patch`'s effect: 0 = nothing passes along the
path, 1 = the whole clean-vs-corrupt difference. Senders and receivers are named as the sites of `sp.patch` and
`sp.ablate` (inside/sites.py; a (hook name, head) pair is the label with [head=h]): senders the outputs
'blocks.i.attn.hook_z[head=h]' or 'blocks.i.hook_mlp_out'; receivers their inputs 'blocks.j.attn.hook_q[head=h]'
(also hook_k, hook_v: that input only), 'blocks.j.mlp.hook_pre' or 'final.hook_out', with i < j. The older receiver
names 'blocks.j.attn[head=h]' (its inputs picked by `which=`), 'blocks.j.mlp' and 'final' are still taken here (and
refused by patch / ablate, naming the site to write); an output given as a receiver is refused naming its inputs.
A receiver *set* joins receivers with '+'
('blocks.2.attn[head=0]+blocks.3.mlp'): their inputs are recorded in one run (step 1) and replaced together
(step 2), the effect through all of them at once; the sender must come before every one of them.
"""
import re
import warnings

import numpy as np
import torch
import xarray as xr

from scoreprobe.errors import ConfigError
from scoreprobe.inside.gpt_patch import gpt_runner
from scoreprobe.inside.hooks import hook_points, installed, keepers, network_of
from scoreprobe.inside.patch import (
    FINAL, _direction, capture, metric, pair_inputs, patched_output, warn_undefined_effects,
)
from scoreprobe.inside.sites import Atom, is_site_item, resolve_sites, site_text, with_atoms
from scoreprobe.inside.ratio import DEN_FLOOR, pooled_ratio, unit_ratio

_SENDER = re.compile(r"^blocks\.(\d+)\.(attn\.hook_z\[head=(\d+)\]|hook_mlp_out)$")
_RECEIVER = re.compile(r"^(?:blocks\.(\d+)\.(attn\[head=(\d+)\]|mlp)|final)$")
_RECEIVER_SITE = re.compile(r"^blocks\.(\d+)\.attn\.hook_([qkv])\[head=(\d+)\]$")


def _sender(label, n_heads, depth):
    m = _SENDER.match(label)
    if not m or (m.group(3) is not None and int(m.group(3)) >= n_heads) or int(m.group(1)) >= depth:
        old = re.match(r"^blocks\.(\d+)\.(?:attn\[head=(\d+)\]|mlp)$", label)
        new = (f": write {_output_site(old.group(1), old.group(2))!r}" if old else "")
        raise ConfigError(f"unknown sender {label!r}{new}; senders are head outputs 'blocks.i.attn.hook_z[head=h]' "
                          "(or ('blocks.i.attn.hook_z', h)) or MLP outputs 'blocks.i.hook_mlp_out'")
    return int(m.group(1)), label


def _output_site(j, head):
    return f"blocks.{j}.hook_mlp_out" if head is None else f"blocks.{j}.attn.hook_z[head={head}]"


def _labels(items):
    """A label, a (hook name, head) pair or a list of them -> list of labels (inside.sites.site_text)."""
    return [site_text(it) for it in ([items] if is_site_item(items) else list(items))]


def _receiver(label, n_heads, which, depth):
    """(first layer, {hook name: set of head indices, or None for the whole input}) of a receiver or a '+' set."""
    layer, hooks_ = None, {}
    for part in str(label).split("+"):
        lj, part_hooks = _one_receiver(part.strip(), n_heads, which, depth)
        layer = lj if layer is None else min(layer, lj)
        for h, head in part_hooks.items():
            heads = hooks_.setdefault(h, set())
            if heads is not None:
                hooks_[h] = None if head is None else heads | {head}
    return layer, hooks_


def _one_receiver(label, n_heads, which, depth):
    """(layer, {hook name: head index or None}) of one receiver, in either naming (module docstring)."""
    site = _RECEIVER_SITE.match(label)
    if site and int(site.group(3)) < n_heads and int(site.group(1)) < depth:
        j = int(site.group(1))
        return j, {f"blocks.{j}.attn.hook_{site.group(2)}": int(site.group(3))}
    if label in ("final", FINAL):
        return 10 ** 9, {FINAL: None}
    m = re.match(r"^blocks\.(\d+)\.mlp\.hook_pre$", label)
    if m and int(m.group(1)) < depth:
        return int(m.group(1)), {label: None}
    m = _RECEIVER.match(label)
    out = re.match(r"^blocks\.(\d+)\.(?:attn\.hook_z\[head=(\d+)\]|hook_mlp_out)$", label)
    if out:
        j, h = out.group(1), out.group(2)
        inputs = (f"'blocks.{j}.mlp.hook_pre'" if h is None
                  else f"'blocks.{j}.attn.hook_q[head={h}]' (or hook_k, hook_v)")
        raise ConfigError(f"unknown receiver {label!r}: an output; a receiver is named by its input, {inputs}")
    if not m or (m.group(3) is not None and int(m.group(3)) >= n_heads) or int(m.group(1)) >= depth:
        raise ConfigError(f"unknown receiver {label!r}: 'blocks.j.attn[head=h]', 'blocks.j.mlp', 'final', their "
                          "inputs as patch sites ('blocks.j.attn.hook_q[head=h]', 'blocks.j.mlp.hook_pre', "
                          "'final.hook_out'), or a set joined with '+'")
    j = int(m.group(1))
    if m.group(2) == "mlp":
        return j, {f"blocks.{j}.mlp.hook_pre": None}
    return j, {f"blocks.{j}.attn.hook_{w}": int(m.group(3)) for w in which}


def _frozen_fns(depth, acts_r, sender_layer, sender, clean_acts):
    """Hook functions: every head's z and every MLP output at its corrupt value, except the sender's (clean)."""
    fns = {}
    for i in range(depth):
        z, mlp = f"blocks.{i}.attn.hook_z", f"blocks.{i}.hook_mlp_out"
        fns[z] = _setter(acts_r[z])
        fns[mlp] = _setter(acts_r[mlp])
    m = _SENDER.match(sender)
    if m.group(3) is not None:
        h = int(m.group(3))
        z = f"blocks.{sender_layer}.attn.hook_z"
        fns[z] = _setter(acts_r[z], clean_acts[z], h)
    else:
        fns[f"blocks.{sender_layer}.hook_mlp_out"] = _setter(clean_acts[f"blocks.{sender_layer}.hook_mlp_out"])
    return fns


def _setter(value, other=None, head=None):
    """fn(a) -> value (with `other`'s head slice where given)."""
    def fn(a):
        out = value.clone()
        if other is not None:
            out[:, head] = other[:, head]
        return out.to(a.dtype)
    return fn


def _recorder(store, name):
    def fn(a):
        store[name] = a.detach().clone()
        return a
    return fn


def path_patch(D, clean, corrupt, sigma, senders, receivers, which="qkv", seed=0, direction=None, floor=DEN_FLOOR,
               metric=None, positions=None):
    """Path patching of a DiT denoiser at one noise level, or of a GPT (see the module docstring).

    clean, corrupt : (B, D) images (0/1 bits or ±1; a GPT: 0/1 bits, sigma None); sigma : scalar or (B,); senders,
    receivers : labels (or lists of labels); which : for head receivers, any of "q", "k", "v"; direction : (B, D)
    metric direction (DiT; default y_c − y_r); metric, positions : a GPT's metric as `sp.patch` takes it ("log_lik"
    by default, or "logit_diff" with optional position weights); floor : the smallest |contrast| a ratio is taken
    over (scoreprobe.inside.ratio).
    Returns xarray.Dataset, dims (sender, receiver, sample): `effect` (NaN where the pair's |contrast| < floor),
    `effect_numerator` m − m_r, and `effect_pooled` (sender, receiver) Σ(m − m_r)/Σ(m_c* − m_r); NaN where the
    sender is not before the receiver, or where the pairs' contrasts have mixed sign or |mean| < floor (the
    reason in attrs["pooled_undefined"], with one warning)."""
    net, kind = network_of(D)
    if not floor >= 0:
        raise ConfigError(f"floor must be a non-negative number, got {floor!r}")
    if not which or set(which) - set("qkv"):
        raise ConfigError(f"which must be letters of 'qkv', got {which!r}")
    senders, receivers = _labels(senders), _labels(receivers)
    blocks = _blocks(net, kind)
    H = blocks[0].attn.num_heads if kind == "dit" else net.config.n_head
    snd = [_sender(s, H, len(blocks)) for s in senders]
    rcv = [_receiver(r, H, sorted(set(which)), len(blocks)) for r in receivers]
    needed = sorted({f"blocks.{i}.{h}" for i in range(len(blocks)) for h in ("attn.hook_z", "hook_mlp_out")}
                    | {FINAL})
    with torch.no_grad():
        run, acts_c, acts_r, m_r, m_c = _runner(D, net, kind, clean, corrupt, sigma, seed, direction, needed,
                                                metric, positions)
        den = m_c - m_r
        eff = np.full((len(snd), len(rcv), len(m_r)), np.nan)
        for a, (li, label) in enumerate(snd):
            for b, (lj, hooks_) in enumerate(rcv):
                if li < lj:
                    eff[a, b] = (_one_path(run, net, len(blocks), (li, label), hooks_, acts_r, acts_c)
                                 - m_r).cpu().numpy()
    return _dataset(senders, receivers, eff, den.cpu().numpy(), floor)


def _blocks(net, kind):
    return net.blocks if kind == "dit" else net.transformer.h


def _runner(D, net, kind, clean, corrupt, sigma, seed, direction, needed, metric_name, positions):
    """(run, clean activations, corrupt activations, m_corrupt, m_clean*): run(fns) -> (B,) metric of the corrupt
    input with hook functions `fns` installed. DiT: the projection on the pair's difference (or `direction`), m_clean*
    the corrupt input with every network activation clean (the skip term stays corrupt); GPT: gpt_patch's metric."""
    if kind == "gpt":
        if sigma is not None or direction is not None:
            raise ConfigError("a GPT has no noise level and reads a logit metric: pass sigma=None, metric= (not "
                              "direction=)")
        run, acts_c, m_r, m_c = gpt_runner(net, clean, corrupt, needed, metric_name or "log_lik", positions)
        fns, acts_r = keepers(needed)
        run(fns)
        return run, acts_c, acts_r, m_r, m_c
    if metric_name is not None or positions is not None:
        raise ConfigError("metric= and positions= are a GPT's; a DiT's metric is direction=")
    xc, xr, s, delta = pair_inputs(D, clean, corrupt, sigma, seed)
    delta = delta if direction is None else _direction(direction, delta)
    _, acts_c = capture(D, net, xc, s, needed)
    out_r, acts_r = capture(D, net, xr, s, needed)
    m_c = metric(patched_output(D, net, xr, s, resolve_sites(net, FINAL)[0], acts_c), delta)

    def run(fns):
        with installed(net, fns, compose=True):
            return metric(D(xr, s), delta)
    return run, acts_c, acts_r, metric(out_r, delta), m_c


def _one_path(run, net, depth, sender, hooks_, acts_r, acts_c):
    """The metric after the receiver's input is replaced by its value with only the sender clean (step 1)."""
    recorded = {}
    fns = _frozen_fns(depth, acts_r, sender[0], sender[1], acts_c)
    fns.update({h: _recorder(recorded, h) for h in hooks_})
    run(fns)
    points, fns = hook_points(net), {}
    for h, heads in hooks_.items():
        atoms = [Atom(h)] if heads is None else [Atom(h, (("head", hd),)) for hd in sorted(heads)]
        fns[h] = (lambda p, new, ats: lambda a: with_atoms(a, new, p, ats))(points[h], recorded[h], atoms)
    return run(fns)


def _dataset(senders, receivers, num, den, floor):
    """num (sender, receiver, sample) m − m_r, den (sample,) -> the Dataset (see path_patch)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)                      # pairs not run (sender after receiver)
        pooled, _ = pooled_ratio(num, np.broadcast_to(den, num.shape), axis=2, floor=floor)
    pooled = np.where(np.isfinite(num).all(2), pooled, np.nan)
    contrast = pooled_ratio(den, den, floor=floor)[1].item()               # shared by every pooled value
    warn_undefined_effects("path_patch", contrast, pooled.size, den, floor)
    dims = ("sender", "receiver", "sample")
    return xr.Dataset({
        "effect": (dims, unit_ratio(num, den, floor)[0], {"units": "1", "long_name": "path patching effect"}),
        "effect_numerator": (dims, num, {"units": "1", "long_name": "m(path patched) − m(corrupt)"}),
        "effect_pooled": (("sender", "receiver"), pooled, {"units": "1", "long_name": "Σ(m − m_r)/Σ(m_c − m_r)"}),
    }, coords={"sender": senders, "receiver": receivers, "sample": np.arange(num.shape[2])},
        attrs={"floor": float(floor), "pooled_undefined": contrast})
