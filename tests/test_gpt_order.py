"""The GPT's token orders (models.order, TrainConfig.token_order) and param_count (models.build)."""
import itertools
import json

import numpy as np
import pytest
import torch

from scoreprobe.data.rules import LatinSquare, Parity, rule_from_spec
from scoreprobe.errors import CheckpointError, ConfigError
from scoreprobe.loading.series import load_checkpoint, load_series
from scoreprobe.models.build import build_model, model_arch, param_count
from scoreprobe.models.gpt import build_gpt, gpt_arch
from scoreprobe.models.order import TOKEN_ORDERS, check_pixel_order, group_locality, pixel_order
from scoreprobe.training.config import MATCHED_GPT, TrainConfig, ckpt_path
from scoreprobe.training.train import train_run

OFFSET = {"name": "parity", "G": 2, "shape": [6, 6], "layout": "offset", "seed": 0}   # the grid's rule


def test_patch_order_reads_the_dit_patches_in_raster_order():
    assert pixel_order("raster", (2, 3)).tolist() == [0, 1, 2, 3, 4, 5]
    # 4x4, p = 2: patch (0,0) = pixels 0 1 4 5, patch (0,1) = 2 3 6 7, then the lower row of patches
    assert pixel_order("patch", (4, 4), 2).tolist() == [0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15]
    assert pixel_order("patch", (6, 6), 2)[:8].tolist() == [0, 1, 6, 7, 2, 3, 8, 9]
    assert pixel_order("patch", (6, 6), 1).tolist() == list(range(36))   # 1x1 patches: raster
    rnd = pixel_order("random", (6, 6))
    assert sorted(rnd.tolist()) == list(range(36)) and rnd.tolist() != list(range(36))
    assert np.array_equal(rnd, pixel_order("random", (6, 6)))             # one fixed permutation
    with pytest.raises(ConfigError, match="divide"):
        pixel_order("patch", (6, 6), 4)
    with pytest.raises(ConfigError, match="token_order"):
        pixel_order("zigzag", (6, 6))
    with pytest.raises(ConfigError, match="permutation"):
        check_pixel_order([0, 0, 1], 3)


def _gpt(shape, order, tokens="bits", seed=0, p=2):
    torch.manual_seed(seed)
    perm = None if order == "raster" else pixel_order(order, shape[1:], p).tolist()
    arch = dict(image_shape=list(shape), tokens=tokens, n_layer=1, n_head=2, n_embd=16, token_order=order)
    return build_gpt(arch if perm is None else {**arch, "token_perm": perm})


@pytest.mark.parametrize("order", TOKEN_ORDERS)
def test_tokens_round_trip_and_read_the_permuted_pixels(order):
    m = _gpt((1, 4, 4), order)
    perm = pixel_order(order, (4, 4))
    bits = torch.from_numpy(np.random.default_rng(1).integers(0, 2, (50, 16)))   # (50, 16)
    tokens = m.bits_to_tokens(bits)
    assert torch.equal(tokens, bits[:, perm])                   # token t reads pixel perm[t]
    assert torch.equal(m.tokens_to_bits(tokens), bits.to(torch.uint8))
    cells = _gpt((4, 4, 4), order, tokens="cells")              # one-hot cells: the same order over cells
    square = torch.from_numpy(LatinSquare(4).sample(20, seed=0).astype(np.int64))   # (20, 64)
    assert torch.equal(cells.tokens_to_bits(cells.bits_to_tokens(square)), square.to(torch.uint8))
    assert torch.equal(cells.bits_to_tokens(square), square.view(20, 4, 16).argmax(dim=1)[:, perm])


def _same_weights(order, shape=(1, 4, 4)):
    raster, other = _gpt(shape, "raster"), _gpt(shape, order)
    other.load_state_dict(raster.state_dict())
    return raster, other


@pytest.mark.parametrize("order", ["patch", "random"])
def test_samples_and_likelihoods_are_in_image_order(order):
    """Same weights, same uniforms: an ordered GPT emits the raster GPT's token sequence, placed at perm."""
    raster, other = _same_weights(order)
    perm = pixel_order(order, (4, 4))
    a, b = raster.sample(64, seed=3), other.sample(64, seed=3)   # (64, 16) each, image order
    assert np.array_equal(b[:, perm], a)
    assert not np.array_equal(a, b)                             # the order changes where tokens land
    x = torch.from_numpy(np.random.default_rng(2).integers(0, 2, (32, 16)))
    assert torch.allclose(other.log_prob(x), raster.log_prob(x[:, perm]))
    everything = torch.tensor(list(itertools.product([0, 1], repeat=8)))   # (256, 8)
    small = _gpt((1, 2, 4), order)
    assert torch.exp(small.log_prob(everything)).sum().item() == pytest.approx(1.0, abs=1e-5)


def test_train_config_token_order():
    cfg = TrainConfig(rule=OFFSET, model="gpt", token_order="patch")
    arch = model_arch(cfg, rule_from_spec(OFFSET))
    json.dumps(arch)
    assert arch["token_order"] == "patch" and arch["token_perm"] == pixel_order("patch", (6, 6)).tolist()
    assert "token_perm" not in gpt_arch(TrainConfig(model="gpt"), Parity(2))   # raster: as before
    with pytest.raises(ConfigError, match="GPT setting"):
        TrainConfig(token_order="patch").validate()                 # a DiT
    with pytest.raises(ConfigError, match="token_order"):
        TrainConfig(model="gpt", token_order="zigzag").validate()
    with pytest.raises(ConfigError, match="divide"):
        gpt_arch(TrainConfig(model="gpt", token_order="patch", patch_size=4), Parity(2))
    with pytest.raises(ConfigError, match="permutation"):
        build_gpt({**arch, "token_perm": [0] * 36})
    with pytest.raises(ConfigError, match="token_perm unless raster"):
        build_gpt({**arch, "token_order": "raster"})


def test_saved_ordered_gpt_reloads_its_order(tmp_path):
    cfg = TrainConfig(rule=OFFSET, n_train=16, n_heldout=16, model="gpt", hidden_size=16, depth=1, num_heads=2,
                      token_order="patch", batch_size=8, total_steps=20, n_checkpoints=2, log_every=10)
    train_run(cfg, tmp_path / "run", progress=False)
    series = load_series(tmp_path / "run")
    assert series.config["token_order"] == "patch" and series.arch["token_order"] == "patch"
    gpt = series.sampler(20)
    assert gpt.config.token_order == "patch"
    # the same weights read in raster order: its samples, put at the patch order's pixels, are the reload's
    raster = build_gpt({k: v for k, v in series.arch.items() if k not in ("token_order", "token_perm")})
    raster.load_state_dict(gpt.state_dict())
    perm = pixel_order("patch", (6, 6))
    samples = gpt.sample(40, seed=0)
    assert np.array_equal(samples[:, perm], raster.sample(40, seed=0))
    assert np.array_equal(samples, load_series(tmp_path / "run").sampler(20).sample(40, seed=0))
    train_run(cfg, tmp_path / "run", progress=False)               # the same config: nothing to do
    with pytest.raises(ConfigError, match="token_order"):
        train_run(TrainConfig(**{**cfg.to_dict(), "token_order": "raster"}), tmp_path / "run", progress=False)


def test_checkpoint_without_token_order_reads_raster(tmp_path):
    cfg = TrainConfig(rule=OFFSET, n_train=16, n_heldout=16, model="gpt", hidden_size=16, depth=1, num_heads=2,
                      batch_size=8, total_steps=5, n_checkpoints=2)
    train_run(cfg, tmp_path / "run", progress=False)
    ckpt = torch.load(ckpt_path(tmp_path / "run", 5), weights_only=True)
    assert ckpt["arch"]["token_order"] == "raster"
    del ckpt["arch"]["token_order"]                                 # as written before the field existed
    torch.save(ckpt, tmp_path / "old.pt")
    old = load_checkpoint(tmp_path / "old.pt")
    assert old.config.token_order == "raster" and old.config.token_perm is None
    new = load_series(tmp_path / "run").sampler(5)
    assert np.array_equal(old.sample(30, seed=1), new.sample(30, seed=1))
    ckpt["arch"]["token_perm"] = [1, 0]
    torch.save(ckpt, tmp_path / "bad.pt")
    with pytest.raises(CheckpointError, match="token_order"):
        load_checkpoint(tmp_path / "bad.pt")


@pytest.mark.parametrize("kind", ["dit", "gpt"])
def test_param_count_counts_the_built_model(kind):
    cfg = TrainConfig(rule=OFFSET, model=kind, hidden_size=24, depth=2, num_heads=2)
    model = build_model(kind, model_arch(cfg, rule_from_spec(OFFSET)))
    assert param_count(cfg) == sum(p.numel() for p in model.parameters())
    if kind == "gpt":   # nanoGPT: per block 12e² + 13e; embeddings (V+1)e + Te, final norm 2e, head Ve
        e, L, V, T = 24, 2, 2, 36
        assert param_count(cfg) == L * (12 * e * e + 13 * e) + e * (2 * V + 1 + T + 2)


def test_matched_gpt_is_within_ten_percent_of_the_grid_dit():
    dit = param_count(TrainConfig(rule=OFFSET, hidden_size=80, depth=4, patch_size=2))
    gpt = param_count(TrainConfig(rule=OFFSET, **MATCHED_GPT))
    assert abs(gpt / dit - 1) < 0.10
    assert param_count(TrainConfig(rule=OFFSET, **MATCHED_GPT, token_order="patch")) == gpt


def test_offset_pairs_are_local_in_raster_order_and_straddle_dit_patches():
    groups = Parity(2, shape=(6, 6), layout="offset").groups                 # (18, 2)
    raster = group_locality(groups, (6, 6), pixel_order("raster", (6, 6)))
    patch = group_locality(groups, (6, 6), pixel_order("patch", (6, 6)))
    # brute force over the pairs: neighbours in the token sequence, and both pixels in one 2x2 patch
    tok = {o: np.argsort(pixel_order(o, (6, 6))) for o in ("raster", "patch")}
    for name, got in (("raster", raster), ("patch", patch)):
        d = [abs(int(tok[name][a]) - int(tok[name][b])) for a, b in groups]
        assert got["n_adjacent"] == sum(v == 1 for v in d) and got["mean_span"] == pytest.approx(np.mean(d))
    same_patch = sum((a // 6 // 2, a % 6 // 2) == (b // 6 // 2, b % 6 // 2) for a, b in groups)
    assert raster["n_in_patch"] == patch["n_in_patch"] == same_patch
    assert raster["n_groups"] == 18
