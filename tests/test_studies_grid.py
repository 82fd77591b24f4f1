"""scoreprobe.studies.grid.Grid (issue 57 item 1): axes onto TrainConfig fields, names, order, sizes, budgets
that scale with N, and one ConfigError before any work for every bad axis or value."""
import pytest

from scoreprobe.errors import ConfigError
from scoreprobe.studies.grid import Grid, label, views
from scoreprobe.training.config import TrainConfig

BASE = TrainConfig(hidden_size=16, depth=1, num_heads=2, n_checkpoints=4, total_steps=40, n_heldout=32,
                   batch_size=16)


def test_axes_map_onto_trainconfig_and_names_follow_the_axes(tmp_path):
    g = Grid(BASE, {"N": [30, 60], "width": [16, 32], "seed": [0, 1, 2]}, name="mine", out=tmp_path)
    assert len(g) == 12 and g.sizes == {"N": 2, "width": 2, "seed": 3}
    names = [r.name for r in g]
    assert names[:4] == ["N30-width16-seed0", "N30-width16-seed1", "N30-width16-seed2", "N30-width32-seed0"]
    assert names[-1] == "N60-width32-seed2" and len(set(names)) == 12   # row-major, last axis fastest
    r = g.runs[5]
    assert (r.cfg.n_train, r.cfg.hidden_size, r.cfg.seed) == (30, 32, 2) and r.group == "N30-width32"
    assert r.cfg.depth == 1 and r.cfg.total_steps == 40            # the rest is the base's
    assert r.meta["axes"] == {"N": 30, "width": 32, "seed": 2} and r.meta["width"] == 32
    assert g.run_dir(r) == tmp_path / "runs" / r.name and g.exports == tmp_path / "exports"
    assert BASE.n_train == 256                                      # the base is not changed


def test_rule_g_lr_and_any_trainconfig_field():
    rules = [{"name": "parity", "G": 2, "shape": [6, 6], "layout": "contiguous", "seed": 0},
             {"name": "exactk", "k": 10, "shape": [6, 6]}]
    g = Grid(BASE, {"rule": rules, "lr": [1e-3, 2e-3], "p_mean": [-1.2]})
    assert [r.name for r in g][:2] == ["ruleparity2-lr0.001-p_mean-1.2", "ruleparity2-lr0.002-p_mean-1.2"]
    assert g.runs[2].cfg.rule == rules[1] and g.runs[1].cfg.lr == 2e-3
    assert Grid(BASE, {"G": [2, 3]}).runs[1].cfg.rule["G"] == 3
    assert g.coords()["rule"] == ["parity2", "exactk10"]
    assert label(0.5) == "0.5" and label("a/b") == "a_b"


def test_steps_scale_with_n():
    g = Grid(BASE, {"N": [8, 64]}, steps=views(60, min_steps=50))
    assert [r.cfg.total_steps for r in g] == [50, 240]            # max(50, ceil(60 N / 16))
    assert Grid(BASE, {"N": [8]}, name="x").out.as_posix() == "runs/x"


@pytest.mark.parametrize("axes,match", [
    ({"wdith": [16]}, "unknown grid axis 'wdith'"),
    ({"N": []}, "non-empty list of distinct values"),
    ({"N": [4, 4]}, "non-empty list of distinct values"),
    ({"N": 4}, "needs a list of values"),
    ({"N": [0]}, "cell N0: n_train=0 is out of range"),
    ({"lr": [-1.0]}, "cell lr-1.0: lr"),
    ({"rule": ["parity"]}, "takes rule spec dicts"),
    ({"rule": [{"name": "nosuchrule"}]}, "cell rulenosuchrule"),
    ({"model": ["gpt"], "token_order": ["spiral"]}, "token_order"),
])
def test_a_bad_axis_or_value_is_one_config_error(axes, match):
    with pytest.raises(ConfigError, match=match):
        Grid(BASE, axes)


def test_g_needs_a_rule_with_g_and_the_base_must_be_a_trainconfig():
    exactk = TrainConfig(rule={"name": "exactk", "k": 10, "shape": [6, 6]})
    with pytest.raises(ConfigError, match="has none"):
        Grid(exactk, {"G": [2]})
    with pytest.raises(ConfigError, match="needs a TrainConfig"):
        Grid({"n_train": 4}, {"N": [4]})
    with pytest.raises(ConfigError, match="non-empty dict"):
        Grid(BASE, {})
    with pytest.raises(ConfigError, match="grid name"):
        Grid(BASE, {"N": [4]}, name="a b")
