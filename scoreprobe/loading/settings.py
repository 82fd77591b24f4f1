"""Settings of a foreign checkpoint, where each came from, and the parameterization they imply.

    s = Settings({"num_heads": 6}, [("training args", vars(ckpt["args"])), ("args.json", side)])
    param, how = decide_parameterization(s)          # e.g. ("ddpm_eps", "training args are ...")
    schedule, how = resolve_schedule(param, s, how)  # VPSchedule or None (edm)
    row, how = resolve_label(1001, s)                 # label-table row and why

Sources are read in order: keyword overrides, then the file's own sources (safetensors metadata,
training args, a pickled module's attributes), then side files (args.json, config.json, a diffusers
scheduler_config.json). The rules are documented in docs/checkpoints.md; nothing ambiguous is
settled silently: a guess warns (ScoreprobeWarning), and what cannot be decided is reported missing.
"""
import argparse
import json
import math
import re
import warnings

from scoreprobe.errors import ConfigError, ScoreprobeWarning, user_stacklevel
from scoreprobe.limits import (MAX_BITS, MAX_HIDDEN, MAX_JSON_DEPTH, MAX_LABEL_ROWS, MAX_SIGMA, MAX_TIMESTEPS,
                               check_int, check_positive, json_depth)
from scoreprobe.models.param import EDM_ONLY, PARAMETERIZATIONS, VP_ONLY, check_parameterization
from scoreprobe.models.schedules import VPSchedule

SETTINGS = ("num_heads", "sigma_data", "image_shape", "time_scale", "parameterization", "schedule",
            "num_timesteps", "class_label", "num_classes")
EDM_FIELDS = ("sigma_data", "P_mean", "P_std")          # training args that only an EDM trainer has
FACEBOOK_DIT_ARGS = frozenset({"data_path", "results_dir", "model", "image_size", "num_classes", "epochs",
                               "global_batch_size", "global_seed", "vae", "num_workers", "log_every",
                               "ckpt_every"})                       # the options of facebookresearch/DiT train.py
_DIT_PRESET = re.compile(r"DiT-(XL|L|B|S)/(2|4|8)$")
_PREDICTION_TYPES = {"epsilon": "ddpm_eps", "v_prediction": "v", "sample": "x0"}     # diffusers schedulers
_BETA_SCHEDULES = {"linear": "linear", "squaredcos_cap_v2": "cosine"}
_SYNONYMS = {"num_train_timesteps": "num_timesteps", "num_embeds_ada_norm": "num_classes"}


def _parse(value):
    """safetensors metadata values are strings: JSON where they parse, else the string."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
        except RecursionError:
            raise ConfigError(f"a metadata value is nested deeper than {MAX_JSON_DEPTH} levels "
                              "(scoreprobe.limits.MAX_JSON_DEPTH)") from None
    return value


# ---------------------------------------------------------------------------------------------
# The one validation layer: every setting from any source (overrides, --set, safetensors metadata,
# training args, side files, diffusers configs) is checked here for type, range and finiteness
# ---------------------------------------------------------------------------------------------

_INTS = {"num_heads": (1, MAX_HIDDEN), "num_attention_heads": (1, MAX_HIDDEN), "num_classes": (0, MAX_LABEL_ROWS),
         "num_embeds_ada_norm": (1, MAX_LABEL_ROWS), "num_timesteps": (1, MAX_TIMESTEPS),
         "num_train_timesteps": (1, MAX_TIMESTEPS), "sample_size": (1, MAX_BITS)}
_POSITIVE = {"sigma_data": MAX_SIGMA, "time_scale": 1e6, "norm_eps": 1.0, "beta_start": 1.0, "beta_end": 1.0}
_WORDS = {"parameterization": PARAMETERIZATIONS, "schedule": tuple(_BETA_SCHEDULES.values()),
          "prediction_type": tuple(_PREDICTION_TYPES), "beta_schedule": None}


def _integer(value):
    """An int, or a float with an integral value (JSON writers emit 6.0); bools, 4.7, '6' and NaN refused."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value


def check_setting(name, value, where="override"):
    """The checked value of one setting stated by `where`; ConfigError naming both when it is malformed.

    None means "not stated" and passes; names scoreprobe does not read pass unchanged."""
    if value is None:
        return None
    try:
        if name in _INTS:
            return check_int(_integer(value), name, *_INTS[name])
        if name in _POSITIVE:
            return check_positive(value, name, _POSITIVE[name])
        if name in _WORDS:
            known = _WORDS[name]
            if not isinstance(value, str) or (known is not None and value not in known):
                raise ConfigError(f"{name} must be one of {', '.join(known)}, got {_short(value)}" if known else
                                  f"{name} must be a name, got {_short(value)}")
            return value
        if name == "image_shape":
            if not isinstance(value, (list, tuple)) or len(value) != 3:
                raise ConfigError(f"image_shape must be (C, H, W), got {_short(value)}")
            shape = [check_int(_integer(v), "image_shape entry", 1, MAX_BITS) for v in value]
            if math.prod(shape) > MAX_BITS:
                raise ConfigError(f"image_shape {shape} has more than {MAX_BITS} bits (scoreprobe.limits.MAX_BITS)")
            return shape
        if name == "class_label":
            return _check_class_label(value)
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}" if where != "override" else str(e)) from None
    return value


def check_source(d, where):
    """A source's dict with every setting it states checked (check_setting); its nesting depth bounded."""
    if json_depth(d) > MAX_JSON_DEPTH:
        raise ConfigError(f"{where} is nested deeper than {MAX_JSON_DEPTH} levels (scoreprobe.limits.MAX_JSON_DEPTH)")
    return {k: check_setting(k, v, where) for k, v in d.items()}


def _short(value):
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _normalize(raw):
    """A source's dict with synonyms (diffusers names) mapped onto scoreprobe's setting names."""
    out = {k: v for k, v in raw.items() if isinstance(k, str)}
    for old, new in _SYNONYMS.items():
        if old in out and new not in out:
            out[new] = out[old]
    if "prediction_type" in out and "parameterization" not in out:
        pred = out["prediction_type"]
        if pred not in _PREDICTION_TYPES:
            raise ConfigError(f"unsupported prediction_type {pred!r}; known: {sorted(_PREDICTION_TYPES)}")
        out["parameterization"] = _PREDICTION_TYPES[pred]
    if "beta_schedule" in out and "schedule" not in out:
        name = out["beta_schedule"]
        if name not in _BETA_SCHEDULES:
            raise ConfigError(f"unsupported beta_schedule {name!r}; scoreprobe knows {sorted(_BETA_SCHEDULES)}")
        out["schedule"] = _BETA_SCHEDULES[name]
    return out


class Settings:
    """Setting values with their origin: overrides first, then each (name, dict) source in order."""

    def __init__(self, overrides=None, sources=()):
        self.overrides = {k: check_setting(k, v) for k, v in (overrides or {}).items() if v is not None}
        self.raw = []        # [(name, original dict)] for the detection rules
        self.sources = []    # [(name, normalized dict)]
        for name, d in sources:
            self.add(name, d)

    def add(self, name, d, parse=False):
        """Append a source (a dict or argparse.Namespace); parse=True reads string values as JSON."""
        d = vars(d) if isinstance(d, argparse.Namespace) else dict(d or {})
        d = {k: _parse(v) for k, v in d.items()} if parse else d
        d = check_source(d, name)
        self.raw.append((name, d))
        self.sources.append((name, _normalize(d)))

    def lookup(self, name):
        """(value, origin) of the first source that states `name`, else (None, None)."""
        if self.overrides.get(name) is not None:
            return self.overrides[name], "override"
        for src, d in self.sources:
            if d.get(name) is not None:
                return d[name], src
        return None, None

    def get(self, name):
        return self.lookup(name)[0]

    def values(self):
        return {name: self.get(name) for name in SETTINGS}

    def origins(self):
        return {name: o for name in SETTINGS if (o := self.lookup(name)[1]) is not None}


def is_facebook_dit_args(d):
    """True when every key is an option of facebookresearch/DiT train.py and `model` is one of its presets."""
    return bool(d) and set(d) <= FACEBOOK_DIT_ARGS and bool(_DIT_PRESET.match(str(d.get("model", ""))))


def decide_parameterization(settings, own=False):
    """(parameterization or None, how it was decided / why it could not be)."""
    value, origin = settings.lookup("parameterization")
    if value is not None:
        return check_parameterization(value), f"stated by {origin}"
    if own:
        return "edm", "scoreprobe checkpoint (always EDM)"
    for name, d in settings.raw:
        edm = [k for k in EDM_FIELDS if k in d]
        if edm:
            return "edm", f"{name} carry EDM field(s) {', '.join(edm)}"
        if is_facebook_dit_args(d):
            return "ddpm_eps", (f"{name} are facebookresearch/DiT train.py options: DDPM ε-prediction, "
                                "linear β, T=1000")
        if set(d) == FACEBOOK_DIT_ARGS:      # all twelve options, a model of the user's own DiT_models entry
            return "ddpm_eps", _custom_preset(name, d["model"])
    given = [k for k in EDM_ONLY if k in settings.overrides]
    if given:
        return "edm", f"an EDM-only setting was passed ({', '.join(given)})"
    odd = [f"{n}: {_mismatch(d)}" for n, d in settings.raw if "model" in d]
    seen = f"; {'; '.join(odd)}, so they match no known trainer" if odd else ""
    return None, f"nothing in or next to the file states it{seen}"


def _custom_preset(name, model):
    """How (and the warning that) a facebookresearch/DiT run with a model outside its presets is read."""
    how = (f"{name} are exactly facebookresearch/DiT train.py's options, with model {str(model)[:40]!r}, not one "
           "of its DiT-XL|L|B|S/2|4|8 presets (guessed: a custom DiT_models entry); train.py fixes DDPM "
           "ε-prediction, linear β, T=1000")
    warnings.warn(f"{how}. Pass parameterization=... if the run changed the diffusion, and num_heads=... "
                  "(an unknown preset states no head count)", ScoreprobeWarning, stacklevel=user_stacklevel())
    return how


def _mismatch(d):
    """What keeps a training-args dict from being facebookresearch/DiT train.py's (for the error message)."""
    extra, missing = sorted(set(d) - FACEBOOK_DIT_ARGS), sorted(FACEBOOK_DIT_ARGS - set(d))
    model = str(d.get("model"))[:40]
    parts = [] if _DIT_PRESET.match(model) else [f"model {model!r} is not a DiT preset"]
    if extra:
        parts.append(f"options {', '.join(extra[:5])}{' ...' if len(extra) > 5 else ''} are not train.py's")
    if missing and not extra:
        parts.append(f"train.py options {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''} are missing")
    return " and ".join(parts)


def check_conflicts(param, settings, how=""):
    """ConfigError for overrides the parameterization would ignore (never ignored silently)."""
    bad = [k for k in (EDM_ONLY if param != "edm" else VP_ONLY) if k in settings.overrides]
    if bad:
        other = "'edm'" if param != "edm" else "'ddpm_eps', 'v' or 'x0'"
        raise ConfigError(f"{', '.join(bad)} only applies to parameterization {other}, and this checkpoint is "
                          f"{param!r} ({how}); drop {bad[0]}, or pass parameterization=... if you know better")


def resolve_schedule(param, settings, how=""):
    """(VPSchedule, how) for ddpm_eps / v / x0; (None, "") for edm. A schedule nobody states is guessed."""
    if param == "edm":
        return None, ""
    name, n_origin = settings.lookup("schedule")
    T, t_origin = settings.lookup("num_timesteps")
    T = int(T) if isinstance(T, float) and T.is_integer() else T
    schedule = VPSchedule(name or "linear", T if T is not None else 1000)
    for src, d in settings.sources:   # diffusers configs state their β; only the two known schedules load
        if schedule.name == "linear" and ("beta_start" in d or "beta_end" in d):
            want = (1e-4 * 1000 / schedule.num_timesteps, 0.02 * 1000 / schedule.num_timesteps)
            got = (float(d.get("beta_start", want[0])), float(d.get("beta_end", want[1])))
            if any(abs(g - w) > 1e-12 for g, w in zip(got, want)):
                raise ConfigError(f"{src} states a linear β schedule {got[0]:g}→{got[1]:g}; scoreprobe's linear "
                                  f"schedule is {want[0]:g}→{want[1]:g} at T={schedule.num_timesteps}")
    origins = sorted({o for o in (n_origin, t_origin) if o})
    if origins:
        return schedule, f"stated by {', '.join(origins)}"
    if "facebookresearch/DiT" in how:
        return schedule, "facebookresearch/DiT train.py default (create_diffusion)"
    warnings.warn(f"no schedule stated for this {param} checkpoint; assuming {schedule.describe()}. "
                  "Pass schedule=... (and num_timesteps=...) to state it", ScoreprobeWarning, stacklevel=3)
    return schedule, "assumed (nothing states it): the DDPM default"


def _check_class_label(label):
    if label is None or label == "null":
        return label
    if isinstance(label, bool) or not isinstance(label, int) and not (isinstance(label, str) and label.isdigit()):
        raise ConfigError(f"class_label must be an integer class or 'null', got {label!r}")
    return int(label)


def null_row(rows, num_classes):
    """(row of the classifier-free-guidance null label or None, guessed?) of a table with `rows` rows.

    A table with num_classes + 1 rows has the null row last (facebookresearch/DiT, diffusers). When
    num_classes is unknown, a table of more than one row is taken to have it (DiT's default
    class_dropout_prob = 0.1): a guess. num_classes = 0 (an unconditional DiT) has one row, the null row.
    """
    if num_classes is not None and int(num_classes) == 0 and rows == 1:
        return 0, False
    if rows == 1:
        return None, False
    if num_classes is None:
        return rows - 1, True
    num_classes = int(num_classes)
    if rows == num_classes + 1:
        return num_classes, False
    if rows == num_classes:
        return None, False
    raise ConfigError(f"num_classes={num_classes} does not fit a label table of {rows} rows "
                      "(expected num_classes or num_classes + 1 rows)")


def resolve_label(rows, settings):
    """(label-table row, how) from class_label (an int or "null"); default: the null row, else 0."""
    label, origin = settings.lookup("class_label")
    label = _check_class_label(label)
    null, guessed = null_row(rows, settings.get("num_classes"))
    n_classes = rows if null is None else null
    if label == "null" or (label is None and null is not None):
        if null is None:
            raise ConfigError(f"class_label='null' but the label table ({rows} row(s)) has no null row")
        how = "null (classifier-free-guidance) row" + (" by default" if label is None else f", {origin}")
        if guessed:
            warnings.warn(f"num_classes is not stated; taking the last of the {rows} label rows as the null row "
                          "(facebookresearch/DiT's layout). Pass num_classes=... or class_label=...",
                          ScoreprobeWarning, stacklevel=3)
            how += " (guessed: num_classes not stated)"
        return null, f"row {null}: {how}"
    if label is None:
        return 0, "row 0: " + ("the only row" if rows == 1 else "class 0 by default (no null row)")
    if not 0 <= label < n_classes:
        raise ConfigError(f"class_label={label} is out of range: the table has {n_classes} class row(s)"
                          + (f" and a null row ({null})" if null is not None else ""))
    return label, f"row {label}: class {label}, {origin}"


def resolve_onehot_label(label_dim, has_null, settings):
    """(None | int | "null", how) for an EDM network with `label_dim` one-hot classes.

    has_null: the network was trained with label dropout (NVlabs/edm: the all-zero label).
    Default: "null" when it exists, else class 0.
    """
    label = _check_class_label(settings.get("class_label"))
    if label_dim == 0:
        if label not in (None, 0):
            raise ConfigError(f"class_label={label!r}, but this network is unconditional (label_dim=0)")
        return None, "none (unconditional network)"
    if label == "null" or (label is None and has_null):
        if not has_null:
            raise ConfigError("class_label='null', but this network was trained without label dropout")
        return "null", "the all-zero label (trained with label dropout)" + (" by default" if label is None else "")
    label = 0 if label is None else label
    if not 0 <= label < label_dim:
        raise ConfigError(f"class_label={label} is out of range for label_dim={label_dim}")
    return label, f"one-hot class {label}" + (" by default (no label dropout)" if settings.get("class_label") is None else "")
