"""TrainConfig.extra_checkpoints (issue 36 item 3): steps beside the log grid are written without changing
the trajectory, survive a kill and resume, an ensemble and an extension, and leave the digest of older
runs' training states as it was."""
import json

import pytest
import torch

from scoreprobe.errors import ConfigError
from scoreprobe.training import train as train_mod
from scoreprobe.training.ensemble import train_ensemble
from scoreprobe.training.extend import extension_steps, schedule_ratio
from scoreprobe.training.guard import read_meta, run_digest
from scoreprobe.training.train import TrainConfig, checkpoint_steps, ckpt_path, train_run
from tests.kill import killed_at

RULE = {"name": "parity", "G": 2, "shape": [4, 4], "layout": "random", "seed": 0}
EXTRA = [2, 5, 9]


def tiny_cfg(**kw):
    base = dict(rule=RULE, n_train=16, n_heldout=16, hidden_size=32, depth=1, num_heads=2, batch_size=16,
                total_steps=40, n_checkpoints=4, first_checkpoint=10, log_every=4, resume_every=7)
    return TrainConfig(**{**base, **kw})


def _ema(run, step):
    return torch.load(ckpt_path(run, step), weights_only=True)["ema"]


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _steps(run):
    return json.loads((run / "run.json").read_text())["checkpoint_steps"]


@pytest.fixture(scope="module")
def plain_and_extra(tmp_path_factory):
    root = tmp_path_factory.mktemp("extra")
    return (train_run(tiny_cfg(), root / "plain", progress=False),
            train_run(tiny_cfg(extra_checkpoints=EXTRA), root / "extra", progress=False))


def test_extra_checkpoints_are_written_without_changing_the_trajectory(plain_and_extra):
    plain, extra = plain_and_extra
    grid = checkpoint_steps(40, 4, 10)
    assert _steps(plain) == grid and _steps(extra) == sorted(set(grid) | set(EXTRA))
    assert sorted(int(p.name[5:12]) for p in (extra / "ckpt").iterdir()) == _steps(extra)
    for s in grid:                                        # the grid's checkpoints: bitwise the plain run's
        assert _same(_ema(plain, s), _ema(extra, s)), s
    assert (plain / "train_log.jsonl").read_text() == (extra / "train_log.jsonl").read_text()
    assert not _same(_ema(extra, 2), _ema(extra, 5))     # the extra ones are real, distinct steps
    assert read_meta(extra)["config"]["extra_checkpoints"] == EXTRA   # run.json passes the schedule check
    train_run(tiny_cfg(extra_checkpoints=EXTRA), extra, progress=False)   # a rerun: accepted, nothing to do
    with pytest.raises(ConfigError, match="extra_checkpoints"):
        train_run(tiny_cfg(extra_checkpoints=[3]), extra, progress=False)


def test_a_kill_between_extra_checkpoints_resumes_to_the_uninterrupted_run(plain_and_extra, tmp_path, monkeypatch):
    _, full = plain_and_extra
    killed_at(monkeypatch, train_mod, "_train_step", 8,      # after the extra checkpoint 5, before 9
              lambda: train_run(tiny_cfg(extra_checkpoints=EXTRA), tmp_path / "killed", progress=False))
    assert (tmp_path / "killed" / "resume.pt").exists() and not ckpt_path(tmp_path / "killed", 9).exists()
    resumed = train_run(tiny_cfg(extra_checkpoints=EXTRA), tmp_path / "killed", progress=False)
    for s in _steps(full):
        assert _same(_ema(full, s), _ema(resumed, s)), s
    assert (resumed / "train_log.jsonl").read_text() == (full / "train_log.jsonl").read_text()


def test_ensemble_members_write_the_extra_checkpoints(plain_and_extra, tmp_path):
    _, seq = plain_and_extra
    cfgs = [tiny_cfg(extra_checkpoints=EXTRA), tiny_cfg(extra_checkpoints=EXTRA, seed=1)]
    runs = train_ensemble(cfgs, [tmp_path / "m0", tmp_path / "m1"], progress=False)
    assert _steps(runs[0]) == _steps(runs[1]) == _steps(seq)
    for s in _steps(seq):                                # member 0 is the sequential run (to rounding)
        a, b = _ema(seq, s), _ema(runs[0], s)
        assert max((a[k] - b[k]).abs().max().item() for k in a) <= 1e-5, s
    with pytest.raises(ConfigError, match="extra_checkpoints"):     # a loop setting: shared by the members
        train_ensemble([tiny_cfg(extra_checkpoints=EXTRA), tiny_cfg(seed=1)], [tmp_path / "x0", tmp_path / "x1"],
                       progress=False)


def test_extension_continues_the_grid_and_keeps_the_extra_steps(plain_and_extra, tmp_path):
    import shutil
    plain, extra = (shutil.copytree(d, tmp_path / d.name) for d in plain_and_extra)
    assert schedule_ratio(json.loads((extra / "run.json").read_text())) == \
        pytest.approx(schedule_ratio(json.loads((plain / "run.json").read_text())))
    train_run(tiny_cfg(total_steps=120), plain, progress=False)
    train_run(tiny_cfg(total_steps=120, extra_checkpoints=EXTRA), extra, progress=False)
    new = extension_steps(40, 120, schedule_ratio(json.loads((plain / "run.json").read_text())))
    assert _steps(extra) == sorted(set(checkpoint_steps(40, 4, 10) + new) | set(EXTRA))
    assert _steps(plain) == checkpoint_steps(40, 4, 10) + new
    assert _same(_ema(plain, 120), _ema(extra, 120)) and read_meta(extra)["extended_from"] == [40]


def test_digest_of_older_runs_is_unchanged_and_bad_extras_are_refused(tmp_path):
    cfg = tiny_cfg().to_dict()
    older = {k: v for k, v in cfg.items() if k != "extra_checkpoints"}   # run.json before the setting
    assert run_digest(older) == run_digest(cfg) != run_digest({**cfg, "extra_checkpoints": EXTRA})
    oldest = {k: v for k, v in cfg.items() if k not in ("extra_checkpoints", "transpose", "patch_shape")}
    assert run_digest(oldest) == run_digest(cfg)    # nor do the data transpose and the DiT patch shape
    assert run_digest({**cfg, "transpose": True}) != run_digest(cfg) != run_digest({**cfg, "patch_shape": "1x4"})
    assert tiny_cfg(extra_checkpoints=(2, 5)).to_dict()["extra_checkpoints"] == [2, 5]
    for bad in ([5, 2], [0], [41], [2, 2], [True], ["5"], 5, list(range(1, 1002))):
        kw = dict(total_steps=2000) if isinstance(bad, list) and len(bad) > 100 else {}
        with pytest.raises(ConfigError, match="extra_checkpoints"):
            tiny_cfg(extra_checkpoints=bad, **kw).validate()


def test_train_command_takes_extra_checkpoints(tmp_path):
    from click.testing import CliRunner
    from scoreprobe.cli.app import cli
    args = ["train", str(tmp_path / "run"), "--shape", "4x4", "--n-train", "8", "--n-heldout", "8", "--hidden-size",
            "16", "--depth", "1", "--num-heads", "2", "--batch-size", "8", "--total-steps", "12", "--n-checkpoints",
            "3", "--first-checkpoint", "6", "--threads", "1", "--layout", "contiguous"]
    ok = CliRunner().invoke(cli, args + ["--extra-checkpoints", "2,4"])
    assert ok.exit_code == 0, ok.output
    assert _steps(tmp_path / "run") == [0, 2, 4, 6, 12]
    bad = CliRunner().invoke(cli, args + ["--extra-checkpoints", "2,x"])
    assert bad.exit_code == 2 and "comma-separated steps" in bad.output
