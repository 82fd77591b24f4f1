"""Attribution patching (AtP) with one joint estimate per site, and AtP* (Kramár et al. 2024).

Patching a site S = {a_1, …, a_k} runs the corrupt input with every atom *forced* to its clean value c_i
(an atom downstream of another ignores what flows into it: the patch overrides it). Write F(v_1, …, v_k)
for the metric of the corrupt run with atom i forced to v_i; patching measures F(c) − F(r), r the corrupt
run's own values (F(r) = m_corrupt). Its first-order estimate is the joint linearisation

    AtP(S) = Σ_i ⟨∂F/∂v_i |_r , c_i − r_i⟩

in which ∂F/∂v_i holds the *other* atoms of S fixed: it counts the paths from a_i to the output that do
not pass through another atom of S. One backward pass per site spanning several hooks gets every term:
each atom is cut from its upstream (detached at the atom: same forward values, the gradient stops there),
so the gradient reaching a_i stops where a later atom of S is cut. Entries of one hook never feed one
another, so for a site on a single hook the cut changes nothing: one shared backward serves all of them
(the usual AtP). Summing per-atom AtP terms instead counts every path through two atoms twice: embed and
blocks.0.hook_resid_pre carry the same signal in series, so AtP(embed + resid_pre) = AtP(resid_pre) (the
embed's every path is cut at resid_pre), where the per-atom sum gives AtP(embed) + AtP(resid_pre) ≈ twice
that. Entries of one hook chosen by several atoms count once (their union). A network that is affine in the
patched activations gives AtP = patching exactly; otherwise the error is second order in c − r.

Activations that do not depend on the input — the σ conditioning (`hook_cond`, the adaLN
`hook_shift_*|scale_*|gate_*`, `final.hook_shift|scale`) and a GPT's position embeddings — are equal bit for
bit in the clean and corrupt runs (both share σ and positions), so patching them is the identity: their AtP
term is exactly 0, as is their real patching effect. They get no gradient of their own (they may not require
one); nothing is differentiated through them.

AtP* (`star=True`), the two fixes of Kramár et al. 2024 (arXiv 2403.00745):

- QK fix. An atom on a query, key, score or pattern hook of layer l is not linearised through the softmax:
  the pattern P_l is recomputed exactly from the patched queries, keys and scores (pattern atoms then set
  their entries), and the term is ⟨∂F/∂P_l, P_l(patched) − P_l(corrupt)⟩ — linear only after the pattern,
  where a saturated softmax has no say. Sites without such atoms (heads' z, blocks, tokens) are unchanged.
- GradDrop. For each layer ℓ = 0 … L−1 the estimate I_ℓ is recomputed with the gradient through layer ℓ's
  contribution to the residual stream (`blocks.ℓ.hook_attn_out` and `hook_mlp_out`) set to zero, and the
  pair's score is (1/(L−1)) Σ_ℓ |I_ℓ| (the paper's c_AtP+GD, before its mean over pairs): a magnitude for
  ranking. Where a site's direct and indirect effects cancel in AtP, the terms with one of them dropped
  show it. A site inside block ℓ gets I_ℓ = 0 (all its paths leave through that block's contribution), so
  L − 1 terms remain: hence 1/(L − 1).
"""
import re
from dataclasses import dataclass, field

import numpy as np
import torch

from scoreprobe.errors import ConfigError, DataError
from scoreprobe.inside.hooks import hook_points
from scoreprobe.inside.sites import atom_index, with_atoms
from scoreprobe.models.hookpoint import attention_scores

_ATTN = re.compile(r"^blocks\.(\d+)\.attn\.hook_(q|k|attn_scores|pattern)$")


@dataclass
class _Plan:
    """One site: plain {hook: atoms} (linearised), attn {layer: {"q"|"k"|"attn_scores"|"pattern": atoms}}
    (AtP*: exact softmax), joint: atoms on more than one hook (its own backward, cut at every atom)."""
    plain: dict = field(default_factory=dict)
    attn: dict = field(default_factory=dict)
    joint: bool = False

    def hooks(self):
        """Every hook the pass keeps: the plain hooks, and q, k, pattern (and scores) of each attention layer."""
        out = set(self.plain)
        for layer, kinds in self.attn.items():
            out |= {f"blocks.{layer}.attn.hook_{k}" for k in set(kinds) | {"q", "k", "pattern"}}
        return out

    def cuts(self):
        """{hook: atoms}: where the joint pass detaches (every atom of the site)."""
        out = {h: list(a) for h, a in self.plain.items()}
        for layer, kinds in self.attn.items():
            for k, atoms in kinds.items():
                out.setdefault(f"blocks.{layer}.attn.hook_{k}", []).extend(atoms)
        return out


def plan(site, star):
    """The _Plan of a Site: its atoms grouped by hook (AtP*: attention atoms by layer)."""
    p = _Plan()
    for at in site.atoms:
        m = _ATTN.match(at.hook) if star else None
        if m:
            p.attn.setdefault(int(m.group(1)), {}).setdefault(m.group(2), []).append(at)
        else:
            p.plain.setdefault(at.hook, []).append(at)
    n_hooks = len(p.plain) + sum(len(k) for k in p.attn.values())
    p.joint = n_hooks > 1
    return p


def needed_hooks(site_list, star):
    """Hooks whose clean activations AtP needs (AtP*: also q and k of each layer with attention atoms)."""
    out = set()
    for site in site_list:
        pl = plan(site, star)
        out |= set(pl.plain) | {f"blocks.{l}.attn.hook_{k}" for l, kinds in pl.attn.items() for k in kinds}
        out |= {f"blocks.{l}.attn.hook_{k}" for l in pl.attn for k in ("q", "k")}
    return out


def n_layers(net):
    return len(net.blocks) if hasattr(net, "blocks") else len(net.transformer.h)


def estimate(net, run, site_list, acts_c, n, star=False, causal=False):
    """AtP numerators (site, sample) ≈ m(patched) − m(corrupt), and with star the GradDrop scores (site, sample)
    (else None). run(fns) -> (B,) metric of the corrupt input with hook functions `fns` installed; acts_c: the
    clean run's activations at needed_hooks; causal: the attention is causal (GPT)."""
    plans = [plan(site, star) for site in site_list]
    points = hook_points(net)
    atp = _numerators(points, run, plans, acts_c, n, causal, None)
    if not star:
        return atp, None
    L = n_layers(net)
    if L < 2:
        raise ConfigError("AtP*'s GradDrop averages over the other layers: it needs a network of 2 or more blocks")
    gd = sum(np.abs(_numerators(points, run, plans, acts_c, n, causal, layer)) for layer in range(L)) / (L - 1)
    return atp, gd


def _numerators(points, run, plans, acts_c, n, causal, drop):
    """(site, sample) estimates from one shared pass (single-hook sites) and one pass per joint site."""
    out = np.zeros((len(plans), n))
    shared = [i for i, p in enumerate(plans) if not p.joint and (p.plain or p.attn)]
    if shared:
        keep = set().union(*(plans[i].hooks() for i in shared))
        kept, grads = _pass(points, run, keep, {}, drop)
        for i in shared:
            out[i] = _site_sum(plans[i], points, kept, grads, acts_c, n, causal)
    for i, p in enumerate(plans):
        if p.joint:
            kept, grads = _pass(points, run, p.hooks(), p.cuts(), drop)
            out[i] = _site_sum(p, points, kept, grads, acts_c, n, causal)
    return out


def _mask(point, atoms, shape, device):
    """True (the whole activation) or a bool tensor of `shape`: the union of the atoms' entries."""
    if any(at.whole for at in atoms):
        return True
    mask = torch.zeros(shape, dtype=torch.bool, device=device)
    for at in atoms:
        mask[atom_index(point, at, shape)] = True
    return mask


def _dropped(drop):
    return set() if drop is None else {f"blocks.{drop}.hook_attn_out", f"blocks.{drop}.hook_mlp_out"}


def _keeper(kept, name, point, cut, dropped):
    """Hook fn: cut (detach) the atoms' entries from upstream, keep the value as a tensor with a gradient,
    pass it on (detached when its layer's gradient is dropped)."""
    def fn(a):
        b = a
        if cut:
            mask = _mask(point, cut, a.shape, a.device)
            b = a.detach() if mask is True else torch.where(mask, a.detach(), a)
        b = b.view_as(b) if b.requires_grad else b.detach().requires_grad_(True)
        kept[name] = b
        return b.detach() if dropped else b
    return fn


def _pass(points, run, keep, cuts, drop):
    """One forward of the corrupt input, one backward of Σ metric: ({hook: value}, {hook: ∂m/∂value or None})."""
    kept, dropped = {}, _dropped(drop)
    fns = {h: _keeper(kept, h, points[h], cuts.get(h), h in dropped) for h in keep}
    fns.update({h: (lambda a: a.detach()) for h in dropped - set(keep)})
    with torch.enable_grad():
        m = run(fns)
        names = [h for h in kept if kept[h].requires_grad]
        grads = (torch.autograd.grad(m.sum(), [kept[h] for h in names], allow_unused=True)
                 if m.requires_grad and names else [None] * len(names))
    return kept, dict(zip(names, grads))


def _site_sum(p, points, kept, grads, acts_c, n, causal):
    """(B,) Σ over the site's hooks of ⟨gradient, clean − corrupt⟩ on its entries (+ AtP*'s pattern terms)."""
    total = torch.zeros(n, dtype=torch.float64)
    for h, atoms in p.plain.items():
        g, r = grads.get(h), kept[h].detach()
        d = acts_c[h].to(r.device).double() - r.double()
        if g is None or not d.any():             # no path to the output, or input-independent: exactly 0
            continue
        if not points[h].batched:
            raise DataError(f"{h} differs between the clean and corrupt runs but has no batch axis")
        term = g.double() * d
        if len(atoms) == 1:                          # one atom: index it (the common case, no mask to build)
            term = term[atom_index(points[h], atoms[0], term.shape)]
        else:
            mask = _mask(points[h], atoms, term.shape, term.device)
            term = term if mask is True else term * mask
        total += term.reshape(n, -1).sum(1).cpu()
    for layer, kinds in p.attn.items():
        g = grads.get(f"blocks.{layer}.attn.hook_pattern")
        if g is not None:
            dp = _pattern_change(layer, kinds, points, kept, acts_c, causal)
            total += (g.double() * dp).reshape(n, -1).sum(1).cpu()
    return total.numpy()


def _pattern_change(layer, kinds, points, kept, acts_c, causal):
    """(B, h, T, T) P(patched) − P(corrupt) of one layer, both by the exact softmax in float64 (AtP*'s QK fix)."""
    name = lambda k: f"blocks.{layer}.attn.hook_{k}"                          # noqa: E731
    new = {}
    for k in ("q", "k"):
        r = kept[name(k)].detach().double()
        new[k] = with_atoms(r, acts_c[name(k)].to(r.device).double(), points[name(k)], kinds[k]) if k in kinds else r
    s_r = attention_scores(kept[name("q")].detach().double(), kept[name("k")].detach().double(), causal)
    s_new = attention_scores(new["q"], new["k"], causal)
    if "attn_scores" in kinds:
        s_new = with_atoms(s_new, acts_c[name("attn_scores")].to(s_new.device).double(), points[name("attn_scores")],
                           kinds["attn_scores"])
    p_r, p_new = s_r.softmax(-1), s_new.softmax(-1)
    if "pattern" in kinds:
        p_new = with_atoms(p_new, acts_c[name("pattern")].to(p_new.device).double(), points[name("pattern")],
                           kinds["pattern"])
    return p_new - p_r
