"""What keeps a run directory whole (issue 33, section 2; scoreprobe.training.guard): atomic log rewrites
under SIGKILL, states bound to their run, checkpoints never rewritten with other weights, the thread
count, one trainer per directory, run.json checked before any work, `extended_from` only totals reached."""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from scoreprobe.errors import CheckpointError, ConfigError
from scoreprobe.training import train as train_mod
from scoreprobe.training.guard import RunLock, planned_steps
from scoreprobe.training.train import FINAL_STATE, TrainConfig, ckpt_path, train_run
from scoreprobe.training.trainlog import LOG_NAME, truncate_log
from tests.kill import killed_at

RULE = {"name": "parity", "G": 2, "shape": [4, 4], "layout": "random", "seed": 0}


def tiny_cfg(**kw):
    base = dict(rule=RULE, n_train=16, n_heldout=16, hidden_size=32, depth=1, num_heads=2,
                batch_size=16, total_steps=30, n_checkpoints=6, log_every=4, resume_every=7)
    return TrainConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished run (30 steps, final_state.pt kept) of seed 0 and one of seed 1."""
    root = tmp_path_factory.mktemp("guard")
    return train_run(tiny_cfg(), root / "s0", progress=False), train_run(tiny_cfg(seed=1), root / "s1", progress=False)


@pytest.fixture
def run0(finished, tmp_path):
    d = tmp_path / "s0"
    shutil.copytree(finished[0], d)
    return d


def _files(d):
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------------------------------------
# The training log: atomic rewrites, kills during the rewrite, bad lines kept
# ---------------------------------------------------------------------------------------------

KILLED_REWRITE = textwrap.dedent("""
    import sys
    from pathlib import Path
    import scoreprobe.training.config as config
    from scoreprobe.training.trainlog import truncate_log
    import os, time
    real = config.atomic_write_text
    real_replace = os.replace

    def renaming(*a):   # the temp file is whole and synced: hold the moment before the rename open for kills
        print("renaming", flush=True)
        time.sleep(0.05)
        real_replace(*a)
    os.replace = renaming

    def announced(*a):
        print("writing", flush=True)
        real(*a)
        print("written", flush=True)
    config.atomic_write_text = announced
    print("ready", flush=True)
    truncate_log(Path(sys.argv[1]), int(sys.argv[2]))
""")


@pytest.mark.slow   # real SIGKILLs of training subprocesses at random moments
def test_a_kill_at_random_moments_of_the_log_rewrite_leaves_the_old_or_the_new_log(tmp_path):
    """300 000 lines, rewritten to keep the first 150 000; SIGKILL at random moments of the whole call
    and of its write (temp file, fsync, rename; calibrated on an unkilled rewrite): the log is the old
    one or the new one, never shorter, and the rerun gives the new one."""
    lines = [json.dumps({"step": s, "loss": 0.5}) + "\n" for s in range(1, 300_001)]
    full, cut = "".join(lines), "".join(lines[:150_000])
    log = tmp_path / LOG_NAME
    temps = lambda: list(tmp_path.glob("*.tmp"))   # noqa: E731  (scoreprobe.atomic: .<name>.<random>.tmp)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}

    def rewrite(kill_after=None, at="ready"):
        """Start the rewrite; SIGKILL `kill_after` s after the line `at`. Returns the seconds from
        'ready' to 'writing' and from 'writing' to 'written' (None when killed before)."""
        log.write_text(full)
        for t in temps():
            t.unlink()
        p = subprocess.Popen([sys.executable, "-c", KILLED_REWRITE, str(log), "150000"], stdout=subprocess.PIPE,
                             text=True, env=env)
        marks = {}
        for line in p.stdout:
            marks[line.strip()] = time.perf_counter()
            if line.strip() == at and kill_after is not None:
                time.sleep(kill_after)
                p.send_signal(signal.SIGKILL)
                break
        p.wait()
        return marks

    marks = rewrite()
    assert log.read_text() == cut and not temps()
    whole, write = marks["written"] - marks["ready"], marks["written"] - marks["writing"]
    rng, outcomes = random.Random(0), []
    for i in range(10):   # odd: anywhere in the call; even: in the write, from its start or just before its rename
        at = "ready" if i % 2 else ("writing" if i % 4 else "renaming")
        rewrite({"ready": rng.uniform(0, whole), "writing": rng.uniform(0, write), "renaming": rng.uniform(0, 0.03)}[at], at)
        text = log.read_text()
        assert text in (full, cut), f"{len(text.splitlines())} lines after the kill"
        outcomes.append("during the write" if temps() else ("old" if text == full else "new"))
        truncate_log(log, 150_000)                           # the rerun after the kill: the new log
        assert log.read_text() == cut
    assert "during the write" in outcomes, outcomes


def test_a_kill_between_the_temp_file_and_the_rename_keeps_the_old_log(tmp_path, monkeypatch):
    log = tmp_path / LOG_NAME
    old = "".join(json.dumps({"step": s, "loss": 1.0}) + "\n" for s in range(1, 9))
    log.write_text(old)

    def killed(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        truncate_log(log, 4)
    assert log.read_text() == old


def test_a_bad_line_in_the_middle_is_refused_before_any_work_and_a_deep_one_is_no_traceback(run0):
    log = run0 / LOG_NAME
    good = log.read_text().splitlines(True)
    bad, deep, stringy = "not json\n", "[" * 100_000 + "]" * 100_000 + "\n", '{"step": "8", "loss": 1}\n'
    log.write_text(good[0] + bad + good[1] + deep + stringy + "".join(good[2:]) + '{"step": 20, "lo')
    before = _files(run0)
    with pytest.raises(CheckpointError, match=r"line\(s\) 2, 4, 5 of \d+ are not training-log records"):
        train_run(tiny_cfg(total_steps=60), run0, progress=False)
    assert _files(run0) == before                       # nothing dropped, nothing written
    log.write_text("".join(good) + '{"step": 20, "lo')   # only a last line cut short: dropped on resume
    train_run(tiny_cfg(total_steps=60), run0, progress=False)
    assert log.read_text().startswith("".join(good)) and '"lo\n' not in log.read_text()


# ---------------------------------------------------------------------------------------------
# States bound to their run
# ---------------------------------------------------------------------------------------------

def test_another_runs_final_state_is_refused(finished, run0):
    shutil.copy(finished[1] / FINAL_STATE, run0 / FINAL_STATE)
    before = _files(run0)
    with pytest.raises(CheckpointError, match=f"{FINAL_STATE} belongs to another run.*checkpoints are unaffected"):
        train_run(tiny_cfg(total_steps=60), run0, progress=False)
    assert _files(run0) == before                        # refused before run.json or anything else is written


def test_a_state_without_its_run_digest_is_bound_by_the_last_checkpoint(finished, run0):
    """States written before the digest existed: the EMA at their step must be the checkpoint's."""
    sd = torch.load(finished[1] / FINAL_STATE, weights_only=True)
    del sd["run"]
    torch.save(sd, run0 / FINAL_STATE)
    with pytest.raises(CheckpointError, match="EMA weights at step 30 differ from ckpt/step_0000030.pt"):
        train_run(tiny_cfg(total_steps=60), run0, progress=False)
    own = torch.load(finished[0] / FINAL_STATE, weights_only=True)
    del own["run"]
    torch.save(own, run0 / FINAL_STATE)
    train_run(tiny_cfg(total_steps=60), run0, progress=False)          # its own legacy state extends


def test_a_damaged_final_state_names_itself_and_a_safe_route(run0):
    (run0 / FINAL_STATE).write_bytes(b"garbage")
    with pytest.raises(CheckpointError) as e:
        train_run(tiny_cfg(total_steps=60), run0, progress=False)
    msg = str(e.value)
    assert msg.startswith(str(run0 / FINAL_STATE)) and "resume.pt" not in msg and "step 0" not in msg
    assert "checkpoints are unaffected" in msg and "new directory" in msg
    (run0 / FINAL_STATE).unlink()                        # the route it names: the run stays final at 30
    with pytest.raises(CheckpointError, match="without keeping its training state"):
        train_run(tiny_cfg(total_steps=60), run0, progress=False)


# ---------------------------------------------------------------------------------------------
# Checkpoints never rewritten with other weights; the thread count
# ---------------------------------------------------------------------------------------------

def test_retraining_keeps_equal_checkpoints_and_refuses_to_overwrite_a_different_one(run0):
    (run0 / FINAL_STATE).unlink()
    ckpt_path(run0, 30).unlink()                         # unfinished: retrained from step 0
    stamp = {p.name: p.stat().st_mtime_ns for p in (run0 / "ckpt").iterdir()}
    train_run(tiny_cfg(), run0, progress=False)
    assert {p.name: p.stat().st_mtime_ns for p in (run0 / "ckpt").iterdir() if p.name in stamp} == stamp
    (run0 / FINAL_STATE).unlink()
    ckpt_path(run0, 30).unlink()
    ck = torch.load(ckpt_path(run0, 13), weights_only=True)
    ck["ema"] = {k: v + 1e-3 for k, v in ck["ema"].items()}
    torch.save(ck, ckpt_path(run0, 13))
    planted = ckpt_path(run0, 13).read_bytes()
    with pytest.raises(CheckpointError, match=r"step_0000013.pt exists with other weights.*Nothing was overwritten"):
        train_run(tiny_cfg(), run0, progress=False)
    assert ckpt_path(run0, 13).read_bytes() == planted


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_another_thread_count_is_refused_before_anything_is_written(run0, threads):
    assert json.loads((run0 / "run.json").read_text())["torch_threads"] == torch.get_num_threads() == 1
    torch.set_num_threads(2)
    before = _files(run0)
    with pytest.raises(ConfigError, match=r"trained with 1 CPU thread.*--threads 1"):
        train_run(tiny_cfg(total_steps=60), run0, progress=False)
    assert _files(run0) == before


# ---------------------------------------------------------------------------------------------
# One trainer per run directory
# ---------------------------------------------------------------------------------------------

def test_a_second_trainer_on_one_run_directory_is_refused(tmp_path):
    lock = RunLock(tmp_path / "run").acquire()
    try:
        with pytest.raises(ConfigError, match=f"is being trained by pid {os.getpid()}"):
            train_run(tiny_cfg(), tmp_path / "run", progress=False)
    finally:
        lock.release()
    train_run(tiny_cfg(total_steps=4, n_checkpoints=2), tmp_path / "run", progress=False)   # free again


def test_a_trainer_in_another_process_holds_the_lock_until_it_dies(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from scoreprobe.training.guard import RunLock
        RunLock({str(tmp_path / 'run')!r}).acquire()
        print("locked", flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(ConfigError, match=f"being trained by pid {holder.pid}"):
            train_run(tiny_cfg(), tmp_path / "run", progress=False)
    finally:
        holder.kill()
        holder.wait()
    RunLock(tmp_path / "run").acquire().release()       # SIGKILL dropped it


# ---------------------------------------------------------------------------------------------
# run.json checked before any work; extended_from
# ---------------------------------------------------------------------------------------------

def _edit(d, **changes):
    meta = json.loads((d / "run.json").read_text())
    meta.update(changes)
    (d / "run.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("name,change", [
    ("steps_edited_down", lambda m: {"checkpoint_steps": m["checkpoint_steps"][:3]}),
    ("steps_strings", lambda m: {"checkpoint_steps": [str(s) for s in m["checkpoint_steps"]]}),
    ("extended_from_strings", lambda m: {"extended_from": ["30"]}),
    ("extended_from_not_reached", lambda m: {"extended_from": [40]}),
    ("extended_from_dict", lambda m: {"extended_from": {"a": 1}}),
])
def test_run_json_edits_are_refused_before_any_work(run0, name, change):
    _edit(run0, **change(json.loads((run0 / "run.json").read_text())))
    before = _files(run0)
    with pytest.raises(CheckpointError, match="run.json"):
        train_run(tiny_cfg(total_steps=60), run0, progress=False)
    assert _files(run0) == before


def test_a_truncated_run_json_is_one_typed_error(run0):
    (run0 / "run.json").write_text((run0 / "run.json").read_text()[:200])
    with pytest.raises(CheckpointError, match="not readable JSON"):
        train_run(tiny_cfg(), run0, progress=False)


def test_extended_from_records_only_totals_reached(run0, tmp_path, monkeypatch):
    killed_at(monkeypatch, train_mod, "_train_step", 20,      # killed at step 50 of 30 -> 90
              lambda: train_run(tiny_cfg(total_steps=90), run0, progress=False))
    train_run(tiny_cfg(total_steps=120), run0, progress=False)             # the target raised while under way
    meta = json.loads((run0 / "run.json").read_text())
    assert meta["extended_from"] == [30] and meta["checkpoint_steps"] == planned_steps(meta)
    fresh = train_run(tiny_cfg(total_steps=120), tmp_path / "fresh", progress=False)
    a, b = (torch.load(ckpt_path(d, 120), weights_only=True)["ema"] for d in (run0, fresh))
    assert all(torch.equal(a[k], b[k]) for k in a)                         # the same trajectory, bitwise


def test_an_unfinished_first_segment_is_not_extended(tmp_path, monkeypatch):
    real, calls = train_mod._train_step, {"n": 0}

    def dying(*a, **k):
        calls["n"] += 1
        if calls["n"] == 12:
            raise KeyboardInterrupt
        return real(*a, **k)
    monkeypatch.setattr(train_mod, "_train_step", dying)
    with pytest.raises(KeyboardInterrupt):
        train_run(tiny_cfg(), tmp_path / "run", progress=False)
    monkeypatch.setattr(train_mod, "_train_step", real)
    with pytest.raises(ConfigError, match="unfinished.*--total-steps 30 first"):
        train_run(tiny_cfg(total_steps=60), tmp_path / "run", progress=False)


def test_temporary_files_a_kill_left_are_removed_by_the_next_trainer(run0):
    for name in ("train_log.jsonl.tmp", "run.json.tmp", "resume.pt.tmp", "ckpt/step_0000030.pt.tmp"):
        (run0 / name).write_bytes(b"half written")
    train_run(tiny_cfg(total_steps=40), run0, progress=False)
    assert not [p for p in run0.rglob("*.tmp")]
