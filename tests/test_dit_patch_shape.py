"""Non-square DiT patches (patch_size (ph, pw), TrainConfig.patch_shape): the token layout, the square patch
unchanged, and transposition: a square-patch DiT processes a transposed grid exactly as the grid itself (with its
weights mapped), a 1×4 row-patch DiT cannot (its tokens are image rows)."""
import pytest
import torch

from scoreprobe.errors import CheckpointError, ConfigError
from scoreprobe.models.build import check_arch, model_arch, param_count
from scoreprobe.models.dit import DiT
from scoreprobe.training.config import TrainConfig
from scoreprobe.data.rules import rule_from_spec

SUDOKU = {"name": "sudoku", "n": 4}


def _randomize(net, seed=0, scale=0.3, only=""):
    """Random non-zero values in the trainable weights whose name starts with `only` (adaLN-Zero starts with zeros)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in net.named_parameters():
            if p.requires_grad and name.startswith(only):
                p.copy_(torch.randn(p.shape, generator=g) * scale)
    return net


@pytest.mark.parametrize("patch", [(1, 4), (2, 3), (4, 1)])
def test_unpatchify_inverts_the_documented_layout_of_a_rectangular_patch(patch):
    """Token (i, j) holds the ph×pw×C values of its patch in (row-in-patch, col-in-patch, channel) order."""
    (ph, pw), C, H, W = patch, 2, 4, 12
    net = DiT(input_size=(H, W), patch_size=patch, in_channels=C, hidden_size=16, depth=1, num_heads=2)
    assert net.grid == (H // ph, W // pw) and net.pos_embed.shape[1] == (H // ph) * (W // pw)
    img = torch.randn(2, C, H, W)
    tokens = torch.empty(2, (H // ph) * (W // pw), ph * pw * C)
    for i in range(H // ph):
        for j in range(W // pw):
            for a in range(ph):
                for b in range(pw):
                    for c in range(C):
                        tokens[:, i * (W // pw) + j, (a * pw + b) * C + c] = img[:, c, i * ph + a, j * pw + b]
    assert torch.equal(net.unpatchify(tokens), img)
    assert net(img, torch.zeros(2)).shape == img.shape


def test_a_square_pair_is_the_square_patch():
    """patch_size (2, 2) builds the very network patch_size 2 builds: same parameters, same outputs."""
    kw = dict(input_size=(4, 4), in_channels=4, hidden_size=32, depth=2, num_heads=4)
    a, b = _randomize(DiT(patch_size=2, **kw)), DiT(patch_size=(2, 2), **kw)
    assert {k: v.shape for k, v in a.state_dict().items()} == {k: v.shape for k, v in b.state_dict().items()}
    b.load_state_dict(a.state_dict(), strict=True)
    x, t = torch.randn(5, 4, 4, 4), torch.randn(5)
    assert torch.equal(a(x, t), b(x, t)) and a.patch_size == 2 and a.patch_shape == (2, 2)


def _transposed_weights(net):
    """The state_dict of the square-patch DiT that processes x^T as `net` processes x: patch kernels transposed,
    the two halves of the hidden channels swapped (the fixed position code holds the column in the first half
    and the row in the second), the output's (p, q) patch positions swapped."""
    D, p, C = net.pos_embed.shape[-1], net.patch_size, net.out_channels
    perm = torch.cat([torch.arange(D // 2, D), torch.arange(D // 2)])
    blocks = lambda k: torch.cat([perm + i * D for i in range(k)])   # noqa: E731
    swap = torch.arange(p * p * C).reshape(p, p, C).transpose(0, 1).reshape(-1)
    out = {}
    for name, w in net.state_dict().items():
        if name == "x_embedder.proj.weight":
            w = w[perm].transpose(-1, -2)
        elif name.endswith(("attn.qkv.weight", "attn.qkv.bias")):
            w = w[blocks(3)][:, perm] if w.dim() == 2 else w[blocks(3)]
        elif name.endswith(("attn.proj.weight", "mlp.fc2.weight", "mlp.fc2.bias", "attn.proj.bias",
                            "x_embedder.proj.bias")):
            w = w[perm][:, perm] if name.endswith("attn.proj.weight") else w[perm]
        elif name.endswith("mlp.fc1.weight"):
            w = w[:, perm]
        elif "adaLN_modulation" in name:
            w = w[blocks(w.shape[0] // D)]
        elif name.startswith("final_layer.linear"):
            w = w[swap][:, perm] if w.dim() == 2 else w[swap]
        out[name] = w
    return out


def test_square_patch_dit_processes_a_transposed_grid_as_the_grid():
    """For every weight set of the 2×2-patch DiT there is one (_transposed_weights, a relabelling of its parameters
    that leaves the initial distribution unchanged) with f'(x^T) = f(x)^T exactly: the architecture does not
    prefer rows to columns. Without the map it does not hold (the check can fail)."""
    net = _randomize(DiT(input_size=(4, 4), patch_size=2, in_channels=4, hidden_size=32, depth=2, num_heads=4))
    twin = DiT(input_size=(4, 4), patch_size=2, in_channels=4, hidden_size=32, depth=2, num_heads=4)
    twin.load_state_dict(_transposed_weights(net), strict=True)
    x, t = torch.randn(6, 4, 4, 4), torch.randn(6)
    with torch.no_grad():
        want = net(x, t).transpose(-1, -2)
        assert torch.allclose(twin(x.transpose(-1, -2), t), want, rtol=1e-4, atol=1e-4)
        assert not torch.allclose(net(x.transpose(-1, -2), t), want, atol=1e-2)


def _dependence(net):
    """(16, 16) bool: output cell (r, c) of a 4×4 grid depends on input cell (r', c') (any channel), from the
    Jacobian of the network at a random input."""
    x, t = torch.randn(1, 4, 4, 4), torch.zeros(1)
    J = torch.autograd.functional.jacobian(lambda v: net(v, t), x)[0]              # (C, H, W, 1, C, H, W)
    return (J.abs().sum(dim=(0, 3, 4)) > 0).reshape(16, 16)


def _partition(key):
    cells = [(r, c) for r in range(4) for c in range(4)]
    return torch.tensor([[key(*a) == key(*b) for b in cells] for a in cells])


def _transposed(dep):
    """The dependence of a network that processes x^T as `dep`'s processes x: cells relabelled (r, c) -> (c, r)."""
    idx = torch.arange(16).reshape(4, 4).T.reshape(-1)
    return dep[idx][:, idx]


def test_row_patch_dit_is_not_symmetric_under_transposition():
    """At initialization (adaLN-Zero: the blocks are the identity, so nothing mixes tokens) the output of a cell
    depends on the cells of its token only: for 1×4 patches its image row, for 2×2 patches its box. Boxes map to
    boxes under transposition, so the square DiT can treat x^T as x; rows map to columns, and a row-patch DiT
    mixes within image rows whatever its weights, so it treats x^T as a different grid."""
    rows, cols, boxes = _partition(lambda r, c: r), _partition(lambda r, c: c), _partition(lambda r, c: (r // 2, c // 2))
    kw = dict(input_size=(4, 4), in_channels=4, hidden_size=32, depth=2, num_heads=4)
    for seed in range(2):
        row_net = _randomize(DiT(patch_size=(1, 4), **kw), seed, only="final_layer")
        box_net = _randomize(DiT(patch_size=2, **kw), seed, only="final_layer")
        assert torch.equal(_dependence(row_net), rows) and torch.equal(_dependence(box_net), boxes)
    assert torch.equal(_transposed(rows), cols) and not torch.equal(rows, cols)
    assert torch.equal(_transposed(boxes), boxes)


def test_train_config_patch_shape():
    """patch_shape "1x4" gives the DiT of 1×4 patches with the square DiT's parameter count (same tokens on 4×4);
    malformed shapes, shapes that do not tile, and GPTs are refused."""
    rule = rule_from_spec(SUDOKU)
    row = TrainConfig(rule=SUDOKU, hidden_size=32, depth=2, num_heads=4, patch_shape="1x4")
    square = TrainConfig(rule=SUDOKU, hidden_size=32, depth=2, num_heads=4)
    row.validate()
    assert model_arch(row, rule)["net"]["patch_size"] == [1, 4] and model_arch(square, rule)["net"]["patch_size"] == 2
    assert param_count(row) == param_count(square)
    for bad in ("1x", "x4", "1by4", "0x4"):
        with pytest.raises(ConfigError):
            TrainConfig(rule=SUDOKU, patch_shape=bad).validate()
    with pytest.raises(ConfigError, match="DiT setting"):
        TrainConfig(rule=SUDOKU, patch_shape="1x4", model="gpt").validate()
    with pytest.raises(ConfigError, match="tile"):
        param_count(TrainConfig(rule=SUDOKU, patch_shape="3x4"))
    arch = model_arch(row, rule)
    for bad in ([1, 4, 1], [3, 4], [1, True], [0, 4], ["1", 4]):
        with pytest.raises(CheckpointError, match="patch"):
            check_arch("dit", {**arch, "net": {**arch["net"], "patch_size": bad}})
    assert check_arch("dit", arch) == check_arch("dit", model_arch(square, rule))   # the estimate: same count
