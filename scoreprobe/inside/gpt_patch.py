"""Activation patching of a GPT (issue 58 item 6): the same sites and AtP as `sp.patch`, with a logit metric.

A GPT is run teacher-forced on bits. For a pair of images (clean, corrupt) the metric of a run is the
log-likelihood of the **clean** image's tokens, m = Σ_t log p(clean token t | the run's prefix); the corrupt
run is patched at a site with the clean run's activation, and

    effect = (m(patched) − m(corrupt)) / (m(clean) − m(corrupt))

0 = the corrupt run, 1 = the clean run (patching every activation reproduces it exactly: a GPT has no skip
term outside the network). AtP is the first-order estimate from one forward and one backward, as for the DiT.
"""
import numpy as np
import torch

from scoreprobe.errors import DataError
from scoreprobe.inside.cache import check_input, gpt_inputs
from scoreprobe.inside.hooks import hook_points, installed, keepers
from scoreprobe.inside.sites import atp_numerators, with_atoms

FINAL = "final.hook_out"


def gpt_pairs(net, clean, corrupt):
    """(clean bits, corrupt bits) (B, D) long on the model's device, and the clean tokens (B, T)."""
    c, r = (check_input(net, "gpt", torch.as_tensor(np.asarray(b))) for b in (clean, corrupt))
    if c.shape != r.shape:
        raise DataError(f"clean {tuple(c.shape)} and corrupt {tuple(r.shape)} must have one shape")
    if (c == r).all(1).any():
        raise DataError("a clean and a corrupt image are identical: the metric needs them to differ")
    return c, r, net.bits_to_tokens(c).to(net.lm_head.weight.device)


def log_lik(logits, tokens):
    """(B,) Σ_t log p(tokens[t]) from logits (B, T, V), in float64."""
    return torch.log_softmax(logits.double(), -1).gather(2, tokens[:, :, None])[:, :, 0].sum(1)


def _run(net, bits, fns=None, grad=False):
    with installed(net, fns or {}, compose=True):
        return net(gpt_inputs(net, bits))


def _capture(net, bits, names, grad=False):
    fns, kept = keepers(names, grad)
    return _run(net, bits, fns), kept


def gpt_patch(net, clean, corrupt, site_list, method, confirm=None):
    """(effect (S, B), AtP numerators (S, B) or None, m_r, m_c, den) of the GPT (see the module docstring); with
    method "atp", only the `confirm` sites of largest |pooled AtP| are patched for real (none when None)."""
    c, r, tokens = gpt_pairs(net, clean, corrupt)
    points = hook_points(net)
    names = sorted({at.hook for st in site_list for at in st.atoms})
    with torch.no_grad():
        out_c, acts_c = _capture(net, c, names)
        m_c, m_r = log_lik(out_c, tokens), log_lik(_run(net, r), tokens)
    den = m_c - m_r
    atp = _atp(net, points, r, tokens, names, site_list, acts_c) if method in ("atp", "both") else None
    todo = range(len(site_list)) if method != "atp" else _top(atp, confirm)
    effect = np.full((len(site_list), len(c)), np.nan)
    with torch.no_grad():
        for i in todo:
            effect[i] = ((log_lik(_run(net, r, _site_fns(points, site_list[i], acts_c)), tokens) - m_r) / den).cpu().numpy()
    return effect, atp, m_r, m_c, den


def _top(atp, confirm):
    """Indices of the `confirm` sites of largest |Σ over pairs of the AtP numerators| ([] when None)."""
    if confirm is None:
        return []
    return [int(i) for i in np.argsort(-np.abs(atp.sum(1)), kind="stable")[:int(confirm)]]


def _site_fns(points, site, acts_c):
    by_hook = {}
    for at in site.atoms:
        by_hook.setdefault(at.hook, []).append(at)
    return {h: (lambda p, ats, clean: lambda a: with_atoms(a, clean, p, ats))(points[h], ats, acts_c[h])
            for h, ats in by_hook.items()}


def _atp(net, points, r, tokens, names, site_list, acts_c):
    with torch.enable_grad():
        out, acts_r = _capture(net, r, names, grad=True)
        log_lik(out, tokens).sum().backward()
    return atp_numerators(points, site_list, acts_r, acts_c, len(r))
