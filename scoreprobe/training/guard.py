"""What keeps a run directory whole while it is trained (docs/definitions.md, "Extending a run").

- `read_meta`: run.json read and checked before any work (a truncated or hand-edited file is one
  CheckpointError): `checkpoint_steps` must be the schedule the settings and `extended_from` give,
  `extended_from` the increasing totals the run reached.
- `run_digest` / `check_state`: a training state (resume.pt, final_state.pt) is bound to its run by
  the digest of run.json's settings (total_steps aside) and, where the step of the state has a
  checkpoint, by that checkpoint's EMA weights; a state copied from another run is refused.
- `save_checkpoint`: a checkpoint that exists is never rewritten with other tensors (a continuation
  that does not reproduce the run is refused with the file left as it was).
- `check_threads`: on CPU the weights are bitwise reproducible per thread count only; a resume or an
  extension with another thread count than run.json's `torch_threads` is refused.
- `RunLock`: one trainer per run directory (a `fcntl.flock` on RUN_DIR/.scoreprobe-train-lock,
  dropped by the kernel when its holder dies, as stores are locked: `scoreprobe.store.lock`).
"""
import hashlib
import json
import warnings
import zipfile
from pathlib import Path

from scoreprobe.errors import CheckpointError, ConfigError, first_line
from scoreprobe.limits import MAX_STEP, check_int
from scoreprobe.store.lock import FileLock
from scoreprobe.training.config import (CKPT_FORMAT, FINAL_STATE, atomic_write_text, checkpoint_steps,  # noqa: F401
                                        ckpt_path, fsync_dir, stored_config)

LOCK_NAME = ".scoreprobe-train-lock"
# settings added after run digests were introduced: left out of the digest at their default, so a state
# written before them keeps its digest
DIGEST_LATER = {"extra_checkpoints": [], "transpose": False, "patch_shape": ""}


# ---------------------------------------------------------------------------------------------
# run.json
# ---------------------------------------------------------------------------------------------

def read_meta(run_dir):
    """The checked run.json of a run directory to train (CheckpointError, naming the file and the fix,
    for anything the trainer would misread)."""
    from scoreprobe.loading.series import _read_run_json   # size, depth, JSON, format, arch, steps' types
    run_dir = Path(run_dir)
    meta = _read_run_json(run_dir)
    path = run_dir / "run.json"
    total = check_int(meta["config"].get("total_steps"), f"{path}: config.total_steps", 1, MAX_STEP, CheckpointError)
    if not isinstance(meta.get("checkpoint_steps"), list) or not meta["checkpoint_steps"]:
        raise CheckpointError(f"{path}: checkpoint_steps must be the list of the run's checkpoint steps")
    reached = meta.get("extended_from", [])
    if not isinstance(reached, list):
        raise CheckpointError(f"{path}: extended_from must be a list of the totals the run reached, got "
                              f"{type(reached).__name__}")
    for s in reached:
        check_int(s, f"{path}: a step of extended_from", 1, MAX_STEP, CheckpointError)
    if any(b <= a for a, b in zip(reached, [*reached[1:], total])):
        raise CheckpointError(f"{path}: extended_from {reached} must increase and stay below total_steps {total}")
    expected = planned_steps(meta)
    if meta["checkpoint_steps"] != expected:
        raise CheckpointError(f"{path}: checkpoint_steps {_short(meta['checkpoint_steps'])} are not the schedule its "
                              f"settings give ({_short(expected)}; edited by hand?): the trainer would skip or add "
                              "checkpoints. Restore run.json's checkpoint_steps, or train a new run")
    return meta


def planned_steps(meta):
    """The checkpoint steps run.json's settings give: the first log-spaced schedule up to the first
    total, then each extension's continued grid (`scoreprobe.training.extend.extension_steps`)."""
    from scoreprobe.training.extend import extension_steps
    cfg = stored_config(meta["config"])
    totals = [*meta.get("extended_from", []), cfg["total_steps"]]
    steps = checkpoint_steps(totals[0], cfg["n_checkpoints"], cfg["first_checkpoint"])
    nonzero = [s for s in steps if s > 0]
    ratio = (nonzero[-1] / nonzero[0]) ** (1 / (len(nonzero) - 1)) if len(nonzero) > 1 else None
    for a, b in zip(totals[:-1], totals[1:]):
        steps = steps + extension_steps(a, b, ratio)
    extra = cfg.get("extra_checkpoints") or []     # below the first total: the grid's ratio ignores them
    return sorted(set(steps) | set(extra)) if extra else steps


def _short(steps):
    text = str(steps)
    return text if len(text) <= 80 else text[:77] + "...]"


def run_digest(config):
    """16 hex digits of SHA-256 over a run's settings (a TrainConfig dict; total_steps aside, which an
    extension raises): what binds a training state to its run."""
    cfg = {k: v for k, v in stored_config(config).items()
           if k != "total_steps" and not (k in DIGEST_LATER and v == DIGEST_LATER[k])}
    return hashlib.sha256(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()[:16]


def check_threads(meta, device, run_dir):
    """ConfigError when a CPU run of `meta` (trained with `torch_threads`) continues with another thread count."""
    import torch
    want, have = meta.get("torch_threads"), torch.get_num_threads()
    if want is None or not str(device).startswith("cpu") or want == have:
        return
    raise ConfigError(f"{run_dir} was trained with {want} CPU thread(s) (run.json torch_threads) and would continue "
                      f"with {have}: on CPU the weights are bitwise reproducible per thread count only, so the "
                      f"continued run would not be the run run.json describes; use --threads {want} "
                      f"(torch.set_num_threads({want}) in the API)")


# ---------------------------------------------------------------------------------------------
# Training states and checkpoints
# ---------------------------------------------------------------------------------------------

def cast_weights(sd, dtype):
    """A state_dict on the CPU with floating tensors in `dtype` (as checkpoints store them)."""
    return {k: (v.detach().cpu().to(dtype) if v.is_floating_point() else v.detach().cpu()) for k, v in sd.items()}


def same_tensors(a, b):
    """True when the dicts of tensors `a` and `b` hold the same names, dtypes, shapes and values."""
    import torch
    return (isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys()
            and all(torch.is_tensor(b[k]) and a[k].dtype == b[k].dtype and a[k].shape == b[k].shape
                    and torch.equal(a[k], b[k]) for k in a))


def check_state(sd, path, run_dir, meta, save_dtype):
    """CheckpointError unless the training state `sd` (read from `path`) continues the run of `meta`:
    its run digest (states written since issue 33) and, when its step has a checkpoint file, that
    checkpoint's EMA weights must be this run's."""
    import torch
    own = run_digest(meta["config"])
    if "run" in sd and sd["run"] != own:
        raise CheckpointError(f"{path} belongs to another run (settings digest {str(sd['run'])[:20]!r}, this run's "
                              f"{own}): a state copied from another run directory would continue that run under "
                              "this run's name")
    step = int(sd["step"])
    from scoreprobe.training.extend import finished
    reached = meta["config"]["total_steps"] if finished(meta, run_dir) else (meta.get("extended_from") or [None])[-1]
    if Path(path).name == FINAL_STATE and reached is not None and step != reached:
        raise CheckpointError(f"{path} holds step {step}, but the run's last total was {reached}")
    ck = ckpt_path(run_dir, step)
    if step not in meta["checkpoint_steps"] or not ck.is_file():
        return
    try:
        stored = torch.load(ck, map_location="cpu", weights_only=True)["ema"]
    except Exception as e:   # noqa: BLE001  a damaged checkpoint: named with its reason
        raise CheckpointError(f"{ck} is damaged ({first_line(e)}), so it cannot confirm that {Path(path).name} "
                              "belongs to this run; restore that checkpoint from a backup") from None
    if not same_tensors(cast_weights(sd["ema"], getattr(torch, save_dtype)), stored):
        raise CheckpointError(f"{path} does not continue this run: its EMA weights at step {step} differ from "
                              f"{ck.relative_to(run_dir)} (a state copied from another run, or another run's "
                              "checkpoint)")


def _damage_fix(path):
    """What to do about a damaged or foreign training state at `path` (resume.pt or final_state.pt)."""
    if Path(path).name == FINAL_STATE:
        return (f"; the run's checkpoints are unaffected and load as they are. To extend the run, restore "
                f"{FINAL_STATE} from a backup, or train the longer run into a new directory (moving {FINAL_STATE} "
                "away leaves this run final at its last total)")
    return ("; move it away to train this run again from step 0: the checkpoints already written are kept "
            "and compared, and training stops rather than overwrite one with other weights")


def read_state(path, device, total_steps, run=None):
    """The training state dict at `path` (resume.pt or final_state.pt: tensors and plain values only),
    checked; CheckpointError when it is unreadable, hostile, truncated or (`run`: the (run directory,
    run.json, save_dtype) it must continue, `check_state`) belongs to another run."""
    from scoreprobe.loading.foreign import is_state_dict
    from scoreprobe.loading.formats import check_zip_crc
    import torch
    fix = _damage_fix(path)
    try:
        if zipfile.is_zipfile(path):
            check_zip_crc(path)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*pickle protocol", category=UserWarning)
            sd = torch.load(path, map_location=device, weights_only=True)
    except Exception as e:  # noqa: BLE001  UnpicklingError (hostile), EOFError / RuntimeError (truncated), ...
        raise CheckpointError(f"{path} is not a readable training state ({first_line(e)}){fix}") from None
    if not isinstance(sd, dict) or sd.get("format") != CKPT_FORMAT or not all(map(is_state_dict, (
            sd.get("model"), sd.get("ema")))) or not isinstance(sd.get("opt"), dict):
        raise CheckpointError(f"{path} is not a {CKPT_FORMAT} training state{fix}")
    check_int(sd.get("step"), f"{path}: step", 0, total_steps, CheckpointError)
    if run is not None:
        try:
            check_state(sd, path, *run)
        except CheckpointError as e:
            raise CheckpointError(f"{e}{fix}") from None
    return sd


def load_state(st, path, device, total_steps, run=None):
    """Restore `st` (train._State) from the training state at `path` (`read_state`); CheckpointError
    also when its tensors do not fit the run."""
    from scoreprobe.loading.weights import check_tensors
    sd = read_state(path, device, total_steps, run)
    for key, net in (("model", st.model), ("ema", st.ema)):
        check_tensors(sd[key], {k: tuple(v.shape) for k, v in net.state_dict().items()}, f"{path} ({key})")
    try:
        st.load_state_dict(sd)
    except (RuntimeError, ValueError, TypeError, KeyError, IndexError, AttributeError) as e:
        raise CheckpointError(f"{path} does not fit this run ({first_line(e)}){_damage_fix(path)}") from None


def save_checkpoint(ck, path, save):
    """Write the checkpoint dict `ck` to `path` with `save(obj, path)` unless the file exists: then it
    must hold the same tensors (it is kept as it is), else CheckpointError and nothing is written."""
    import torch
    path = Path(path)
    if not path.exists():
        save(ck, path)
        return
    try:
        old = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:   # noqa: BLE001
        raise CheckpointError(f"{path} exists but is damaged ({first_line(e)}); training does not overwrite a "
                              "checkpoint: move it away, then run the same command again") from None
    same = isinstance(old, dict) and old.get("step") == ck["step"] and all(
        same_tensors(ck[k], old.get(k)) for k in ("ema", "model") if k in ck)
    if not same:
        raise CheckpointError(f"{path} exists with other weights than this training computes at step {ck['step']}: "
                              "the continuation does not reproduce the run (another thread count, device or torch "
                              "version?). Nothing was overwritten; the run's checkpoints load as they are. To train "
                              "longer, train a new run directory with the larger --total-steps")


# ---------------------------------------------------------------------------------------------
# One trainer per run directory
# ---------------------------------------------------------------------------------------------

class RunLock(FileLock):
    """Exclusive, non-blocking lock of a run directory for its trainer (`acquire` / `release`); the
    lock file exists only while a trainer holds it (`scoreprobe.store.lock.FileLock`, as stores are)."""

    def __init__(self, run_dir):
        super().__init__(Path(run_dir) / LOCK_NAME)

    def busy(self, who):
        return ConfigError(f"{self.path.parent} is being trained by {who}; one trainer per run directory: "
                           "wait for it to finish (or stop it), then run this again")

    def cannot_open(self, e):
        return ConfigError(f"cannot train in {self.path.parent}: {e.strerror or e}")


def remove_stale_temps(run_dir):
    """Remove the temporary files a kill left in a run directory (`*.tmp` beside run.json, the log, the
    states and the checkpoints): called by the trainer holding the lock, so no writer owns them."""
    run_dir = Path(run_dir)
    for p in [*run_dir.glob("*.tmp"), *run_dir.glob("ckpt/*.tmp")]:
        if p.is_file():
            p.unlink(missing_ok=True)


def state_file(run_dir, meta):
    """The training state a run continues from: resume.pt when it exists; final_state.pt of a finished
    run that an extension continues (a checkpoint after the last total it reached is missing, none
    before); else None (training starts at step 0)."""
    run_dir = Path(run_dir)
    if (run_dir / "resume.pt").exists():
        return run_dir / "resume.pt"
    missing = [s for s in meta["checkpoint_steps"] if not ckpt_path(run_dir, s).exists()]
    reached = (meta.get("extended_from") or [None])[-1]
    if (run_dir / FINAL_STATE).exists() and missing and reached is not None and min(missing) > reached:
        return run_dir / FINAL_STATE
    return None
