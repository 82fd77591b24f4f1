"""The hand-written TFRecord writer (training/tensorboard.py, behind `scoreprobe export-tb`) against tensorboardX's
SummaryWriter (training/live.py), writing the same events: the shipped run's training log
(checkpoints/parity-default, 360 records of `train/loss`). Times are medians of --reps rounds, the two writers
alternating; each writes into a fresh folder and its file is complete on disk when the time is taken.

    PYTHONPATH=$PWD python bench/bench_tensorboard_writers.py [--reps 7]

Rows:
  export-tb (hand-written)   export_tb([run], logdir): read the log, check every value, frame, write atomically
  hand-written, frames only  the same events framed in memory (CRC-32C in pure python): the writer's own cost
  tensorboardX, one writer   SummaryWriter: add_scalar per event with the log's step, close()
  tensorboardX, live path    LiveBoard.log_record per record (a flush after each, as `train --tensorboard` does)
Also the bytes of each file and whether both files hold the same (step, tag, value) triples.
"""
import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

RUN = Path(__file__).resolve().parents[1] / "checkpoints" / "parity-default"


def _hand(logdir):
    from scoreprobe.training.tensorboard import export_tb
    return export_tb([str(RUN)], logdir)[0]


def _frames_only(records):
    from scoreprobe.training.tensorboard import _event_bytes, _log_scalars
    return _event_bytes([(r["step"], _log_scalars(r)) for r in records])


def _tbx(logdir, records):
    from tensorboardX import SummaryWriter
    w = SummaryWriter(str(logdir))
    for r in records:
        w.add_scalar("train/loss", r["loss"], r["step"])
    w.close()
    return next(Path(logdir).glob("events.out.tfevents.*"))


def _live(logdir, records):
    from scoreprobe.training.live import LiveBoard
    b = LiveBoard(logdir)
    for r in records:
        b.log_record(r)
    b.close()
    return next(Path(logdir).glob("events.out.tfevents.*"))


def _triples(raw):
    from tensorboardX.proto import event_pb2
    from scoreprobe.training.tensorboard import records
    out = set()
    for data in records(raw):
        e = event_pb2.Event.FromString(data)
        out |= {(e.step, v.tag, v.simple_value) for v in e.summary.value if v.tag.startswith("train/")}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args(argv)
    from scoreprobe.training.trainlog import read_log
    records = list(read_log(RUN))
    times = {k: [] for k in ("export-tb (hand-written)", "hand-written, frames only", "tensorboardX, one writer",
                             "tensorboardX, live path")}
    files = {}
    for _ in range(args.reps):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            for i, (name, fn) in enumerate((("export-tb (hand-written)", lambda d: _hand(d)),
                                            ("hand-written, frames only", lambda d: _frames_only(records)),
                                            ("tensorboardX, one writer", lambda d: _tbx(d, records)),
                                            ("tensorboardX, live path", lambda d: _live(d, records)))):
                t = time.perf_counter()
                f = fn(tmp / str(i))
                times[name].append(time.perf_counter() - t)
                files[name] = f if isinstance(f, bytes) else f.read_bytes()
    print(f"{len(records)} records of {RUN.name}; median of {args.reps} rounds")
    for name, ts in times.items():
        print(f"  {name:28s} {1000 * statistics.median(ts):8.1f} ms   {len(files[name]):7d} bytes")
    same = _triples(files["export-tb (hand-written)"]) == _triples(files["tensorboardX, one writer"])
    print(f"  the same (step, tag, value) in both files: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
