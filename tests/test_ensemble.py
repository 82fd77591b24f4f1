"""Ensemble training: members equal sequential runs, their directories load as series, mismatched
members are refused, an interrupted ensemble resumes, and `scoreprobe train --ensemble`."""
import json

import numpy as np
import pytest
import torch

from scoreprobe.training import ensemble as ens_mod
from scoreprobe.loading.series import load_series
from scoreprobe.data.datasets import make_dataset
from scoreprobe.training.ensemble import train_ensemble
from scoreprobe.errors import ConfigError
from scoreprobe.data.rules import rule_from_spec
from scoreprobe.training.train import TrainConfig, ckpt_path, train_run
from tests.kill import killed_at

RULE = {"name": "parity", "G": 2, "shape": [4, 4], "layout": "random", "seed": 0}
# Largest |ensemble − sequential| over every tensor of every checkpoint (EMA and raw weights) after
# 30 steps of the members below. Measured on CPU (torch 2.13, 1 and 2 threads): 1.2e-7. The batched
# kernels add in another order than the per-model ones (the first steps agree bitwise), and training
# amplifies such rounding differences: about 2e-4 after 300 steps of these members at lr 1e-3.
TOL = 1e-5


def tiny_cfg(**kw):
    base = dict(rule=RULE, n_train=16, n_heldout=16, hidden_size=32, depth=1, num_heads=2, batch_size=16,
                total_steps=30, n_checkpoints=5, log_every=5, resume_every=7, lr_schedule="cosine",
                warmup_steps=4, lr_min=1e-4, save_model=True)
    return TrainConfig(**{**base, **kw})


MEMBERS = [tiny_cfg(seed=0),
           tiny_cfg(seed=1, rule={**RULE, "G": 4}, n_train=24, data_seed=1),           # other G and N
           tiny_cfg(seed=2, n_train=32, n_heldout=8, p_mean=-1.0, save_dtype="float16")]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(sequential run dirs, ensemble run dirs) of MEMBERS."""
    root = tmp_path_factory.mktemp("ens")
    seq = [train_run(c, root / f"seq{i}", progress=False) for i, c in enumerate(MEMBERS)]
    ens = train_ensemble(MEMBERS, [root / f"ens{i}" for i in range(len(MEMBERS))], progress=False)
    return seq, ens


def _meta(run):
    return json.loads((run / "run.json").read_text())


def _max_diff(a, b):
    """Largest |a − b| over every tensor of every checkpoint of two run directories; in float16 files
    less the rounding to float16 (one unit in the last place, eps·|a|), which a tiny difference can flip."""
    worst = 0.0
    for s in _meta(a)["checkpoint_steps"]:
        x, y = torch.load(ckpt_path(a, s), weights_only=True), torch.load(ckpt_path(b, s), weights_only=True)
        for part in ("ema", "model"):
            for k, u in x[part].items():
                slack = 0 if u.dtype == torch.float32 else torch.finfo(u.dtype).eps * u.float().abs()
                worst = max(worst, ((u.float() - y[part][k].float()).abs() - slack).max().item())
    return worst


def _log(run):
    return [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]


def test_members_equal_sequential_runs(trained):
    for seq, ens in zip(*trained):
        a, b = _meta(seq), _meta(ens)
        assert a["config"] == b["config"] and a["arch"] == b["arch"]
        assert a["checkpoint_steps"] == b["checkpoint_steps"]
        assert sorted(p.name for p in (ens / "ckpt").iterdir()) == sorted(p.name for p in (seq / "ckpt").iterdir())
        with np.load(seq / "dataset.npz") as x, np.load(ens / "dataset.npz") as y:
            assert all(np.array_equal(x[k], y[k]) for k in ("train", "heldout"))
        assert _max_diff(seq, ens) <= TOL
        la, lb = _log(seq), _log(ens)
        assert [r["step"] for r in la] == [r["step"] for r in lb]
        assert [r["loss"] for r in lb] == pytest.approx([r["loss"] for r in la], rel=1e-4)
        assert not (ens / "resume.pt").exists()
    ens = trained[1]
    assert _max_diff(ens[0], ens[1]) > 1e-3       # the members really are different runs
    assert torch.load(ckpt_path(ens[2], 30), weights_only=True)["ema"]["net.pos_embed"].dtype == torch.float16


def test_member_directories_load_as_series(trained):
    for cfg, seq, ens in zip(MEMBERS, *trained):
        series = load_series(ens)
        assert list(series.steps) == _meta(seq)["checkpoint_steps"]
        data = make_dataset(rule_from_spec(cfg.rule), cfg.n_train, cfg.n_heldout, cfg.data_seed)
        assert np.array_equal(series.dataset.train, data.train)
        x = torch.randn(5, 16, generator=torch.Generator().manual_seed(0))
        out = series.denoiser(cfg.total_steps)(x, 0.5)                        # (5, 16)
        ref = load_series(seq).denoiser(cfg.total_steps)(x, 0.5)
        assert out.shape == (5, 16) and torch.isfinite(out).all()
        assert (out - ref).abs().max().item() < 1e-3


@pytest.mark.parametrize("change,field", [(dict(hidden_size=64), "hidden_size"), (dict(lr=2e-3), "lr"),
                                          (dict(batch_size=8), "batch_size"), (dict(total_steps=20), "total_steps"),
                                          (dict(rule={**RULE, "shape": [6, 6]}), "shape"),
                                          (dict(ema_decay=0.99), "ema_decay")])
def test_a_member_with_another_architecture_or_loop_is_refused(tmp_path, change, field):
    dirs = [tmp_path / "a", tmp_path / "b"]
    with pytest.raises(ConfigError, match=field):
        train_ensemble([tiny_cfg(), tiny_cfg(seed=1, **change)], dirs, progress=False)
    assert not any(d.exists() for d in dirs)


@pytest.mark.parametrize("cfgs,dirs,match", [([tiny_cfg(model="gpt")] * 2, ["a", "b"], "DiTs only"),
                                             ([tiny_cfg(), tiny_cfg(seed=1)], ["a", "a"], "own run directory"),
                                             ([tiny_cfg()], ["a", "b"], "1 configs but 2"),
                                             ([], [], "at least one")])
def test_bad_ensembles_are_refused(tmp_path, cfgs, dirs, match):
    with pytest.raises(ConfigError, match=match):
        train_ensemble(cfgs, [tmp_path / d for d in dirs], progress=False)


def test_a_member_directory_holding_another_run_is_refused_before_any_is_written(tmp_path):
    train_run(tiny_cfg(total_steps=2, n_checkpoints=2), tmp_path / "b", progress=False)
    with pytest.raises(ConfigError, match="b already holds a run with different settings"):
        train_ensemble([tiny_cfg(), tiny_cfg(seed=1)], [tmp_path / "a", tmp_path / "b"], progress=False)
    assert not (tmp_path / "a").exists()


def _kill(monkeypatch, dirs, at=19):
    """Run the ensemble of MEMBERS into `dirs` and kill it before optimizer step `at` (1-based)."""
    killed_at(monkeypatch, ens_mod, "_ensemble_step", at, lambda: train_ensemble(MEMBERS, dirs, progress=False))
    assert all((d / "resume.pt").exists() for d in dirs)


def test_an_interrupted_ensemble_resumes_to_the_uninterrupted_one(trained, tmp_path, monkeypatch):
    dirs = [tmp_path / f"m{i}" for i in range(len(MEMBERS))]
    _kill(monkeypatch, dirs)
    train_ensemble(MEMBERS, dirs, progress=False)
    for full, resumed in zip(trained[1], dirs):
        assert _max_diff(full, resumed) == 0.0                               # bitwise on CPU
        assert (resumed / "train_log.jsonl").read_text() == (full / "train_log.jsonl").read_text()
        assert not (resumed / "resume.pt").exists()


def test_members_at_different_steps_resume_separately(trained, tmp_path, monkeypatch):
    """After a kill: member 0 finished alone by train_run (its resume.pt is an ordinary one), member 2
    restarted from step 0; the ensemble then skips member 0 and trains members 1 and 2 from their steps."""
    dirs = [tmp_path / f"m{i}" for i in range(len(MEMBERS))]
    _kill(monkeypatch, dirs)
    train_run(MEMBERS[0], dirs[0], progress=False)
    (dirs[2] / "resume.pt").unlink()                      # as if killed before its first resume.pt: no checkpoint
    for p in (dirs[2] / "ckpt").glob("step_*.pt"):        # after step 0 either (one would be compared, and the
        if p.name != "step_0000000.pt":                   # ensemble of another size differs in float rounding)
            p.unlink()
    before = {p.name: p.stat().st_mtime_ns for p in (dirs[0] / "ckpt").iterdir()}
    train_ensemble(MEMBERS, dirs, progress=False)
    assert {p.name: p.stat().st_mtime_ns for p in (dirs[0] / "ckpt").iterdir()} == before
    for seq, d in zip(trained[0], dirs):
        assert _max_diff(seq, d) <= TOL
        assert [r["step"] for r in _log(d)] == [r["step"] for r in _log(seq)]   # no step logged twice


# ---------------------------------------------------------------------------------------------
# scoreprobe train --ensemble
# ---------------------------------------------------------------------------------------------

TOY = ["--shape", "4x4", "--n-train", "16", "--n-heldout", "16", "--hidden-size", "32", "--depth", "1",
       "--num-heads", "2", "--batch-size", "8", "--total-steps", "4", "--n-checkpoints", "3", "--device", "cpu",
       "--threads", "1"]


@pytest.fixture
def restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_train_ensemble_command_writes_one_run_per_grid_member(tmp_path, restore_threads):
    from click.testing import CliRunner
    from scoreprobe.cli import cli
    args = ["train", str(tmp_path / "grid"), "--ensemble", "G=2,4 seed=0,1", "--lr", "2e-3", *TOY]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    names = ["G2-seed0", "G2-seed1", "G4-seed0", "G4-seed1"]
    assert sorted(p.name for p in (tmp_path / "grid").iterdir()) == names
    assert [line.split(": ", 1)[1] for line in r.output.splitlines() if line.startswith("  ")] == [
        f"G={n[1]} seed={n[-1]} -> {tmp_path / 'grid' / n}" for n in names]
    for name in names:
        cfg = _meta(tmp_path / "grid" / name)["config"]
        assert (cfg["rule"]["G"], cfg["seed"], cfg["lr"], cfg["total_steps"]) == (int(name[1]), int(name[-1]), 2e-3, 4)
        assert list(load_series(tmp_path / "grid" / name).steps)[-1] == 4
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "grid").rglob("*.pt")}
    assert CliRunner().invoke(cli, args).exit_code == 0                   # rerun: complete, nothing rewritten
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "grid").rglob("*.pt")} == before


@pytest.mark.parametrize("extra,message", [
    (["--ensemble", "hidden_size=32,64"], "'hidden_size' cannot vary"),
    (["--ensemble", "G"], "expected KEY=V1,V2"),
    (["--ensemble", "seed=0,0"], "distinct"),
    (["--ensemble", "seed=0,x"], "seed=0,x"),
    (["--ensemble", "seed=0 seed=1"], "given twice"),
    (["--ensemble", " "], "empty"),
    (["--ensemble", "G=2,4", "--G", "2"], "set by both --G and --ensemble"),
    (["--ensemble", "G=2,3"], "G=3 does not divide"),
    (["--ensemble", "seed=0,1", "--model", "gpt"], "DiTs only"),
    (["--ensemble", "rule=parity,latin"], "image"),
])
def test_bad_ensemble_specs_end_with_one_line_and_exit_2(tmp_path, capsys, restore_threads, extra, message):
    from scoreprobe.cli import main
    with pytest.raises(SystemExit) as e:
        main(["train", str(tmp_path / "grid"), *TOY, *extra])
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err and "Traceback" not in err
    assert err.startswith("error: ") and len([line for line in err.splitlines() if line.startswith("error")]) == 1
    assert not (tmp_path / "grid").exists()
