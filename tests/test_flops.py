"""scoreprobe.models.flops: the training compute from the architecture formulas, checked against a brute-force
count of the built models by torch's FlopCounterMode (forward exactly; forward + backward ≈ 3 forwards)."""
import pytest

from scoreprobe.models.flops import TRAIN_FACTOR, counted_flops, forward_flops, n_tokens, step_flops
from scoreprobe.training.config import MATCHED_GPT, TrainConfig

PARITY = {"name": "parity", "G": 2, "shape": [6, 6], "layout": "offset", "seed": 0}
SUDOKU = {"name": "sudoku", "n": 4}
CONFIGS = {
    "grid DiT 80/4": dict(hidden_size=80, depth=4, num_heads=4),
    "DiT global token": dict(hidden_size=32, depth=2, num_heads=4, global_token=True),
    "DiT GLU": dict(hidden_size=32, depth=2, num_heads=4, multiplicative=True),
    "DiT patch 1": dict(hidden_size=16, depth=1, num_heads=2, patch_size=1),
    "matched GPT patch": dict(**MATCHED_GPT, token_order="patch"),
    "matched GPT random": dict(**MATCHED_GPT, token_order="random"),
    "tiny GPT": dict(model="gpt", hidden_size=16, depth=1, num_heads=4),
    "GPT on Sudoku cells": dict(model="gpt", hidden_size=16, depth=2, num_heads=4, rule=SUDOKU),
}


def _cfg(kw):
    return TrainConfig(**{"rule": PARITY, "batch_size": 96, **kw})


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_formula_equals_flop_counter_mode_on_one_forward(name):
    cfg = _cfg(CONFIGS[name])
    assert forward_flops(cfg) == counted_flops(cfg)


@pytest.mark.parametrize("name", ["grid DiT 80/4", "DiT global token", "matched GPT patch"])
def test_forward_and_backward_count_about_three_forwards(name):
    cfg = _cfg(CONFIGS[name])
    ratio = counted_flops(cfg, backward=True) / counted_flops(cfg)
    assert 2.9 < ratio <= 3.0 + 1e-9            # the first layer needs no input gradient: a little under 3
    assert step_flops(cfg) == TRAIN_FACTOR * cfg.batch_size * forward_flops(cfg)


def test_the_matched_gpt_reads_four_times_the_tokens_and_costs_about_six_dit_forwards():
    dit, gpt = _cfg(CONFIGS["grid DiT 80/4"]), _cfg(CONFIGS["matched GPT patch"])
    assert (n_tokens(dit), n_tokens(gpt)) == (9, 36)
    assert 5 < forward_flops(gpt) / forward_flops(dit) < 7   # 4× the tokens, 1.25× the width, T² attention
