"""Checkpoint series (run directories) and safe loading of checkpoint files, ours and other people's.

    series = load_series()                       # the shipped default series
    series = load_series("runs/parity-g3-n256")  # any run directory written by `scoreprobe train`
    D = series.denoiser(step)                    # EDMDenoiser, EMA weights, eval mode, no grad
    D = load_checkpoint("DiT-S-2.pt", sigma_data=0.5)   # a facebookresearch/DiT file

`load_checkpoint` sniffs the format: (a) our step files; (b) facebookresearch/DiT training dicts
{"model", "ema", "opt", "args"} (args an argparse.Namespace); (c) bare DiT state_dicts, with or
without "module." / "model." / "_orig_mod." prefixes; (d) EDM-style network pickles ({"ema": net}),
which run code when unpickled and so load only with trust=True. Without trust nothing is unpickled
beyond tensors, plain containers and argparse.Namespace (`torch.load(weights_only=True)`).
"""
import argparse
import json
import logging
import math
import os
import pickle
import re
import warnings
import zipfile
from pathlib import Path

import torch
import torch.nn as nn

from scoreprobe.data import load_dataset
from scoreprobe.errors import CheckpointError, ConfigError, ScoreprobeError, first_line
from scoreprobe.models.build import build_model
from scoreprobe.models.foreign import check_overrides, infer_dit_arch, is_state_dict, strip_prefixes
from scoreprobe.rules import Rule, rule_from_spec
from scoreprobe.train import CKPT_FORMAT, RUN_FORMAT   # the formats the trainer writes

logger = logging.getLogger(__name__)

DEFAULT_SERIES = "parity-default"
ENV_VAR = "SCOREPROBE_CHECKPOINTS"
_STEP_FILE = re.compile(r"step_(\d+)\.pt")


# ---------------------------------------------------------------------------------------------
# Reading files safely
# ---------------------------------------------------------------------------------------------

def _read(path, trust=False):
    """torch.load with weights_only=True (argparse.Namespace allowed); with trust, fall back to full unpickling."""
    path = Path(path)
    if path.is_dir():
        if (path / "run.json").is_file():
            raise CheckpointError(f"{path} is a run directory; load it with load_series(path)")
        raise CheckpointError(f"{path} is a directory without run.json, not a run directory or checkpoint file")
    if not path.is_file():
        raise CheckpointError(f"no checkpoint file at {path}")
    if path.stat().st_size == 0:
        raise CheckpointError(f"{path} is empty")
    try:
        with torch.serialization.safe_globals([argparse.Namespace]), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*pickle protocol", category=UserWarning)
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        if trust:
            return _read_trusted(path)
        m = re.search(r"GLOBAL ([\w.]+)", str(e))
        with open(path, "rb") as f:
            is_pickle = f.read(1) == b"\x80" and not zipfile.is_zipfile(path)
        if m or is_pickle:
            what = f"Python objects beyond tensors ({m.group(1)})" if m else "a plain Python pickle"
            raise CheckpointError(f"{path} holds {what}; loading it needs code execution. Pass trust=True "
                                  "(CLI: --trust) only for files you trust") from None
        raise CheckpointError(f"{path} is not a readable checkpoint (corrupt?): {first_line(e)}") from None
    except Exception as e:  # truncated zip (RuntimeError), EOFError, bad headers, ...
        raise CheckpointError(f"{path} is not a readable checkpoint (truncated or corrupt?): "
                              f"{first_line(e)}") from None


def _read_trusted(path):
    """Full unpickling (runs code from the file): torch zip files via torch.load, others via pickle."""
    logger.warning("loading %s with trust=True: code stored in the file may run", path)
    try:
        if zipfile.is_zipfile(path):
            return torch.load(path, map_location="cpu", weights_only=False)
        with open(path, "rb") as f:
            obj = pickle.load(f)
        if isinstance(obj, int) and obj == torch.serialization.MAGIC_NUMBER:  # legacy torch.save format
            return torch.load(path, map_location="cpu", weights_only=False)
        return obj
    except ModuleNotFoundError as e:
        raise CheckpointError(f"{path} needs the Python module {e.name!r} to load; make it importable") from None
    except Exception as e:
        raise CheckpointError(f"could not load {path} even with trust=True: {first_line(e)}") from None


# ---------------------------------------------------------------------------------------------
# Sniffing: what is in the file, and what architecture does it need
# ---------------------------------------------------------------------------------------------

def _plan(obj, path, ema, overrides):
    """What to build from a loaded object: dict(format, kind, arch, weights | module, step, missing)."""
    if isinstance(obj, dict) and obj.get("format") == CKPT_FORMAT:
        return _plan_ours(obj, path, ema)
    net = obj.get("ema" if ema else "model") if isinstance(obj, dict) else obj
    if isinstance(obj, dict) and ema and not isinstance(net, nn.Module):
        net = obj.get("model", net)
    if isinstance(net, nn.Module):  # only reachable with trust=True
        return _plan_module(net, path, overrides)
    args = obj.get("args") if isinstance(obj, dict) else None
    if isinstance(args, dict):  # some scripts store vars(args)
        args = argparse.Namespace(**{k: v for k, v in args.items() if isinstance(k, str)})
    args = args if isinstance(args, argparse.Namespace) else None
    keys = ("ema", "model", "state_dict") if ema else ("model", "state_dict")
    sd, fmt = None, "bare DiT state_dict"
    if is_state_dict(obj):
        sd = obj
    elif isinstance(obj, dict):
        key = next((k for k in keys if is_state_dict(obj.get(k))), None)
        if key is None:
            what = "raw weights ('model')" if not ema and "ema" in obj else "weights"
            raise CheckpointError(f"{path} holds no {what} in a form scoreprobe knows; top-level keys: "
                                  f"{sorted(map(str, obj))[:8]}")
        kind = "facebookresearch/DiT training checkpoint" if {"args", "opt"} & set(obj) else "checkpoint dict"
        sd, fmt = obj[key], f"{kind} ({key!r} weights)"
    else:
        raise CheckpointError(f"{path} holds a {type(obj).__name__}, not a checkpoint dict")
    sd = strip_prefixes(sd)
    arch, missing = infer_dit_arch(sd, args, **overrides)
    return {"format": fmt, "kind": "dit", "arch": arch, "weights": sd, "step": None, "missing": missing,
            "foreign": True}


def _plan_ours(obj, path, ema):
    if "arch" not in obj or obj.get("kind") not in ("dit", "gpt"):
        raise CheckpointError(f"{path} is a training-resume state without architecture; "
                              "load its run directory with load_series instead")
    weights = obj.get("ema") if ema else obj.get("model")
    if not is_state_dict(weights):
        raise CheckpointError(f"{path} stores no {'EMA' if ema else 'raw (non-EMA)'} weights"
                              + ("; use ema=True (trained with save_model=False)" if not ema else ""))
    return {"format": f"{CKPT_FORMAT} ({'EMA' if ema else 'raw'} weights)", "kind": obj["kind"],
            "arch": obj["arch"], "weights": weights, "step": obj.get("step"), "missing": [], "foreign": False}


def _plan_module(net, path, overrides):
    shape = overrides.get("image_shape")
    if shape is None and hasattr(net, "img_channels") and hasattr(net, "img_resolution"):
        shape = (net.img_channels, net.img_resolution, net.img_resolution)
    return {"format": f"trusted network pickle ({type(net).__name__})", "kind": "dit", "module": net,
            "arch": {"image_shape": None if shape is None else [int(s) for s in shape]}, "step": None,
            "missing": [] if shape is not None else ["image_shape"], "foreign": True}


def n_parameters(plan):
    """Trainable parameter count of a plan (fixed DiT pos_embed excluded)."""
    if "module" in plan:
        return sum(p.numel() for p in plan["module"].parameters())
    return sum(v.numel() for k, v in plan["weights"].items() if not k.endswith("pos_embed"))


# ---------------------------------------------------------------------------------------------
# Building denoisers
# ---------------------------------------------------------------------------------------------

class ModuleDenoiser(nn.Module):
    """Denoiser contract around an EDM-style net(x (B, C, H, W), sigma (B,), class_labels=None) -> denoised."""

    def __init__(self, net, image_shape):
        super().__init__()
        self.net = net
        self.image_shape = tuple(int(s) for s in image_shape)
        self.dim = math.prod(self.image_shape)

    def forward(self, x, sigma):
        """x: (B, D), sigma: (B,) or scalar -> (B, D) in x's dtype."""
        sigma = torch.as_tensor(sigma, dtype=torch.float32, device=x.device).reshape(-1).expand(x.shape[0])
        out = self.net(x.float().reshape(-1, *self.image_shape), sigma, class_labels=None)  # (B, C, H, W)
        return out.reshape(x.shape[0], self.dim).to(x.dtype)


def _build(plan, path, device):
    if plan["missing"]:
        names = ", ".join(plan["missing"])
        raise CheckpointError(f"{path} does not state {names}; pass it, e.g. load_checkpoint(path, "
                              f"{plan['missing'][0]}=...) (CLI: --set {plan['missing'][0]}=...)")
    if "module" in plan:
        model = ModuleDenoiser(plan["module"], plan["arch"]["image_shape"])
    else:
        try:
            model = build_model(plan["kind"], plan["arch"])
            target = model.net if plan["foreign"] else model
            weights = {k: (v.float() if v.is_floating_point() else v) for k, v in plan["weights"].items()}
            target.load_state_dict(weights, strict=True)
        except (RuntimeError, ValueError, TypeError, KeyError, ScoreprobeError) as e:
            msg = "; ".join(s.strip() for s in str(e).splitlines() if s.strip())
            raise CheckpointError(f"{path}: weights do not fit the architecture: {msg[:400]}") from None
    return model.to(device).eval().requires_grad_(False)


def load_checkpoint(path, trust=False, *, ema=True, device="cpu", **overrides):
    """Load one checkpoint file as a denoiser (or, for our GPT files, a GPT sampler).

    Parameters
    ----------
    path : a checkpoint file (formats in the module docstring).
    trust : allow full unpickling (runs code from the file); only for files you trust.
    ema : take EMA weights when the file has both (CheckpointError when asked-for weights are absent).
    device : where the model goes.
    **overrides : settings a foreign file may not state: num_heads, sigma_data, image_shape (C, H, W),
        time_scale (default 1.0 for foreign files). Keyword overrides win over a DiT file's args.

    Returns
    -------
    nn.Module in eval mode with requires_grad False: EDMDenoiser (D(x (B, D), sigma (B,)) -> (B, D)),
    ModuleDenoiser for trusted EDM-style pickles, or models.gpt.GPT for GPT files.
    """
    check_overrides(overrides)
    plan = _plan(_read(path, trust), Path(path), ema, overrides)
    return _build(plan, path, device)


def describe_checkpoint(path, trust=False, **overrides):
    """Facts about one checkpoint file without building it: dict(format, kind, step, arch, n_params, missing)."""
    check_overrides(overrides)
    plan = _plan(_read(path, trust), Path(path), True, overrides)
    return {"path": str(path), "format": plan["format"], "kind": plan["kind"], "step": plan["step"],
            "arch": plan["arch"], "n_params": n_parameters(plan), "missing": plan["missing"]}


# ---------------------------------------------------------------------------------------------
# Series
# ---------------------------------------------------------------------------------------------

class CheckpointSeries:
    """The checkpoints of one training run (or a list of files) with the data they were trained on.

    Attributes: path, steps (sorted ints), rule, dataset (data.Dataset), config (dict), kind ("dit" |
    "gpt"), arch (dict or None).
    """

    def __init__(self, path, files, dataset, config=None, kind="dit", arch=None, trust=False, overrides=None,
                 meta=None):
        self.path = None if path is None else Path(path)
        self._files = {int(s): Path(f) for s, f in sorted(files.items())}
        self.steps = list(self._files)
        self.dataset, self.rule = dataset, dataset.rule
        self.config, self.kind, self.arch = dict(config or {}), kind, arch
        self._trust, self._overrides = trust, dict(overrides or {})
        self.meta = dict(meta or {})  # the whole run.json of a run directory

    def __len__(self):
        return len(self.steps)

    def __iter__(self):
        return iter(self.steps)

    def __contains__(self, step):
        return step in self._files

    def __repr__(self):
        shown = self.steps if len(self) <= 6 else [*self.steps[:3], "...", *self.steps[-2:]]
        steps = ", ".join(map(str, shown))
        return (f"CheckpointSeries({str(self.path)!r}, kind={self.kind!r}, rule={self.rule!r}, "
                f"n_train={len(self.dataset.train)}, n_heldout={len(self.dataset.heldout)}, "
                f"steps=[{steps}] ({len(self)} checkpoints))")

    def checkpoint_path(self, step):
        """Path of the checkpoint file of `step`; CheckpointError listing nearby steps when absent."""
        if step not in self._files:
            near = sorted(sorted(self.steps, key=lambda s: abs(s - step))[:4]) if self.steps else []
            raise CheckpointError(f"step {step} is not in this series ({len(self)} checkpoints); "
                                  f"nearby steps: {near}")
        return self._files[step]

    def denoiser(self, step, device="cpu", ema=True):
        """EDM denoiser of `step` (EMA weights by default), eval mode, requires_grad False."""
        if self.kind == "gpt":
            raise CheckpointError("this is a GPT series: it has no denoiser; use series.sampler(step)")
        return load_checkpoint(self.checkpoint_path(step), self._trust, ema=ema, device=device,
                               **self._overrides)

    def sampler(self, step, device="cpu"):
        """GPT of `step` (EMA weights): `.sample(n, seed, temperature=1.0) -> uint8 (n, D)`."""
        if self.kind != "gpt":
            raise CheckpointError("sampler() is for GPT series; for DiT use sp.sample(series.denoiser(step), n, seed)")
        return load_checkpoint(self.checkpoint_path(step), self._trust, device=device, **self._overrides)

    def describe(self):
        """Facts for `scoreprobe info`: dict of plain values."""
        n_params = None
        if self.arch is not None:
            n_params = sum(p.numel() for p in build_model(self.kind, self.arch).parameters() if p.requires_grad)
        planned = self.meta.get("checkpoint_steps")
        return {"path": str(self.path), "kind": self.kind, "rule": self.rule, "n_train": len(self.dataset.train),
                "n_heldout": len(self.dataset.heldout), "image_shape": list(self.rule.image_shape),
                "arch": self.arch, "n_params": n_params, "steps": self.steps, "planned_steps": planned,
                "config": self.config}


def checkpoints_dir():
    """Folder of shipped series: $SCOREPROBE_CHECKPOINTS, else <repo>/checkpoints."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    import scoreprobe
    return Path(scoreprobe.__file__).resolve().parents[1] / "checkpoints"


def _read_run_json(path):
    meta_path = path / "run.json"
    if not meta_path.is_file():
        raise CheckpointError(f"{path} is not a run directory (no run.json)")
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{meta_path} is not readable JSON: {first_line(e)}") from None
    if not isinstance(meta, dict) or meta.get("format") != RUN_FORMAT:
        raise CheckpointError(f"{meta_path} is not a {RUN_FORMAT} file")
    missing = [k for k in ("config", "kind", "arch") if k not in meta]
    if missing or not isinstance(meta["config"], dict) or "rule" not in meta["config"]:
        raise CheckpointError(f"{meta_path} is incomplete (missing {missing or ['config.rule']})")
    return meta


def load_series(path=None):
    """The checkpoint series of a run directory (None: the shipped default series).

    Steps are those whose ckpt/step_*.pt files exist, so a run in progress gives a partial series.
    CheckpointError when the directory is missing, incomplete or has no checkpoints yet.
    """
    if path is None:
        path = checkpoints_dir() / DEFAULT_SERIES
        if not (path / "run.json").is_file():
            raise CheckpointError(f"the default series is not at {path}; set {ENV_VAR} to the folder holding "
                                  f"{DEFAULT_SERIES}/, or pass a run directory")
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"no run directory at {path}")
    if path.is_file():
        raise CheckpointError(f"{path} is a file; load_series takes a run directory (use load_checkpoint for files)")
    meta = _read_run_json(path)
    try:
        rule = rule_from_spec(meta["config"]["rule"])
        dataset = load_dataset(path / "dataset.npz", rule)
    except ScoreprobeError as e:
        raise CheckpointError(f"{path}: {e}") from None
    files = {int(m.group(1)): p for p in (path / "ckpt").glob("step_*.pt") if (m := _STEP_FILE.fullmatch(p.name))}
    if not files:
        raise CheckpointError(f"{path} has no checkpoints yet (ckpt/step_*.pt)")
    return CheckpointSeries(path, files, dataset, config=meta["config"], kind=meta["kind"], arch=meta["arch"],
                            meta=meta)


def series_from_files(files, steps, dataset, rule=None, **arch):
    """Wrap anyone's checkpoint files (one per training step) as a CheckpointSeries.

    files: paths; steps: their training steps (ints, same length); dataset: data.Dataset or the path of a
    dataset .npz; rule: Rule or spec (default: the dataset's); **arch: load_checkpoint overrides
    (num_heads, sigma_data, image_shape, time_scale) and trust=.
    """
    trust = bool(arch.pop("trust", False))
    check_overrides(arch)
    files, steps = [Path(f) for f in files], [int(s) for s in steps]
    if len(files) != len(steps) or not files:
        raise ConfigError(f"need one step per file and at least one file, got {len(files)} files, {len(steps)} steps")
    if len(set(steps)) != len(steps):
        raise ConfigError(f"steps must be unique, got {steps}")
    if rule is not None and not isinstance(rule, Rule):
        rule = rule_from_spec(rule)
    if not hasattr(dataset, "train"):
        dataset = load_dataset(dataset, rule)
    elif rule is not None and rule != dataset.rule:
        raise ConfigError(f"rule {rule!r} differs from the dataset's {dataset.rule!r}")
    plan = _plan(_read(files[0], trust), files[0], True, arch)
    shape = plan["arch"].get("image_shape")
    if shape is not None and tuple(shape) != tuple(dataset.rule.image_shape):
        raise ConfigError(f"{files[0]} models images of shape {tuple(shape)}, the dataset has "
                          f"{tuple(dataset.rule.image_shape)}")
    for f in files[1:]:
        if not f.is_file():
            raise CheckpointError(f"no checkpoint file at {f}")
    parent = Path(os.path.commonpath([str(f.resolve().parent) for f in files]))
    config = {"files": [str(f) for f in files], "steps": steps, "overrides": arch}
    return CheckpointSeries(parent, dict(zip(steps, files)), dataset, config=config, kind=plan["kind"],
                            arch=None if plan["foreign"] else plan["arch"], trust=trust, overrides=arch)
