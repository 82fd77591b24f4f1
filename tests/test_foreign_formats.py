"""Foreign checkpoints as people have them (issue #11): parameterization auto-detection, class labels,
EMA locations, safetensors (with and without the package), trusted pickles, diffusers folders, `info`."""
import argparse
import builtins
import json
import pickle
import sys

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from scoreprobe.loading.series import describe_checkpoint, load_checkpoint
from scoreprobe.cli import cli
from scoreprobe.errors import CheckpointError, ConfigError, ScoreprobeWarning
from scoreprobe.models.dit import DiT
from scoreprobe.models.edm import EDMDenoiser
from scoreprobe.models.param import VPDenoiser
from scoreprobe.models.schedules import VPSchedule
from test_dit import facebook_dit_state_dict
from test_param import ref_alpha_bar, ref_x0

C, P, HIDDEN, DEPTH, GRID = 1, 2, 24, 2, 3
UPSTREAM_ARGS = dict(data_path="data", results_dir="results", model="DiT-S/2", image_size=256, num_classes=1,
                     epochs=1400, global_batch_size=256, global_seed=0, vae="ema", num_workers=4, log_every=100,
                     ckpt_every=50000)     # every option facebookresearch/DiT train.py defines


def _sd(seed=0, rows=2, learn_sigma=True):
    return facebook_dit_state_dict(C, P, HIDDEN, DEPTH, GRID, learn_sigma=learn_sigma, label_rows=rows, seed=seed)


def _net(sd, heads=6, rows=2, **kw):
    net = DiT(input_size=(6, 6), patch_size=P, in_channels=C, hidden_size=HIDDEN, depth=DEPTH, num_heads=heads,
              learn_sigma=True, num_label_rows=rows, **kw)
    net.load_state_dict(sd, strict=True)
    return net.eval()


def _grid():
    """Noise levels on the linear table (t = 0, 100, 500, 999), between entries, and the issue's σ."""
    table = VPSchedule().sigmas()
    sig = [*table[[0, 100, 500, 999]], np.sqrt(table[200] * table[201]), 0.65, 1.24]
    x = torch.randn(len(sig), 36, generator=torch.Generator().manual_seed(5)) * 1.5
    return x, [float(np.float32(s)) for s in sig]


def _max_diff_ddpm(D, net, label, kind="ddpm_eps", schedule="linear"):
    """max |D − reference| / max(1, σ): D = x − σ·ε amplifies float32 rounding of ε by σ (up to 157)."""
    x, sig = _grid()
    with torch.no_grad():
        got = D(x, torch.tensor(sig))
        want = ref_x0(net, x, sig, kind, ref_alpha_bar(schedule), label=label)
    return float(((got - want).abs().max(1).values / torch.tensor(sig).clamp(min=1)).max())


# ---------------------------------------------------------------------------------------------
# Auto-detection
# ---------------------------------------------------------------------------------------------

def test_upstream_train_py_dict_is_ddpm_eps_with_the_null_row(tmp_path):
    raw, ema = _sd(1), _sd(2)
    torch.save({"model": raw, "ema": ema, "opt": {}, "args": argparse.Namespace(**UPSTREAM_ARGS)}, tmp_path / "c.pt")
    D = load_checkpoint(tmp_path / "c.pt")                 # no sigma_data needed
    assert isinstance(D, VPDenoiser) and D.parameterization == "ddpm_eps" and D.schedule == VPSchedule("linear", 1000)
    assert D.label == 1 and "EMA" in repr(D) and "facebookresearch/DiT" in repr(D)
    assert _max_diff_ddpm(D, _net(ema), label=1) < 2e-5
    D0 = load_checkpoint(tmp_path / "c.pt", class_label=0, ema=False)
    assert D0.label == 0 and _max_diff_ddpm(D0, _net(raw), label=0) < 2e-5
    with pytest.raises(ConfigError, match="out of range"):
        load_checkpoint(tmp_path / "c.pt", class_label=1)
    d = describe_checkpoint(tmp_path / "c.pt")
    assert d["parameterization"] == "ddpm_eps" and "train.py" in d["parameterization_how"]
    assert d["sigma_data"] is None and d["label"] == 1 and "null" in d["label_how"]


def test_edm_style_args_and_overrides(tmp_path):
    sd = _sd()
    args = argparse.Namespace(model="DiT-S/2", sigma_data=0.5, num_classes=1)
    torch.save({"ema": sd, "args": args}, tmp_path / "edm.pt")
    D = load_checkpoint(tmp_path / "edm.pt")
    assert isinstance(D, EDMDenoiser) and D.sigma_data == 0.5 and D.label == 1
    with pytest.raises(ConfigError, match="schedule"):      # a VP-only setting on an EDM file is refused
        load_checkpoint(tmp_path / "edm.pt", schedule="cosine")
    V = load_checkpoint(tmp_path / "edm.pt", parameterization="v", schedule="cosine")   # the user says so
    assert V.parameterization == "v" and _max_diff_ddpm(V, _net(sd), 1, "v", "cosine") < 2e-5


def test_bare_state_dict_needs_a_parameterization(tmp_path):
    torch.save(_sd(), tmp_path / "sd.pt")
    with pytest.raises(CheckpointError, match="parameterization"):
        load_checkpoint(tmp_path / "sd.pt", num_heads=6, num_classes=1)
    assert load_checkpoint(tmp_path / "sd.pt", num_heads=6, num_classes=1, sigma_data=1.0).parameterization == "edm"
    with pytest.warns(ScoreprobeWarning, match="schedule"):      # a stated parameterization, a guessed schedule
        D = load_checkpoint(tmp_path / "sd.pt", num_heads=6, num_classes=1, parameterization="x0")
    assert _max_diff_ddpm(D, _net(_sd()), 1, "x0") < 2e-5
    with pytest.warns(ScoreprobeWarning, match="null row"):      # num_classes not stated: a guessed null row
        load_checkpoint(tmp_path / "sd.pt", num_heads=6, sigma_data=1.0)


def test_fork_args_are_ambiguous(tmp_path):
    args = argparse.Namespace(**UPSTREAM_ARGS, path_type="Linear", prediction="velocity")   # e.g. a SiT run
    torch.save({"model": _sd(), "ema": _sd(), "opt": {}, "args": args}, tmp_path / "sit.pt")
    with pytest.raises(CheckpointError, match="parameterization.*path_type"):
        load_checkpoint(tmp_path / "sit.pt")


def test_side_files_are_read(tmp_path):
    torch.save(_sd(), tmp_path / "sd.pt")
    (tmp_path / "args.json").write_text(json.dumps({"parameterization": "v", "schedule": "cosine", "num_heads": 6,
                                                    "num_classes": 1}))
    D = load_checkpoint(tmp_path / "sd.pt")
    assert D.parameterization == "v" and D.schedule.name == "cosine"
    (tmp_path / "args.json").unlink()
    (tmp_path / "config.json").write_text(json.dumps({"prediction_type": "epsilon", "beta_schedule": "linear",
                                                      "num_train_timesteps": 1000, "beta_start": 0.0001,
                                                      "beta_end": 0.02, "num_heads": 6, "num_classes": 1}))
    assert load_checkpoint(tmp_path / "sd.pt").parameterization == "ddpm_eps"
    (tmp_path / "config.json").write_text(json.dumps({"prediction_type": "epsilon", "beta_schedule": "scaled_linear"}))
    with pytest.raises(ConfigError, match="scaled_linear"):
        load_checkpoint(tmp_path / "sd.pt", num_heads=6)


# ---------------------------------------------------------------------------------------------
# EMA locations
# ---------------------------------------------------------------------------------------------

def _ema_files(raw, ema):
    pre = lambda p, sd: {p + k: v for k, v in sd.items()}            # noqa: E731
    counters = {"initted": torch.tensor(True), "step": torch.tensor(10)}
    return {
        "timm": {"state_dict": raw, "state_dict_ema": ema, "epoch": 3, "arch": "dit"},
        "lightning": {"state_dict": {**pre("model.", raw), **pre("ema.", ema)}, "epoch": 1, "global_step": 10,
                      "pytorch-lightning_version": "2.4.0", "hyper_parameters": {"sigma_data": 1.0}},
        "ema_pytorch": {**pre("online_model.", raw), **pre("ema_model.", ema), **counters},
        "ema_pytorch_nested": {"model": raw, "ema": {**pre("online_model.", raw), **pre("ema_model.", ema),
                                                     **counters}},
    }


@pytest.mark.parametrize("kind", ["timm", "lightning", "ema_pytorch", "ema_pytorch_nested"])
def test_ema_locations(tmp_path, kind):
    raw, ema = _sd(1), _sd(2)
    torch.save(_ema_files(raw, ema)[kind], tmp_path / "c.pt")
    kw = dict(num_heads=6, num_classes=1, sigma_data=1.0)
    for choice, weights in (("auto", ema), (True, ema), (False, raw)):
        D = load_checkpoint(tmp_path / "c.pt", ema=choice, **kw)
        assert torch.equal(D.net.blocks[0].attn.qkv.weight, weights["blocks.0.attn.qkv.weight"])
    assert "EMA" in repr(load_checkpoint(tmp_path / "c.pt", **kw))


def test_ema_errors(tmp_path):
    raw = _sd(1)
    kw = dict(num_heads=6, num_classes=1, sigma_data=1.0)
    torch.save({"model": raw}, tmp_path / "raw_only.pt")
    with pytest.raises(CheckpointError, match="no weights marked as EMA"):
        load_checkpoint(tmp_path / "raw_only.pt", ema=True, **kw)
    D = load_checkpoint(tmp_path / "raw_only.pt", **kw)
    assert "raw" in D.info["weights"] and "no EMA" in D.info["weights"]
    torch.save(raw, tmp_path / "bare.pt")
    for ema in (True, False):
        with pytest.raises(CheckpointError, match="ema='auto'"):
            load_checkpoint(tmp_path / "bare.pt", ema=ema, **kw)
    shadow = {"decay": 0.999, "num_updates": 5, "shadow_params": [v.clone() for v in raw.values()],
              "collected_params": None}
    torch.save({"model": raw, "ema": shadow}, tmp_path / "torch_ema.pt")
    for ema in ("auto", True):
        with pytest.raises(CheckpointError, match="shadow_params.*cannot match"):
            load_checkpoint(tmp_path / "torch_ema.pt", ema=ema, **kw)
    assert load_checkpoint(tmp_path / "torch_ema.pt", ema=False, **kw) is not None
    with pytest.raises(ConfigError, match="ema must be"):
        load_checkpoint(tmp_path / "bare.pt", ema="yes", **kw)


# ---------------------------------------------------------------------------------------------
# safetensors
# ---------------------------------------------------------------------------------------------

def test_safetensors_with_metadata_sniffed_from_bytes(tmp_path):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    sd = _sd()
    meta = {"parameterization": "ddpm_eps", "schedule": "linear", "num_heads": "6", "num_classes": "1"}
    safetensors_torch.save_file(sd, str(tmp_path / "weights.pt"), metadata=meta)   # the extension lies
    D = load_checkpoint(tmp_path / "weights.pt")
    assert D.parameterization == "ddpm_eps" and _max_diff_ddpm(D, _net(sd), 1) < 2e-5
    d = describe_checkpoint(tmp_path / "weights.pt")
    assert "safetensors" in d["format"] and "safetensors metadata" in d["parameterization_how"]


def test_safetensors_without_the_package(tmp_path, monkeypatch):
    header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    (tmp_path / "m.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 4)
    real_import = builtins.__import__

    def no_safetensors(name, *args, **kwargs):
        if name == "safetensors" or name.startswith("safetensors."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)
    for mod in [m for m in sys.modules if m == "safetensors" or m.startswith("safetensors.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setattr(builtins, "__import__", no_safetensors)
    with pytest.raises(CheckpointError, match="pip install safetensors"):
        load_checkpoint(tmp_path / "m.safetensors")


# ---------------------------------------------------------------------------------------------
# Trusted pickles
# ---------------------------------------------------------------------------------------------

class LabelledEDMNet(torch.nn.Module):
    """Stands in for an NVlabs/edm EDMPrecond with label_dim classes."""

    def __init__(self, label_dim=3, dropout=0.1):
        super().__init__()
        self.img_channels, self.img_resolution, self.sigma_data, self.label_dim = 1, 4, 0.5, label_dim
        self.model = torch.nn.Module()
        self.model.label_dropout = dropout
        self.w = torch.nn.Parameter(torch.arange(1.0, label_dim + 1))

    def forward(self, x, sigma, class_labels=None):
        shift = 0 if class_labels is None else (class_labels * self.w).sum(1)
        return x + shift.reshape(-1, 1, 1, 1) if torch.is_tensor(shift) else x


def test_pickled_dit_module_takes_the_state_dict_path(tmp_path):
    net = _net(_sd(), heads=6)
    torch.save(net, tmp_path / "module.pt")
    with pytest.raises(CheckpointError, match="trust=True"):
        load_checkpoint(tmp_path / "module.pt")
    D = load_checkpoint(tmp_path / "module.pt", trust=True, parameterization="ddpm_eps", class_label="null",
                        num_classes=1, schedule="linear")
    assert isinstance(D, VPDenoiser) and D.net.num_heads == 6
    assert _max_diff_ddpm(D, net, label=1) < 2e-5
    assert "state_dict" in describe_checkpoint(tmp_path / "module.pt", trust=True, sigma_data=1.0,
                                             num_classes=1)["format"]


def test_edm_pickle_overrides_applied_or_refused(tmp_path):
    with open(tmp_path / "edm.pkl", "wb") as f:
        pickle.dump({"ema": LabelledEDMNet(), "loss_fn": None}, f)
    D = load_checkpoint(tmp_path / "edm.pkl", trust=True)
    x, s = torch.zeros(2, 16), torch.tensor([1.0, 2.0])
    assert D.sigma_data == 0.5 and D.label == "null" and torch.equal(D(x, s), x)   # all-zero label
    D2 = load_checkpoint(tmp_path / "edm.pkl", trust=True, class_label=2)
    assert torch.equal(D2(x, s), x + 3.0)                                          # one-hot class 2 -> w[2]
    for bad in ({"num_heads": 4}, {"sigma_data": 1.0}, {"parameterization": "ddpm_eps"}, {"image_shape": (1, 6, 6)}):
        with pytest.raises(ConfigError, match="cannot be applied"):
            load_checkpoint(tmp_path / "edm.pkl", trust=True, **bad)
    assert load_checkpoint(tmp_path / "edm.pkl", trust=True, sigma_data=0.5, image_shape=(1, 4, 4)) is not None


# ---------------------------------------------------------------------------------------------
# diffusers DiTTransformer2DModel folders
# ---------------------------------------------------------------------------------------------

def _to_diffusers(sd, depth):
    """The inverse name mapping, written out: scoreprobe/DiT layout -> DiTTransformer2DModel names."""
    out = {"pos_embed.proj.weight": sd["x_embedder.proj.weight"], "pos_embed.proj.bias": sd["x_embedder.proj.bias"],
           "proj_out_1.weight": sd["final_layer.adaLN_modulation.1.weight"],
           "proj_out_1.bias": sd["final_layer.adaLN_modulation.1.bias"],
           "proj_out_2.weight": sd["final_layer.linear.weight"], "proj_out_2.bias": sd["final_layer.linear.bias"]}
    for i in range(depth):
        b, e = f"transformer_blocks.{i}.", f"transformer_blocks.{i}.norm1.emb."
        for p in ("weight", "bias"):
            out[e + f"timestep_embedder.linear_1.{p}"] = sd[f"t_embedder.mlp.0.{p}"]
            out[e + f"timestep_embedder.linear_2.{p}"] = sd[f"t_embedder.mlp.2.{p}"]
            out[b + f"norm1.linear.{p}"] = sd[f"blocks.{i}.adaLN_modulation.1.{p}"]
            for c, chunk in zip("qkv", sd[f"blocks.{i}.attn.qkv.{p}"].chunk(3)):
                out[b + f"attn1.to_{c}.{p}"] = chunk
            out[b + f"attn1.to_out.0.{p}"] = sd[f"blocks.{i}.attn.proj.{p}"]
            out[b + f"ff.net.0.proj.{p}"] = sd[f"blocks.{i}.mlp.fc1.{p}"]
            out[b + f"ff.net.2.{p}"] = sd[f"blocks.{i}.mlp.fc2.{p}"]
        out[e + "class_embedder.embedding_table.weight"] = sd["y_embedder.embedding_table.weight"]
    return {k: v.clone().contiguous() for k, v in out.items()}


def test_diffusers_folder(tmp_path):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    sd = _sd(rows=2)
    root = tmp_path / "pipe"
    (root / "transformer").mkdir(parents=True)
    (root / "scheduler").mkdir()
    (root / "model_index.json").write_text(json.dumps({"_class_name": "DiTPipeline"}))
    config = {"_class_name": "DiTTransformer2DModel", "num_attention_heads": 6, "attention_head_dim": 4,
              "in_channels": 1, "out_channels": 2, "num_layers": DEPTH, "sample_size": 6, "patch_size": P,
              "num_embeds_ada_norm": 1, "norm_type": "ada_norm_zero", "activation_fn": "gelu-approximate"}
    (root / "transformer" / "config.json").write_text(json.dumps(config))
    (root / "scheduler" / "scheduler_config.json").write_text(json.dumps(
        {"_class_name": "DDIMScheduler", "beta_schedule": "linear", "beta_start": 0.0001, "beta_end": 0.02,
         "num_train_timesteps": 1000, "prediction_type": "epsilon"}))
    safetensors_torch.save_file(_to_diffusers(sd, DEPTH), str(root / "transformer" / "diffusion_pytorch_model.safetensors"))
    D = load_checkpoint(root)
    assert D.parameterization == "ddpm_eps" and D.label == 1
    ref = _net({**sd, "pos_embed": D.net.pos_embed}, heads=6, time_freq_shift=1, mlp_norm_eps=1e-5)
    assert _max_diff_ddpm(D, ref, label=1) < 2e-5
    bad = _to_diffusers(sd, DEPTH)
    bad["transformer_blocks.1.norm1.emb.timestep_embedder.linear_1.bias"] += 1
    safetensors_torch.save_file(bad, str(root / "transformer" / "diffusion_pytorch_model.safetensors"))
    with pytest.raises(CheckpointError, match="embedder differs"):
        load_checkpoint(root)


# ---------------------------------------------------------------------------------------------
# scoreprobe info
# ---------------------------------------------------------------------------------------------

def test_info_shows_every_decision(tmp_path):
    torch.save({"model": _sd(1), "ema": _sd(2), "opt": {}, "args": argparse.Namespace(**UPSTREAM_ARGS)},
               tmp_path / "c.pt")
    out = CliRunner().invoke(cli, ["info", str(tmp_path / "c.pt")])
    assert out.exit_code == 0, out.output
    for text in ("parameterization: ddpm_eps", "train.py", "schedule:", "linear", "T=1000", "sigma_data:",
                 "label:", "row 1: null", "weights:", "EMA", "overrides:        none"):
        assert text in out.stdout, text
    out = CliRunner().invoke(cli, ["info", str(tmp_path / "c.pt"), "--set", "parameterization=v", "--set",
                                   "schedule=cosine", "--set", "class_label=0", "--set", "ema=false"])
    assert out.exit_code == 0, out.output
    for text in ("parameterization: v (stated by override)", "cosine", "row 0: class 0", "raw",
                 "parameterization=v, schedule=cosine, class_label=0"):
        assert text in out.stdout, text
    out = CliRunner().invoke(cli, ["info", str(tmp_path / "c.pt"), "--set", "sigma_data=0.5"])
    assert out.exit_code == 2 and "sigma_data only applies" in out.stderr


def test_unconditional_upstream_dit_with_num_classes_0_loads_its_one_null_row(tmp_path):
    """facebookresearch/DiT train.py with num_classes=0 (an unconditional model): LabelEmbedder keeps one row,
    the classifier-free-guidance null row (0 classes + 1), and that row is the label every call uses."""
    raw, ema = _sd(1, rows=1), _sd(2, rows=1)
    args = argparse.Namespace(**{**UPSTREAM_ARGS, "num_classes": 0})
    torch.save({"model": raw, "ema": ema, "opt": {}, "args": args}, tmp_path / "uncond.pt")
    D = load_checkpoint(tmp_path / "uncond.pt")
    assert isinstance(D, VPDenoiser) and D.parameterization == "ddpm_eps"
    assert _max_diff_ddpm(D, _net(ema, rows=1), label=0) < 2e-5     # row 0 of the one-row table
    d = describe_checkpoint(tmp_path / "uncond.pt")
    assert d["label_how"].startswith("row 0: null") and "guessed" not in d["label_how"]
    with pytest.raises(ConfigError, match="out of range"):   # there is no class to choose
        load_checkpoint(tmp_path / "uncond.pt", class_label=0)


@pytest.mark.parametrize("name, text", [("measure.py", "import torch\nprint('hi')\n"),
                                        ("run.json", '{"config": {"G": 2}}'), ("notes.txt", "σ ≥ 0.5\n"),
                                        ("a.txt", "hello world\n"), ("b.txt", "(see above)\n"), ("c.txt", "K")])
def test_a_text_file_is_named_as_such_not_called_corrupt(tmp_path, name, text):
    """A script, a JSON file or notes handed over as a checkpoint: one message that says what the file is and
    what is read instead, not 'corrupt?' with pickle's opcode error — also where unpickling the text fails
    otherwise than with UnpicklingError ('hello' is a KeyError, '(' and 'K' an EOFError)."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CheckpointError, match="is a text file, not a checkpoint") as e:
        load_checkpoint(path)
    assert "corrupt" not in str(e.value)


def test_binary_garbage_is_still_called_unreadable(tmp_path):
    path = tmp_path / "noise.pt"
    path.write_bytes(bytes([0x43, 0x00, 0xff, 0x13]) * 64)
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_checkpoint(path)
