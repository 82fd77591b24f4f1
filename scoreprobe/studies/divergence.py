"""A run's training log read for its health: when training started, its loss spikes, and which of them are blow-ups.

Training *starts* at the first logged step whose loss is below START_LOSS: an untrained EDM network (its output F ≈ 0,
so D(x) = c_skip·x) has loss ≈ 1 at every σ with σ_data = 1, and the 0.51M DiT of the shipped recipe is below 0.5
by step 200. The larger DiTs under the same recipe (lr 2e-3, no warm-up) sit at ≈ 1 for up to thousands of steps
first; a start that late shifts every clock of the run.

A *spike* is a logged training loss that is not finite or exceeds FACTOR × the median of the WINDOW lines before it.
It is a *blow-up* (the run diverged) unless training recovers: some WINDOW consecutive lines after it (all of them when
fewer follow) have a median within RECOVER × the median before it. Recovery may take a while (the 2.83M DiT at N = 240,
seed 0: loss 0.14, then 259 at step 19,100, 4.3, 0.54, 0.37, …), so a run is judged once its training is done. Two
spikes seen in the studies (lr 2e-3, no warm-up) show the difference:

- the 2.83M DiT at N = 120, seed 2: 0.105 → 1.1, 14, 214, then 1.0 up to step 14,500 (a network that predicts
  nothing): no median after it comes within 9× the median before, a blow-up;
- the 1.27M DiT at N = 240, seed 1: 0.124 → 0.34, 6.1, then 0.17, 0.15, … (held-out loss unmoved): the 10 lines
  after it have a median 1.2× the one before, recovered. A run that recovered is kept (leaving it out would select
  runs on their outcome) and its spike recorded in the export's meta.

A spike with no line after it (the log ends there) is *pending*: nothing shows it recovered.
"""
import json
import math
import statistics
from pathlib import Path

from scoreprobe.errors import DataError

FACTOR = 10.0    # a logged loss this many times the median of the WINDOW lines before it is a spike
WINDOW = 10
RECOVER = 2.0    # recovered: some WINDOW consecutive lines after it have a median within this × the one before
START_LOSS = 0.5   # training has started once a logged loss is below this (an untrained network's is ≈ 1)


def _losses(path):
    """[(step, loss)] of <path>/train_log.jsonl ([] when there is no log). A last line a kill cut short (no newline)
    is left out, as training drops it when it resumes; any other line that is not a record (JSON with an integer step,
    and a number as loss where it has one) is a DataError naming the file and the line."""
    log = Path(path) / "train_log.jsonl"
    if not log.is_file():
        return []
    lines, out = log.read_text(errors="replace").splitlines(True), []
    for i, line in enumerate(lines, 1):
        if not line.strip() or (i == len(lines) and not line.endswith("\n")):
            continue
        rec = _record(line)
        if rec is None:
            raise DataError(f"{log}, line {i}: not a training-log record (a JSON object with an integer step and a "
                            f"numeric loss): {line.strip()[:60]!r}")
        if "loss" in rec:
            out.append((rec["step"], float(rec["loss"])))
    return out


def _record(line):
    """The JSON object of one log line with an integer step and (where it has one) a numeric loss, else None."""
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(rec, dict) or type(rec.get("step")) is not int:
        return None
    loss = rec.get("loss", 0.0)
    if isinstance(loss, bool) or not isinstance(loss, (int, float)):
        return None
    try:
        float(loss)
    except OverflowError:   # an integer of hundreds of digits
        return None
    return rec


def loss_spikes(path, factor=FACTOR, window=WINDOW, recover=RECOVER):
    """Every spike of <path>'s training log, in order: [{"step", "loss", "median" (of the `window` lines before),
    "after" (the lowest median of `window` consecutive lines after it, or of all of them when fewer follow; None
    when none do), "back_at" (the last step of the first such window within `recover` × "median"; None if none),
    "recovered" (bool; None when no line follows)}]. A spike's own run of spike lines (14, 214 after 1.1) is part of
    what follows it."""
    return _spikes(_losses(path), factor, window, recover)


def _spikes(losses, factor=FACTOR, window=WINDOW, recover=RECOVER):
    """`loss_spikes` of a log already read ([(step, loss)])."""
    out = []
    for i in range(window, len(losses)):
        step, loss = losses[i]
        median = statistics.median(v for _, v in losses[i - window:i])
        if math.isfinite(loss) and loss <= factor * median:
            continue
        later = [(s, v if math.isfinite(v) else math.inf) for s, v in losses[i + 1:]]
        spans = [later[j:j + window] for j in range(max(1, len(later) - window + 1))] if later else []
        medians = [(statistics.median(v for _, v in w), w[-1][0]) for w in spans]
        back = next((at for m, at in medians if m <= recover * median), None)
        out.append({"step": step, "loss": loss, "median": median, "after": min(medians)[0] if medians else None,
                    "back_at": back, "recovered": None if not medians else back is not None})
    return out


def divergence(path, factor=FACTOR, window=WINDOW, recover=RECOVER):
    """The first spike of <path>'s log that did not recover (`loss_spikes`; "recovered" False, or None when the log
    ends at it), or None when training never blew up (or there is no log)."""
    return next((s for s in loss_spikes(path, factor, window, recover) if s["recovered"] is not True), None)


SPIKE_META = ("step", "loss", "median", "after", "back_at")   # what an export's meta keeps of a recovered spike


def recovered_spikes(path):
    """[{"step", "loss", "median", "after", "back_at"}] of the spikes training recovered from, for an export's meta."""
    return [{k: s[k] for k in SPIKE_META} for s in loss_spikes(path) if s["recovered"]]


def training_start(path, start_loss=START_LOSS):
    """The first logged step of <path>'s training log with a loss below `start_loss`; None when there is none
    (training has not started, or there is no log)."""
    return _start(_losses(path), start_loss)


def _start(losses, start_loss=START_LOSS):
    return next((step for step, loss in losses if loss < start_loss), None)


def never_started(record):
    """Whether an export's meta, or a run's row that copies it, records that training never started: a
    `train_start` of None (no logged loss below START_LOSS). A record without the field says nothing: False."""
    return "train_start" in record and record["train_start"] is None


def log_meta(path):
    """What an export's meta records of the training log (read once): {"train_start": step (None: never started)};
    when training never started, {"lowest_loss": {"step", "loss"}, "last_loss": {"step", "loss"}} (how far from
    START_LOSS it stayed); when training recovered from any spike, {"loss_spikes": `recovered_spikes`}; {} when
    there is no log."""
    losses = _losses(path)
    if not losses:
        return {}
    spikes = [{k: s[k] for k in SPIKE_META} for s in _spikes(losses) if s["recovered"]]
    start = _start(losses)
    never = {} if start is not None else {"lowest_loss": dict(zip(("step", "loss"), min(losses, key=lambda x: x[1]))),
                                          "last_loss": dict(zip(("step", "loss"), losses[-1]))}
    return {"train_start": start, **never, **({"loss_spikes": spikes} if spikes else {})}
