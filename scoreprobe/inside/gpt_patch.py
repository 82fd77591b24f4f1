"""Activation patching of a GPT (issue 58 item 6): the same sites and AtP as `sp.patch`, with a logit metric.

A GPT is run teacher-forced on bits. For a pair of images (clean, corrupt) the metric of a run is one of

    "log_lik"     m = Σ_t log p(clean token t | the run's prefix): the clean image's log-likelihood;
    "logit_diff"  m = Σ_{t ≥ t₀} (logit_t[clean bit t] − logit_t[the other bit]): the run's log-odds for the
                  clean image's bits, from the first position t₀ where the two images' tokens differ (the
                  predictions before t₀ see the same prefix in both runs). It is the logit difference of
                  interpretability work — linear in the logits, free of the softmax's normalisation over other
                  tokens. Read only at the flipped positions themselves it would be useless here: teacher
                  forced, the prediction of token t sees tokens < t only, so for one flipped bit the clean and
                  corrupt runs give the same logits there (a contrast of exactly 0). Bit tokens only.
                  With `positions` (B, D) weights w: m = Σ_t w_t (logit_t[clean bit t] − logit_t[the other
                  bit]) instead — e.g. one-hot at the position whose bit the rule fixes given the flipped one
                  (a rule pair's group mate, later in token order): the rule's own log-odds, free of how the
                  rest of the continuation depends on the prefix;

the corrupt run is patched at a site with the clean run's activation, and

    effect = (m(patched) − m(corrupt)) / (m(clean) − m(corrupt))

0 = the corrupt run, 1 = the clean run (patching every activation reproduces it exactly: a GPT has no skip
term outside the network). AtP is the first-order estimate (scoreprobe.inside.atp), as for the DiT; with
"logit_diff" it is exact for `final.hook_out` (the metric is linear in the logits).
"""
import numpy as np
import torch

from scoreprobe.errors import ConfigError, DataError
from scoreprobe.inside.cache import check_input, gpt_inputs
from scoreprobe.inside.hooks import installed, keepers

METRICS = ("log_lik", "logit_diff")


def gpt_pairs(net, clean, corrupt):
    """(clean bits, corrupt bits) (B, D) long on the model's device, and their tokens (B, T) each."""
    c, r = (check_input(net, "gpt", torch.as_tensor(np.asarray(b))) for b in (clean, corrupt))
    if c.shape != r.shape:
        raise DataError(f"clean {tuple(c.shape)} and corrupt {tuple(r.shape)} must have one shape")
    if (c == r).all(1).any():
        raise DataError("a clean and a corrupt image are identical: the metric needs them to differ")
    device = net.lm_head.weight.device
    return c, r, net.bits_to_tokens(c).to(device), net.bits_to_tokens(r).to(device)


def log_lik(logits, tokens):
    """(B,) Σ_t log p(tokens[t]) from logits (B, T, V), in float64."""
    return torch.log_softmax(logits.double(), -1).gather(2, tokens[:, :, None])[:, :, 0].sum(1)


def logit_diff(logits, clean_tokens, corrupt_tokens, weights=None):
    """(B,) Σ_t w_t (logit_t[clean bit] − logit_t[1 − clean bit]); logits (B, T, V), bit tokens (B, T) in {0, 1};
    float64. w (B, T): `weights`, or by default 1 from t₀ (the first position where the clean and corrupt tokens
    differ) on and 0 before."""
    lg = logits.double()
    diff = lg.gather(2, clean_tokens[:, :, None])[:, :, 0] - lg.gather(2, (1 - clean_tokens)[:, :, None])[:, :, 0]
    if weights is None:
        weights = torch.cumsum((clean_tokens != corrupt_tokens).long(), 1) > 0            # (B, T): t ≥ t₀
    return (diff * weights).sum(1)


def _positions(positions, tokens):
    """A user's position weights (B, D) as float64 on the tokens' device; finite, the pairs' shape, no zero row."""
    w = torch.as_tensor(np.asarray(positions, dtype=np.float64), device=tokens.device)
    if w.shape != tokens.shape or not torch.isfinite(w).all() or (w == 0).all(1).any():
        raise DataError(f"positions must be finite weights of shape {tuple(tokens.shape)} (pairs × bits), with no "
                        "zero row")
    return w


def gpt_runner(net, clean, corrupt, names, metric="log_lik", positions=None):
    """(run, clean activations at `names`, m_corrupt, m_clean): run(fns) -> (B,) metric of the corrupt input
    with hook functions `fns` installed (composed after any hook already there). `positions`: weights (B, D)
    of the logit difference's positions ("logit_diff" only)."""
    if metric not in METRICS:
        raise ConfigError(f"a GPT's metric is one of {METRICS}, got {metric!r}")
    if metric == "logit_diff" and net.config.tokens != "bits":
        raise ConfigError("metric 'logit_diff' compares a bit with the other bit: it needs a GPT on bit tokens")
    if positions is not None and metric != "logit_diff":
        raise ConfigError("positions= weights the positions of metric 'logit_diff'; pass metric='logit_diff'")
    c, r, tc, tr = gpt_pairs(net, clean, corrupt)
    w = None if positions is None else _positions(positions, tc)
    score = (lambda lg: log_lik(lg, tc)) if metric == "log_lik" else (lambda lg: logit_diff(lg, tc, tr, w))

    def run(fns):
        with installed(net, fns, compose=True):
            return score(net(gpt_inputs(net, r)))
    fns, acts_c = keepers(names)
    with torch.no_grad():
        with installed(net, fns, compose=True):
            m_c = score(net(gpt_inputs(net, c)))
        m_r = run({})
    return run, acts_c, m_r, m_c
