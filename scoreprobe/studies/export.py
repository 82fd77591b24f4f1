"""The compact per-run result of a study's run, <results>/<folder>/<run>.npz, and the minimal
clocks Dataset rebuilt from it: what every table and figure is computed from (no run directory needed).

One file holds: the run's TrainConfig (JSON) and its parameter count, the clocks' settings (JSON), the
checkpoint steps (S,), the per-sample endpoint state (S, n) int8 (codes of scoreprobe.data.STATES), the
per-sample constraint-family validity (S, n, F) packed along the sample axis when the rule has
families, for a curriculum run (TrainConfig.curriculum, ordered or mixed) which samples satisfy every
piece of the curriculum (S, n) packed (`piece_valid`: the rule clock beyond the pieces is read from it,
scoreprobe.data.curriculum.beyond_state), novel_oracle, and the training and clock seconds (training: of
the process that trained it, or
of an earlier export of the same run; NaN when it was trained elsewhere, e.g. by two_clocks.py). A few
tens of KB compressed.

Versions (`version`; a file without it is version 1): 2 adds the optional `bit_sum` (S, n) int16, each
sample's number of ones (-1 for a non-finite endpoint; `scoreprobe.probes.counts.bit_sums`), written when
the clocks kept the bits (`clocks(..., keep_bits=True)`): what the count error of an exact-K rule is read
from. The keys of version 1 are unchanged, so readers of version 1 read version 2
files (the `format` string stays); a version newer than VERSION is refused.
"""
import json
from pathlib import Path

import numpy as np
import xarray as xr

from scoreprobe.atomic import atomic_write
from scoreprobe.data.datasets import STATE_CODES
from scoreprobe.errors import DataError, first_line
from scoreprobe.limits import MAX_STEP
from scoreprobe.loading.npz import check_clocks, field, read_npz
from scoreprobe.probes.counts import bit_sums
from scoreprobe.store import normalize_config

FORMAT = "scoreprobe-scaling-run/1"
VERSION = 2


def clocks_config_text(ds):
    """The clocks settings of `ds` as JSON; a GPT series' sampler is what it really is: ancestral sampling of
    the tokens (the clocks store's config records the default PF-ODE settings, which a GPT does not use)."""
    config = json.loads(ds.attrs.get("scoreprobe_config", "{}"))
    if (config.get("source") or {}).get("kind") == "gpt":
        config.update(sampler={"name": "ancestral", "temperature": 1.0}, n_steps=None)
    return json.dumps(config, sort_keys=True)


def export_run(ds, cfg, params, path, train_s=None, clocks_s=None, meta=None, piece_valid=None):
    """Write the compact result of one run's clocks Dataset `ds` (atomically) to `path`; piece_valid: None,
    or (S, n) bool (a curriculum run's samples that satisfy every piece)."""
    arrays = {"format": FORMAT, "version": np.int64(VERSION),
              "config": json.dumps(normalize_config(cfg.to_dict()), sort_keys=True),
              "meta": json.dumps(normalize_config(meta or {}), sort_keys=True),
              "clocks_config": clocks_config_text(ds), "params": np.int64(params),
              "step": ds["step"].values.astype(np.int64), "state": ds["state"].values.astype(np.int8),
              "novel_oracle": np.float64(ds.attrs["novel_oracle"]),
              "train_s": np.float64(np.nan if train_s is None else train_s),
              "clocks_s": np.float64(np.nan if clocks_s is None else clocks_s)}
    if "family_valid" in ds:
        fv = ds["family_valid"].transpose("step", "sample", "family").values.astype(bool)   # (S, n, F)
        arrays.update(family_valid=np.packbits(fv, axis=1), family=np.array([str(f) for f in ds["family"].values]))
    if "bits" in ds:   # the clocks kept the bits: each sample's number of ones (S, n)
        arrays["bit_sum"] = bit_sums(ds["bits"].transpose("step", "sample", "bit").values, ds["state"].values)
    if piece_valid is not None:
        arrays["piece_valid"] = np.packbits(np.asarray(piece_valid, dtype=bool), axis=1)   # (S, ceil(n / 8))
    save_npz(path, arrays)


def set_meta(path, fields):
    """Add `fields` to the meta of the export at `path` (atomically; every other field kept byte for byte): what a
    run's training log says of it (`scoreprobe.studies.divergence.log_meta`), recorded after the export was made."""
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["meta"]))
    arrays["meta"] = json.dumps(normalize_config({**meta, **fields}), sort_keys=True)
    save_npz(path, arrays)


def save_npz(path, arrays):
    """np.savez_compressed of `arrays` at exactly `path` atomically (scoreprobe.atomic: a fresh temporary file,
    then os.replace): a kill or a full disk leaves the earlier file or none, never half of one, and no temporary."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: np.savez_compressed(f, **arrays))


def read_export(path):
    """{"config", "meta", "clocks_config" (dicts), "params", "train_s", "clocks_s", "version", "ds", "piece_valid"
    ((S, n) bool, or None)} of an export; ds holds `bit_sum` (step, sample) when the export has it (version 2).
    Every field is checked before it is trusted (scoreprobe.loading.npz): a DataError names the file and field."""
    z = read_npz(path)
    if str(field(path, z, "format", "text")) != FORMAT:
        raise DataError(f"{path}: not a {FORMAT} file")
    version = int(field(path, z, "version", "int", 0)) if "version" in z else 1
    if not 1 <= version <= VERSION:
        raise DataError(f"{path}: export version {version}; this code reads versions 1 to {VERSION}")
    step, state, oracle = check_clocks(path, z)
    S, n = state.shape
    info = {k: _json_field(path, z, k) for k in ("config", "meta", "clocks_config")}
    _check_meta(path, info["meta"])
    info.update(params=int(field(path, z, "params", "int", 0)), train_s=_num(field(path, z, "train_s", "real", 0)),
                clocks_s=_num(field(path, z, "clocks_s", "real", 0)), version=version)
    fv = None
    if "family_valid" in z:
        packed, names = _packed(path, z, "family_valid", S, n, 3), field(path, z, "family", None, 1)
        if packed.shape[2] != names.size:
            raise DataError(f"{path}: field 'family_valid' has {packed.shape[2]} families, 'family' names {names.size}")
        fv = (np.unpackbits(packed, axis=1, count=n).astype(np.uint8), [str(f) for f in names])
    bit_sum = None
    if "bit_sum" in z:
        bit_sum = field(path, z, "bit_sum", "int", 2)
        if bit_sum.shape != (S, n):
            raise DataError(f"{path}: field 'bit_sum' has shape {bit_sum.shape}, the states {(S, n)}")
    info["ds"] = clocks_dataset(step, state, oracle, fv, bit_sum)
    info["piece_valid"] = (np.unpackbits(_packed(path, z, "piece_valid", S, n, 2), axis=1, count=n).astype(bool)
                           if "piece_valid" in z else None)
    return info


def _packed(path, z, name, S, n, ndim):
    """A bit-packed (along samples) uint8 field of (S, ceil(n / 8), ...)."""
    a = field(path, z, name, None, ndim)
    if a.dtype != np.uint8 or a.shape[:2] != (S, -(-n // 8)):
        raise DataError(f"{path}: field {name!r} must be uint8 of shape ({S}, {-(-n // 8)}, ...), got {a.dtype} "
                        f"{a.shape}")
    return a


def _json_field(path, z, name):
    """A JSON object field (config, meta, clocks_config); DataError for anything else."""
    try:
        value = json.loads(str(field(path, z, name, "text")))
    except (ValueError, RecursionError) as e:
        raise DataError(f"{path}: field {name!r} is not JSON: {first_line(e)}") from None
    if not isinstance(value, dict):
        raise DataError(f"{path}: field {name!r} must be a JSON object, got {type(value).__name__}")
    return value


def _check_meta(path, meta):
    """DataError unless the meta fields tables read have their types: train_start an integer step or null (never
    started), loss_spikes a list of objects (`scoreprobe.studies.divergence.log_meta`)."""
    start = meta.get("train_start")
    if start is not None and (type(start) is not int or not 0 <= start <= MAX_STEP):
        raise DataError(f"{path}: meta train_start must be a training step (an integer in [0, {MAX_STEP}]) or null, "
                        f"got {str(start)[:40]!r}")
    spikes = meta.get("loss_spikes", [])
    if not isinstance(spikes, list) or not all(isinstance(x, dict) for x in spikes):
        raise DataError(f"{path}: meta loss_spikes must be a list of objects (one per recovered spike), got "
                        f"{str(spikes)[:40]!r}")


def _num(v):
    v = float(v)
    return None if np.isnan(v) else v


def clocks_dataset(step, state, novel_oracle, family=None, bit_sum=None):
    """The minimal clocks Dataset of taus / tau_draws / abruptness / family_taus: `state` (step, sample),
    rule_acc and mem_ratio (step,) counted from it, `family_valid` (step, sample, family) and `family_acc`
    (step, family) when given as (array (S, n, F), names), `bit_sum` (step, sample) when given; attrs
    novel_oracle, n_samples."""
    state = np.asarray(state, dtype=np.int8)                                   # (S, n)
    share = {name: (state == code).mean(axis=1) for name, code in STATE_CODES.items()}
    rule_acc = share["valid_novel"] + share["valid_heldout"] + share["valid_memorized"]
    ds = xr.Dataset({"state": (("step", "sample"), state), "rule_acc": ("step", rule_acc),
                     "mem_ratio": ("step", share["valid_memorized"]),
                     "novel_valid": ("step", share["valid_novel"] + share["valid_heldout"])},
                    coords={"step": np.asarray(step, dtype=np.int64)},
                    attrs={"novel_oracle": float(novel_oracle), "n_samples": int(state.shape[1])})
    if family is not None:
        valid, names = family
        ds["family_valid"] = (("step", "sample", "family"), valid)
        ds["family_acc"] = (("step", "family"), valid.mean(axis=1))
        ds = ds.assign_coords(family=np.array([str(f) for f in names]))
    if bit_sum is not None:
        ds["bit_sum"] = (("step", "sample"), np.asarray(bit_sum, dtype=np.int16))
    return ds


NO_EXPORT = "no export yet"   # why a planned run is missing when no file exists (not run, or still training)


def load_matching(items, folder, read, same):
    """{name: read(path)} of the planned `items` (each with a .name) whose export `folder`/{name}.npz exists
    and `same(item, info)`; {name: why} for the others (no export yet: not run or still training; or run with
    other settings)."""
    done, missing = {}, {}
    for item in items:
        path = Path(folder) / f"{item.name}.npz"
        info = read(path) if path.is_file() else None
        if info is None:
            missing[item.name] = NO_EXPORT
        elif not same(item, info):
            missing[item.name] = "its export is from other settings"
        else:
            done[item.name] = info
    return done, missing


def load_exports(runs, folder):
    """{run name: read_export(...)} for the planned `runs` whose export exists with the same TrainConfig (a
    setting added to TrainConfig after the export was written reads as its default, as in run.json);
    {run name: why} for the others (no export yet, or run with other settings)."""
    from scoreprobe.training.config import stored_config
    return load_matching(runs, folder, read_export, lambda run, info: normalize_config(
        stored_config(info["config"])) == normalize_config(run.cfg.to_dict()))
