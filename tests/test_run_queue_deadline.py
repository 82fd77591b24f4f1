"""run_queue's --hours: a run starts only when its estimate (× LOAD_FACTOR) ends before the deadline *at the time
it would start*; runs that fitted when the queue began but no longer do after the earlier runs are not started."""
import types

import numpy as np
from pytest import approx

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


def test_workers_beyond_the_cores_slow_every_run_in_the_deadline_check(monkeypatch):
    """3 one-thread workers on 2 cores each run at 2/3 of the one-thread rate: a 60-min estimate × 1.5 × 3/2 =
    135 min does not fit 2 hours, where it would on 3 cores (90 min)."""
    runs = [types.SimpleNamespace(name=f"r{i}") for i in range(3)]
    started = {}

    def one_pass(q, todo, jobs):       # the pool's loop without processes: which runs `fits` lets start
        fits = q[2]
        started[jobs] = [r.name for r in list(todo) if fits(r)]
        todo.clear()
        return []
    monkeypatch.setattr(queue, "_pool_pass", one_pass)
    for cores, expect in ((2, []), (3, ["r0", "r1", "r2"])):
        monkeypatch.setattr(queue, "cpu_cores", lambda: cores)
        queue.run_queue(None, types.SimpleNamespace(device="cpu"), runs, None, lambda r: 60 * 60, hours=2.0, jobs=3)
        assert started[3] == expect


def test_shared_cores_only_where_cpu_workers_outnumber_them(monkeypatch):
    monkeypatch.setattr(queue, "cpu_cores", lambda: 2)
    assert queue.shared_cores("cpu", 3) == 2
    assert queue.shared_cores("cpu", 2) is None and queue.shared_cores("cuda", 8) is None


def _first_free_worker(seconds, jobs):
    """The plain schedule (a core per worker): each run on the first free of `jobs` workers."""
    free, done = [0.0] * jobs, []
    for s in seconds:
        i = min(range(jobs), key=free.__getitem__)
        free[i] += s
        done.append(free[i])
    return done, max(free)


def test_finish_times_with_a_core_per_worker_is_the_first_free_worker_schedule():
    rng = np.random.default_rng(0)
    for _ in range(200):
        secs, jobs = list(rng.integers(1, 100, rng.integers(0, 9)).astype(float)), int(rng.integers(1, 5))
        done, total = queue.finish_times(secs, jobs)
        ref_done, ref_total = _first_free_worker(secs, jobs) if secs else ([], 0.0)
        np.testing.assert_allclose(done, ref_done) if secs else None
        assert total == approx(ref_total)
        assert queue.finish_times(secs, jobs, cores=jobs) == (done, total)


def test_finish_times_shares_the_cores_between_the_runs_in_flight():
    # 3 equal runs on 2 cores: all at 2/3 speed, done together after 90 of their 60 one-thread minutes
    assert queue.finish_times([60, 60, 60], 3, cores=2) == ([90.0, 90.0, 90.0], 90.0)
    # 2 workers on 1 core: r0 and r1 at half speed, r0 done at 60 (r1 has 30 left); r1 and r2 at half speed, r1 done
    # at 120 (r2 has 60 left), r2 alone at full speed done at 180 = all the work on one core
    done, total = queue.finish_times([30, 60, 90], 2, cores=1)
    np.testing.assert_allclose(done, [60, 120, 180])
    assert total == approx(180)
