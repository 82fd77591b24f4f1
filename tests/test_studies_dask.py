"""scoreprobe.studies.execute.run on dask.distributed (issue 57 item 1): a LocalCluster of 2 one-thread worker
processes, each under a nanny; while one run is training, its worker process is killed (SIGKILL, as the
out-of-memory killer does). The scheduler runs that task again on a worker (the nanny restarts the dead one),
the run continues from its run directory (the checkpoints written before the kill are not rewritten) and
ends bitwise where an uninterrupted run ends; the rest of the grid completes and is exported, but for a run
whose directory holds another run: its task raises, and it is logged as failed without being retried. Each worker's
trainer log goes to a file (a worker plugin, set up again on the restarted worker): the retry says it resumed."""
import dataclasses
import logging
import os
import re
import signal
import sys
import threading
import time

import pytest
import torch

from scoreprobe.studies.execute import run
from scoreprobe.studies.grid import Grid
from scoreprobe.training.config import TrainConfig, ckpt_path
from scoreprobe.training.train import train_run

distributed = pytest.importorskip("distributed")
cloudpickle = pytest.importorskip("cloudpickle")

BASE = TrainConfig(hidden_size=32, depth=1, num_heads=2, n_checkpoints=5, first_checkpoint=10, total_steps=400,
                   n_heldout=32, batch_size=16, lr=1e-2, resume_every=20)
TIMEOUT_S = 240


class TrainerLog(distributed.WorkerPlugin):
    """A worker plugin: the trainer's INFO lines of that worker process go to <folder>/worker-<pid>.log."""

    def __init__(self, folder):
        self.folder = str(folder)

    def setup(self, worker):
        log = logging.getLogger("scoreprobe.training.train")
        log.setLevel(logging.INFO)
        log.addHandler(logging.FileHandler(os.path.join(self.folder, f"worker-{os.getpid()}.log")))


def _kill_mid_training(client, grid, target, killed, stop):
    """Once `target` has a checkpoint after step 0 and is still training (resume.pt), SIGKILL the worker
    process whose task is training it; record what was on disk then in `killed`."""
    run_dir = grid.run_dir(target)
    first = [s for s in target.cfg.checkpoint_schedule() if s > 0][0]
    while not stop.is_set():
        if ckpt_path(run_dir, first).exists() and (run_dir / "resume.pt").exists():
            holders = [w for w, keys in client.processing().items() if any(target.name in str(k) for k in keys)]
            if holders:
                pid = client.run(os.getpid, workers=holders)[holders[0]]
                files = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (run_dir / "ckpt").glob("*.pt")}
                os.kill(pid, signal.SIGKILL)
                killed.update(pid=pid, files=files)
                return
        time.sleep(0.02)


@pytest.mark.slow   # a real SIGKILL of a dask worker mid-run on a LocalCluster
def test_a_worker_killed_mid_run_is_retried_and_the_grid_completes(tmp_path, caplog):
    from scoreprobe.sweep.dask import client_for
    grid = Grid(BASE, {"N": [2, 4, 3], "seed": [0]}, name="dask", out=tmp_path / "grid")
    target, refused = grid.runs[0], grid.runs[2]
    other = dataclasses.replace(refused.cfg, total_steps=5, n_checkpoints=2, first_checkpoint=1, lr=5e-3)
    train_run(other, grid.run_dir(refused), progress=False)   # its directory holds another run: the task raises
    killed, stop = {}, threading.Event()
    t0 = time.monotonic()
    logs = tmp_path / "logs"
    logs.mkdir()
    cloudpickle.register_pickle_by_value(sys.modules[__name__])   # the workers need not import this file
    with client_for(("local", 2)) as client:
        client.register_plugin(TrainerLog(logs), name="trainer-log")
        killer = threading.Thread(target=_kill_mid_training, args=(client, grid, target, killed, stop), daemon=True)
        killer.start()
        try:
            with caplog.at_level(logging.INFO, logger="grid"):
                summary = run(grid, scheduler=client, n_samples=16, n_steps=6)
        finally:
            stop.set()
            killer.join(5)
        pids = set(client.run(os.getpid).values())
    assert time.monotonic() - t0 < TIMEOUT_S
    assert killed, "the run finished training before it could be killed"
    assert summary.done == [target.name, grid.runs[1].name] and summary.failed == [refused.name], summary
    assert sorted(p.stem for p in grid.exports.glob("*.npz")) == sorted([target.name, grid.runs[1].name])
    assert f"{refused.name} failed: ConfigError: " in caplog.text   # raised on its worker: logged, not retried
    assert f"{target.name} started on tcp://" in caplog.text              # issue 78: the runs as they go
    assert f"{target.name}: the worker running it died (1 time(s))" in caplog.text
    assert "submitted 3 runs to tcp://" in caplog.text
    assert killed["pid"] not in pids                      # that worker process is gone (the nanny started another)
    run_dir = grid.run_dir(target)
    for name, (ino, mtime) in killed["files"].items():   # continued, not restarted: nothing before the kill rewritten
        st = (run_dir / "ckpt" / name).stat()
        assert (st.st_ino, st.st_mtime_ns) == (ino, mtime), name
    assert not (run_dir / "resume.pt").exists()
    said = " ".join(p.read_text() for p in logs.glob("*.log"))
    resumed = re.findall(rf"resuming {re.escape(str(run_dir))} from step (\d+) \(resume.pt\)", said)
    assert len(resumed) == 1 and int(resumed[0]) > 0, said   # the retry continued from the dead worker's state
    alone = train_run(target.cfg, tmp_path / "alone", progress=False)   # uninterrupted, here (CPU: bitwise)
    last = ckpt_path(run_dir, target.cfg.total_steps).name
    a, b = (torch.load(d / "ckpt" / last, weights_only=True) for d in (run_dir, alone))
    assert all(torch.equal(a["ema"][k], b["ema"][k]) for k in a["ema"])
