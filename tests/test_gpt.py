"""GPT over bit / cell tokens: exact normalization by enumeration, causality, sampler statistics,
batch-independent seeding, architecture dicts, and a tiny training run that memorizes its data."""
import itertools
import json
import math

import numpy as np
import pytest
import scipy.stats
import torch

from scoreprobe.loading.series import load_series
from scoreprobe.errors import CheckpointError, ConfigError, DataError
from scoreprobe.models.gpt import GPT, GPT_SIZES, GPTConfig, build_gpt, gpt_arch
from scoreprobe.data.rules import LatinSquare, Parity
from scoreprobe.training.train import TrainConfig, train_run


def _model(shape=(1, 2, 3), tokens="bits", seed=0, sharpen=1.0):
    torch.manual_seed(seed)
    m = GPT(GPTConfig(image_shape=shape, tokens=tokens, n_layer=2, n_head=2, n_embd=16)).eval()
    with torch.no_grad():
        m.lm_head.weight.mul_(sharpen)   # a far-from-uniform distribution makes the checks sharper
    return m


def _all_bits(d):
    return torch.tensor(list(itertools.product([0, 1], repeat=d)), dtype=torch.uint8)   # (2^d, d)


def test_likelihood_is_normalized_over_all_images():
    m = _model(sharpen=30.0)
    with torch.no_grad():
        p = m.log_prob(_all_bits(6)).double().exp()                         # (64,)
    assert abs(p.sum().item() - 1.0) < 1e-5
    assert p.max() > 4 / 64                                                  # not the uniform distribution
    with torch.no_grad():
        loss = m.loss(_all_bits(6))
    assert torch.allclose(loss, -p.log().float() / 6, atol=1e-5)             # mean CE per token


def test_cell_tokens_are_normalized_over_all_one_hot_images():
    n = 2
    m = _model(shape=(n, n, n), tokens="cells", sharpen=30.0)
    grids = torch.tensor(list(itertools.product(range(n), repeat=n * n)))    # (16, 4) every token sequence
    bits = torch.zeros(len(grids), n ** 3, dtype=torch.uint8)
    for i, g in enumerate(grids):                                            # one-hot by the documented layout
        for cell, sym in enumerate(g.tolist()):
            bits[i, sym * n * n + cell] = 1
    with torch.no_grad():
        p = m.log_prob(bits).double().exp()
    assert abs(p.sum().item() - 1.0) < 1e-5


def test_cell_tokens_match_the_one_hot_layout():
    rule = LatinSquare(3)
    m = _model(shape=rule.image_shape, tokens="cells")
    bits = torch.from_numpy(rule.sample(20, seed=1))
    tokens = m.bits_to_tokens(bits)
    n = rule.n
    for i in range(len(bits)):
        for r in range(n):
            for c in range(n):
                syms = [s for s in range(n) if bits[i, s * n * n + r * n + c] == 1]
                assert syms == [tokens[i, r * n + c].item()]
    assert torch.equal(m.tokens_to_bits(tokens), bits)
    broken = bits.clone()
    broken[0, 0] = 1 - broken[0, 0]                                          # cell (0, 0) no longer one-hot
    with pytest.raises(DataError, match="one-hot"):
        m.bits_to_tokens(broken)
    with pytest.raises(DataError):
        _model().bits_to_tokens(torch.full((2, 6), 2))


def test_causal_prediction_ignores_later_tokens():
    m = _model(shape=(1, 3, 4))
    idx = torch.randint(0, 2, (4, 12))
    idx[:, 0] = m.bos
    changed = idx.clone()
    changed[:, 7:] = 1 - changed[:, 7:]
    with torch.no_grad():
        a, b = m(idx), m(changed)
    assert torch.allclose(a[:, :7], b[:, :7], atol=1e-6)
    assert not torch.allclose(a[:, 7:], b[:, 7:], atol=1e-4)


def _exact_probs(m, temperature):
    """Probability of each of the 2^D images under ancestral sampling at `temperature`, from the
    model's next-token logits (teacher forcing)."""
    bits = _all_bits(m.n_bits)
    idx = torch.cat([torch.full((len(bits), 1), m.bos), bits[:, :-1].long()], dim=1)
    with torch.no_grad():
        logp = torch.log_softmax(m(idx).double() / temperature, dim=-1)       # (2^D, D, 2)
    return logp.gather(2, bits.long()[:, :, None])[:, :, 0].sum(1).exp().numpy(), bits.numpy()


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_sample_frequencies_follow_the_model(temperature):
    m = _model(shape=(1, 1, 3), sharpen=20.0)
    probs, bits = _exact_probs(m, temperature)
    samples = m.sample(6000, seed=11, temperature=temperature)
    codes = samples @ (1 << np.arange(2, -1, -1))
    expected_codes = bits @ (1 << np.arange(2, -1, -1))
    counts = np.bincount(codes, minlength=8)[expected_codes]
    assert scipy.stats.chisquare(counts, probs * len(samples)).pvalue > 1e-4


def test_temperature_zero_is_greedy():
    m = _model(shape=(1, 2, 2), sharpen=10.0)
    s = m.sample(5, seed=0, temperature=0.0)
    assert (s == s[0]).all()
    tok = torch.tensor([[m.bos]])
    with torch.no_grad():
        for _ in range(4):
            tok = torch.cat([tok, m(tok)[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert np.array_equal(s[0], tok[0, 1:].numpy().astype(np.uint8))


def test_samples_do_not_depend_on_batch_or_chunk_size():
    m = _model(shape=(1, 3, 3))
    full = m.sample(40, seed=5)
    assert full.dtype == np.uint8 and full.shape == (40, 9) and set(np.unique(full)) <= {0, 1}
    assert np.array_equal(full, m.sample(40, seed=5, chunk_size=7))
    assert np.array_equal(full[:13], m.sample(13, seed=5))
    assert not np.array_equal(full, m.sample(40, seed=6))
    assert m.sample(0, seed=5).shape == (0, 9)
    with pytest.raises(ConfigError):
        m.sample(3, seed=0, temperature=-1.0)


def test_cell_samples_are_one_hot():
    m = _model(shape=(4, 4, 4), tokens="cells")
    s = m.sample(10, seed=0).reshape(10, 4, 16)
    assert (s.sum(axis=1) == 1).all()


def test_gpt_arch_from_train_config():
    cfg = TrainConfig(model="gpt", size="tiny")
    arch = gpt_arch(cfg, Parity(2, shape=(6, 6)))
    json.dumps(arch)
    m = build_gpt(arch)
    assert (m.vocab_size, m.n_tokens, m.n_bits) == (2, 36, 36)
    assert (m.config.n_embd, m.config.n_layer, m.config.n_head) == tuple(
        GPT_SIZES["tiny"][k] for k in ("n_embd", "n_layer", "n_head"))
    cfg = TrainConfig(model="gpt", size="tiny", hidden_size=24, depth=1, num_heads=3)
    m = build_gpt(gpt_arch(cfg, LatinSquare(4)))
    assert (m.vocab_size, m.n_tokens, m.n_bits) == (4, 16, 64)
    assert (m.config.n_embd, m.config.n_layer, m.config.n_head) == (24, 1, 3)
    with pytest.raises(ConfigError, match="size"):
        gpt_arch(TrainConfig(model="gpt", size="huge"), Parity(2))
    with pytest.raises(ConfigError, match="unknown GPT settings"):
        build_gpt({**arch, "dropout": 0.1})


def test_train_run_gpt_memorizes_a_tiny_set(tmp_path):
    rule = {"name": "parity", "G": 2, "shape": [2, 4], "layout": "contiguous", "seed": 0}   # 16 valid images
    cfg = TrainConfig(rule=rule, n_train=8, n_heldout=8, model="gpt", size="tiny", hidden_size=32, depth=2,
                      num_heads=2, lr=3e-3, batch_size=32, total_steps=150, n_checkpoints=4, log_every=10)
    train_run(cfg, tmp_path / "run", progress=False)
    losses = [json.loads(line)["loss"] for line in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    assert losses[0] > 0.45                          # close to uniform: ln 2 = 0.69 nats per bit
    assert losses[-1] < math.log(8) / 8 + 0.1        # near the memorizer's optimum ln(N)/D = 0.26
    series = load_series(tmp_path / "run")
    assert series.kind == "gpt" and series.steps[0] == 0 and series.steps[-1] == 150
    idx = series.dataset.train_index
    first = series.sampler(series.steps[0]).sample(300, seed=0)
    last = series.sampler(series.steps[-1]).sample(300, seed=0)
    assert idx.contains(first).mean() < 0.15         # untrained: about 8/256 of random images
    assert idx.contains(last).mean() > 0.7           # trained: copies its training set
    with pytest.raises(CheckpointError, match="sampler"):
        series.denoiser(150)


def test_report_of_a_gpt_series_shows_its_clocks(tmp_path):
    """sp.report on a GPT run: the time estimate counts ancestral samples (a GPT has no denoiser), the
    page holds the clocks and the gallery and no section a GPT cannot measure."""
    import scoreprobe as sp
    from scoreprobe.reports.plan import estimate, make_plan
    rule = {"name": "parity", "G": 2, "shape": [2, 4], "layout": "contiguous", "seed": 0}
    cfg = TrainConfig(rule=rule, n_train=8, n_heldout=8, model="gpt", size="tiny", hidden_size=32, depth=2,
                      num_heads=2, lr=3e-3, batch_size=32, total_steps=20, n_checkpoints=3, log_every=10)
    train_run(cfg, tmp_path / "run", progress=False)
    series = load_series(tmp_path / "run")
    sizes = {"n_samples": 40, "gallery": 5}
    plan = estimate(make_plan(series, tmp_path / "p.html", sizes=sizes, sections=("clocks", "gallery")))
    assert plan.items["clocks"].rows == len(plan.steps) * 40      # samples, one per draw
    assert 0 < plan.rate < float("inf") and 0 < plan.seconds < 60
    with pytest.warns(Warning):
        got = sp.report(series, tmp_path / "page.html", sizes=sizes)
    assert set(got.computed) == {"clocks"} and got.computed["clocks"] == list(series.steps)
    html = (tmp_path / "page.html").read_text()
    assert 'id="gallery"' in html and "a GPT series has no denoiser" in html
    assert got.notes and {section for section, _ in got.notes} == {"basins", "field", "retention", "dsm"}
    with pytest.raises(ConfigError, match="GPT series has no denoiser, so it has no basins"):
        make_plan(series, tmp_path / "q.html", sections=("clocks", "basins"))
