"""The held-out DSM loss in the training log (training/trainlog.heldout_*) and `plot-log` over several runs."""
import json

import numpy as np
import pytest
import torch

from scoreprobe.cli import main
from scoreprobe.models.build import build_model
from scoreprobe.training.config import ckpt_path
from scoreprobe.training.train import TrainConfig, train_run
from scoreprobe.training.trainlog import SIGMA_EDGES, bucket_labels, heldout_bank, heldout_record

RULE = {"name": "parity", "G": 2, "shape": [4, 4], "layout": "random", "seed": 0}


def _cfg(**kw):
    base = dict(rule=RULE, n_train=16, n_heldout=40, hidden_size=32, depth=1, num_heads=2, batch_size=16,
                total_steps=20, n_checkpoints=3, log_every=5, resume_every=7, save_model=True, save_dtype="float32")
    return TrainConfig(**{**base, **kw})


def _records(run):
    return [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return train_run(_cfg(), tmp_path_factory.mktemp("h") / "run", progress=False)


def test_every_log_line_has_the_heldout_loss_per_bucket(run):
    recs = _records(run)
    assert [r["step"] for r in recs] == [5, 10, 15, 20]
    for r in recs:
        h = r["heldout"]
        assert list(h["loss_by_sigma"]) == bucket_labels() == list(r["loss_by_sigma"])
        assert h["n_items"] == 40 and h["n_draws"] == 160 and np.isfinite(h["loss"])
    assert len({r["heldout"]["loss"] for r in recs}) == 4   # the model changes; the bank does not


def test_the_heldout_loss_is_the_weighted_dsm_loss_of_the_model_on_the_bank(run):
    """Recomputed by hand from the step-20 weights (saved as float32): λ(σ)·mean((D(y+σn, σ) − y)²), per bucket."""
    meta = json.loads((run / "run.json").read_text())
    ck = torch.load(ckpt_path(run, 20), weights_only=True)
    model = build_model(meta["kind"], meta["arch"])
    model.load_state_dict(ck["model"])
    heldout = np.load(run / "dataset.npz")["heldout"]
    y, sigma, noise, n_items = heldout_bank(heldout, -1.2, 1.2)
    assert n_items == 40 and torch.equal(y[:4], (torch.from_numpy(heldout[:1]).float() * 2 - 1).repeat(4, 1))
    with torch.no_grad():
        err = ((model(y + sigma[:, None] * noise, sigma) - y) ** 2).mean(dim=1)
    loss = ((sigma ** 2 + 1) / sigma ** 2 * err).double().numpy()
    s = sigma.numpy()
    edges = (0.0, *SIGMA_EDGES, np.inf)
    want = {lab: loss[(s >= lo) & (s < hi)].mean() for lab, lo, hi in zip(bucket_labels(), edges[:-1], edges[1:])}
    got = _records(run)[-1]["heldout"]
    assert got["loss"] == pytest.approx(loss.mean(), rel=1e-5)
    for lab in bucket_labels():
        assert got["loss_by_sigma"][lab] == pytest.approx(want[lab], rel=1e-5)
    assert heldout_record(model, heldout_bank(heldout, -1.2, 1.2))["loss"] == pytest.approx(loss.mean(), rel=1e-6)


def test_the_bank_leaves_training_unchanged_and_is_fixed(tmp_path, run):
    again = train_run(_cfg(), tmp_path / "again", progress=False)
    assert _records(again) == _records(run)                  # the same losses and held-out values
    assert heldout_bank(np.zeros((0, 16), np.uint8), -1.2, 1.2) is None


def test_plot_log_overlays_several_runs(tmp_path, run):
    from scoreprobe.viz.trainlog import plot_train_log, plot_train_logs
    other = train_run(_cfg(seed=1), tmp_path / "other", progress=False)
    ax = plot_train_logs([run, other]).axes[0]
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["run: training", "run: held-out", "other: training",
                                                    "other: held-out"]
    assert lines[0].get_color() == lines[1].get_color() != lines[2].get_color() == lines[3].get_color()
    np.testing.assert_array_equal(lines[3].get_ydata(), [r["heldout"]["loss"] for r in _records(other)])
    single = plot_train_log(run).axes[0]
    held = [line for line in single.get_lines() if line.get_label() == "all σ (held-out, fixed bank)"]
    np.testing.assert_array_equal(held[0].get_ydata(), [r["heldout"]["loss"] for r in _records(run)])
    main(["plot-log", str(run), str(other), "--out", str(tmp_path / "both.png")])
    assert (tmp_path / "both.png").read_bytes()[:4] == b"\x89PNG"
