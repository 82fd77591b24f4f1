"""An SAE on disk, in SAELens's folder layout, and the state of an SAE's training for resuming.

    sp.save_sae(sae, "saes/resid2")          # saes/resid2/cfg.json + saes/resid2/sae_weights.safetensors
    sae = sp.load_sae("saes/resid2")

The folder is the layout SAELens (v6) reads and writes: `cfg.json` (d_in, d_sae, architecture, k, and
scoreprobe's own training settings under "scoreprobe") and `sae_weights.safetensors` holding W_enc (d_in, d_sae),
W_dec (d_sae, d_in), b_enc (d_sae,), b_dec (d_in,) and, for jumprelu / batchtopk, threshold. safetensors holds
tensors only: loading never executes code. Needs the `safetensors` extra (`pip install -e ".[safetensors]"`).
Checked against SAELens's names, not against SAELens itself (not a dependency).

Training state (train_sae's `checkpoint=`): one file written atomically every `save_every` steps: the SAE's
and Adam's tensors, the random generator's state, the batch order, the step, and a fingerprint of the rows and
the settings. It is read with torch.load(weights_only=True) (tensors and plain containers only)."""
import hashlib
import json
from pathlib import Path

import torch

from scoreprobe.atomic import atomic_path, atomic_write_text, check_out_path, check_path_text
from scoreprobe.errors import CheckpointError, ConfigError
from scoreprobe.features.sae import SAE
from scoreprobe.training.run_dir import atomic_save

WEIGHTS, CONFIG = "sae_weights.safetensors", "cfg.json"
STATE_VERSION = 1


def _safetensors():
    try:
        import safetensors.torch as st
    except ImportError:
        raise ConfigError("saving or loading an SAE needs safetensors: pip install -e \".[safetensors]\"") from None
    return st


def save_sae(sae, folder):
    """Write `sae` to `folder` (created) as cfg.json + sae_weights.safetensors, each atomically; returns the Path."""
    st = _safetensors()
    folder = check_path_text(folder, "folder")
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"folder {folder} is a file, not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {name: t.detach().contiguous().cpu() for name, t in sae.state_dict().items()}
    with atomic_path(folder / WEIGHTS) as tmp:
        st.save_file(tensors, str(tmp))
    cfg = {"d_in": sae.d_in, "d_sae": sae.d_sae, "architecture": sae.arch, "k": sae.k,
           "apply_b_dec_to_input": True, "dtype": "float32",
           "scoreprobe": json.loads(json.dumps(getattr(sae, "config", {}), default=str))}
    atomic_write_text(folder / CONFIG, json.dumps(cfg, indent=1, sort_keys=True) + "\n")
    return folder


def load_sae(folder):
    """The SAE saved in `folder` by save_sae (or written by SAELens with these names), in eval mode on the CPU."""
    st = _safetensors()
    folder = Path(folder)
    if not (folder / CONFIG).is_file() or not (folder / WEIGHTS).is_file():
        raise CheckpointError(f"{folder} holds no SAE (it needs {CONFIG} and {WEIGHTS})")
    try:
        cfg = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
        sae = SAE(int(cfg["d_in"]), int(cfg["d_sae"]), cfg["architecture"], cfg.get("k"))
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{folder / CONFIG} is not an SAE config: {type(e).__name__}: {e}") from None
    tensors = st.load_file(str(folder / WEIGHTS))
    missing = set(sae.state_dict()) - set(tensors)
    if missing:
        raise CheckpointError(f"{folder / WEIGHTS} lacks {', '.join(sorted(missing))}")
    for name, t in sae.state_dict().items():
        if tensors[name].shape != t.shape:
            raise CheckpointError(f"{folder / WEIGHTS}: {name} has shape {tuple(tensors[name].shape)}, "
                                  f"cfg.json implies {tuple(t.shape)}")
    sae.load_state_dict({name: tensors[name] for name in sae.state_dict()})
    sae.config = cfg.get("scoreprobe", {})
    return sae.eval()


def fingerprint(x, cfg, seed):
    """sha256 of the rows' float32 bytes (n, d_in), the settings and the seed: what a resumed run must match."""
    h = hashlib.sha256(x.detach().to(torch.float32).contiguous().numpy().tobytes())
    h.update(json.dumps({"cfg": cfg, "seed": int(seed), "shape": list(x.shape)}, sort_keys=True).encode())
    return h.hexdigest()


def write_state(path, state):
    """Replace the training state file `path` by `state` (a dict of tensors and plain values), atomically."""
    atomic_save(dict(state, version=STATE_VERSION), Path(path))      # a full disk stays an OSError naming it


def read_state(path, print_):
    """The training state in `path` if it exists (None otherwise); CheckpointError when it is unreadable,
    ConfigError when it was written for other rows or settings (`print_`: the expected fingerprint)."""
    path = check_out_path(path, "checkpoint")
    if not path.exists():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:   # noqa: BLE001  (a truncated or foreign file: one message naming it)
        raise CheckpointError(f"{path} is not a readable SAE training state: {type(e).__name__}") from None
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        raise CheckpointError(f"{path} is not an SAE training state of this version")
    if state.get("fingerprint") != print_:
        raise ConfigError(f"{path} is the training state of other rows or settings; "
                          "pass another checkpoint= path or delete it")
    return state
