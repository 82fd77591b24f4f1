"""What to build from one checkpoint file or folder: weights, architecture, parameterization, label.

    plan = plan_checkpoint("0050000.pt", trust=False, ema="auto", overrides={})
    plan["facts"]["parameterization"], plan["facts"]["parameterization_how"]   # "ddpm_eps", "training args are ..."

A plan is a dict(format, kind, arch, weights | module, step, missing, foreign, facts); `facts` holds every
decision with its source (what `scoreprobe info` prints). checkpoints.load_checkpoint builds it.
"""
import argparse
import warnings
from pathlib import Path

import torch
import torch.nn as nn

from scoreprobe.errors import CheckpointError, ConfigError, ScoreprobeWarning
from scoreprobe.limits import MAX_STEP, check_expansion, check_int, check_positive
from scoreprobe.models.build import check_arch
from scoreprobe.loading.diffusers_dit import convert_diffusers_dit, find_diffusers_dir, is_diffusers_dit
from scoreprobe.loading.diffusers_dit import read_diffusers_weights
from scoreprobe.loading.foreign import dit_module_settings, infer_dit_arch, is_state_dict, strip_prefixes
from scoreprobe.loading.formats import read_file, read_json, read_side_files
from scoreprobe.loading.settings import (Settings, check_conflicts, check_source, decide_parameterization,
                                         resolve_label, resolve_onehot_label, resolve_schedule)
from scoreprobe.loading.weights import select_weights


# ---------------------------------------------------------------------------------------------
# Reading: the object in the file and the settings stated in or next to it
# ---------------------------------------------------------------------------------------------

def _read(path, trust, overrides):
    """(object, Settings, container phrase, diffusers config or None, bytes of the files read) of a file
    or diffusers folder."""
    path, settings = Path(path), Settings(overrides)
    found = find_diffusers_dir(path) if path.is_dir() else None
    if found is not None:
        sd, config, files = read_diffusers_weights(found.model_dir, lambda f: read_file(f, trust))
        config = check_source(config, f"{found.model_dir / 'config.json'}")
        if found.scheduler is not None:
            settings.add(f"diffusers {found.scheduler.name}", read_json(found.scheduler))
        return sd, settings, "diffusers DiTTransformer2DModel folder", config, sum(f.stat().st_size for f in files)
    obj, meta, container = read_file(path, trust)
    if meta:
        settings.add("safetensors metadata", meta, parse=True)
    return obj, settings, container, None, path.stat().st_size


def _check_allocation(weights, file_bytes, path):
    """CheckpointError, before anything is allocated, when the chosen weights would take far more memory
    (float32 at least) than the file holds (limits.check_expansion); a module (trusted pickle) is built already."""
    if isinstance(weights, dict):
        n = sum(v.numel() * max(v.element_size(), 4) for v in weights.values() if torch.is_tensor(v))
        check_expansion(n, file_bytes, str(path), CheckpointError)


def _unwrap_dit_modules(obj, settings):
    """Pickled whole DiT modules (top level or dict values) -> (object with their state_dicts, names)."""
    got = dit_module_settings(obj)
    if got is not None:
        settings.add(f"pickled {type(obj).__name__} attributes", got[1])
        return got[0], [type(obj).__name__]
    names = []
    if isinstance(obj, dict):
        obj = dict(obj)
        for k, v in list(obj.items()):
            if (got := dit_module_settings(v)) is not None:
                obj[k] = got[0]
                names.append(type(v).__name__)
                settings.add(f"pickled {type(v).__name__} attributes ({k!r})", got[1])
    return obj, names


def _add_file_sources(obj, path, settings):
    """Training args in the file, then side files; returns the side config.json (or None)."""
    if isinstance(obj, dict):
        args = obj.get("args")
        if isinstance(args, (argparse.Namespace, dict)):
            settings.add("training args", args)
        if isinstance(obj.get("hyper_parameters"), dict):
            settings.add("Lightning hyper_parameters", obj["hyper_parameters"])
    side_config = None
    for name, d in read_side_files(path):
        settings.add(name, d)
        side_config = d if name == "config.json" else side_config
    return side_config


# ---------------------------------------------------------------------------------------------
# Planning: what to build
# ---------------------------------------------------------------------------------------------

def plan_checkpoint(path, trust, ema, overrides, expect_shape=None):
    """dict(format, kind, arch, weights | module, step, missing, foreign, facts) for one file or folder.

    expect_shape: the (C, H, W) of the data the model is to be compared with, when known; a diffusers
    config that states another is refused before its position table is built."""
    from scoreprobe.training.config import CKPT_FORMAT   # the format the trainer writes
    obj, settings, container, config, file_bytes = _read(path, trust, overrides)
    if isinstance(obj, dict) and obj.get("format") == CKPT_FORMAT:
        return _plan_ours(obj, path, ema, settings, file_bytes)
    obj, unwrapped = _unwrap_dit_modules(obj, settings)
    if config is None:
        config = _add_file_sources(obj, Path(path), settings)
    try:
        w = select_weights(obj, ema)
    except CheckpointError as e:
        raise CheckpointError(f"{path}: {e}") from None
    if container.startswith("diffusers") and w.which == "unmarked":
        w.where, w.note = "the diffusers folder's weights", "diffusers saves one set; it does not say whether it is EMA"
    _check_allocation(w.weights, file_bytes, path)
    fmt = _format_name(obj, container, w, unwrapped)
    if isinstance(w.weights, nn.Module):
        return _plan_module(w, path, settings, fmt)
    sd = strip_prefixes(w.weights)
    extra = {}
    if is_diffusers_dit(sd):
        sd, extra, found = convert_diffusers_dit(sd, config, settings.get("image_shape"), expect_shape)
        settings.add("diffusers config", found)
    arch, missing = infer_dit_arch(sd, settings)
    arch["net"].update(extra)
    facts = _decide(arch, settings, missing)
    facts["weights"] = w.describe()
    return {"format": fmt, "kind": "dit", "arch": arch, "weights": sd, "step": None, "missing": missing,
            "foreign": True, "facts": facts}


def _format_name(obj, container, w, unwrapped):
    """A phrase naming the file's format, e.g. 'facebookresearch/DiT training checkpoint (torch)'."""
    if container.startswith("diffusers"):
        return container
    if isinstance(w.weights, nn.Module):
        return f"trusted network pickle ({type(w.weights).__name__})"
    if unwrapped:
        return f"trusted pickle of a whole {unwrapped[0]} module, read as its state_dict ({container})"
    if isinstance(obj, dict) and not is_state_dict(obj):
        kind = ("facebookresearch/DiT training checkpoint" if {"args", "opt"} <= set(obj) else
                "Lightning checkpoint" if "pytorch-lightning_version" in obj else
                "timm checkpoint" if "state_dict_ema" in obj else "checkpoint dict")
    else:
        kind = "DiT state_dict"
    names = " with diffusers parameter names" if is_diffusers_dit(strip_prefixes(w.weights)) else ""
    return f"{kind}{names} ({container})"


def _decide(arch, settings, missing):
    """Parameterization, schedule, σ_data, label row and their sources; fills arch and missing."""
    param, how = decide_parameterization(settings)
    facts = {"parameterization": param, "parameterization_how": how, "schedule": None, "schedule_how": "",
             "overrides": dict(settings.overrides), "origins": settings.origins()}
    if param is None:
        missing.append("parameterization")
    else:
        check_conflicts(param, settings, how)
        facts["schedule"], facts["schedule_how"] = resolve_schedule(param, settings, how)
    if param == "edm":
        sd, origin = settings.lookup("sigma_data")
        arch["sigma_data"] = None if sd is None else check_positive(sd, f"sigma_data ({origin})")
        ts, ts_origin = settings.lookup("time_scale")
        arch["time_scale"] = 1.0 if ts is None else check_positive(ts, f"time_scale ({ts_origin})")
        if ts is None:   # a guess, so it is named: the model differs by up to ~0.7 between 1 and 250
            warnings.warn("time_scale is not stated; taking 1.0 (c_noise = ln σ / 4, as in EDM). scoreprobe's own "
                          "trainer uses 250: pass time_scale=... if the network was trained with another",
                          ScoreprobeWarning, stacklevel=4)
        facts["sigma_data_how"] = origin or ""
        if sd is None:
            missing.append("sigma_data")
    rows = arch["net"]["num_label_rows"]
    row, facts["label_how"] = resolve_label(rows, settings)
    facts["label"] = row if rows > 1 or row != 0 else None
    return facts


def _plan_ours(obj, path, ema, settings, file_bytes):
    if "arch" not in obj or obj.get("kind") not in ("dit", "gpt"):
        raise CheckpointError(f"{path} is a training-resume state without architecture; "
                              "load its run directory with load_series instead")
    try:
        w = select_weights({k: obj.get(k) for k in ("ema", "model") if obj.get(k) is not None}, ema)
    except CheckpointError as e:
        hint = "; use ema=True (trained with save_model=False)" if ema is False else ""
        raise CheckpointError(f"{path}: {e}{hint}") from None
    _check_allocation(w.weights, file_bytes, path)
    arch = obj["arch"]
    check_arch(obj["kind"], arch, where=f"{path}: stored architecture")
    check_int(obj.get("step"), f"{path}: stored step", 0, MAX_STEP, CheckpointError)
    stored = {"sigma_data": arch.get("sigma_data"), "time_scale": arch.get("time_scale"), "parameterization": "edm",
              "image_shape": arch.get("image_shape"), "num_heads": (arch.get("net") or {}).get("num_heads"),
              "class_label": 0}
    for k, v in settings.overrides.items():
        if k not in stored or not _same_setting(v, stored[k]):
            raise ConfigError(f"{path} is a scoreprobe checkpoint that states its own settings; {k}={v!r} "
                              f"cannot be applied (stored: {stored.get(k, 'not applicable')!r})")
    facts = {"parameterization": "edm" if obj["kind"] == "dit" else None,
             "parameterization_how": "scoreprobe checkpoint (always EDM)", "schedule": None, "schedule_how": "",
             "sigma_data_how": "scoreprobe checkpoint", "label": None, "label_how": "row 0: the only row",
             "weights": w.describe(), "overrides": dict(settings.overrides), "origins": {}}
    return {"format": f"{obj['format']} ({w.which} weights)", "kind": obj["kind"], "arch": arch,
            "weights": w.weights, "step": obj.get("step"), "missing": [], "foreign": False, "facts": facts}


def _same_setting(a, b):
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return b is not None and [int(x) for x in a] == [int(x) for x in b]
    return str(a) == str(b) if isinstance(a, str) or isinstance(b, str) else float(a) == float(b)


def _plan_module(w, path, settings, fmt):
    """An EDM-style network pickle: settings are applied (image_shape, class_label) or refused."""
    net = w.weights
    own_shape = None
    if hasattr(net, "img_channels") and hasattr(net, "img_resolution"):
        own_shape = [int(net.img_channels), int(net.img_resolution), int(net.img_resolution)]
    own = {"parameterization": "edm", "sigma_data": getattr(net, "sigma_data", None), "image_shape": own_shape}
    for k, v in settings.overrides.items():
        if k in ("class_label", "num_classes") or (k in own and (own[k] is None or _same_setting(v, own[k]))):
            continue
        raise ConfigError(f"{path} is a pickled network that carries its own {k}; {k}={v!r} cannot be applied "
                          f"(it has {own.get(k, 'no such setting')!r})")
    shape = settings.get("image_shape") or own_shape
    has_null = float(getattr(getattr(net, "model", None), "label_dropout", 0) or 0) > 0
    label, label_how = resolve_onehot_label(int(getattr(net, "label_dim", 0) or 0), has_null, settings)
    facts = {"parameterization": "edm", "parameterization_how": "a pickled network that returns D itself",
             "schedule": None, "schedule_how": "", "sigma_data_how": "the network's attribute",
             "label": label, "label_how": label_how, "weights": w.describe(),
             "overrides": dict(settings.overrides), "origins": settings.origins()}
    return {"format": fmt, "kind": "dit", "module": net, "step": None, "foreign": True, "facts": facts,
            "arch": {"image_shape": None if shape is None else [int(s) for s in shape],
                     "sigma_data": own["sigma_data"]},
            "missing": [] if shape is not None else ["image_shape"]}


def n_parameters(plan):
    """Trainable parameter count of a plan (fixed DiT pos_embed excluded)."""
    if "module" in plan:
        return sum(p.numel() for p in plan["module"].parameters())
    return sum(v.numel() for k, v in plan["weights"].items() if not k.endswith("pos_embed"))
