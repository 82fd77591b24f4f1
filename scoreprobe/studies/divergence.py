"""A run's training log read for its health: when training started, its loss spikes, and which of them are blow-ups.

Training *starts* at the first logged step whose loss is below START_LOSS: an untrained EDM network (its output F ≈ 0,
so D(x) = c_skip·x) has loss ≈ 1 at every σ with σ_data = 1, and the 0.51M DiT of the shipped recipe is below 0.5
by step 200. The larger DiTs under the same recipe (lr 2e-3, no warm-up) sit at ≈ 1 for up to thousands of steps
first; a start that late shifts every clock of the run.

A *spike* is a logged training loss that is not finite or exceeds FACTOR × the median of the WINDOW lines before it.
It is a *blow-up* (the run diverged) unless training recovers: the median of the (up to) WINDOW lines after it is
within RECOVER × the median before it. Two spikes seen in the studies (lr 2e-3, no warm-up) show the difference:

- the 2.83M DiT at N = 120, seed 2: 0.105 → 1.1, 14, 214, then 1.0 for good (a network that predicts nothing): the
  median after is 9× the median before, a blow-up;
- the 1.27M DiT at N = 240, seed 1: 0.124 → 0.34, 6.1, then 0.17, 0.15, … (held-out loss unmoved): the median after
  is 1.2× the median before, recovered; the run is a working network at every checkpoint after it and is kept
  (leaving it out would select runs on their outcome), its spike is recorded in the export's meta.

A spike with no line after it (the log ends there) is *pending*: nothing shows it recovered.
"""
import json
import math
import statistics
from pathlib import Path

FACTOR = 10.0    # a logged loss this many times the median of the WINDOW lines before it is a spike
WINDOW = 10
RECOVER = 2.0    # recovered: the median of the WINDOW lines after the spike is within this many times the one before
START_LOSS = 0.5   # training has started once a logged loss is below this (an untrained network's is ≈ 1)


def _losses(path):
    """[(step, loss)] of <path>/train_log.jsonl ([] when there is no log)."""
    log = Path(path) / "train_log.jsonl"
    if not log.is_file():
        return []
    return [(int(d["step"]), float(d["loss"])) for d in map(json.loads, filter(str.strip, log.read_text().splitlines()))
            if "loss" in d]


def loss_spikes(path, factor=FACTOR, window=WINDOW, recover=RECOVER):
    """Every spike of <path>'s training log, in order: [{"step", "loss", "median" (of the `window` lines before),
    "after" (median of up to `window` lines after; None when none follow), "recovered" (bool; None when pending)}].
    A spike's own run of spike lines (14, 214 after 1.1) is part of its "after"."""
    losses, out = _losses(path), []
    for i in range(window, len(losses)):
        step, loss = losses[i]
        median = statistics.median(v for _, v in losses[i - window:i])
        if math.isfinite(loss) and loss <= factor * median:
            continue
        later = [v if math.isfinite(v) else math.inf for _, v in losses[i + 1:i + 1 + window]]
        after = statistics.median(later) if later else None
        out.append({"step": step, "loss": loss, "median": median, "after": after,
                    "recovered": None if after is None else bool(after <= recover * median)})
    return out


def divergence(path, factor=FACTOR, window=WINDOW, recover=RECOVER):
    """The first spike of <path>'s log that did not recover (`loss_spikes`; "recovered" False, or None when the log
    ends at it), or None when training never blew up (or there is no log)."""
    return next((s for s in loss_spikes(path, factor, window, recover) if s["recovered"] is not True), None)


def recovered_spikes(path):
    """[{"step", "loss", "median", "after"}] of the spikes training recovered from, for an export's meta."""
    return [{k: s[k] for k in ("step", "loss", "median", "after")} for s in loss_spikes(path) if s["recovered"]]


def training_start(path, start_loss=START_LOSS):
    """The first logged step of <path>'s training log with a loss below `start_loss`; None when there is none
    (training has not started, or there is no log)."""
    return next((step for step, loss in _losses(path) if loss < start_loss), None)


def log_meta(path):
    """What an export's meta records of the training log: {"train_start": step (None: never started)} and, when
    training recovered from any spike, {"loss_spikes": `recovered_spikes`}; {} when there is no log."""
    if not _losses(path):
        return {}
    spikes = recovered_spikes(path)
    return {"train_start": training_start(path), **({"loss_spikes": spikes} if spikes else {})}
