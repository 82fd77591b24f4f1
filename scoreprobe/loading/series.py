"""Checkpoint series (run directories) and safe loading of checkpoint files, ours and other people's.

    series = load_series()                       # the shipped default series
    series = load_series("runs/parity-g3-n256")  # any run directory written by `scoreprobe train`
    D = series.denoiser(step)                    # EDMDenoiser, EMA weights, eval mode, no grad
    D = load_checkpoint("0050000.pt")            # a facebookresearch/DiT train.py file: DDPM ε, linear β
    D = load_checkpoint("sd.pt", parameterization="v", schedule="cosine", num_heads=4)

`load_checkpoint` sniffs the container from the bytes (safetensors, torch zip, pickle; loading.formats)
and the content: (a) our step files; (b) training dicts such as facebookresearch/DiT's {"model", "ema",
"opt", "args"}, timm's {"state_dict", "state_dict_ema"}, Lightning's {"state_dict", "hyper_parameters"};
(c) bare DiT state_dicts, with or without "module." / "model." / "_orig_mod." prefixes; (d) diffusers
DiTTransformer2DModel folders; (e) pickled modules (trust=True only): a whole DiT goes through the
state_dict path, anything else is taken as an NVlabs/edm-style network returning D. Which weights
(loading.weights), which parameterization, schedule, σ_data and label row (loading.settings) are decided
by written rules and shown by `describe_checkpoint` / `scoreprobe info`; docs/checkpoints.md has them.
"""
import json
import os
import re
from pathlib import Path

import torch

from scoreprobe.data.datasets import load_dataset
from scoreprobe.errors import CheckpointError, ConfigError, ScoreprobeError, first_line
from scoreprobe.limits import MAX_JSON_BYTES, MAX_JSON_DEPTH, MAX_STEP, check_bool, check_int, json_depth
from scoreprobe.models.build import build_model, check_arch, expected_shapes
from scoreprobe.models.dit import dit_from_config
from scoreprobe.loading.foreign import check_overrides
from scoreprobe.models.param import ModuleDenoiser, make_denoiser
from scoreprobe.loading.plan import n_parameters, plan_checkpoint
from scoreprobe.loading.weights import check_ema, check_tensors
from scoreprobe.data.rules import Rule, rule_from_spec
from scoreprobe.training.config import RUN_FORMAT   # the format the trainer writes

DEFAULT_SERIES = "parity-default"
ENV_VAR = "SCOREPROBE_CHECKPOINTS"
_STEP_FILE = re.compile(r"step_(\d+)\.pt")
_PARAM_HINT = "parameterization='edm' | 'ddpm_eps' | 'v' | 'x0'"


# ---------------------------------------------------------------------------------------------
# Building denoisers
# ---------------------------------------------------------------------------------------------

def _missing_error(plan, path):
    first = plan["missing"][0]
    if first == "parameterization":
        why = plan["facts"]["parameterization_how"]
        return CheckpointError(f"{path} does not state its parameterization ({why}); pass {_PARAM_HINT}, e.g. "
                               "load_checkpoint(path, parameterization='ddpm_eps') (CLI: --set parameterization=...)"
                               + (f"; also missing: {', '.join(plan['missing'][1:])}" if plan["missing"][1:] else ""))
    return CheckpointError(f"{path} does not state {', '.join(plan['missing'])}; pass it, e.g. "
                           f"load_checkpoint(path, {first}=...) (CLI: --set {first}=...)")


def _build(plan, path, device):
    if plan["missing"]:
        raise _missing_error(plan, path)
    facts = plan["facts"]
    if "module" in plan:
        model = ModuleDenoiser(plan["module"], plan["arch"]["image_shape"], label=facts["label"])
    else:
        arch, foreign = plan["arch"], plan["foreign"]
        check_arch(plan["kind"], arch, where=f"{path}: architecture")
        weights = check_tensors(plan["weights"], expected_shapes(plan["kind"], arch, foreign), path)
        try:
            if foreign:
                model = make_denoiser(dit_from_config(arch["net"]), arch["image_shape"], facts["parameterization"],
                                      sigma_data=arch.get("sigma_data"), time_scale=arch.get("time_scale", 1.0),
                                      schedule=facts["schedule"], label=facts["label"])
            else:
                model = build_model(plan["kind"], arch)
            (model.net if foreign else model).load_state_dict(weights, strict=True)
        except (RuntimeError, ValueError, TypeError, KeyError, ScoreprobeError) as e:
            msg = "; ".join(s.strip() for s in str(e).splitlines() if s.strip())
            raise CheckpointError(f"{path}: weights do not fit the architecture: {msg[:400]}") from None
    if hasattr(model, "info"):
        model.info = {"weights": facts["weights"], "parameterization_from": facts["parameterization_how"]}
    return model.to(device).eval().requires_grad_(False)


def load_checkpoint(path, trust=False, *, ema="auto", device="cpu", **overrides):
    """Load one checkpoint file (or diffusers folder) as a denoiser (or, for our GPT files, a GPT sampler).

    Parameters
    ----------
    path : a checkpoint file or diffusers folder (formats in the module docstring and docs/checkpoints.md).
    trust : allow full unpickling (runs code from the file); only for files you trust.
    ema : "auto" (EMA weights when the file has them, else raw; the choice is in the wrapper's repr),
        True (EMA or CheckpointError), False (raw or CheckpointError).
    device : where the model goes.
    **overrides : settings the file may not state: parameterization ("edm" | "ddpm_eps" | "v" | "x0"),
        schedule ("linear" | "cosine"), num_timesteps, class_label (int or "null"), num_classes,
        num_heads, sigma_data, time_scale (edm only), image_shape (C, H, W). Overrides win over what
        the file states; one that cannot be applied is a ConfigError, never ignored.

    Returns
    -------
    nn.Module in eval mode with requires_grad False: D(x (B, D), sigma (B,)) -> (B, D) — EDMDenoiser,
    VPDenoiser (ddpm_eps / v / x0) or ModuleDenoiser (trusted EDM-style pickles) — each with
    `.parameterization`, `.sigma_data` (None when the model has none) and `.info`; or models.gpt.GPT.
    """
    from scoreprobe.atomic import check_path_text
    path = check_path_text(path, "load_checkpoint: path")   # not a path (a number, None): ConfigError
    try:
        path.stat()
    except FileNotFoundError:
        pass                      # said by the reader, with what it looked for
    except OSError as e:          # a name too long, a loop of links, a folder that may not be read
        raise CheckpointError(f"cannot read {str(path)[:80]}: {e.strerror or e}") from None
    return _load(path, trust, ema, device, overrides)


def _load(path, trust, ema, device, overrides, step=None):
    """load_checkpoint; with `step`, CheckpointError when a scoreprobe file states another step."""
    check_overrides(overrides)
    plan = plan_checkpoint(path, check_bool(trust, "trust"), check_ema(ema), overrides)
    if step is not None and not plan["foreign"] and plan["step"] != step:
        raise CheckpointError(f"{path} states step {plan['step']}, but its file name says {step}; "
                              "the run directory is inconsistent")
    return _build(plan, path, device)


def describe_checkpoint(path, trust=False, *, ema="auto", **overrides):
    """Facts about one checkpoint without building it: format, kind, step, arch, n_params, missing,
    parameterization (+ how), schedule (+ how), sigma_data, label (+ how), weights, overrides."""
    check_overrides(overrides)
    plan = plan_checkpoint(path, check_bool(trust, "trust"), check_ema(ema), overrides)
    facts = plan["facts"]
    schedule = facts["schedule"]
    return {"path": str(path), "format": plan["format"], "kind": plan["kind"], "step": plan["step"],
            "arch": plan["arch"], "n_params": n_parameters(plan), "missing": plan["missing"],
            "parameterization": facts["parameterization"], "parameterization_how": facts["parameterization_how"],
            "schedule": None if schedule is None else schedule.describe(), "schedule_how": facts["schedule_how"],
            "sigma_data": plan["arch"].get("sigma_data"), "sigma_data_how": facts.get("sigma_data_how", ""),
            "label": facts["label"], "label_how": facts["label_how"], "weights": facts["weights"],
            "overrides": facts["overrides"], "origins": facts["origins"]}


# ---------------------------------------------------------------------------------------------
# Series
# ---------------------------------------------------------------------------------------------

class CheckpointSeries:
    """The checkpoints of one training run (or a list of files) with the data they were trained on.

    Attributes: path, steps (sorted ints), rule, dataset (data.Dataset), config (dict), kind ("dit" |
    "gpt"), arch (dict or None).
    """

    def __init__(self, path, files, dataset, config=None, kind="dit", arch=None, trust=False, overrides=None,
                 meta=None, ema="auto"):
        self.path = None if path is None else Path(path)
        self._files = {int(s): Path(f) for s, f in sorted(files.items())}
        self.steps = list(self._files)
        self.dataset, self.rule = dataset, dataset.rule
        self.config, self.kind, self.arch = dict(config or {}), kind, arch
        self._trust, self._overrides, self._ema = check_bool(trust, "trust"), dict(overrides or {}), ema
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

    def denoiser(self, step, device="cpu", ema="auto"):
        """Denoiser of `step` (EMA weights when the file has them; see load_checkpoint), eval mode, no grad."""
        if self.kind == "gpt":
            raise CheckpointError("this is a GPT series: it has no denoiser; use series.sampler(step)")
        ema = self._ema if ema == "auto" else ema
        return _load(self.checkpoint_path(step), self._trust, ema, device, self._overrides, self._own_step(step))

    def sampler(self, step, device="cpu"):
        """GPT of `step` (EMA weights): `.sample(n, seed, temperature=1.0) -> uint8 (n, D)`."""
        if self.kind != "gpt":
            raise CheckpointError("sampler() is for GPT series; for DiT use sp.sample(series.denoiser(step), n, seed)")
        return _load(self.checkpoint_path(step), self._trust, "auto", device, self._overrides, self._own_step(step))

    def _own_step(self, step):
        """The step a file of this series must state (run directories only), else None."""
        return step if self.meta.get("format") == RUN_FORMAT else None

    def describe(self):
        """Facts for `scoreprobe info`: dict of plain values."""
        n_params = None
        if self.arch is not None:
            check_arch(self.kind, self.arch, where=f"{self.path}: architecture")
            with torch.device("meta"):   # counts without allocating
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
    """The checked run.json of a run directory: size, depth, format, kind, arch, config.rule, checkpoint_steps."""
    meta_path = path / "run.json"
    if not meta_path.is_file():
        raise CheckpointError(f"{path} is not a run directory (no run.json)")
    if meta_path.stat().st_size > MAX_JSON_BYTES:
        raise CheckpointError(f"{meta_path} is larger than {MAX_JSON_BYTES} bytes (scoreprobe.limits.MAX_JSON_BYTES)")
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise CheckpointError(f"{meta_path} is not readable JSON: {first_line(e)}") from None
    if json_depth(meta) > MAX_JSON_DEPTH:
        raise CheckpointError(f"{meta_path} is nested deeper than {MAX_JSON_DEPTH} levels (scoreprobe.limits)")
    if not isinstance(meta, dict) or meta.get("format") != RUN_FORMAT:
        raise CheckpointError(f"{meta_path} is not a {RUN_FORMAT} file")
    missing = [k for k in ("config", "kind", "arch") if k not in meta]
    if missing or not isinstance(meta["config"], dict) or "rule" not in meta["config"]:
        raise CheckpointError(f"{meta_path} is incomplete (missing {missing or ['config.rule']})")
    check_arch(meta["kind"], meta["arch"], where=f"{meta_path}: arch")
    planned = meta.get("checkpoint_steps")
    if planned is not None:
        if not isinstance(planned, list):
            raise CheckpointError(f"{meta_path}: checkpoint_steps must be a list of steps")
        for s in planned:
            check_int(s, f"{meta_path}: a checkpoint step", 0, MAX_STEP, CheckpointError)
    return meta


def _step_files(path):
    """{step: file} of ckpt/step_*.pt; CheckpointError for huge steps or two files naming one step."""
    files = {}
    for p in sorted((path / "ckpt").glob("step_*.pt")):
        m = _STEP_FILE.fullmatch(p.name)
        if not m:
            continue
        if len(m.group(1)) > 13 or int(m.group(1)) > MAX_STEP:
            raise CheckpointError(f"{p} names step {m.group(1)[:20]}{'...' if len(m.group(1)) > 20 else ''}, "
                                  f"beyond the limit {MAX_STEP} (scoreprobe.limits.MAX_STEP)")
        step = int(m.group(1))
        if step in files:
            raise CheckpointError(f"{files[step].name} and {p.name} both name step {step} in {path / 'ckpt'}; "
                                  "remove one")
        files[step] = p
    return files


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
    from scoreprobe.atomic import check_path_text
    path = check_path_text(path, "load_series: path")
    try:
        path.stat()
    except FileNotFoundError:
        raise CheckpointError(f"no run directory at {path}") from None
    except OSError as e:          # a name too long, a loop of links, a folder that may not be read
        raise CheckpointError(f"cannot read {str(path)[:80]}: {e.strerror or e}") from None
    if path.is_file():
        raise CheckpointError(f"{path} is a file; load_series takes a run directory (use load_checkpoint for files)")
    meta = _read_run_json(path)
    try:
        rule = rule_from_spec(meta["config"]["rule"])
        if list(rule.image_shape) != list(meta["arch"]["image_shape"]):
            raise CheckpointError(f"arch image_shape {meta['arch']['image_shape']} differs from the rule's "
                                  f"{list(rule.image_shape)}")
        dataset = load_dataset(path / "dataset.npz", rule)
    except ScoreprobeError as e:
        raise CheckpointError(f"{path}: {e}") from None
    files = _step_files(path)
    if not files:
        raise CheckpointError(f"{path} has no checkpoints yet (ckpt/step_*.pt)")
    return CheckpointSeries(path, files, dataset, config=meta["config"], kind=meta["kind"], arch=meta["arch"],
                            meta=meta)


def _check_distinct_files(files, steps):
    """ConfigError when one file (by its real path: symlinks and ../ resolved) is named at two steps."""
    seen = {}
    for f, s in zip(files, steps):
        real = os.path.realpath(f)
        if real in seen:
            raise ConfigError(f"{f} is named at steps {seen[real][1]} and {s}" + (
                f" (as {seen[real][0]}, the same file)" if str(seen[real][0]) != str(f) else "")
                + "; every step needs its own checkpoint file")
        seen[real] = (f, s)


def series_from_files(files, steps, dataset, rule=None, **arch):
    """Wrap anyone's checkpoint files (one per training step) as a CheckpointSeries.

    files: paths; steps: their training steps (ints, same length); dataset: data.Dataset or the path of a
    dataset .npz; rule: Rule or spec (default: the dataset's); **arch: load_checkpoint overrides
    (parameterization, schedule, class_label, num_heads, sigma_data, image_shape, ...), trust= and ema=.
    """
    trust = check_bool(arch.pop("trust", False), "trust")
    ema = check_ema(arch.pop("ema", "auto"))
    check_overrides(arch)
    files, steps = [Path(f) for f in files], [check_int(s, "a step", 0, MAX_STEP) for s in steps]
    if len(files) != len(steps) or not files:
        raise ConfigError(f"need one step per file and at least one file, got {len(files)} files, {len(steps)} steps")
    if len(set(steps)) != len(steps):
        raise ConfigError(f"steps must be unique, got {steps}")
    _check_distinct_files(files, steps)
    if rule is not None and not isinstance(rule, Rule):
        rule = rule_from_spec(rule)
    if not hasattr(dataset, "train"):
        dataset = load_dataset(dataset, rule)
    elif rule is not None and rule != dataset.rule:
        raise ConfigError(f"rule {rule!r} differs from the dataset's {dataset.rule!r}")
    plan = plan_checkpoint(files[0], trust, ema, arch, expect_shape=dataset.rule.image_shape)
    shape = plan["arch"].get("image_shape")
    if shape is not None and tuple(shape) != tuple(dataset.rule.image_shape):
        raise ConfigError(f"{files[0]} models images of shape {tuple(shape)}, the dataset has "
                          f"{tuple(dataset.rule.image_shape)}")
    for f in files[1:]:
        if not f.is_file():
            raise CheckpointError(f"no checkpoint file at {f}")
    parent = Path(os.path.commonpath([str(f.resolve().parent) for f in files]))
    if plan["missing"]:
        raise _missing_error(plan, files[0])
    config = {"files": [str(f) for f in files], "steps": steps, "overrides": arch, "ema": ema,
              "parameterization": plan["facts"]["parameterization"]}
    return CheckpointSeries(parent, dict(zip(steps, files)), dataset, config=config, kind=plan["kind"],
                            arch=None if plan["foreign"] else plan["arch"], trust=trust, overrides=arch, ema=ema)
