"""The training log `train_log.jsonl`: the loss per logging interval and its σ-bucketed parts.

One JSON record per line, written every `log_every` optimizer steps:

    {"step": 1200, "loss": 0.1834, "loss_by_sigma": {"sigma<0.1": 0.021, "0.1<=sigma<1": 0.164, "sigma>=1": 0.611}}

`loss` is the mean per-sample training loss over the interval's minibatches; for a DiT (EDM) it is the
weighted DSM loss λ(σ)·mean_i (D(x, σ)_i − y_i)², and `loss_by_sigma` is its mean over the samples
of the interval whose training σ fell in each bucket (null for a bucket no sample fell in; bucket
edges `SIGMA_EDGES`). A GPT's lines have no buckets. Logs written before the buckets existed
have `step` and `loss` only; `read_log` reads both, with checks, so that no log makes a traceback
(plot-log and export-tb read it).

A DiT's lines also carry `heldout`: the same loss of the model at that step on a fixed bank of
held-out items (`heldout_bank`: the first 64 held-out items, 4 draws of σ and noise each, drawn once),
{"loss", "loss_by_sigma", "n_items", "n_draws"}; training loss below it is memorization showing.
"""
import json
import math
import warnings
from pathlib import Path

import numpy as np

from scoreprobe.errors import DataError, ScoreprobeWarning
from scoreprobe.limits import MAX_LOG_BYTES, MAX_LOG_LINE_BYTES, MAX_STEP

SIGMA_EDGES = (0.1, 1.0)   # bucket edges in σ: σ < 0.1 (fine detail), 0.1 ≤ σ < 1, σ ≥ 1 (coarse structure)
LOG_NAME = "train_log.jsonl"


def bucket_labels(edges=SIGMA_EDGES):
    """The keys of `loss_by_sigma`, one per bucket: 'sigma<e0', 'e0<=sigma<e1', ..., 'sigma>=eK'."""
    fmt = lambda e: f"{e:g}"  # noqa: E731
    inner = [f"{fmt(a)}<=sigma<{fmt(b)}" for a, b in zip(edges[:-1], edges[1:])]
    return [f"sigma<{fmt(edges[0])}", *inner, f"sigma>={fmt(edges[-1])}"]


def bucket_tag(bucket):
    """A bucket label as a TensorBoard tag part: 'sigma<0.1' -> 'sigma_lt_0.1', '0.1<=sigma<1' -> '0.1_le_sigma_lt_1',
    'sigma>=1' -> 'sigma_ge_1' (tensorboardX would rewrite '<' and '=' to '_' on its own, losing the reading; the
    live writer and export-tb use this one form)."""
    return str(bucket).replace("<=", "_le_").replace(">=", "_ge_").replace("<", "_lt_").replace(">", "_gt_")


def bucket_sums(loss, sigma, edges=SIGMA_EDGES):
    """Per-bucket loss sums and counts of one minibatch: a (2K,) float64 tensor [sums..., counts...].

    loss: (B,) per-sample losses; sigma: (B,) their training σ. K = len(edges) + 1 buckets.
    """
    import torch
    k = len(edges) + 1
    idx = torch.bucketize(sigma.detach(), torch.tensor(edges, dtype=sigma.dtype, device=sigma.device),
                          right=True)                                                 # (B,) in [0, K)
    sums = torch.zeros(k, dtype=torch.float64, device=loss.device).index_add_(0, idx, loss.detach().double())
    counts = torch.bincount(idx, minlength=k).double()                                # (K,)
    return torch.cat([sums, counts])                                                  # (2K,)


def log_record(step, losses, parts=None, edges=SIGMA_EDGES):
    """The log line's dict for `step`: losses, the interval's step losses (floats); parts, their
    per-step bucket_sums as lists (or None: no buckets)."""
    rec = {"step": step, "loss": float(np.mean(losses))}
    if parts:
        k = len(edges) + 1
        sums = [math.fsum(p[i] for p in parts) for i in range(k)]
        counts = [math.fsum(p[k + i] for p in parts) for i in range(k)]
        rec["loss_by_sigma"] = {lab: (s / c if c else None)
                                for lab, s, c in zip(bucket_labels(edges), sums, counts)}
    return rec


def postfix(rec):
    """A short text for a progress line: 'loss 0.1834 (σ<0.1 0.021, 0.1≤σ<1 0.164, σ≥1 0.611)'."""
    text = f"loss {rec['loss']:.4f}"
    parts = rec.get("loss_by_sigma")
    if parts:
        nice = lambda lab: lab.replace("sigma", "σ").replace("<=", "≤").replace(">=", "≥")  # noqa: E731
        text += " (" + ", ".join(f"{nice(k)} {'-' if v is None else f'{v:.3f}'}" for k, v in parts.items()) + ")"
    return text


def read_log(run_dir):
    """The records of RUN_DIR/train_log.jsonl checked (see the module text), a list of dicts sorted by
    step (stable). Lines that are no record (cut short by a kill, not UTF-8, longer than
    MAX_LOG_LINE_BYTES, nested deeper than MAX_JSON_DEPTH) are skipped and counted in one warning.
    DataError for no log, a log past MAX_LOG_BYTES (before it is read), a record with a wrong value
    (`step` an integer in [0, MAX_STEP], `loss` a number >= 0 that is not a bool, `loss_by_sigma` an
    object of such numbers or nulls, `heldout` likewise), or no record."""
    path = Path(run_dir) / LOG_NAME
    if not path.is_file():
        what = "is not a directory" if not Path(run_dir).is_dir() else f"has no {LOG_NAME}"
        raise DataError(f"{run_dir} {what}; plot-log reads the training log of a run directory "
                        "written by `scoreprobe train`")
    size = path.stat().st_size
    if size > MAX_LOG_BYTES:
        raise DataError(f"{path} holds {size / 2**20:.0f} MiB, more than the {MAX_LOG_BYTES >> 20} MiB plot-log "
                        "reads (scoreprobe.limits.MAX_LOG_BYTES)")
    recs, n_lines, skipped = [], 0, 0
    with open(path, "rb") as f:
        for i, raw in enumerate(_lines(f), 1):
            n_lines = i
            if not raw.strip():
                continue
            rec = _parse(raw)
            if rec is None or "loss" not in rec:   # no record: cut short, garbage, or a line of another kind
                skipped += 1
                continue
            _check_record(rec, f"{path}, line {i}")
            recs.append(rec)
    if not recs:
        raise DataError(f"{path} holds no training-log records (the run has not logged a step yet)")
    if skipped:
        warnings.warn(f"{path}: {skipped} of {n_lines} lines are not training-log records (cut short by a kill, "
                      "not JSON, too long or too deeply nested) and were skipped", ScoreprobeWarning, stacklevel=3)
    return sorted(recs, key=lambda r: r["step"])


def _parse(raw):
    """The JSON object of one log line (bytes), or None when it is not one within the limits."""
    if len(raw) > MAX_LOG_LINE_BYTES:
        return None
    try:
        rec = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):   # not JSON, not UTF-8, nested past the interpreter's limit
        return None
    return rec if isinstance(rec, dict) else None


def _loss(v):
    """A loss value: a JSON number (not a bool) that is a float (NaN and inf included: a diverged run)
    and not negative."""
    if type(v) is float:    # JSON gives float, int, bool, str, None, list or dict: exact types are enough
        return not v < 0
    if type(v) is int:
        try:
            return float(v) >= 0
        except OverflowError:   # an integer of hundreds of digits
            return False
    return False


def _check_record(rec, where):
    """DataError unless rec's step, loss and loss_by_sigma have the types and ranges of a log record."""
    step, loss, parts = rec.get("step"), rec.get("loss"), rec.get("loss_by_sigma")
    if type(step) is not int or not 0 <= step <= MAX_STEP:
        raise DataError(f"{where}: step must be an integer in [0, {MAX_STEP}], got {_short(step)}")
    if not _loss(loss):
        raise DataError(f"{where}: loss must be a number >= 0 (a mean squared or cross-entropy loss), "
                        f"got {_short(loss)}")
    if parts is not None and not (isinstance(parts, dict) and all(v is None or _loss(v) for v in parts.values())):
        raise DataError(f"{where}: loss_by_sigma must be an object of losses >= 0 or nulls, got {_short(parts)}")
    held = rec.get("heldout")
    if held is not None and not (isinstance(held, dict) and _loss(held.get("loss"))):
        raise DataError(f"{where}: heldout must be an object with a loss >= 0 (trainlog.heldout_record), "
                        f"got {_short(held)}")
    if held is not None:
        _check_record({"step": step, "loss": held["loss"], "loss_by_sigma": held.get("loss_by_sigma")},
                      f"{where}, heldout")


def _short(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _lines(f):
    """The lines of a binary file, each cut at MAX_LOG_LINE_BYTES + 1 bytes (the rest of a longer line
    is read and dropped, never held), at most MAX_LOG_BYTES in all."""
    total = 0
    while total <= MAX_LOG_BYTES:
        line = f.readline(MAX_LOG_LINE_BYTES + 1)
        if not line:
            return
        total += len(line)
        while len(line) > MAX_LOG_LINE_BYTES and not line.endswith(b"\n"):
            rest = f.readline(MAX_LOG_LINE_BYTES + 1)
            total += len(rest)
            if not rest or rest.endswith(b"\n"):
                break
        yield line


def check_log(path):
    """CheckpointError when a line of the training log at `path` other than a last one cut short by a
    kill is not a record (not JSON, nested too deep, no integer step): the trainer rewrites the log when
    it resumes and must neither drop nor misread such a line. Nothing is read when there is no log."""
    from scoreprobe.errors import CheckpointError
    if not path.exists():
        return
    lines = path.read_text().splitlines(True)
    bad = [i + 1 for i, line in enumerate(lines) if _log_step(line) is None
           and not (i == len(lines) - 1 and not line.endswith("\n"))]
    if bad:
        raise CheckpointError(f"{path}: line(s) {', '.join(map(str, bad[:5]))}{' ...' if len(bad) > 5 else ''} of "
                              f"{len(lines)} are not training-log records (JSON objects with an integer step); "
                              "training rewrites the log when it continues and would lose them: repair or remove "
                              "those lines, then run the same command again")


def truncate_log(path, step):
    """Drop the log lines written after `step` by an interrupted run (they are about to be redone) and
    a last line a kill cut short (`check_log` has refused any other line that is not a record). The
    file is rewritten atomically (temp file, fsync, rename: a kill leaves the old log or the new one)
    and only when a line goes."""
    from scoreprobe.training.config import atomic_write_text
    if not path.exists():
        return
    lines = path.read_text().splitlines(True)
    steps = [_log_step(line) for line in lines]
    keep = [line for line, s in zip(lines, steps) if s is not None and s <= step]
    if len(keep) != len(lines):
        atomic_write_text(path, "".join(keep))


def _log_step(line):
    """The step of a complete training-log line, None for a line that is not one (cut short, not JSON,
    nested too deep, without an integer step)."""
    if not line.endswith("\n"):
        return None
    try:
        step = json.loads(line).get("step")
    except (ValueError, AttributeError, RecursionError):
        return None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


# ---------------------------------------------------------------------------------------------
# The held-out DSM loss of a log line
# ---------------------------------------------------------------------------------------------

HELDOUT_ITEMS, HELDOUT_DRAWS, HELDOUT_SEED = 64, 4, 20261202   # the fixed held-out bank (see heldout_bank)


def heldout_bank(heldout_bits, p_mean, p_std, n_items=HELDOUT_ITEMS, n_draws=HELDOUT_DRAWS, seed=HELDOUT_SEED):
    """The fixed draws a run's held-out loss is measured on at every log line: the first `n_items`
    held-out items (N_h, D) uint8, each `n_draws` times, with σ from the training distribution
    (lognormal p_mean, p_std) and Gaussian noise, drawn once from their own generator (the training
    stream is not touched). Returns (y (M, D) signed, sigma (M,), noise (M, D)) CPU tensors and the
    number of items, or None without held-out items."""
    import torch
    from scoreprobe.models.edm import sample_sigmas
    bits = np.asarray(heldout_bits, dtype=np.uint8)[:n_items]
    if len(bits) == 0:
        return None
    gen = torch.Generator().manual_seed(seed)
    y = torch.from_numpy(np.repeat(bits, n_draws, axis=0)).float() * 2 - 1                 # (M, D)
    sigma = sample_sigmas(len(y), gen, p_mean=p_mean, p_std=p_std)                          # (M,)
    return y, sigma, torch.randn(y.shape, generator=gen), len(bits)


def heldout_record(model, bank, edges=SIGMA_EDGES):
    """The log record's `heldout` field: the EDM-weighted DSM loss (as in training) of `model` on
    the bank of `heldout_bank`, without gradients: {"loss": mean, "loss_by_sigma": {bucket: mean
    or None}, "n_items": held-out items, "n_draws": rows}."""
    import torch
    from scoreprobe.models.edm import dsm_loss
    y, sigma, noise, n_items = bank
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    with torch.no_grad():
        loss = dsm_loss(model, y.to(device), sigma.to(device), noise.to(device))                  # (M,)
    parts = bucket_sums(loss, sigma.to(device)).tolist()                                          # (2K,)
    rec = log_record(0, [float(loss.double().mean())], [parts], edges)
    return {"loss": rec["loss"], "loss_by_sigma": rec["loss_by_sigma"], "n_items": n_items, "n_draws": len(y)}
