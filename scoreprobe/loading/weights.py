"""Which weights of a checkpoint to take: EMA or raw, found where the usual training tools put them.

    w = select_weights(obj, ema="auto")     # obj: what formats.read_file returned
    w.weights, w.which, w.where             # state_dict (or module), "EMA" | "raw" | "unmarked", where

EMA weights are recognised in: a top-level "ema" entry (facebookresearch/DiT, scoreprobe), timm's
"state_dict_ema" (and "model_ema"), a state_dict holding an "ema." submodule next to the model
(PyTorch Lightning modules that keep `self.ema`), and ema-pytorch's "ema_model." prefix (its
"online_model." weights are the raw ones). torch_ema keeps `shadow_params` as an unnamed list in the
order of the training code's `model.parameters()`, which cannot be matched to names: an error says so.

ema=True takes EMA weights or fails; ema=False takes raw weights or fails; ema="auto" takes EMA when
present, else raw, else the file's only (unmarked) weights, and `describe` says which it took.
"""
from dataclasses import dataclass

import torch
import torch.nn as nn

from scoreprobe.errors import OTHER_MODELS, CheckpointError, ConfigError
from scoreprobe.limits import warn_nonfinite
from scoreprobe.loading.foreign import is_state_dict

EMA_KEYS = ("ema", "state_dict_ema", "model_ema")
RAW_KEYS = ("model", "state_dict", "net")
EMA_PREFIXES = {"ema.": "'ema.' submodule of the state_dict (Lightning-style)",
                "ema_model.": "ema-pytorch 'ema_model.' weights", "model_ema.": "'model_ema.' submodule"}
RAW_PREFIXES = {"ema.": "model.", "ema_model.": "online_model.", "model_ema.": "model."}   # the raw weights beside
WEIGHT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)   # float8 & co: no isfinite, no math
BOOKKEEPING = ("initted", "step", "num_updates", "decay", "n_averaged")   # EMA wrappers' counters


@dataclass
class Weights:
    """weights: state_dict or nn.Module; which: "EMA" | "raw" | "unmarked"; where: a phrase; auto: chosen by ema='auto'."""
    weights: object
    which: str
    where: str
    auto: bool = False
    note: str = ""

    def describe(self):
        how = f"chosen by ema='auto'{': ' + self.note if self.note else ''}" if self.auto else "as asked"
        return f"{self.which} ({self.where}; {how})"


def check_ema(ema):
    """True, False or "auto" (strings 'true'/'false'/'auto' accepted); ConfigError otherwise."""
    text = str(ema).lower()
    if text in ("true", "1", "ema"):
        return True
    if text in ("false", "0", "raw"):
        return False
    if text == "auto":
        return "auto"
    raise ConfigError(f"ema must be True, False or 'auto', got {ema!r}")


def _split(sd, where):
    """[(role, where, weights)] of one state_dict: EMA / raw submodules when it holds an EMA prefix."""
    for prefix, what in EMA_PREFIXES.items():
        if any(k.startswith(prefix) for k in sd):
            ema = {k[len(prefix):]: v for k, v in sd.items() if k.startswith(prefix)}
            rest = {k: v for k, v in sd.items() if not k.startswith(prefix) and k not in BOOKKEEPING}
            raw_prefix = RAW_PREFIXES[prefix]
            if rest and all(k.startswith(raw_prefix) for k in rest):
                rest = {k[len(raw_prefix):]: v for k, v in rest.items()}
            found = [("EMA", f"{what} of {where}", ema)]
            if rest:
                found.append(("raw", f"the other weights of {where}", rest))
            return found
    return [("unmarked", where, sd)]


def _candidates(obj):
    """[(role, where, weights)] of a loaded object, and whether torch_ema shadow_params were seen."""
    if is_state_dict(obj):
        return _split(obj, "a bare state_dict"), False
    if isinstance(obj, nn.Module):
        return [("unmarked", f"a pickled {type(obj).__name__} module", obj)], False
    if not isinstance(obj, dict):
        raise CheckpointError(f"holds a {type(obj).__name__}, not a checkpoint dict or state_dict: a layout "
                              f"scoreprobe does not know; {OTHER_MODELS}")
    torch_ema = "shadow_params" in obj or any(isinstance(v, dict) and "shadow_params" in v for v in obj.values())
    found = []
    for k in EMA_KEYS:
        v = obj.get(k)
        if is_state_dict(v):   # an EMA wrapper's own state_dict (ema-pytorch) holds raw weights too
            found += [("EMA", w, sd) for role, w, sd in _split(v, f"{k!r} entry") if role != "raw"]
        elif isinstance(v, nn.Module):
            found.append(("EMA", f"{k!r} entry ({type(v).__name__} module)", v))
    for k in RAW_KEYS:
        v = obj.get(k)
        if is_state_dict(v):
            found += [(("raw" if role == "unmarked" else role), w, sd) for role, w, sd in _split(v, f"{k!r} entry")]
        elif isinstance(v, nn.Module):
            found.append(("raw", f"{k!r} entry ({type(v).__name__} module)", v))
    return found, torch_ema


def _torch_ema_error():
    return CheckpointError(
        "the file keeps its EMA as torch_ema 'shadow_params': an unnamed list in the order of the training "
        "code's model.parameters(), which scoreprobe cannot match to parameter names. In the training code, "
        "run ema.copy_to(model.parameters()) and save model.state_dict(); or pass ema=False for the raw weights")


def select_weights(obj, ema="auto"):
    """The Weights to build from a loaded checkpoint object (see the module docstring for the rules)."""
    ema = check_ema(ema)
    found, torch_ema = _candidates(obj)
    by_role = {}
    for role, where, w in found:
        by_role.setdefault(role, (where, w))
    roles = ", ".join(f"{r} ({w})" for r, (w, _) in by_role.items()) or "none"
    if ema is True or (ema == "auto" and torch_ema and "EMA" not in by_role):
        if "EMA" in by_role:
            return Weights(by_role["EMA"][1], "EMA", by_role["EMA"][0])
        if torch_ema:
            raise _torch_ema_error()
        raise CheckpointError(f"the file has no weights marked as EMA (found: {roles}); "
                              f"pass ema='auto'{'' if 'raw' not in by_role else ' or ema=False'} to use them")
    if ema is False:
        if "raw" in by_role:
            return Weights(by_role["raw"][1], "raw", by_role["raw"][0])
        hint = "ema=True or 'auto'" if "EMA" in by_role else "ema='auto'"
        raise CheckpointError(f"the file stores no weights marked as raw (non-EMA) (found: {roles}); "
                              f"use {hint}")
    for role, note in (("EMA", "the file has EMA weights"), ("raw", "the file has no EMA weights"),
                       ("unmarked", "the file's only weights; it does not say whether they are EMA")):
        if role in by_role:
            return Weights(by_role[role][1], role, by_role[role][0], auto=True, note=note)
    keys = sorted(map(str, obj))[:8] if isinstance(obj, dict) else []
    raise CheckpointError(f"holds no weights in a form scoreprobe knows; top-level keys: {keys}")


def check_tensors(sd, expected, path):
    """Check weights before they are loaded into a network; returns them as float32.

    CheckpointError when names or shapes differ from `expected` ({name: shape}, models.build.expected_shapes)
    or a tensor is not a dense float16 / bfloat16 / float32 / float64 tensor (int8, float8, complex, bool,
    sparse weights are refused);
    NonFiniteWarning with the count when values are NaN/inf (the model then runs, and its NaN outputs are
    counted where they land).
    """
    missing, extra = sorted(set(expected) - set(sd)), sorted(set(sd) - set(expected))
    wrong = [k for k in expected if k in sd and tuple(sd[k].shape) != tuple(expected[k])]
    if missing or extra or wrong:
        what = "; ".join(f"{label}: {', '.join(keys[:3])}{' ...' if len(keys) > 3 else ''}" for label, keys in
                         (("missing", missing), ("unexpected", extra), ("wrong shape", wrong)) if keys)
        raise CheckpointError(f"{path}: weights do not fit the architecture ({what}); "
                              + (f"e.g. {wrong[0]} is {tuple(sd[wrong[0]].shape)}, expected {expected[wrong[0]]}"
                                 if wrong else "the file's architecture and tensors disagree"))
    odd = [(k, v) for k, v in sd.items() if v.layout != torch.strided or v.dtype not in WEIGHT_DTYPES]
    if odd:
        raise CheckpointError(f"{path}: weight {odd[0][0]!r} has dtype {odd[0][1].dtype} ({odd[0][1].layout}); "
                              "weights must be dense float16, bfloat16, float32 or float64 tensors "
                              f"({len(odd)} are not)")
    n_bad = sum(int((~torch.isfinite(v)).sum()) for v in sd.values())
    warn_nonfinite(n_bad, sum(v.numel() for v in sd.values()), f"weight values of {path}",
                   "the model will produce NaN outputs, counted as `invalid` endpoints", stacklevel=4)
    return {k: v.float() for k, v in sd.items()}
