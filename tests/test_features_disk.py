"""An SAE saved and loaded (SAELens's folder layout) and train_sae resumed from its checkpoint= file."""
import json
import pickle

import pytest
import torch

import scoreprobe as sp
from scoreprobe.errors import CheckpointError, ConfigError
from scoreprobe.features import train as train_mod

pytest.importorskip("safetensors")   # in the test extra; the skip only guards a bare install

KW = dict(steps=60, lr=0.01, seed=3, batch_size=64)


@pytest.fixture(scope="module")
def rows():
    return torch.as_tensor(sp.planted_dictionary(512, 8, 6, p=0.1, seed=1).x, dtype=torch.float32)


@pytest.mark.parametrize("arch,extra", [("topk", {"k": 2}), ("batchtopk", {"k": 2}), ("jumprelu", {}),
                                        ("standard", {})])
def test_a_saved_sae_loads_to_the_same_codes(tmp_path, rows, arch, extra):
    sae = sp.train_sae(rows, 12, arch=arch, **extra, **KW)
    folder = sp.save_sae(sae, tmp_path / "sae")
    assert sorted(p.name for p in folder.iterdir()) == ["cfg.json", "sae_weights.safetensors"]
    cfg = json.loads((folder / "cfg.json").read_text())
    assert (cfg["d_in"], cfg["d_sae"], cfg["architecture"]) == (8, 12, arch)
    back = sp.load_sae(folder)
    assert torch.equal(back.encode(rows), sae.encode(rows))
    assert torch.equal(back(rows), sae(rows))
    assert back.config["seed"] == 3 and back.config["arch"] == arch


def _interrupt_at(monkeypatch, n_calls):
    """_loss raises KeyboardInterrupt on its call n_calls + 1; returns the list counting its calls."""
    real, calls = train_mod._loss, []

    def loss(*a, **k):
        calls.append(1)
        if len(calls) > n_calls:
            raise KeyboardInterrupt
        return real(*a, **k)
    monkeypatch.setattr(train_mod, "_loss", loss)
    return calls


@pytest.mark.parametrize("arch,extra", [("topk", {"k": 2}), ("jumprelu", {})])
def test_an_interrupted_training_resumes_bit_for_bit(tmp_path, rows, monkeypatch, arch, extra):
    straight = sp.train_sae(rows, 12, arch=arch, **extra, **KW)
    ckpt = tmp_path / "sae.state"
    with monkeypatch.context() as m:
        _interrupt_at(m, 37)                       # dies in step 38; the state of step 30 is on disk
        with pytest.raises(KeyboardInterrupt):
            sp.train_sae(rows, 12, arch=arch, checkpoint=ckpt, save_every=10, **extra, **KW)
    assert torch.load(ckpt, weights_only=True)["step"] == 30
    with monkeypatch.context() as m:
        calls = _interrupt_at(m, 10**6)
        resumed = sp.train_sae(rows, 12, arch=arch, checkpoint=ckpt, save_every=10, **extra, **KW)
    assert len(calls) == 30                        # steps 31..60 only: resumed, not restarted
    for name, t in straight.state_dict().items():
        assert torch.equal(resumed.state_dict()[name], t), name
    with monkeypatch.context() as m:               # finished: the SAE comes back without a training step
        _interrupt_at(m, 0)
        again = sp.train_sae(rows, 12, arch=arch, checkpoint=ckpt, save_every=10, **extra, **KW)
    assert torch.equal(again.W_dec, straight.W_dec)


def test_a_state_of_other_rows_or_settings_is_refused(tmp_path, rows):
    ckpt = tmp_path / "sae.state"
    sp.train_sae(rows, 12, k=2, checkpoint=ckpt, **KW)
    with pytest.raises(ConfigError, match="other rows or settings"):
        sp.train_sae(rows[:-1], 12, k=2, checkpoint=ckpt, **KW)
    with pytest.raises(ConfigError, match="other rows or settings"):
        sp.train_sae(rows, 12, k=3, checkpoint=ckpt, **KW)
    with pytest.raises(ConfigError, match="other rows or settings"):
        sp.train_sae(rows, 12, k=2, checkpoint=ckpt, **dict(KW, seed=4))
    with pytest.raises(ConfigError, match="save_every"):
        sp.train_sae(rows, 12, k=2, checkpoint=ckpt, save_every=0, **KW)


class _Payload:
    def __reduce__(self):
        return (open, (str(_Payload.marker), "w"))


def test_a_truncated_or_malicious_state_is_refused_without_running_code(tmp_path, rows):
    ckpt = tmp_path / "sae.state"
    sp.train_sae(rows, 12, k=2, checkpoint=ckpt, **KW)
    ckpt.write_bytes(ckpt.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="not a readable SAE training state"):
        sp.train_sae(rows, 12, k=2, checkpoint=ckpt, **KW)
    _Payload.marker = tmp_path / "ran"
    ckpt.write_bytes(pickle.dumps({"version": 1, "x": _Payload()}))
    with pytest.raises(CheckpointError):
        sp.train_sae(rows, 12, k=2, checkpoint=ckpt, **KW)
    assert not _Payload.marker.exists()


def test_load_sae_names_what_is_missing_or_wrong(tmp_path, rows):
    with pytest.raises(CheckpointError, match="holds no SAE"):
        sp.load_sae(tmp_path)
    folder = sp.save_sae(sp.train_sae(rows, 12, k=2, **KW), tmp_path / "sae")
    cfg = json.loads((folder / "cfg.json").read_text())
    (folder / "cfg.json").write_text(json.dumps(dict(cfg, d_sae=13)))
    with pytest.raises(CheckpointError, match="shape"):
        sp.load_sae(folder)
    (folder / "cfg.json").write_text("{")
    with pytest.raises(CheckpointError, match="not an SAE config"):
        sp.load_sae(folder)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        sp.save_sae(sp.train_sae(rows, 12, k=2, **KW), tmp_path / "file")
