"""run_queue's --hours: a run starts only when its estimate (× LOAD_FACTOR) ends before the deadline *at the time
it would start*; runs that fitted when the queue began but no longer do after the earlier runs are not started."""
import types

from scoreprobe.studies import queue


def test_the_deadline_is_read_when_each_run_would_start(monkeypatch):
    clock = {"now": 0.0}
    monkeypatch.setattr(queue.time, "time", lambda: clock["now"])
    runs = [types.SimpleNamespace(name=f"r{i}") for i in range(4)]

    def fn(args, run):          # each run takes 40 minutes of the clock
        clock["now"] += 40 * 60
        return run.name
    done = []
    skipped = queue.run_queue(fn, types.SimpleNamespace(device="cpu"), runs, done.append, lambda r: 30 * 60,
                              hours=2.0, jobs=1)
    # at 0, 40 and 80 min a 30-min run × 1.5 = 45 min ends by 120 min: r0, r1 start (ends 45, 85); at 80 min it
    # would end at 125 > 120: not started, nor r3
    assert done == ["r0", "r1"] and skipped == ["r2", "r3"]
