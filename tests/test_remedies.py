"""The paper's remedies as DiT switches (issue #15): a global register token broadcast to every token,
a multiplicative (GLU) MLP at the same parameter count; off is today's DiT exactly."""
import pytest
import torch

from scoreprobe.errors import ConfigError
from scoreprobe.models.build import check_arch
from scoreprobe.models.dit import DiT, GluMlp, dit_from_config, glu_hidden

ARCH = dict(hidden_size=80, depth=4, num_heads=4)


def _net(seed=0, **kw):
    torch.manual_seed(seed)
    return DiT(**ARCH, **kw)


def _count(net):
    return sum(p.numel() for p in net.parameters() if p.requires_grad)


def test_off_is_the_baseline_exactly():
    a, b = _net(), _net(mlp="gelu", global_token=False)
    assert a.state_dict().keys() == b.state_dict().keys()
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())


def test_glu_keeps_the_parameter_count_and_multiplies():
    base, glu = _count(_net()), _count(_net(mlp="glu"))
    assert abs(glu - base) / base < 0.01
    assert glu_hidden(80, 320) == 213
    m = GluMlp(4, 3)
    x = torch.randn(2, 5, 4)
    a, b = m.fc1(x).chunk(2, dim=-1)
    torch.testing.assert_close(m(x), m.fc2(torch.nn.functional.gelu(a, approximate="tanh") * b))


def test_the_global_token_is_seen_and_broadcast():
    net = _net(global_token=True)
    for blk in net.blocks:   # give the zero-initialised parts values
        for p in (*blk.broadcast.parameters(), *blk.adaLN_modulation.parameters()):
            torch.nn.init.normal_(p, std=0.1)
    torch.nn.init.normal_(net.final_layer.linear.weight, std=0.1)
    x, t = torch.randn(3, 1, 6, 6), torch.rand(3)
    with torch.no_grad():
        before = net(x, t)
        net.register.add_(1.0)                                   # only the register changes
        after = net(x, t)
    assert before.shape == (3, 1, 6, 6) and not torch.allclose(before, after)
    extra = _count(net) - _count(_net())
    assert extra == 4 * (80 * 80 + 80) + 80                      # broadcast maps + the register


def test_switches_travel_through_the_architecture_dict():
    arch = {"net": {**ARCH, "input_size": [6, 6], "patch_size": 2, "in_channels": 1, "mlp": "glu",
                    "global_token": True}, "image_shape": [1, 6, 6], "sigma_data": 1.0, "time_scale": 250.0}
    check_arch("dit", arch)
    net = dit_from_config(arch["net"])
    assert isinstance(net.blocks[0].mlp, GluMlp) and net.register is not None
    for bad, msg in (({"mlp": "relu"}, "mlp must be"), ({"global_token": "yes"}, "global_token must be")):
        with pytest.raises(ConfigError, match=msg):
            check_arch("dit", {**arch, "net": {**arch["net"], **bad}}, error=ConfigError)


# ---------------------------------------------------------------------------------------------
# The switches in TrainConfig: trained, saved, loaded back
# ---------------------------------------------------------------------------------------------

def _cfg(**kw):
    from scoreprobe.training.config import TrainConfig
    base = dict(rule={"name": "parity", "G": 2, "shape": [6, 6], "layout": "offset", "seed": 0}, n_train=16,
                n_heldout=16, hidden_size=32, depth=1, num_heads=2, batch_size=16, total_steps=12, n_checkpoints=3,
                log_every=4, resume_every=5)
    return TrainConfig(**{**base, **kw})


def test_switches_off_leave_the_architecture_as_it_was():
    from scoreprobe.models.build import model_arch
    from scoreprobe.data.rules import rule_from_spec
    cfg = _cfg()
    arch = model_arch(cfg, rule_from_spec(cfg.rule))
    assert "mlp" not in arch["net"] and "global_token" not in arch["net"]   # run.json as before the switches
    on = model_arch(_cfg(global_token=True, multiplicative=True), rule_from_spec(cfg.rule))
    assert on["net"]["mlp"] == "glu" and on["net"]["global_token"] is True


@pytest.mark.parametrize("switch", ["global_token", "multiplicative"])
def test_a_run_with_a_switch_trains_saves_and_loads(switch, tmp_path):
    from scoreprobe.loading.series import load_series
    from scoreprobe.training.train import train_run
    run = train_run(_cfg(**{switch: True}), tmp_path / "run", progress=False)
    base = train_run(_cfg(), tmp_path / "base", progress=False)
    s, b = load_series(run), load_series(base)
    net = s.denoiser(s.steps[-1]).net
    assert (net.register is not None) if switch == "global_token" else isinstance(net.blocks[0].mlp, GluMlp)
    x, sig = torch.randn(4, 36), torch.full((4,), 0.7)
    assert not torch.allclose(s.denoiser(s.steps[-1])(x, sig), b.denoiser(b.steps[-1])(x, sig))
    train_run(_cfg(**{switch: True}), run, progress=False)            # a finished run: nothing to do
    with pytest.raises(ConfigError, match=switch):                    # the other setting: refused
        train_run(_cfg(), run, progress=False)


def test_switches_are_dit_only():
    with pytest.raises(ConfigError, match="DiT switches"):
        _cfg(model="gpt", global_token=True).validate()


# ---------------------------------------------------------------------------------------------
# The curriculum over G
# ---------------------------------------------------------------------------------------------

def _g4(**kw):
    return _cfg(rule={"name": "parity", "G": 4, "shape": [6, 6], "layout": "offset", "seed": 0}, **kw)


@pytest.mark.parametrize("spec, message", [("2:4", "G_START:G_END:STEPS"), ("2:3:5", "G=3"), ("4:4:5", "smaller than G_END"),
                                           ("1:4:5", "> 1"), ("2:4:0", "STEPS=0"), ("2:4:12", "STEPS=12")])
def test_bad_curricula_are_refused(spec, message):
    with pytest.raises(ConfigError, match=message):
        _g4(curriculum=spec).validate()


def test_the_curriculum_trains_on_finer_groups_then_on_the_rule(tmp_path):
    import numpy as np

    from scoreprobe.loading.series import load_series
    from scoreprobe.data.rules import rule_from_spec
    from scoreprobe.training.train import open_run, train_run
    cfg = _g4(curriculum="2:4:5")
    run = open_run(cfg, tmp_path / "run", "cpu")
    first, final = run.bits_at(0), run.bits_at(5)
    fine, rule = rule_from_spec({**cfg.rule, "G": 2}), rule_from_spec(cfg.rule)
    assert first.shape == final.shape and run.bits_at(4) is first and final is run.train_bits
    assert fine.is_valid(first).all() and rule.is_valid(first).all()      # finer groups tile the rule's
    assert not fine.is_valid(final).all()                                 # the rule's own items are not all finer-valid
    data = np.load(run.dir / "dataset.npz")
    assert not {r.tobytes() for r in first} & {r.tobytes() for r in data["heldout"]}   # never a held-out image
    run.close()                                                           # the directory's lock (one trainer)
    train_run(cfg, tmp_path / "run", progress=False)                      # trains, resumable like any run
    base = train_run(_g4(), tmp_path / "base", progress=False)
    s, b = load_series(tmp_path / "run"), load_series(base)
    x, sig = torch.randn(4, 36), torch.full((4,), 0.7)
    assert not torch.equal(s.denoiser(s.steps[-1])(x, sig), b.denoiser(b.steps[-1])(x, sig))
    assert json_config(tmp_path / "run")["curriculum"] == "2:4:5"


def test_a_curriculum_piece_set_equals_brute_force_enumeration():
    import itertools

    import numpy as np

    from scoreprobe.data.curriculum import curriculum_bits, fine_groups
    from scoreprobe.data.rules import Parity
    rule = Parity(3, shape=(2, 3), layout="offset")                     # groups [1 2 3] [4 5 0]
    assert [c.tolist() for c in fine_groups(rule, 2)] == [[1, 2], [3], [4, 5], [0]]
    every = np.array(list(itertools.product([0, 1], repeat=6)), np.uint8)
    pieces = [[1, 2], [3], [4, 5], [0]]                                   # written out, not derived
    truth = {r.tobytes() for r in every if all(r[p].sum() % 2 == 0 for p in pieces)}
    got = curriculum_bits(rule, 2, 4, np.zeros((0, 6), np.uint8), seed=0)
    assert {r.tobytes() for r in got} == truth and len(truth) == 4 and rule.is_valid(got).all()
    held = got[:1]
    assert not {r.tobytes() for r in curriculum_bits(rule, 2, 3, held, seed=1)} & {held[0].tobytes()}
    with pytest.raises(ConfigError, match="3 images outside the held-out set, fewer than n_train=4"):
        curriculum_bits(rule, 2, 4, held, seed=0)


def test_a_curriculum_at_g3_cuts_each_group_into_a_pair_and_a_zero_pixel(tmp_path):
    from scoreprobe.data.curriculum import fine_groups
    from scoreprobe.data.rules import rule_from_spec
    from scoreprobe.training.train import open_run
    cfg = _cfg(rule={"name": "parity", "G": 3, "shape": [6, 6], "layout": "offset", "seed": 0}, curriculum="2:3:5")
    run = open_run(cfg, tmp_path / "run", "cpu")
    rule, first = rule_from_spec(cfg.rule), run.bits_at(0)
    singles = [int(c[0]) for c in fine_groups(rule, 2) if len(c) == 1]
    assert len(singles) == 12 and not first[:, singles].any()           # one zero pixel per group of 3
    assert rule.is_valid(first).all() and len({r.tobytes() for r in first}) == cfg.n_train
    assert run.train_bits[:, singles].any()                              # the rule's own items use them
    run.close()


def json_config(run_dir):
    import json
    return json.loads((run_dir / "run.json").read_text())["config"]


def test_beyond_pieces_tells_the_curriculum_set_from_the_rule():
    """A sampler of the curriculum's images scores rule accuracy 1, but 0 beyond the pieces (except
    copies); the rule oracle keeps its accuracy (few of its samples happen to satisfy the pieces)."""
    import numpy as np

    from scoreprobe.data.curriculum import beyond_pieces, curriculum_bits
    from scoreprobe.data.datasets import make_dataset
    from scoreprobe.oracles import EmpiricalDenoiser, RuleDenoiser
    from scoreprobe.stats.clocks import clocks
    from scoreprobe.stats.taus import tau_summary
    from scoreprobe.data.rules import Parity
    rule = Parity(3, shape=(3, 4), layout="offset")                  # 4 groups of 3: 256 valid, 16 on the pieces
    data = make_dataset(rule, 16, 16, seed=0)
    pieces = EmpiricalDenoiser(curriculum_bits(rule, 2, 16, np.zeros((0, 12), np.uint8), seed=0))
    ds = clocks({0: RuleDenoiser(rule), 1: pieces}, n_samples=400, seed=0, dataset=data, rule=rule, keep_bits=True,
                progress=False)
    out = beyond_pieces(ds, rule, 2)
    assert float(ds.rule_acc[1]) > 0.99 and float(out.piece_share[1]) > 0.99
    assert float(out.rule_acc[1]) == float(ds.mem_ratio[1]) < 0.5              # only copies remain valid
    assert float(out.piece_share[0]) < 0.2 and float(out.rule_acc[0]) > float(ds.rule_acc[0]) - 0.2
    assert tau_summary(out, n_boot=50, warn=False)["tau_rule_ci"] is not None
    with pytest.raises(ConfigError, match="keep_bits=True"):
        beyond_pieces(ds.drop_vars("bits"), rule, 2)
