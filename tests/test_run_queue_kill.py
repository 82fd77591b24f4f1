"""Issue 53 item 3: one dead worker does not stop a study. scoreprobe.studies.queue.run_queue with jobs = 2, where a run's
worker process is really killed (SIGKILL, as the out-of-memory killer does): the other runs complete, the
killed run is named in the log, and a run whose worker died once but not again completes on its rerun."""
import pytest
import logging
import os
import signal
import time
from collections import namedtuple
from types import SimpleNamespace

from scoreprobe.studies.queue import run_queue

Run = namedtuple("Run", "name folder kill")     # kill: "always", "once" (first attempt only) or ""


def work(args, run):
    """A run of the queue: writes its marker; `kill` runs end their own worker process with SIGKILL."""
    first = not (run.folder / f"{run.name}.tried").exists()
    (run.folder / f"{run.name}.tried").write_text("")
    if run.kill == "always" or (run.kill == "once" and first):
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.2)            # long enough that the other worker's run is in flight when one dies
    (run.folder / f"{run.name}.done").write_text("")
    return run.name


def _queue(tmp_path, kills, caplog):
    runs = [Run(f"r{i}", tmp_path, kills.get(i, "")) for i in range(6)]
    done = []
    with caplog.at_level(logging.INFO, logger="queue"):
        skipped = run_queue(work, SimpleNamespace(device="cpu"), runs, done.append, lambda r: 1.0, jobs=2)
    return done, skipped


@pytest.mark.slow   # real SIGKILLs of worker processes, each respawned worker imports torch
def test_a_killed_worker_is_logged_and_the_other_runs_complete(tmp_path, caplog):
    """r2 kills its worker at every attempt, r4 at its first only: every other run completes (r4 on its rerun)."""
    done, skipped = _queue(tmp_path, {2: "always", 4: "once"}, caplog)
    assert sorted(done) == ["r0", "r1", "r3", "r4", "r5"] and skipped == []
    assert sorted(p.stem for p in tmp_path.glob("*.done")) == ["r0", "r1", "r3", "r4", "r5"]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == ["r2 failed: its worker process died (killed: out of memory?); skipped"]
    assert any(r.getMessage().startswith("a worker process died with") for r in caplog.records)
