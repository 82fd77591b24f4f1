"""Steering training: extending a finished run, the σ-bucketed loss log, `plot-log`, the default layout."""
import json
import math

import pytest
import torch

from scoreprobe.training import train as train_mod
from scoreprobe.errors import CheckpointError, ConfigError, SettingWarning
from scoreprobe.training.extend import extension_steps, schedule_ratio
from scoreprobe.training.train import FINAL_STATE, TrainConfig, checkpoint_steps, ckpt_path, train_run
from scoreprobe.training.trainlog import SIGMA_EDGES, bucket_labels, bucket_sums, log_record
from tests.kill import killed_at

RULE = {"name": "parity", "G": 2, "shape": [4, 4], "layout": "random", "seed": 0}


def tiny_cfg(**kw):
    base = dict(rule=RULE, n_train=16, n_heldout=16, hidden_size=32, depth=1, num_heads=2,
                batch_size=16, total_steps=30, n_checkpoints=6, log_every=4, resume_every=7)
    return TrainConfig(**{**base, **kw})


def _ema(run, step):
    return torch.load(ckpt_path(run, step), weights_only=True)["ema"]


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("schedule", ["constant", "step"])
def test_extension_keeps_the_first_part_and_follows_the_run_trained_to_the_new_total(tmp_path, monkeypatch, schedule):
    kw = dict(lr_schedule=schedule, lr_drop_step=20, lr_min=2e-4, warmup_steps=3)
    never = train_run(tiny_cfg(**kw), tmp_path / "never", progress=False)       # never extended
    ext = train_run(tiny_cfg(**kw), tmp_path / "ext", progress=False)
    first = {s: ckpt_path(ext, s).read_bytes() for s in checkpoint_steps(30, 6)}
    killed_at(monkeypatch, train_mod, "_train_step", 25,     # a kill in the middle of the extension, then the same command
              lambda: train_run(tiny_cfg(total_steps=90, **kw), ext, progress=False))
    train_run(tiny_cfg(total_steps=90, **kw), ext, progress=False)
    meta = json.loads((ext / "run.json").read_text())
    old = checkpoint_steps(30, 6)
    assert meta["checkpoint_steps"] == old + extension_steps(30, 90, schedule_ratio(meta)) and meta["extended_from"] == [30]
    for s in old:                            # the first part: the same files, equal to the never-extended run's
        assert ckpt_path(ext, s).read_bytes() == first[s] and _same(_ema(ext, s), _ema(never, s)), s
    fresh = train_run(tiny_cfg(total_steps=90, **kw), tmp_path / "fresh", progress=False)
    assert _same(_ema(ext, 90), _ema(fresh, 90))                                      # the same trajectory
    assert (ext / "train_log.jsonl").read_text() == (fresh / "train_log.jsonl").read_text()
    assert (ext / FINAL_STATE).exists() and not (ext / "resume.pt").exists()


def test_extension_schedule_continues_the_shipped_log_grid():
    old = checkpoint_steps(36000, 24, 500)
    meta = {"config": {"total_steps": 36000}, "checkpoint_steps": old}
    r = schedule_ratio(meta)
    assert r == pytest.approx((36000 / 500) ** (1 / 22))
    new = extension_steps(36000, 72000, r)
    assert new == [round(36000 * r), round(36000 * r * r), round(36000 * r ** 3), 72000]
    assert extension_steps(36000, 37000, r) == [37000]                 # within half a grid step: the total only
    meta2 = {"config": {"total_steps": 72000}, "checkpoint_steps": old + new, "extended_from": [36000]}
    assert schedule_ratio(meta2) == r                                 # a second extension: the same grid
    assert extension_steps(5, 12, 1.0 + 1e-9) == list(range(6, 13))   # a grid denser than a step: every step


def test_extension_refusals(tmp_path):
    train_run(tiny_cfg(lr_schedule="cosine"), tmp_path / "cos", progress=False)
    with pytest.raises(ConfigError, match="cosine"):
        train_run(tiny_cfg(lr_schedule="cosine", total_steps=60), tmp_path / "cos", progress=False)
    run = train_run(tiny_cfg(), tmp_path / "nostate", progress=False, keep_state=False)
    assert not (run / FINAL_STATE).exists()
    with pytest.raises(CheckpointError, match="without keeping its training state"):
        train_run(tiny_cfg(total_steps=60), run, progress=False)
    with pytest.raises(ConfigError, match="total_steps: 30 in the run, 20 now.*not shortened"):
        train_run(tiny_cfg(total_steps=20), run, progress=False)
    with pytest.raises(ConfigError, match="lr.*total_steps"):          # another setting too: not an extension
        train_run(tiny_cfg(total_steps=60, lr=5e-4), run, progress=False)


def test_bucket_sums_and_log_record_against_brute_force():
    gen = torch.Generator().manual_seed(0)
    steps = [(torch.rand(20, generator=gen), torch.exp(torch.randn(20, generator=gen) * 2)) for _ in range(3)]
    rec = log_record(12, [float(l.mean()) for l, _ in steps], [bucket_sums(l, s).tolist() for l, s in steps])
    loss, sigma = torch.cat([l for l, _ in steps]).double().numpy(), torch.cat([s for _, s in steps]).numpy()
    edges = (0.0, *SIGMA_EDGES, math.inf)
    for lab, lo, hi in zip(bucket_labels(), edges[:-1], edges[1:]):
        inside = (sigma >= lo) & (sigma < hi)
        assert inside.any() and rec["loss_by_sigma"][lab] == pytest.approx(loss[inside].mean(), rel=1e-12)
    assert rec["loss"] == pytest.approx(loss.mean(), rel=1e-6)
    assert bucket_labels() == ["sigma<0.1", "0.1<=sigma<1", "sigma>=1"]
    empty = log_record(1, [0.5], [bucket_sums(torch.ones(2), torch.tensor([0.5, 0.6])).tolist()])
    assert empty["loss_by_sigma"]["sigma<0.1"] is None and empty["loss_by_sigma"]["0.1<=sigma<1"] == 1.0


def test_log_and_progress_lines_carry_the_sigma_buckets(tmp_path, capsys):
    run = train_run(tiny_cfg(), tmp_path / "run")           # stderr captured: "lines" progress
    recs = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in recs] == list(range(4, 31, 4))
    assert all(list(r["loss_by_sigma"]) == bucket_labels() for r in recs)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("train: step 30/30")]
    assert lines and f"loss {recs[-1]['loss']:.4f} (σ<0.1 " in lines[0] and "σ≥1" in lines[0]


def test_plot_log_draws_the_curve_and_refuses_a_directory_without_a_log(tmp_path, capsys):
    from scoreprobe.cli import main
    from scoreprobe.viz.trainlog import plot_train_log
    run = train_run(tiny_cfg(), tmp_path / "run", progress=False)
    ax = plot_train_log(run).axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["all σ (training loss)", "σ<0.1", "0.1≤σ<1", "σ≥1", "all σ (held-out, fixed bank)",
                      "checkpoint steps"]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    marks = sorted(line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == ":")
    assert marks == checkpoint_steps(30, 6)[1:]
    main(["plot-log", str(run), "--out", str(tmp_path / "log.png")])
    assert (tmp_path / "log.png").read_bytes()[:4] == b"\x89PNG"
    main(["info", str(run)])
    assert "extendable:       yes (final_state.pt" in capsys.readouterr().out
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as e:
        main(["plot-log", str(tmp_path / "empty")])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and "has no train_log.jsonl" in err[0]


def test_train_without_layout_is_contiguous_and_says_that_the_default_changed(tmp_path):
    from click.testing import CliRunner
    from scoreprobe.cli import cli
    args = ["train", str(tmp_path / "run"), "--G", "2", "--shape", "2x4", "--n-train", "4", "--n-heldout", "4",
            "--hidden-size", "16", "--depth", "1", "--num-heads", "2", "--batch-size", "4", "--total-steps", "2",
            "--n-checkpoints", "2", "--device", "cpu"]
    with pytest.warns(SettingWarning, match="--layout not given.*random before"):
        r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "run" / "run.json").read_text())["config"]["rule"]["layout"] == "contiguous"
    assert TrainConfig().rule["layout"] == "contiguous"
    from scoreprobe.data.rules import Parity, rule_from_spec
    assert Parity(2).layout == rule_from_spec({"name": "parity", "G": 2}).layout == "contiguous"
    r = CliRunner().invoke(cli, [*args, "--layout", "random"])          # the old default's run: named in the error
    assert r.exit_code != 0 and "layout" in str(r.exception) and "{'layout': 'contiguous'} in the run, {'layout': 'random'} now" in str(r.exception)
