"""Live TensorBoard events while a run trains or a Monitor measures, through tensorboardX's kept writer.

    scoreprobe train --tensorboard tb/ ...          # then: tensorboard --logdir tb/   (updates as it trains)
    monitor = sp.Monitor(ds, every=500, tensorboard="tb/run1")

What is written (each event at the wall time it is made; tensorboardX's thread puts it on disk within FLUSH_SECS,
and `close()` — at the end of training, `Monitor.close()` — writes what is left):
- from the training log, at each logged step: `train/loss`, `train/loss_by_sigma/<bucket>`, `heldout/loss`,
  `heldout/loss_by_sigma/<bucket>`;
- from a Monitor, at each measured step: `clocks/<curve>` (rule_acc, novel_valid, mem_ratio) with their 95% Wilson
  interval ends `clocks/<curve>_lo`, `_hi`, shown together as margin charts (the "clocks" custom-scalar layout),
  `tau/<clock>` (the τ known at this step, in steps, once it is reached), and `samples`: a grid of the first
  16 samples' bits (white = 1) when the monitor keeps its bits (keep_bits=True).

`train_run(..., tensorboard=, tensorboard_samples=N)` / `scoreprobe train --tensorboard DIR --tensorboard-samples N`
also measures the EMA model at each checkpoint step with a Monitor of N samples (training/monitor.live_monitor: the clocks with their
intervals, τ and the sample grid above, in the same event file as the losses); the training itself is unchanged (the
Monitor leaves the loop's random streams as they were).

`pip install "scoreprobe[tensorboard]"` (tensorboardX and protobuf, < 0.5 MB) provides the writer; without it
asking for live events is one ConfigError. `scoreprobe export-tb` (training/tensorboard.py) writes the same tags
after the fact from run directories and stores.
"""
import math

import numpy as np

from scoreprobe.errors import ConfigError
from scoreprobe.probes.wilson import wilson_interval
from scoreprobe.training.trainlog import bucket_tag

CURVES = ("rule_acc", "novel_valid", "mem_ratio")
CLOCKS = ("tau_rule", "tau_novel", "tau_mem")
Z95 = 1.959963984540054
FLUSH_SECS = 2          # tensorboardX writes from a queue on its own thread and reaches the disk at most this late


class LiveBoard:
    """A TensorBoard event writer for one run folder (tensorboardX.SummaryWriter), created at the first use."""

    def __init__(self, logdir):
        if not isinstance(logdir, (str, bytes)) and not hasattr(logdir, "__fspath__"):
            raise ConfigError(f"tensorboard= is a folder path, got {logdir!r}")
        try:
            from tensorboardX import SummaryWriter
        except ImportError:
            raise ConfigError("live TensorBoard events need tensorboardX: pip install 'scoreprobe[tensorboard]'") \
                from None
        self.logdir = str(logdir)
        self.writer = SummaryWriter(self.logdir, flush_secs=FLUSH_SECS)
        self.writer.add_custom_scalars({"clocks": {
            c: ["Margin", [f"clocks/{c}", f"clocks/{c}_lo", f"clocks/{c}_hi"]] for c in CURVES}})

    def log_record(self, rec):
        """A training-log record (trainlog.log_record, with its `heldout` part when present)."""
        step = int(rec["step"])
        self._scalar("train/loss", rec["loss"], step)
        for bucket, v in (rec.get("loss_by_sigma") or {}).items():
            self._scalar(f"train/loss_by_sigma/{bucket_tag(bucket)}", v, step)
        held = rec.get("heldout") or {}
        if "loss" in held:
            self._scalar("heldout/loss", held["loss"], step)
        for bucket, v in (held.get("loss_by_sigma") or {}).items():
            self._scalar(f"heldout/loss_by_sigma/{bucket_tag(bucket)}", v, step)
        self.writer.flush()

    def log_clocks(self, step, part, tau, image_shape=None):
        """One measured step of a Monitor: part (its clocks Dataset, one step), the τ summary known now, and the
        rule's image shape (C, H, W) for the sample grid."""
        n = int(part.sizes["sample"])
        for c in CURVES:
            y = float(part[c].values[0])
            lo, hi = wilson_interval(np.array([y]), n, Z95)
            self._scalar(f"clocks/{c}", y, step)
            self._scalar(f"clocks/{c}_lo", float(lo[0]), step)
            self._scalar(f"clocks/{c}_hi", float(hi[0]), step)
        for k in CLOCKS:                                   # a τ once reached (in steps); nothing while it is not
            v = (tau or {}).get(k)
            if v is not None and math.isfinite(float(v)):
                self._scalar(f"tau/{k}", float(v), step)
        if "bits" in part and image_shape is not None:
            self.writer.add_image("samples", sample_grid(part["bits"].values.reshape(-1, part.sizes["bit"]),
                                                         image_shape), int(step), dataformats="HW")
        self.writer.flush()

    def _scalar(self, tag, value, step):
        if value is not None:
            self.writer.add_scalar(tag, float(value), int(step))

    def close(self):
        """Write every pending event and close the file (idempotent)."""
        self.writer.close()


def sample_grid(bits, image_shape, n=16, cols=4):
    """(H', W') uint8: the first n samples' bits (N, D) as images (one-hot channels: the symbol's index, scaled),
    white = 1, in a grid of `cols` columns with one grey pixel between them."""
    C, H, W = image_shape
    imgs = bits[:n].reshape(-1, C, H, W)
    imgs = imgs[:, 0] * 255 if C == 1 else imgs.argmax(1) * (255 // max(C - 1, 1))           # (k, H, W)
    rows = -(-len(imgs) // cols)
    grid = np.full((rows * (H + 1) - 1, cols * (W + 1) - 1), 128, np.uint8)
    for k, im in enumerate(imgs):
        r, c = divmod(k, cols)
        grid[r * (H + 1):r * (H + 1) + H, c * (W + 1):c * (W + 1) + W] = im
    return grid
