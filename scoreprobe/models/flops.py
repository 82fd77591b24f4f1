"""Training compute of a run from its architecture: matrix-multiply FLOPs per sample and per optimizer step.

Counted: every matmul of one forward pass at 2 FLOPs per multiply-add (the convention of
torch.utils.flop_counter): linear layers, the DiT's patch convolution, and attention's two T × T products
(scores q kᵀ and pattern · v, each 2 · T² · width per layer; a causal mask saves nothing in this count,
as the kernels compute the full product). Not counted: embedding lookups, normalisation, activations,
softmax, EDM preconditioning and the other elementwise work (a few percent at these widths).

    DiT (width h, depth L, T = (H/p)(W/p) tokens, T' = T + 1 with the global token, MLP width m = 4h):
        patch embedding 2·T·(C·p²)·h + timestep MLP 2·(256·h + h²)
        + L · [adaLN 2·h·6h + qkv 2·T'·h·3h + attention 2·2·T'²·h + projection 2·T'·h² + MLP 2·2·T'·h·m
               (GLU: 2·T'·h·2g + 2·T'·g·h, g = glu_hidden(h, m)) + global broadcast 2·h²]
        + final adaLN 2·h·2h + output 2·T·h·(p²·C)
    GPT (width e, depth L, T tokens = C·H·W bits, vocabulary V, MLP width m = 4e):
        L · [qkv 2·T·e·3e + attention 2·2·T²·e + projection 2·T·e² + MLP 2·2·T·e·m] + head 2·T·e·V

A training step is forward and backward: ≈ 3 × the forward (the backward computes the gradients of the
activations and of the weights, one forward's matmuls each) × the batch size. tests/test_flops.py checks
the forward count against torch's FlopCounterMode on built models and the factor 3 against its count of a
forward and backward pass.
"""
from scoreprobe.models.dit import DIT_SIZES, glu_hidden

TRAIN_FACTOR = 3   # forward + backward ≈ 3 forwards


def dit_forward_flops(net):
    """Matmul FLOPs of one DiT forward on one image: `net` as model_arch(...)["net"] (with an optional size)."""
    n = {**DIT_SIZES.get(net.get("size"), {}), **{k: v for k, v in net.items() if v is not None}}
    h, L, p, C = n["hidden_size"], n["depth"], n.get("patch_size", 2), n.get("in_channels", 1)
    H, W = n["input_size"]
    T = (H // p) * (W // p)
    Tg = T + (1 if n.get("global_token") else 0)
    m = int(h * n.get("mlp_ratio", 4.0))
    out = p * p * C * (2 if n.get("learn_sigma") else 1)
    mlp = 2 * Tg * h * 2 * glu_hidden(h, m) + 2 * Tg * glu_hidden(h, m) * h if n.get("mlp") == "glu" \
        else 2 * 2 * Tg * h * m
    block = 2 * h * 6 * h + 2 * Tg * h * 3 * h + 2 * 2 * Tg * Tg * h + 2 * Tg * h * h + mlp
    block += 2 * h * h if n.get("global_token") else 0
    return 2 * T * C * p * p * h + 2 * (256 * h + h * h) + L * block + 2 * h * 2 * h + 2 * T * h * out


def gpt_forward_flops(arch):
    """Matmul FLOPs of one GPT forward over a whole sequence: `arch` as model_arch(...) for a GPT."""
    C, H, W = arch["image_shape"]
    e, L = arch["n_embd"], arch["n_layer"]
    T, V = (C * H * W, 2) if arch["tokens"] == "bits" else (H * W, C)
    m = int(e * arch.get("mlp_ratio", 4.0))
    block = 2 * T * e * 3 * e + 2 * 2 * T * T * e + 2 * T * e * e + 2 * 2 * T * e * m
    return L * block + 2 * T * e * V


def n_tokens(cfg):
    """Tokens of one forward pass of a TrainConfig's model (DiT: patches, without the global token; GPT: bits)."""
    from scoreprobe.data.rules import rule_from_spec
    C, H, W = rule_from_spec(cfg.rule).image_shape
    if cfg.model == "dit":
        return (H // cfg.patch_size) * (W // cfg.patch_size)
    from scoreprobe.models.build import model_arch
    return C * H * W if model_arch(cfg, rule_from_spec(cfg.rule))["tokens"] == "bits" else H * W


def forward_flops(cfg):
    """Matmul FLOPs of one forward pass on one training item of a TrainConfig's model."""
    from scoreprobe.data.rules import rule_from_spec
    from scoreprobe.models.build import model_arch
    arch = model_arch(cfg, rule_from_spec(cfg.rule))
    return dit_forward_flops(arch["net"]) if cfg.model == "dit" else gpt_forward_flops(arch)


def step_flops(cfg):
    """Training FLOPs of one optimizer step: TRAIN_FACTOR × batch_size × forward_flops(cfg)."""
    return TRAIN_FACTOR * cfg.batch_size * forward_flops(cfg)


def _flop_counter():
    """FlopCounterMode's per-op formulas (torch.utils.flop_counter.flop_registry) summed at the dispatcher, without
    its ModuleTracker: the tracker registers global module hooks, and a hook point that sees torch hooks takes its
    explicit path (per-head results, layer-norm scale), so FlopCounterMode would count work that an unobserved
    forward does not do."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    class Count(TorchDispatchMode):
        total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            formula = flop_registry.get(func._overloadpacket)
            if formula is not None:
                self.total += formula(*args, **(kwargs or {}), out_val=out)
            return out
    return Count()


def counted_flops(cfg, batch=2, backward=False):
    """The brute-force count: torch.utils.flop_counter's formulas over every op of one training forward (DSM loss or
    GPT loss) of the built model on `batch` random items, and its backward pass when `backward`, per item.
    Attention runs its explicit path (every pattern hook returns a copy): the counter does not see the CPU's
    fused attention kernel."""
    import torch

    from scoreprobe.data.rules import rule_from_spec
    from scoreprobe.models.build import build_model, model_arch
    from scoreprobe.models.edm import dsm_loss
    from scoreprobe.models.hookpoint import HookPoint
    rule = rule_from_spec(cfg.rule)
    model = build_model(cfg.model, model_arch(cfg, rule))
    patterns = [m.hook_pattern for m in model.modules() if isinstance(getattr(m, "hook_pattern", None), HookPoint)]
    for hook in patterns:
        hook.fn = lambda p: p.clone()
    gen = torch.Generator().manual_seed(0)
    C, H, W = rule.image_shape
    if cfg.model == "gpt" and model.config.tokens == "cells":   # one-hot cells: one symbol per cell
        symbols = torch.randint(0, C, (batch, H * W), generator=gen)
        bits = torch.nn.functional.one_hot(symbols, C).transpose(1, 2).reshape(batch, -1)
    else:
        bits = torch.randint(0, 2, (batch, rule.n_bits), generator=gen)
    try:
        with _flop_counter() as counter:
            if cfg.model == "gpt":
                loss = model.loss(bits)
            else:
                y = bits.float() * 2 - 1
                loss = dsm_loss(model, y, torch.full((batch,), 0.5), torch.randn(y.shape, generator=gen))
            if backward:
                loss.mean().backward()
    finally:
        for hook in patterns:
            hook.fn = None
    return counter.total / batch
