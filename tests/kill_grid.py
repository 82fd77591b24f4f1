"""A tiny Grid run in a process of its own that ends itself with SIGKILL at one point, for tests/test_grid_kills.py:

    python -m tests.kill_grid OUT POINT

POINT is where the kill lands (`POINTS`): nothing after it runs (no `finally`, no lock released by Python: the
kernel drops the flock), so the run directory, the exports and the lock files are left as a real kill leaves them.
The process reaching its end without being killed exits with status 3."""
import os
import signal
import sys

from scoreprobe.training.config import TrainConfig

# 30 steps of a width-32 one-block DiT, checkpoints at 0, 10, 30 (3 steps), 8 samples of 4 ODE steps
BASE = TrainConfig(hidden_size=32, depth=1, num_heads=2, n_checkpoints=3, first_checkpoint=10, total_steps=30,
                   n_heldout=16, batch_size=8, lr=1e-2)
SIZES = dict(n_samples=8, n_steps=4)
POINTS = ("after_run_json", "mid_checkpoint", "mid_export")


def grid(out):
    from scoreprobe.studies.grid import Grid
    return Grid(BASE, {"N": [2]}, name="kill", out=out)


def die(*_):
    os.kill(os.getpid(), signal.SIGKILL)


def half_then_die(path, write, mode="wb"):
    """atomic_write's temporary file half written, then the kill (as a kill while a file is being written)."""
    from scoreprobe.atomic import atomic_path
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(b"\x00" * 100)
            f.flush()
            die()


def arm(point):
    """Replace the function where `point` lands by one that kills this process there."""
    from scoreprobe.studies import export
    from scoreprobe.training import train
    if point == "after_run_json":        # run.json and dataset.npz written, no checkpoint yet, the lock held
        train._save_step = die
    elif point == "mid_checkpoint":      # the checkpoint of step 10 half written (resume.pt of step 10 is whole)
        real = train.save_checkpoint
        train.save_checkpoint = lambda ck, path, save: real(
            ck, path, (lambda obj, p: half_then_die(p, None)) if ck["step"] == 10 else save)
    elif point == "mid_export":          # trained and measured, its export half written
        export.atomic_write = half_then_die
    else:
        raise SystemExit(f"unknown point {point!r}: one of {POINTS}")


if __name__ == "__main__":
    import torch
    torch.set_num_threads(1)
    arm(sys.argv[2])
    from scoreprobe.studies.execute import run
    run(grid(sys.argv[1]), **SIZES)
    sys.exit(3)
