"""Patching sites: which activations are taken from the clean run.

A site is a label and one or more atoms patched together; an atom is a hook point, whole or at one
index of one of its named axes:

    "blocks.1.attn.hook_z[head=2]"         head 2 of block 1 (its per-head output z)
    "blocks.1.attn.hook_z[head=2,token=4]" that head at token 4 only
    "blocks.0.mlp.hook_post[d_mlp=17]"     one MLP neuron of block 0 (every token)
    "blocks.0.hook_resid_pre[token=4]"     token 4 of the residual stream entering block 0
    "blocks.2.hook_mlp_out"                the MLP sub-block's output of block 2 (all tokens)
    "blocks.2"                             block 2: its attention and MLP outputs together
    "a+b"                                  atoms a and b together
    "*"                                    every hook point (the clean run's output: effect 1)
    "none"                                 nothing (the corrupt run's output: effect 0)
    ("blocks.1.attn.hook_z", 2)            a (hook name, head) pair: the same as "blocks.1.attn.hook_z[head=2]"
    ("blocks.1.attn.hook_z", {"head": 2, "token": 4})   a (hook name, {axis: index}) pair

One naming for `sp.patch`, `sp.ablate` and `sp.path_patch` (its senders and receivers are sites too: a receiver
is named by its input, 'blocks.j.attn.hook_q[head=h]', 'blocks.j.mlp.hook_pre', 'final.hook_out'). path_patch's
older receiver names ('blocks.j.attn[head=h]', 'blocks.j.mlp', 'final') are refused here with the site to write.

`site_grid(net)` is the default list: per block the block, its two sub-blocks, each head, and the
residual stream entering it at each token; the finer granularities "head_token" (each head at each token)
and "neuron" (each MLP neuron) are there when asked for by name.
"""
import re
from dataclasses import dataclass

import numpy as np

from scoreprobe.errors import ConfigError
from scoreprobe.inside.hooks import hook_points

_ATOM = re.compile(r"^([A-Za-z0-9_.]+?)(?:\[(\w+=\d+(?:,\w+=\d+)*)\])?$")
GRANULARITIES = ("block", "sub", "head", "token")
FINER = ("head_token", "neuron")          # only when asked for by name: many sites


@dataclass(frozen=True)
class Atom:
    """hook: hook name; sel: ((axis name, index), ...) of the hook's axes, () for all of it."""
    hook: str
    sel: tuple = ()

    @property
    def whole(self):
        return not self.sel


def atom_index(point, atom, shape):
    """The indexing tuple of an atom into an activation of `shape` (batch axis first where the point has one);
    ConfigError for an index out of range."""
    ix = [slice(None)] * len(shape)
    for dim, index in atom.sel:
        axis = point.dims.index(dim) + point.batched
        if index >= shape[axis]:
            raise ConfigError(f"site index {dim}={index} out of range (size {shape[axis]})")
        ix[axis] = index
    return tuple(ix)


def with_atoms(a, new, point, atoms):
    """`a` with the atoms' entries taken from `new` (same shape): `new` itself when an atom is whole."""
    if any(at.whole for at in atoms):
        return new.to(a.dtype)
    a = a.clone()
    for at in atoms:
        ix = atom_index(point, at, a.shape)
        a[ix] = new[ix].to(a.dtype)
    return a


def replacer(point, atoms, new):
    """Hook function: the activation with the atoms' entries taken from `new` (same shape)."""
    return lambda a: with_atoms(a, new, point, atoms)


def patch_fns(points, site, acts):
    """{hook name: fn}: hook functions that take the site's atoms from `acts` ({hook name: activation})."""
    by_hook = {}
    for at in site.atoms:
        by_hook.setdefault(at.hook, []).append(at)
    return {h: replacer(points[h], ats, acts[h]) for h, ats in by_hook.items()}


@dataclass(frozen=True)
class Site:
    """label: what the user wrote (or the grid's name); atoms: patched together; kind: granularity."""
    label: str
    atoms: tuple
    kind: str = "custom"

    @property
    def layer(self):
        """The block of the first atom (-1 when it is outside the blocks)."""
        m = re.match(r"^blocks\.(\d+)", self.atoms[0].hook) if self.atoms else None
        return int(m.group(1)) if m else -1


def site_text(item):
    """A site as its label: a string as it is, (hook name, head index) -> 'hook[head=h]', (hook name, {axis: index})
    -> 'hook[axis=i,...]'; ConfigError for anything else."""
    if isinstance(item, str):
        return item.strip()
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        sel = {"head": item[1]} if not isinstance(item[1], dict) else item[1]
        if sel and all(isinstance(k, str) and isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 0
                       for k, v in sel.items()):
            return f"{item[0].strip()}[{','.join(f'{k}={int(v)}' for k, v in sel.items())}]"
    raise ConfigError(f"a site is a label ('blocks.1.attn.hook_z[head=2]') or a (hook name, head) / (hook name, "
                      f"{{axis: index}}) pair with non-negative int indices, got {item!r}")


def is_site_item(item):
    """Whether `item` is one site (a label, a Site or a (hook name, index) pair), not a list of them."""
    return isinstance(item, (str, Site)) or (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
                                             and not isinstance(item[1], str))


_OLD_RECEIVER = re.compile(r"^blocks\.(\d+)\.(?:attn\[head=(\d+)\]|mlp)$")


def _old_receiver(text):
    """The message for path_patch's older receiver names used as a site, or None."""
    m = _OLD_RECEIVER.match(text)
    if text == "final":
        return "'final' is path_patch's older name of the output: as a site write 'final.hook_out'"
    if not m:
        return None
    j, h = m.group(1), m.group(2)
    if h is None:
        return (f"{text!r} is path_patch's older receiver name: as a site write 'blocks.{j}.mlp.hook_pre' (its "
                f"input) or 'blocks.{j}.hook_mlp_out' (its output)")
    return (f"{text!r} is path_patch's older receiver name: as a site write 'blocks.{j}.attn.hook_q[head={h}]' (or "
            f"hook_k, hook_v: its inputs) or 'blocks.{j}.attn.hook_z[head={h}]' (its output)")


def _atoms(text, points):
    """One '+'-free term -> list of Atom (checked against the network's hook points)."""
    if _old_receiver(text):
        raise ConfigError(_old_receiver(text))
    if text == "*":
        return [Atom(n) for n in points]
    if re.fullmatch(r"blocks\.\d+", text):
        return _atoms(f"{text}.hook_attn_out", points) + _atoms(f"{text}.hook_mlp_out", points)
    m = _ATOM.match(text)
    if not m or m.group(1) not in points:
        raise ConfigError(f"unknown patching site {text!r}; sites look like 'blocks.1.attn.hook_z[head=2]', "
                          "'blocks.0.hook_resid_pre[token=3]', 'blocks.2' or '*' (docs/inside.md)")
    hook, sel = m.group(1), m.group(2)
    if sel is None:
        return [Atom(hook)]
    point = points[hook]
    pairs = tuple((d, int(i)) for d, i in (kv.split("=") for kv in sel.split(",")))
    bad = [d for d, _ in pairs if d not in point.dims]
    if bad or len({d for d, _ in pairs}) < len(pairs):
        raise ConfigError(f"site {text!r}: {hook} has axes {point.dims}, not {bad[0] if bad else 'one twice'!r}")
    return [Atom(hook, pairs)]


def parse_site(text, points):
    """A site label (or a (hook name, index) pair, see site_text) -> Site (ConfigError naming the bad part)."""
    text = site_text(text) if isinstance(text, tuple) else str(text).strip()
    if text == "none":
        return Site("none", (), "none")
    atoms = [a for term in text.split("+") for a in _atoms(term.strip(), points)]
    return Site(text, tuple(dict.fromkeys(atoms)), "all" if text == "*" else "custom")


def site_grid(net, granularity=GRANULARITIES):
    """The sites of a DiT or GPT at the given granularities (of GRANULARITIES + FINER)."""
    bad = set(granularity) - set(GRANULARITIES + FINER)
    if bad:
        raise ConfigError(f"unknown granularity {sorted(bad)}; choose from {GRANULARITIES + FINER}")
    points = hook_points(net)
    layers = sorted({int(n.split(".")[1]) for n in points if n.startswith("blocks.")})
    n_heads = getattr(net, "num_heads", None) or net.config.n_head
    n_tokens = net.grid[0] * net.grid[1] + (net.register is not None) if hasattr(net, "grid") else net.n_tokens
    out = []
    for i in layers:
        b = f"blocks.{i}"
        if "block" in granularity:
            out.append(Site(b, tuple(_atoms(b, points)), "block"))
        if "sub" in granularity:
            out += [Site(f"{b}.hook_{s}_out", (Atom(f"{b}.hook_{s}_out"),), "sub") for s in ("attn", "mlp")]
        if "head" in granularity:
            out += [Site(f"{b}.attn.hook_z[head={h}]", (Atom(f"{b}.attn.hook_z", (("head", h),)),), "head")
                    for h in range(n_heads)]
        if "token" in granularity:
            out += [Site(f"{b}.hook_resid_pre[token={t}]", (Atom(f"{b}.hook_resid_pre", (("token", t),)),), "token")
                    for t in range(n_tokens)]
        out += _finer(b, granularity, n_heads, n_tokens, _mlp_width(net, i))
    return out


def _finer(b, granularity, n_heads, n_tokens, d_mlp):
    """The head × token and neuron sites of block `b` asked for."""
    out = []
    if "head_token" in granularity:
        out += [Site(f"{b}.attn.hook_z[head={h},token={t}]", (Atom(f"{b}.attn.hook_z", (("head", h), ("token", t))),),
                     "head_token") for h in range(n_heads) for t in range(n_tokens)]
    if "neuron" in granularity:
        post = f"{b}.mlp.hook_post"
        out += [Site(f"{post}[d_mlp={k}]", (Atom(post, (("d_mlp", k),)),), "neuron") for k in range(d_mlp)]
    return out


def _mlp_width(net, i):
    """The hidden width of block i's MLP (DiT: fc2's input; GPT: c_proj's)."""
    blocks = net.blocks if hasattr(net, "blocks") else net.transformer.h
    mlp = blocks[i].mlp
    return (mlp.fc2 if hasattr(mlp, "fc2") else mlp.c_proj).in_features


def resolve_sites(net, sites):
    """sites: "all" (the grid), a granularity name, a label, or a list mixing them (and Sites) -> list of
    Site, granularities expanded in place."""
    if isinstance(sites, str) and sites == "all":
        return site_grid(net)
    if isinstance(sites, str) and sites in GRANULARITIES + FINER:
        return site_grid(net, (sites,))
    if is_site_item(sites):
        sites = [sites]
    elif not isinstance(sites, (list, tuple)) or not all(is_site_item(s) for s in sites):
        raise ConfigError(f"sites are a granularity, a site label, a (hook name, head) pair or a list of them, got "
                          f"{sites!r} (docs/inside.md)")
    if not sites:
        raise ConfigError("no patching sites given (an empty list selects nothing)")
    points = hook_points(net)
    out = []
    for s in sites:
        if isinstance(s, str) and s in GRANULARITIES + FINER + ("all",):
            out += site_grid(net, GRANULARITIES if s == "all" else (s,))
        else:
            out.append(s if isinstance(s, Site) else parse_site(s, points))
    return out


def qk_sites(net):
    """The query and key sites of every head (where AtP*'s QK fix applies): ['blocks.i.attn.hook_q[head=h]', …,
    'blocks.i.attn.hook_k[head=h]', …] layer by layer."""
    L, H = len(net.blocks), net.blocks[0].attn.num_heads
    return [f"blocks.{i}.attn.hook_{w}[head={h}]" for i in range(L) for w in ("q", "k") for h in range(H)]
