"""Build a network from a JSON-able architecture dict (what run.json and checkpoints store)."""
from scoreprobe.errors import CheckpointError, ConfigError
from scoreprobe.limits import (MAX_BITS, MAX_DEPTH, MAX_HIDDEN, MAX_LABEL_ROWS, MAX_MLP_RATIO, MAX_PARAMS,
                               MAX_TRAIN_BYTES, check_int, check_positive)
from scoreprobe.models.dit import DIT_SIZES, dit_from_config, patch_hw
from scoreprobe.models.edm import EDMDenoiser
from scoreprobe.models.order import check_token_order


def model_arch(cfg, rule):
    """Architecture dict for a TrainConfig and its rule: everything needed to rebuild the network."""
    C, H, W = rule.image_shape
    if cfg.model == "dit":
        preset = DIT_SIZES.get(cfg.size)
        if preset is None:
            raise ConfigError(f"unknown DiT size {cfg.size!r}; choose from {sorted(DIT_SIZES)}")
        net = {**preset, **{k: getattr(cfg, k) for k in ("hidden_size", "depth", "num_heads")
                            if getattr(cfg, k) is not None}}
        remedies = {k: v for k, v in (("mlp", "glu" if getattr(cfg, "multiplicative", False) else "gelu"),
                                      ("global_token", getattr(cfg, "global_token", False))) if v not in ("gelu", False)}
        return {"net": {**net, "input_size": [H, W], "patch_size": cfg.patch(), "in_channels": C,
                        "mlp_ratio": 4.0, "learn_sigma": False, "num_label_rows": 1, **remedies},
                "image_shape": [C, H, W], "sigma_data": cfg.sigma_data, "time_scale": cfg.time_scale}
    from scoreprobe.models.gpt import gpt_arch
    return gpt_arch(cfg, rule)


def param_count(cfg):
    """Number of parameters of the network a TrainConfig trains (DiT: the whole EDM denoiser; GPT), counted
    from the model built on the meta device (nothing allocated). ConfigError for an invalid config."""
    import torch
    from scoreprobe.data.rules import rule_from_spec
    cfg.validate()
    arch = model_arch(cfg, rule_from_spec(cfg.rule))
    check_arch(cfg.model, arch, ConfigError, "the model")
    with torch.device("meta"):
        model = build_model(cfg.model, arch)
    return int(sum(p.numel() for p in model.parameters()))


def build_model(kind, arch):
    """kind "dit" -> EDMDenoiser(DiT); kind "gpt" -> GPT."""
    if kind == "dit":
        return EDMDenoiser(dit_from_config(arch["net"]), arch["image_shape"],
                           sigma_data=arch["sigma_data"], time_scale=arch["time_scale"])
    if kind == "gpt":
        from scoreprobe.models.gpt import build_gpt
        return build_gpt(arch)
    raise ConfigError(f"unknown model kind {kind!r}; expected 'dit' or 'gpt'")


# ---------------------------------------------------------------------------------------------
# Checking an architecture before building it (limits in scoreprobe.limits)
# ---------------------------------------------------------------------------------------------

_DIT_KEYS = ("input_size", "patch_size", "in_channels", "hidden_size", "depth", "num_heads", "mlp_ratio",
             "learn_sigma", "num_label_rows", "time_freq_shift", "mlp_norm_eps", "size", "mlp", "global_token")


def check_arch(kind, arch, error=CheckpointError, where="architecture"):
    """`error` unless `arch` is a buildable architecture of `kind` within the limits; returns its parameter count.

    Every field is checked for type and range (hidden size, depth, heads dividing the width, patch
    dividing the image, channels matching image_shape, sigma_data > 0, ...) and the parameter count
    is estimated from the numbers alone, so nothing is allocated for a hostile file.
    """
    if not isinstance(arch, dict):
        raise error(f"{where} must be a JSON object, got {type(arch).__name__}")
    try:
        if kind == "dit":
            return _check_dit(arch)
        if kind == "gpt":
            return _check_gpt(arch)
    except ConfigError as e:
        raise error(f"{where}: {e}") from None
    raise error(f"{where}: unknown model kind {str(kind)[:40]!r}; expected 'dit' or 'gpt'")


def _check_shape(shape):
    if not isinstance(shape, (list, tuple)) or len(shape) != 3:
        raise ConfigError(f"image_shape must be [C, H, W], got {str(shape)[:60]}")
    C, H, W = (check_int(s, "image_shape entry", 1, MAX_BITS) for s in shape)
    if C * H * W > MAX_BITS:
        raise ConfigError(f"image_shape {C}x{H}x{W} has more than {MAX_BITS} bits (scoreprobe.limits.MAX_BITS)")
    return C, H, W


def _check_geometry(h, heads, H, W, p):
    """ConfigError naming the setting that fails (each that fails) and its fix: num_heads must divide
    hidden_size; patch_size must divide both sides of the image (patch_size 1 always does, at the
    cost of p² times the tokens)."""
    import math
    problems = []
    if h % heads:
        fits = [d for d in range(1, min(h, 16) + 1) if h % d == 0]
        problems.append(f"num_heads {heads} does not divide hidden_size {h}: choose num_heads among "
                        f"{', '.join(map(str, fits))} (--num-heads), or a hidden_size that is a multiple of {heads}")
    if H % p or W % p:
        bad = sorted({n for n in (H, W) if n % p})
        side = f"{' and '.join(map(str, bad))} {'is' if len(bad) == 1 else 'are'} not a multiple of {p}"
        fits = [d for d in range(1, math.gcd(H, W) + 1) if H % d == 0 and W % d == 0]
        best = max(d for d in fits if d <= p)
        r = p // best if p % best == 0 else p / best
        cost = (f", at the cost of {H * W // best ** 2} tokens instead of about {H * W / p ** 2:.0f}: about "
                f"{r ** 2:.3g}x the compute of the MLPs and up to {r ** 4:.3g}x that of attention per step")
        others = f"; patch sizes that tile it: {', '.join(map(str, fits))}" if len(fits) > 1 else ""
        problems.append(f"patch_size {p} does not tile the {H}x{W} image ({side}): use patch_size {best} "
                        f"(--patch-size {best}{others}){cost}, or an image whose sides are multiples of {p}")
    if problems:
        raise ConfigError("; ".join(problems))


def _check_dit(arch):
    C, H, W = _check_shape(arch.get("image_shape"))
    for k in ("sigma_data", "time_scale"):
        if arch.get(k) is not None:
            check_positive(arch[k], k)
    net = arch.get("net")
    if not isinstance(net, dict) or set(net) - set(_DIT_KEYS):
        raise ConfigError(f"net must be an object with keys among {_DIT_KEYS}")
    if net.get("size") is not None and net["size"] not in DIT_SIZES:
        raise ConfigError(f"unknown DiT size {str(net['size'])[:40]!r}; choose from {sorted(DIT_SIZES)}")
    net = {**DIT_SIZES.get(net.get("size"), {}), **{k: v for k, v in net.items() if v is not None}}
    h = check_int(net.get("hidden_size"), "hidden_size", 1, MAX_HIDDEN)
    depth = check_int(net.get("depth"), "depth", 1, MAX_DEPTH)
    heads = check_int(net.get("num_heads"), "num_heads", 1, h)
    p = net.get("patch_size", 2)
    if isinstance(p, (list, tuple)):   # a non-square patch [ph, pw]
        ph, pw = _check_patch_pair(p, H, W)
        _check_geometry(h, heads, H, W, 1)
    else:
        ph = pw = check_int(p, "patch_size", 1, max(H, W))
        _check_geometry(h, heads, H, W, ph)
    if check_int(net.get("in_channels", 1), "in_channels", 1, MAX_BITS) != C or list(net.get("input_size", [])) != [H, W]:
        raise ConfigError(f"in_channels / input_size {net.get('in_channels')} / {str(net.get('input_size'))[:30]} "
                          f"do not match image_shape [{C}, {H}, {W}]")
    m = int(h * check_positive(net.get("mlp_ratio", 4.0), "mlp_ratio", MAX_MLP_RATIO))
    rows = check_int(net.get("num_label_rows", 1), "num_label_rows", 1, MAX_LABEL_ROWS)
    check_int(net.get("time_freq_shift", 0), "time_freq_shift", 0, 127)
    check_positive(net.get("mlp_norm_eps", 1e-6), "mlp_norm_eps", 1.0)
    for flag in ("learn_sigma", "global_token"):
        if not isinstance(net.get(flag, False), bool):
            raise ConfigError(f"{flag} must be true or false")
    if net.get("mlp", "gelu") not in ("gelu", "glu"):
        raise ConfigError(f"mlp must be 'gelu' or 'glu', got {str(net.get('mlp'))[:40]!r}")
    tokens, out = (H // ph) * (W // pw), ph * pw * C * (2 if net.get("learn_sigma") else 1)
    extra = h * h + h if net.get("global_token") else 0                     # the broadcast map per block
    n = depth * (10 * h * h + 2 * h * m + extra) + h * (C * ph * pw + tokens + 256 + h + rows + 2 * h + out + 1)
    return _check_count(n)


def _check_patch_pair(p, H, W):
    """(ph, pw) of a non-square patch [ph, pw] that tiles the H x W image; ConfigError otherwise."""
    if len(p) != 2:
        raise ConfigError(f"patch_size must be an integer or [rows, columns], got {str(p)[:40]}")
    ph, pw = check_int(p[0], "patch_size rows", 1, H), check_int(p[1], "patch_size columns", 1, W)
    if H % ph or W % pw:
        raise ConfigError(f"patch {ph}x{pw} does not tile the {H}x{W} image: its rows must divide {H} and its "
                          f"columns {W}")
    return ph, pw


def _check_gpt(arch):
    C, H, W = _check_shape(arch.get("image_shape"))
    e = check_int(arch.get("n_embd"), "n_embd", 1, MAX_HIDDEN)
    layers = check_int(arch.get("n_layer"), "n_layer", 1, MAX_DEPTH)
    heads = check_int(arch.get("n_head"), "n_head", 1, e)
    m = int(e * check_positive(arch.get("mlp_ratio", 4.0), "mlp_ratio", MAX_MLP_RATIO))
    if e % heads or arch.get("tokens") not in ("bits", "cells") or (arch["tokens"] == "cells" and C < 2):
        raise ConfigError(f"n_embd {e} must be divisible by n_head {heads}, and tokens 'bits' or 'cells' "
                          f"(cells need C >= 2), got {str(arch.get('tokens'))[:20]!r}")
    check_token_order(arch.get("token_order", "raster"), arch.get("token_perm"), H * W)
    vocab, n_tokens = (2, C * H * W) if arch["tokens"] == "bits" else (C, H * W)
    return _check_count(layers * (4 * e * e + 2 * e * m) + e * (2 * vocab + 1 + n_tokens))


def check_training_size(kind, arch, batch_size, members=1):
    """ConfigError, before anything is built, when training `members` copies of the architecture on
    minibatches of `batch_size` exceeds the limits: the parameters (MAX_PARAMS, see check_arch) or the
    activations kept for the backward pass, estimated as 4 bytes x batch x depth x (12 x tokens x width
    + heads x tokens²) per member, against MAX_TRAIN_BYTES. Returns that estimate in bytes."""
    n_params = check_arch(kind, arch, ConfigError, "the model")
    if n_params * members > MAX_PARAMS:
        _check_count(n_params * members)
    C, H, W = arch["image_shape"]
    if kind == "dit":
        net = {**DIT_SIZES.get(arch["net"].get("size"), {}), **arch["net"]}
        width, depth, heads = net["hidden_size"], net["depth"], net["num_heads"]
        ph, pw = patch_hw(net["patch_size"])
        tokens = (H // ph) * (W // pw)
    else:
        width, depth, heads = arch["n_embd"], arch["n_layer"], arch["n_head"]
        tokens = C * H * W if arch["tokens"] == "bits" else H * W
    need = 4 * batch_size * members * depth * (12 * tokens * width + heads * tokens * tokens)
    if need > MAX_TRAIN_BYTES:
        raise ConfigError(f"training this model on minibatches of {batch_size}{f' x {members} members' if members > 1 else ''} "
                          f"needs about {need / 2**30:.1f} GiB of activations (limit {MAX_TRAIN_BYTES / 2**30:.0f} GiB, "
                          "scoreprobe.limits.MAX_TRAIN_BYTES); use a smaller batch_size or model")
    return need


def _check_count(n):
    if n > MAX_PARAMS:
        raise ConfigError(f"the architecture declares about {n:.3g} parameters, more than the limit "
                          f"{MAX_PARAMS:.3g} (scoreprobe.limits.MAX_PARAMS)")
    return n


def expected_shapes(kind, arch, foreign=False):
    """{name: shape} of the state_dict the architecture expects, built on the meta device (no memory).

    Call check_arch first. foreign=True: the bare DiT network's names (arch["net"]) rather than the
    wrapped denoiser's.
    """
    import torch
    with torch.device("meta"):
        model = dit_from_config(arch["net"]) if foreign else build_model(kind, arch)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}
