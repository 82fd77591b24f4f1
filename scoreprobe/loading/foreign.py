"""Architecture of other people's DiT weights, read from tensor shapes, training args and overrides.

    sd = strip_prefixes(torch.load("DiT-S-2.pt", weights_only=True)["ema"])
    arch, missing = infer_dit_arch(sd, {"num_heads": 6})   # arch as models.build.build_model takes it

What shapes cannot tell (num_heads, a non-square image_shape) comes from `settings` (anything with
.get: a loading.settings.Settings or a dict) — the training script's args or keyword overrides;
`missing` names whatever nobody stated. σ_data, time_scale and the parameterization are decided by
loading.settings, not here.
"""
import math
import re

import torch
import torch.nn as nn

from scoreprobe.errors import OTHER_MODELS, CheckpointError, ConfigError, first_line
from scoreprobe.loading.settings import SETTINGS, check_setting

OVERRIDES = SETTINGS
DIT_HEADS = {"XL": 16, "L": 16, "B": 12, "S": 6}   # facebookresearch/DiT presets DiT-{size}/{patch}
PREFIXES = ("module.", "_orig_mod.", "model.", "net.")


def is_state_dict(obj):
    """True for a non-empty dict of str -> tensor."""
    return (isinstance(obj, dict) and len(obj) > 0
            and all(isinstance(k, str) and torch.is_tensor(v) for k, v in obj.items()))


def strip_prefixes(sd):
    """Remove wrapper prefixes ("module.", "_orig_mod.", "model.", "net.") shared by every key."""
    while True:
        prefix = next((p for p in PREFIXES if all(k.startswith(p) for k in sd)), None)
        if prefix is None:
            return sd
        sd = {k[len(prefix):]: v for k, v in sd.items()}


def check_overrides(overrides):
    """ConfigError for unknown setting names or a malformed value (loading.settings.check_setting: type,
    range, finiteness; e.g. num_heads a positive int, sigma_data positive finite, image_shape (C, H, W))."""
    unknown = set(overrides) - set(OVERRIDES)
    if unknown:
        raise ConfigError(f"unknown checkpoint settings {sorted(unknown)}; known: {', '.join(OVERRIDES)}, ema")
    for name, value in overrides.items():
        check_setting(name, value)


def dit_module_settings(module):
    """(state_dict, settings dict) of a pickled DiT module (facebookresearch/DiT or ours), else None."""
    if not isinstance(module, nn.Module):
        return None
    sd = module.state_dict()
    if "x_embedder.proj.weight" not in sd:
        return None
    found = {"num_heads": getattr(module, "num_heads", None),
             "num_classes": getattr(getattr(module, "y_embedder", None), "num_classes", None)}
    return sd, {k: int(v) for k, v in found.items() if isinstance(v, int)}


def infer_dit_arch(sd, settings=None):
    """Architecture dict of a facebookresearch/DiT state_dict, as far as tensor shapes and settings tell.

    sd: DiT state_dict without prefixes; settings: .get(name) -> value or None (num_heads,
    image_shape, model). Returns (arch, missing): arch as models.build.build_model takes it (None
    where unknown; sigma_data / time_scale left for the caller), missing the names nobody stated.
    """
    settings = settings if settings is not None else {}
    try:
        hidden, C, p, q = sd["x_embedder.proj.weight"].shape
        blocks = {int(m.group(1)) for k in sd if (m := re.match(r"blocks\.(\d+)\.", k))}
        depth = len(blocks)
        if min(hidden, C, p, q) < 1 or blocks != set(range(depth)):
            raise ValueError(f"empty patch embedding or blocks not numbered 0..{depth - 1}")
        ratio = sd["blocks.0.mlp.fc1.weight"].shape[0] / hidden
        c_out = sd["final_layer.linear.weight"].shape[0] / (p * p)
        n_freq = sd["t_embedder.mlp.0.weight"].shape[1]
        rows = sd["y_embedder.embedding_table.weight"].shape[0]
        n_tokens = sd["pos_embed"].shape[1]
    except (KeyError, ValueError, IndexError, ZeroDivisionError) as e:
        raise CheckpointError(f"not a DiT state_dict in the facebookresearch/DiT layout ({first_line(e)}); "
                              f"keys start with {sorted(sd)[:4]}: a layout scoreprobe does not know; "
                              f"{OTHER_MODELS}") from None
    if p != q or c_out not in (C, 2 * C) or n_freq != 256 or ratio <= 0 or rows < 1 or n_tokens < 1:
        raise CheckpointError(f"unsupported DiT variant: patch {p}x{q}, {C} -> {c_out:g} channels, "
                              f"{n_freq} timestep frequencies (need square patches, C or 2C outputs, 256)")
    heads = check_setting("num_heads", settings.get("num_heads"), "settings")
    preset = re.match(r"DiT-(XL|L|B|S)/\d+$", str(settings.get("model") or ""))
    if heads is None and preset:
        heads = DIT_HEADS[preset.group(1)]
    shape = check_setting("image_shape", settings.get("image_shape"), "settings")
    grid = math.isqrt(n_tokens)
    if shape is None and grid * grid == n_tokens:
        shape = (C, grid * p, grid * p)
    if shape is not None:
        shape = [int(s) for s in shape]
        if len(shape) != 3 or shape[0] != C or shape[1] % p or shape[2] % p or shape[1] * shape[2] != n_tokens * p * p:
            raise CheckpointError(f"image_shape {shape} does not fit the weights: {C} channels, patch {p}, "
                                  f"{n_tokens} tokens")
    net = {"hidden_size": int(hidden), "depth": depth, "num_heads": None if heads is None else int(heads),
           "input_size": None if shape is None else shape[1:], "patch_size": int(p), "in_channels": int(C),
           "mlp_ratio": ratio, "learn_sigma": c_out == 2 * C, "num_label_rows": int(rows)}
    arch = {"net": net, "image_shape": shape, "sigma_data": None, "time_scale": 1.0}
    missing = [name for name, v in (("num_heads", heads), ("image_shape", shape)) if v is None]
    return arch, missing
