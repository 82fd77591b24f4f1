"""Issue 53 item 3 in the attack counts (tests/abuse_issue53.py): a study's queue whose worker is killed for real
(the test itself: tests/test_run_queue_kill.py)."""
import logging
from types import SimpleNamespace

from abuse_issue53 import Attack


def _queue(work):
    from scoreprobe.studies.queue import run_queue
    from test_run_queue_kill import Run, work as run_fn
    runs = [Run(f"r{i}", work, {2: "always", 4: "once"}.get(i, "")) for i in range(6)]
    done, records = [], []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("queue").addHandler(handler)
    try:
        run_queue(run_fn, SimpleNamespace(device="cpu"), runs, done.append, lambda r: 1.0, jobs=2)
    finally:
        logging.getLogger("queue").removeHandler(handler)
    return done, [r.getMessage() for r in records if r.levelno == logging.ERROR]


def _five_done_one_named(work, result):
    done, errors = result
    assert sorted(done) == ["r0", "r1", "r3", "r4", "r5"], done
    assert errors == ["r2 failed: its worker process died (killed: out of memory?); skipped"], errors


ATTACKS = [Attack("queue_worker_killed", 3, api=_queue, answer=_five_done_one_named, timeout_s=300)]
