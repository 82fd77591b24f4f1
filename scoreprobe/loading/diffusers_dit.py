"""diffusers' DiTTransformer2DModel folders, mapped onto scoreprobe's DiT without importing diffusers.

    found = find_diffusers_dir("DiT-pipeline/")     # a pipeline root (model_index.json) or the model folder
    sd, config, files = read_diffusers_weights(found.model_dir, read_file)
    ours, net_extra, settings = convert_diffusers_dit(sd, config)

Name mapping (diffusers -> scoreprobe / facebookresearch/DiT layout):
    pos_embed.proj                                       -> x_embedder.proj
    transformer_blocks.0.norm1.emb.timestep_embedder.linear_1|2 -> t_embedder.mlp.0|2
    transformer_blocks.0.norm1.emb.class_embedder.embedding_table -> y_embedder.embedding_table
    transformer_blocks.i.norm1.linear                    -> blocks.i.adaLN_modulation.1
    transformer_blocks.i.attn1.to_q|to_k|to_v (stacked)  -> blocks.i.attn.qkv
    transformer_blocks.i.attn1.to_out.0                  -> blocks.i.attn.proj
    transformer_blocks.i.ff.net.0.proj | ff.net.2        -> blocks.i.mlp.fc1 | fc2
    proj_out_1 | proj_out_2                              -> final_layer.adaLN_modulation.1 | final_layer.linear
diffusers keeps one timestep/label embedder per block (converted checkpoints hold copies); they must be
identical. Its forward differs from DiT's in two constants, which scoreprobe's DiT reproduces:
timestep frequencies exp(−ln 10⁴·i/(128 − 1)) (`time_freq_shift=1`) and the block's second LayerNorm
eps = config norm_eps (default 1e-5). The fixed position table is not stored; it is rebuilt.
"""
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from scoreprobe.errors import CheckpointError, ConfigError
from scoreprobe.limits import MAX_BITS, MAX_HIDDEN, check_int, check_positive
from scoreprobe.loading.formats import read_json

CLASSES = ("DiTTransformer2DModel", "Transformer2DModel")
WEIGHT_FILES = ("diffusion_pytorch_model.safetensors", "diffusion_pytorch_model.bin")
DEFAULT_NORM_EPS = 1e-5      # DiTTransformer2DModel's norm_eps default


@dataclass
class DiffusersDir:
    """model_dir: the folder with config.json + weights; scheduler: its scheduler_config.json or None."""
    model_dir: Path
    scheduler: Path = None


def find_diffusers_dir(path):
    """DiffusersDir for a pipeline root or a DiT model folder; None for anything else."""
    path = Path(path)
    if not path.is_dir():
        return None
    if (path / "model_index.json").is_file() and (path / "transformer" / "config.json").is_file():
        path = path / "transformer"
    if not (path / "config.json").is_file():
        return None
    if read_json(path / "config.json").get("_class_name") not in CLASSES:
        return None
    sched = path.parent / "scheduler" / "scheduler_config.json"
    return DiffusersDir(path, sched if sched.is_file() else None)


def read_diffusers_weights(model_dir, read_file):
    """(state_dict, config dict, [weight files]) of a diffusers model folder; read_file(path) -> (obj, meta, container)."""
    config = read_json(model_dir / "config.json")
    for name in WEIGHT_FILES:
        index = model_dir / f"{name}.index.json"
        files = ([model_dir / f for f in sorted(set(read_json(index).get("weight_map", {}).values()))]
                 if index.is_file() else [model_dir / name] if (model_dir / name).is_file() else [])
        if files:
            sd = {}
            for f in files:
                sd.update(read_file(f)[0])
            return sd, config, files
    raise CheckpointError(f"{model_dir} has a diffusers config.json but no weights ({' or '.join(WEIGHT_FILES)})")


def is_diffusers_dit(sd):
    """True for a state_dict with DiTTransformer2DModel's parameter names."""
    return "proj_out_2.weight" in sd and "transformer_blocks.0.norm1.linear.weight" in sd


def _check_config(config):
    for key, want in (("norm_type", "ada_norm_zero"), ("activation_fn", "gelu-approximate")):
        if config.get(key, want) != want:
            raise CheckpointError(f"unsupported diffusers DiT: {key}={config[key]!r} (scoreprobe maps {want!r})")
    if config.get("norm_elementwise_affine"):
        raise CheckpointError("unsupported diffusers DiT: norm_elementwise_affine=True (DiT norms have no affine)")


def _shared_embedder(sd, depth):
    """The embedder weights of block 0, after checking that every block holds the same."""
    pre = "transformer_blocks.{}.norm1.emb."
    first = {k[len(pre.format(0)):]: v for k, v in sd.items() if k.startswith(pre.format(0))}
    for i in range(1, depth):
        for name, v in first.items():
            other = sd.get(pre.format(i) + name)
            if other is None or not torch.equal(other, v):
                raise CheckpointError(f"block {i}'s timestep/label embedder differs from block 0's ({name}); "
                                      "scoreprobe's DiT shares one embedder, so this model cannot be mapped")
    return first


def _image_size(config, image_shape, hidden, C, p, expect_shape):
    """The side of the square image, checked before the (1, T, hidden) position table is allocated."""
    size = config.get("sample_size") or (image_shape[-1] if image_shape is not None else None)
    if not size:
        raise CheckpointError("a diffusers DiT state_dict without its config.json: pass image_shape=(C, H, W)")
    size = check_int(size, "sample_size", 1, MAX_BITS, CheckpointError)
    check_int(hidden, "the hidden size of the weights", 1, MAX_HIDDEN, CheckpointError)
    if C * size * size > MAX_BITS or size % p:
        raise CheckpointError(f"sample_size {size} with {C} channel(s) and patch {p} is not a {p}-divisible image of "
                              f"at most {MAX_BITS} bits (scoreprobe.limits.MAX_BITS)")
    if expect_shape is not None and [C, size, size] != [int(v) for v in expect_shape]:
        raise ConfigError(f"the diffusers config models images of shape {(C, size, size)}, the dataset has "
                          f"{tuple(expect_shape)}")
    return size


def convert_diffusers_dit(sd, config=None, image_shape=None, expect_shape=None):
    """(state_dict in scoreprobe's layout, extra DiT arguments, settings dict) of a DiTTransformer2DModel.

    The image size comes from config["sample_size"], else from image_shape (C, H, W) (square only);
    it is checked against the limits and against expect_shape (the data's (C, H, W), when known)
    before the position table is built.
    """
    config = dict(config or {})
    _check_config(config)
    depth = len({int(m.group(1)) for k in sd if (m := re.match(r"transformer_blocks\.(\d+)\.", k))})
    emb = _shared_embedder(sd, depth)
    try:
        out = {"x_embedder.proj.weight": sd["pos_embed.proj.weight"], "x_embedder.proj.bias": sd["pos_embed.proj.bias"],
               "y_embedder.embedding_table.weight": emb["class_embedder.embedding_table.weight"],
               "final_layer.adaLN_modulation.1.weight": sd["proj_out_1.weight"],
               "final_layer.adaLN_modulation.1.bias": sd["proj_out_1.bias"],
               "final_layer.linear.weight": sd["proj_out_2.weight"], "final_layer.linear.bias": sd["proj_out_2.bias"]}
        for j, lin in ((0, "linear_1"), (2, "linear_2")):
            for p in ("weight", "bias"):
                out[f"t_embedder.mlp.{j}.{p}"] = emb[f"timestep_embedder.{lin}.{p}"]
        for i in range(depth):
            src, dst = f"transformer_blocks.{i}.", f"blocks.{i}."
            for p in ("weight", "bias"):
                out[dst + f"adaLN_modulation.1.{p}"] = sd[src + f"norm1.linear.{p}"]
                out[dst + f"attn.qkv.{p}"] = torch.cat([sd[src + f"attn1.to_{c}.{p}"] for c in "qkv"])   # (3D, ...)
                out[dst + f"attn.proj.{p}"] = sd[src + f"attn1.to_out.0.{p}"]
                out[dst + f"mlp.fc1.{p}"] = sd[src + f"ff.net.0.proj.{p}"]
                out[dst + f"mlp.fc2.{p}"] = sd[src + f"ff.net.2.{p}"]
    except KeyError as e:
        raise CheckpointError(f"not a DiTTransformer2DModel state_dict in a layout scoreprobe maps: missing {e}") from None
    hidden, C, p, _ = out["x_embedder.proj.weight"].shape
    size = _image_size(config, image_shape, int(hidden), int(C), int(p), expect_shape)
    from scoreprobe.models.dit import sincos_2d
    out["pos_embed"] = torch.from_numpy(sincos_2d(hidden, size // p, size // p)).float().unsqueeze(0)   # (1, T, D)
    settings = {"num_heads": config.get("num_attention_heads"), "num_classes": config.get("num_embeds_ada_norm"),
                "image_shape": [int(C), size, size]}
    extra = {"time_freq_shift": 1, "mlp_norm_eps": check_positive(config.get("norm_eps", DEFAULT_NORM_EPS), "norm_eps", 1.0,
                                                              CheckpointError)}
    return out, extra, {k: v for k, v in settings.items() if v is not None}
