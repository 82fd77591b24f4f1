"""Build a network from a JSON-able architecture dict (what run.json and checkpoints store)."""
from scoreprobe.errors import ConfigError
from scoreprobe.models.dit import DIT_SIZES, dit_from_config
from scoreprobe.models.edm import EDMDenoiser


def model_arch(cfg, rule):
    """Architecture dict for a TrainConfig and its rule: everything needed to rebuild the network."""
    C, H, W = rule.image_shape
    if cfg.model == "dit":
        preset = DIT_SIZES.get(cfg.size)
        if preset is None:
            raise ConfigError(f"unknown DiT size {cfg.size!r}; choose from {sorted(DIT_SIZES)}")
        net = {**preset, **{k: getattr(cfg, k) for k in ("hidden_size", "depth", "num_heads")
                            if getattr(cfg, k) is not None}}
        return {"net": {**net, "input_size": [H, W], "patch_size": cfg.patch_size, "in_channels": C,
                        "mlp_ratio": 4.0, "learn_sigma": False, "num_label_rows": 1},
                "image_shape": [C, H, W], "sigma_data": cfg.sigma_data, "time_scale": cfg.time_scale}
    from scoreprobe.models.gpt import gpt_arch
    return gpt_arch(cfg, rule)


def build_model(kind, arch):
    """kind "dit" -> EDMDenoiser(DiT); kind "gpt" -> GPT."""
    if kind == "dit":
        return EDMDenoiser(dit_from_config(arch["net"]), arch["image_shape"],
                           sigma_data=arch["sigma_data"], time_scale=arch["time_scale"])
    if kind == "gpt":
        from scoreprobe.models.gpt import build_gpt
        return build_gpt(arch)
    raise ConfigError(f"unknown model kind {kind!r}; expected 'dit' or 'gpt'")
