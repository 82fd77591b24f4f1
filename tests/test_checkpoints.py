"""Checkpoint series and the format-sniffing loader: our run directories, facebookresearch/DiT files,
bare state_dicts, EDM-style pickles (trusted only), hostile and broken files, and `scoreprobe info`."""
import argparse
import json
import os
import pickle
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from scoreprobe.loading.series import (DEFAULT_SERIES, ENV_VAR, CheckpointSeries, load_checkpoint, load_series,
                                    series_from_files)
from scoreprobe.cli import cli
from scoreprobe.data.datasets import make_dataset
from scoreprobe.errors import CheckpointError, ConfigError, TrustWarning
from scoreprobe.models.dit import DiT
from scoreprobe.models.edm import EDMDenoiser
from scoreprobe.data.rules import Parity
from scoreprobe.training.train import TrainConfig, train_run
from test_dit import facebook_dit_state_dict


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------

class TinyEDMNet(torch.nn.Module):
    """Stands in for an EDM network pickle: net(x (B, C, H, W), sigma, class_labels=None) -> denoised."""

    def __init__(self, channels=1, resolution=4):
        super().__init__()
        self.img_channels, self.img_resolution, self.sigma_data = channels, resolution, 0.5
        self.scale = torch.nn.Parameter(torch.tensor(0.7))

    def forward(self, x, sigma, class_labels=None):
        return x * self.scale / (1 + sigma.reshape(-1, 1, 1, 1) ** 2)


class CreatesFile:
    """Unpickling this object would open (create) `path` for writing."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _our_dit(sd, C, H, W, p, hidden, depth, heads, learn_sigma, sigma_data, rows=1):
    net = DiT(input_size=(H, W), patch_size=p, in_channels=C, hidden_size=hidden, depth=depth, num_heads=heads,
              learn_sigma=learn_sigma, num_label_rows=rows)
    net.load_state_dict({k: v.float() for k, v in sd.items()}, strict=True)
    return EDMDenoiser(net, (C, H, W), sigma_data=sigma_data, time_scale=1.0).eval()


def _same(a, b, C=1, H=6, W=6, atol=1e-6):
    x = torch.randn(5, C * H * W, generator=torch.Generator().manual_seed(3))
    s = torch.tensor([0.01, 0.2, 1.0, 3.0, 40.0])
    with torch.no_grad():
        return torch.allclose(a(x, s), b(x, s), atol=atol)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("series") / "run"
    cfg = TrainConfig(rule={"name": "parity", "G": 2, "shape": [4, 4], "layout": "random", "seed": 1},
                      n_train=16, n_heldout=16, hidden_size=16, depth=1, num_heads=2, batch_size=16,
                      total_steps=12, n_checkpoints=5, save_model=True, save_dtype="float16", log_every=4)
    train_run(cfg, path, progress=False)
    return path


# ---------------------------------------------------------------------------------------------
# Our run directories
# ---------------------------------------------------------------------------------------------

def test_load_series_of_a_run_directory(run_dir):
    s = load_series(run_dir)
    meta = json.loads((run_dir / "run.json").read_text())
    files = sorted(int(f.stem.split("_")[1]) for f in (run_dir / "ckpt").glob("step_*.pt"))
    assert isinstance(s, CheckpointSeries) and s.steps == files == meta["checkpoint_steps"]
    assert len(s) == len(files) and s.kind == "dit" and s.config == meta["config"] and s.arch == meta["arch"]
    assert s.rule == Parity(2, shape=(4, 4), layout="random", seed=1)
    with np.load(run_dir / "dataset.npz") as z:
        assert np.array_equal(s.dataset.train, z["train"]) and np.array_equal(s.dataset.heldout, z["heldout"])
    assert "CheckpointSeries(" in repr(s) and "n_train=16" in repr(s)
    assert s.checkpoint_path(12) == run_dir / "ckpt" / "step_0000012.pt"
    with pytest.raises(CheckpointError, match=r"step 7 is not in this series.*nearby steps: \[.*\]"):
        s.denoiser(7)


def test_denoiser_weights_ema_and_raw(run_dir):
    s = load_series(run_dir)
    D0 = s.denoiser(0)
    assert not D0.training and not any(p.requires_grad for p in D0.parameters())
    x, sigma = torch.randn(4, 16), torch.tensor([0.1, 0.5, 1.0, 2.0])
    with torch.no_grad():   # untrained adaLN-Zero network: D = c_skip x
        torch.testing.assert_close(D0(x, sigma), x / (1 + sigma[:, None] ** 2))
    ck = torch.load(s.checkpoint_path(12), weights_only=True)
    for ema, key in ((True, "ema"), (False, "model")):
        D = s.denoiser(12, ema=ema)
        for k, v in D.state_dict().items():
            assert v.dtype == torch.float32 and torch.equal(v, ck[key][k].float())
    assert not _same(s.denoiser(12), s.denoiser(12, ema=False), H=4, W=4)
    assert _same(s.denoiser(12), load_checkpoint(s.checkpoint_path(12)), H=4, W=4)


def test_ema_false_needs_raw_weights(run_dir, tmp_path):
    ck = torch.load(run_dir / "ckpt" / "step_0000012.pt", weights_only=True)
    del ck["model"]
    torch.save(ck, tmp_path / "ema_only.pt")
    assert load_checkpoint(tmp_path / "ema_only.pt") is not None
    with pytest.raises(CheckpointError, match="ema=True"):
        load_checkpoint(tmp_path / "ema_only.pt", ema=False)


def test_partial_and_broken_run_directories(run_dir, tmp_path):
    part = tmp_path / "partial"
    shutil.copytree(run_dir, part)
    (part / "ckpt" / "step_0000012.pt").unlink()
    (part / "ckpt" / "step_0000009.pt.tmp").write_bytes(b"half written")
    assert load_series(part).steps == load_series(run_dir).steps[:-1]
    for broken, fix in [("no_ckpt", lambda d: shutil.rmtree(d / "ckpt")),
                        ("no_data", lambda d: (d / "dataset.npz").unlink()),
                        ("bad_json", lambda d: (d / "run.json").write_text("{not json")),
                        ("no_run_json", lambda d: (d / "run.json").unlink())]:
        d = tmp_path / broken
        shutil.copytree(run_dir, d)
        fix(d)
        with pytest.raises(CheckpointError):
            load_series(d)
    torch.save({"format": "scoreprobe-ckpt/1", "step": 3, "model": {}, "ema": {}}, tmp_path / "resume.pt")
    with pytest.raises(CheckpointError, match="resume"):
        load_checkpoint(tmp_path / "resume.pt")
    with pytest.raises(CheckpointError, match="load_series"):
        load_checkpoint(run_dir)


def test_default_series_location(run_dir, tmp_path, monkeypatch):
    shutil.copytree(run_dir, tmp_path / DEFAULT_SERIES)
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    assert load_series().steps == load_series(run_dir).steps
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "elsewhere"))
    with pytest.raises(CheckpointError, match=ENV_VAR):
        load_series()


# ---------------------------------------------------------------------------------------------
# Foreign formats
# ---------------------------------------------------------------------------------------------

def test_facebook_training_dict_prefers_ema_and_reads_args(tmp_path):
    C, p, hidden, depth, grid = 1, 2, 24, 2, 3
    raw, ema = (facebook_dit_state_dict(C, p, hidden, depth, grid, learn_sigma=True, seed=s) for s in (1, 2))
    net = DiT(input_size=6, patch_size=p, in_channels=C, hidden_size=hidden, depth=depth, num_heads=6,
              learn_sigma=True)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    net(torch.randn(2, 1, 6, 6), torch.randn(2)).sum().backward()
    opt.step()
    args = argparse.Namespace(model="DiT-S/2", image_size=48, num_classes=1000, global_seed=0, vae="ema")
    torch.save({"model": raw, "ema": ema, "opt": opt.state_dict(), "args": args}, tmp_path / "0100000.pt")
    # upstream train.py args make it DDPM ε (issue #11); reading it as EDM must be asked for explicitly
    D = load_checkpoint(tmp_path / "0100000.pt", parameterization="edm", sigma_data=0.5)   # heads 6 from "DiT-S/2"
    assert _same(D, _our_dit(ema, C, 6, 6, p, hidden, depth, 6, True, 0.5))
    assert not _same(D, _our_dit(ema, C, 6, 6, p, hidden, depth, 4, True, 0.5))
    D_raw = load_checkpoint(tmp_path / "0100000.pt", ema=False, parameterization="edm", sigma_data=0.5,
                            num_heads=4)   # override wins
    assert _same(D_raw, _our_dit(raw, C, 6, 6, p, hidden, depth, 4, True, 0.5))
    with pytest.raises(ConfigError, match="sigma_data"):          # an EDM-only setting on a DDPM file
        load_checkpoint(tmp_path / "0100000.pt", sigma_data=0.5)
    with pytest.raises(CheckpointError, match="sigma_data"):
        load_checkpoint(tmp_path / "0100000.pt", parameterization="edm")
    assert load_checkpoint(tmp_path / "0100000.pt").parameterization == "ddpm_eps"
    torch.save({"ema": ema, "args": argparse.Namespace(model="MyDiT")}, tmp_path / "custom.pt")
    with pytest.raises(CheckpointError, match="num_heads"):
        load_checkpoint(tmp_path / "custom.pt", sigma_data=1.0)


@pytest.mark.parametrize("prefix", ["", "model.", "module.", "_orig_mod.", "module._orig_mod."])
def test_bare_state_dicts_with_prefixes(tmp_path, prefix):
    sd = facebook_dit_state_dict(2, 2, 16, 1, 3, learn_sigma=False, label_rows=1001)
    torch.save({prefix + k: v for k, v in sd.items()}, tmp_path / "sd.pt")
    D = load_checkpoint(tmp_path / "sd.pt", num_heads=2, sigma_data=1.0, class_label=0)   # default: null row
    assert _same(D, _our_dit(sd, 2, 6, 6, 2, 16, 1, 2, False, 1.0, rows=1001), C=2)


def test_a_guessed_time_scale_is_named(tmp_path):
    """A bare state_dict read as EDM: time_scale 1.0 is a guess (our trainer uses 250), so it warns."""
    import warnings
    from scoreprobe.errors import ScoreprobeWarning
    torch.save(facebook_dit_state_dict(1, 2, 16, 1, 1, learn_sigma=False), tmp_path / "sd.pt")
    with pytest.warns(ScoreprobeWarning, match="time_scale is not stated; taking 1.0"):
        D = load_checkpoint(tmp_path / "sd.pt", num_heads=2, sigma_data=1.0)
    assert D.time_scale == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScoreprobeWarning)      # stated: no guess, no warning
        assert load_checkpoint(tmp_path / "sd.pt", num_heads=2, sigma_data=1.0, time_scale=250).time_scale == 250


def test_half_precision_and_non_square_images(tmp_path):
    sd = facebook_dit_state_dict(1, 2, 16, 1, 1, learn_sigma=True)
    sd["pos_embed"] = torch.randn(1, 6, 16)                                # a 2 x 3 token grid
    torch.save({k: v.half() for k, v in sd.items()}, tmp_path / "half.pt")
    with pytest.raises(CheckpointError, match="image_shape"):
        load_checkpoint(tmp_path / "half.pt", num_heads=2, sigma_data=0.5)
    with pytest.raises(CheckpointError, match="does not fit"):
        load_checkpoint(tmp_path / "half.pt", num_heads=2, sigma_data=0.5, image_shape=(1, 6, 6))
    D = load_checkpoint(tmp_path / "half.pt", num_heads=2, sigma_data=0.5, image_shape=(1, 4, 6))
    ours = _our_dit({k: v.half() for k, v in sd.items()}, 1, 4, 6, 2, 16, 1, 2, True, 0.5)
    assert next(D.parameters()).dtype == torch.float32 and _same(D, ours, H=4, W=6)


def test_unknown_content_and_settings(tmp_path):
    torch.save({"a": torch.zeros(3)}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not a DiT state_dict"):
        load_checkpoint(tmp_path / "other.pt")
    torch.save([1, 2, 3], tmp_path / "list.pt")
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path / "list.pt")
    with pytest.raises(ConfigError, match="unknown checkpoint settings"):
        load_checkpoint(tmp_path / "other.pt", heads=2)


def test_edm_pickles_need_trust(tmp_path):
    net = TinyEDMNet()
    with open(tmp_path / "network-snapshot.pkl", "wb") as f:
        pickle.dump({"ema": net, "loss_fn": None, "augment_pipe": None}, f)
    torch.save(net, tmp_path / "module.pt")
    for name in ("network-snapshot.pkl", "module.pt"):
        with pytest.raises(CheckpointError, match="trust=True"):
            load_checkpoint(tmp_path / name)
        with pytest.warns(TrustWarning, match="trust=True: code stored in the file may run") as caught:
            D = load_checkpoint(tmp_path / name, trust=True)
        assert [w.filename for w in caught] == [__file__]   # attributed to the caller's line, not scoreprobe's
        x, s = torch.randn(3, 16), torch.tensor([0.5, 1.0, 2.0])
        torch.testing.assert_close(D(x, s), x * 0.7 / (1 + s[:, None] ** 2))


@pytest.mark.parametrize("writer", ["torch", "pickle"])
def test_hostile_pickle_creates_nothing(tmp_path, writer):
    marker = tmp_path / "pwned.txt"
    path = tmp_path / "evil.pt"
    obj = {"ema": CreatesFile(str(marker))}
    if writer == "torch":
        torch.save(obj, path)
    else:
        path.write_bytes(pickle.dumps(obj))
    with pytest.raises(CheckpointError, match="code execution"):
        load_checkpoint(path)
    assert not marker.exists()
    result = CliRunner().invoke(cli, ["info", str(path)])
    assert result.exit_code == 2 and not marker.exists()
    assert result.stderr.count("\n") == 1 and "--trust" in result.stderr and "Traceback" not in result.output


def test_broken_files(tmp_path, run_dir):
    good = (run_dir / "ckpt" / "step_0000012.pt").read_bytes()
    cases = {"empty.pt": b"", "truncated.pt": good[: len(good) // 2],
             "random.pt": np.random.default_rng(0).bytes(4096), "text.pt": b"hello world\n"}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(CheckpointError):
            load_checkpoint(tmp_path / name)
    (tmp_path / "folder").mkdir()
    for path in (tmp_path / "folder", tmp_path / "missing.pt"):
        with pytest.raises(CheckpointError):
            load_checkpoint(path)
    with pytest.raises(CheckpointError):
        load_series(tmp_path / "folder")


# ---------------------------------------------------------------------------------------------
# series_from_files
# ---------------------------------------------------------------------------------------------

def test_series_from_files(tmp_path):
    rule = Parity(2, shape=(6, 6))
    data = make_dataset(rule, 8, 8, seed=0)
    sds = [facebook_dit_state_dict(1, 2, 16, 1, 3, learn_sigma=True, seed=s) for s in range(3)]
    files = []
    for i, sd in enumerate(sds):
        files.append(tmp_path / f"ckpt{i}.pt")
        torch.save({"module." + k: v for k, v in sd.items()}, files[-1])
    s = series_from_files(files, [1000, 10, 100], data, num_heads=4, sigma_data=0.5)
    assert s.steps == [10, 100, 1000] and s.kind == "dit" and s.rule == rule and len(s) == 3
    assert _same(s.denoiser(10), _our_dit(sds[1], 1, 6, 6, 2, 16, 1, 4, True, 0.5))
    data.save(tmp_path / "data.npz")
    s2 = series_from_files(files[:1], [5], tmp_path / "data.npz", rule=rule.spec(), num_heads=4, sigma_data=0.5)
    assert np.array_equal(s2.dataset.train, data.train)
    with pytest.raises(ConfigError):
        series_from_files(files, [1, 2], data)
    with pytest.raises(ConfigError, match="shape"):
        series_from_files(files, [1, 2, 3], make_dataset(Parity(2, shape=(4, 4)), 4, 4))
    with pytest.raises(CheckpointError):
        series_from_files([*files[:2], tmp_path / "nope.pt"], [1, 2, 3], data)


# ---------------------------------------------------------------------------------------------
# scoreprobe info
# ---------------------------------------------------------------------------------------------

def test_info_without_a_path_describes_the_shipped_series():
    result = CliRunner().invoke(cli, ["info"])
    assert result.exit_code == 0, result.output
    s = load_series()
    assert str(s.path) in result.stdout and "120 train + 1024 held-out" in result.stdout
    assert f"{len(s.steps)} of {len(s.steps)} checkpoints" in result.stdout


def test_info_of_a_run_directory(run_dir):
    result = CliRunner().invoke(cli, ["info", str(run_dir)])
    assert result.exit_code == 0, result.output
    s = load_series(run_dir)
    n_params = sum(p.numel() for p in s.denoiser(0).parameters()) - s.denoiser(0).net.pos_embed.numel()
    out = result.stdout
    assert f"{n_params:,}" in out and "Parity(G=2" in out and "16 train + 16 held-out" in out
    assert ", ".join(map(str, s.steps)) in out and "finished" in out


def test_info_of_single_files(tmp_path):
    sd = facebook_dit_state_dict(1, 2, 16, 1, 3, learn_sigma=True)
    torch.save(sd, tmp_path / "bare.pt")
    result = CliRunner().invoke(cli, ["info", str(tmp_path / "bare.pt")])
    assert result.exit_code == 0, result.output
    n_params = sum(v.numel() for k, v in sd.items() if k != "pos_embed")
    assert f"{n_params:,}" in result.stdout and "num_heads" in result.stdout and "sigma_data" in result.stdout
    result = CliRunner().invoke(cli, ["info", str(tmp_path / "bare.pt"), "--set", "num_heads=4",
                                      "--set", "sigma_data=0.5"])
    assert result.exit_code == 0 and "missing" not in result.stdout
    with open(tmp_path / "edm.pkl", "wb") as f:
        pickle.dump({"ema": TinyEDMNet()}, f)
    assert CliRunner().invoke(cli, ["info", str(tmp_path / "edm.pkl")]).exit_code == 2
    result = CliRunner().invoke(cli, ["info", "--trust", str(tmp_path / "edm.pkl")])
    assert result.exit_code == 0 and "TinyEDMNet" in result.stdout


def test_info_subprocess_on_a_bad_file(tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(os.urandom(512))
    proc = subprocess.run([sys.executable, "-m", "scoreprobe", "info", str(bad)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error:") and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
