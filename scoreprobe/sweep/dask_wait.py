"""Waiting for a dask task without hanging: every way a task or its cluster can fail ends in one
typed error (`scoreprobe.errors.WorkerError`) within a stated bound.

    raised in the task (RuntimeError, MemoryError...)  at once, not retried (the step is a pure
                                                       function of its inputs: a retry raises again)
    the task's worker process dies (os._exit, a kill,  the scheduler retries the task on a fresh
    the OOM killer)                                    worker ALLOWED_FAILURES times (a LocalCluster
                                                       started here; a remote scheduler uses its own
                                                       distributed.scheduler.allowed-failures), then
                                                       the error
    no worker left in the cluster                      after NO_WORKER_S seconds without any
    the scheduler killed or unreachable                after SILENT_SCHEDULER_S seconds without an
                                                       answer, or as soon as the client says so

The cluster is asked how many workers it has every POLL_S seconds while a result is awaited
(one small request, answered from the scheduler's memory). Closing a client or a cluster is
bounded by CLOSE_S and never raises: the error that ended the run is the one reported. Steps
already written stay written; a rerun resumes.
"""
import contextlib
import re
import time

from scoreprobe.errors import WorkerError, first_line

POLL_S = 2.0
NO_WORKER_S = 60.0
SILENT_SCHEDULER_S = 30.0
ALLOWED_FAILURES = 2
CLOSE_S = 10.0

RESUME = "the steps before it are written; rerun to resume"


def wait_result(future, client, step):
    """`future.result()`, or a WorkerError naming `step` and what happened (see the module)."""
    import distributed
    watch = _Watch(client, step)
    while True:
        try:
            return future.result(timeout=POLL_S)
        except TimeoutError:    # still pending: is there still a cluster to run it?
            watch.check()
        except distributed.KilledWorker as e:
            tries = re.search(r"on (\d+) different workers", str(e))
            raise WorkerError(f"step {step}: its task ended the worker process that ran it "
                              f"{tries.group(1) + ' times' if tries else 'every time'} (killed, exited or out of "
                              f"memory); {RESUME}") from None
        except distributed.client.FutureCancelledError as e:
            raise WorkerError(f"step {step}: {_cancelled(e)}; {RESUME}") from None
        except Exception as e:  # noqa: BLE001  (anything else dask raises: one typed line)
            raise WorkerError(f"step {step} failed on a dask worker ({first_line(e)}); {RESUME}") from None


def _cancelled(e):
    """Why a task was cancelled: the client lost its scheduler (killed, unreachable), or another reason."""
    reason = str(getattr(e, "reason", None) or e)
    if "connection" in reason.lower():
        return "lost the connection to the dask scheduler (killed or unreachable)"
    return f"the dask scheduler cancelled its task ({first_line(e)})"


class _Watch:
    """Tells, once per POLL_S, whether a pending task can still finish (workers, a scheduler)."""

    def __init__(self, client, step):
        self.client, self.step = client, step
        self.no_worker_since = self.silent_since = None

    def check(self):
        now = time.monotonic()
        if self.client.status in ("closing", "closed"):
            raise WorkerError(f"step {self.step}: lost the connection to the dask scheduler; {RESUME}")
        try:
            n = self.client.sync(self.client.scheduler.identity, n_workers=0, callback_timeout=POLL_S)["n_workers"]
        except Exception:  # noqa: BLE001  (no answer: killed, unreachable, reconnecting)
            self.silent_since = self.silent_since or now
            if now - self.silent_since > SILENT_SCHEDULER_S:
                raise WorkerError(f"step {self.step}: the dask scheduler has not answered for "
                                  f"{SILENT_SCHEDULER_S:.0f} s (killed or unreachable); {RESUME}") from None
            return
        self.silent_since = None
        self.no_worker_since = (self.no_worker_since or now) if n == 0 else None
        if self.no_worker_since is not None and now - self.no_worker_since > NO_WORKER_S:
            raise WorkerError(f"step {self.step}: the dask cluster has had no worker for {NO_WORKER_S:.0f} s; "
                              f"{RESUME}")


def close_quietly(obj):
    """Close a Client or a cluster within CLOSE_S, whatever state it is in (a dead scheduler...)."""
    with contextlib.suppress(Exception):
        obj.close(timeout=CLOSE_S)
    disarm(obj)


def disarm(client):
    """Make a Client's `__del__` a no-op (it would otherwise try to close it again at garbage
    collection and print 'Exception ignored in: Client.__del__ ... TimeoutError' a minute later)."""
    import distributed
    if isinstance(client, distributed.Client):
        with contextlib.suppress(Exception):
            client.status = "closed"
            client._loop_runner.stop()


def half_made_client(tb, client_type):
    """The Client whose constructor raised, from the traceback `tb` (None when not found)."""
    while tb is not None:
        obj = tb.tb_frame.f_locals.get("self")
        if isinstance(obj, client_type):
            return obj
        tb = tb.tb_next
    return None
