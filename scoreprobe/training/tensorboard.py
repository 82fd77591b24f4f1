"""TensorBoard scalars of runs and clocks stores, written without TensorBoard or TensorFlow installed.

    export_tb(["runs/g2-n120", "clocks.zarr"], "tb/")    # then: tensorboard --logdir tb/

An event file (`events.out.tfevents.scoreprobe`, one per run folder) is a sequence of TFRecords, each
`uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)` (little-endian;
the mask of a CRC-32C c is ((c >> 15) | (c << 17)) + 0xa282ead8 mod 2³²), whose data is a serialized
`tensorflow.Event` protocol buffer: wall_time (field 1, double), step (2, int64), file_version (3,
string, "brain.Event:2" in the first record) or summary (5: a `Summary` of `Value`s, each a tag (1,
string) and a simple_value (2, float)). These are the published formats (TFRecord, protobuf wire
format, tensorflow/core/util/event.proto and summary.proto); the code here is written from them
and checked by reading the files back (`read_events`) and against the CRC-32C check values of
RFC 3720.

What is written, one subfolder of `logdir` per run (TensorBoard shows each as a run; `export_plan`):
- a run directory: its training log: `train/loss`, `train/loss_by_sigma/<bucket>`, `heldout/loss`,
  `heldout/loss_by_sigma/<bucket>` at each logged step, and in the same event file its clocks: those
  of a store among the items that measured the run, else the store `clocks RUN` wrote
  (`<run>.clocks.zarr` in `folder`, the current one, or `RUN/clocks.zarr`: scoreprobe.sweep.outputs);
- a clocks store of no run among the items, as a run of its own named after the run it measured:
  `clocks/<curve>` (rule_acc, novel_valid, mem_ratio, ...) at each checkpoint, and `tau/tau_rule`,
  `tau/tau_novel`, `tau/tau_mem`, `tau/window_log10_width` (the τ in steps as the value, NaN when not
  reached) at the last checkpoint.

A re-export replaces each run's event file whole (temporary file, fsync, rename: scoreprobe.atomic), so
TensorBoard shows every point once (restart it, or reload, to see a replaced file); event files of earlier
scoreprobe versions in the folder (`events.out.tfevents.<time>.<host>.scoreprobe`) are removed. Values are
float32 in the file: NaN and ±inf are written as they are (TensorBoard shows them), a finite value past
float32's range is refused (DataError, before anything is written), never written as inf.

Why a hand-written writer beside tensorboardX (training/live.py, the live events): measured on the shipped run's
360 log records (bench/bench_tensorboard_writers.py), this export takes 32 ms end to end against 111 ms for
tensorboardX's SummaryWriter writing the same events (the same (step, tag, value) triples); it needs no optional
dependency; and it replaces one fixed-name file atomically, where a SummaryWriter starts a new time-and-host-named
file each time (a re-export would show every point twice).
"""
import json
import math
import os
import struct
import time
from pathlib import Path

import warnings

from scoreprobe.errors import ConfigError, DataError, ScoreprobeWarning
from scoreprobe.training.trainlog import bucket_tag

FILE_VERSION = "brain.Event:2"
_MASK_DELTA = 0xA282EAD8


# ---------------------------------------------------------------------------------------------
# CRC-32C and TFRecord framing
# ---------------------------------------------------------------------------------------------

def _crc_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1    # Castagnoli polynomial, reflected
        table.append(c)
    return table


_TABLE = _crc_table()


def crc32c(data):
    """CRC-32C (Castagnoli) of bytes: crc32c(b"123456789") == 0xE3069283."""
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame(data):
    """One TFRecord: length, its masked CRC, the data, its masked CRC."""
    head = struct.pack("<Q", len(data))
    return head + struct.pack("<I", masked_crc(head)) + data + struct.pack("<I", masked_crc(data))


def records(raw):
    """The data of each TFRecord in `raw` (bytes); DataError on a bad length or CRC."""
    out, i = [], 0
    while i < len(raw):
        if i + 12 > len(raw):
            raise DataError(f"event file cut short at byte {i}")
        head = raw[i:i + 8]
        (n,), (crc,) = struct.unpack("<Q", head), struct.unpack("<I", raw[i + 8:i + 12])
        if crc != masked_crc(head) or i + 16 + n > len(raw):
            raise DataError(f"bad record length at byte {i}")
        data = raw[i + 12:i + 12 + n]
        if struct.unpack("<I", raw[i + 12 + n:i + 16 + n])[0] != masked_crc(data):
            raise DataError(f"bad record checksum at byte {i}")
        out.append(data)
        i += 16 + n
    return out


# ---------------------------------------------------------------------------------------------
# Protocol buffer wire format (the few fields of Event / Summary used here)
# ---------------------------------------------------------------------------------------------

def _varint(v):
    out = bytearray()
    v &= (1 << 64) - 1           # int64: two's complement, as protobuf encodes negative numbers
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _field(number, wire, payload):
    key = _varint(number << 3 | wire)
    return key + (_varint(len(payload)) + payload if wire == 2 else payload)


def event(wall_time, step=0, scalars=None, file_version=None):
    """Serialized Event: wall_time, step, and either file_version or a Summary of {tag: float}."""
    out = _field(1, 1, struct.pack("<d", wall_time)) + _field(2, 0, _varint(int(step)))
    if file_version is not None:
        out += _field(3, 2, file_version.encode())
    if scalars:
        values = b"".join(_field(1, 2, _field(1, 2, tag.encode()) + _field(2, 5, struct.pack("<f", value)))
                          for tag, value in scalars.items())
        out += _field(5, 2, values)
    return out


def _parse(data):
    """{field: [values]} of one message: ints for varints, bytes for length-delimited and fixed fields."""
    fields, i = {}, 0
    while i < len(data):
        key, i = _read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(data, i)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, i = data[i:i + size], i + size
        elif wire == 2:
            n, i = _read_varint(data, i)
            value, i = data[i:i + n], i + n
        else:
            raise DataError(f"unsupported protobuf wire type {wire}")
        fields.setdefault(number, []).append(value)
    return fields


def _read_varint(data, i):
    shift = value = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def read_events(path):
    """[(wall_time, step, {tag: value} or {"file_version": text})] of an event file (for tests and checks)."""
    out = []
    for data in records(Path(path).read_bytes()):
        f = _parse(data)
        wall = struct.unpack("<d", f[1][0])[0]
        step = f.get(2, [0])[0]
        step = step - (1 << 64) if step >= 1 << 63 else step
        if 3 in f:
            out.append((wall, step, {"file_version": f[3][0].decode()}))
            continue
        scalars = {}
        for value in (_parse(s) for s in _parse(f[5][0]).get(1, [])) if 5 in f else ():
            scalars[value[1][0].decode()] = struct.unpack("<f", value[2][0])[0]
        out.append((wall, step, scalars))
    return out


# ---------------------------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------------------------

EVENT_FILE = "events.out.tfevents.scoreprobe"   # one per run folder, replaced whole by a re-export
_INT64 = 1 << 63


def _checked(where, step, values):
    """(step, {tag: float}) with `step` an int64 and every value a float that float32 holds (NaN and ±inf are
    kept: TensorBoard shows them); DataError naming `where`, the tag and the step otherwise."""
    try:
        ok = not isinstance(step, bool) and int(step) == step and -_INT64 <= int(step) < _INT64
    except (TypeError, ValueError, OverflowError):     # NaN, inf, a string
        ok = False
    if not ok:
        raise DataError(f"export-tb: {where}: step {step!r} is not an int64; nothing was written")
    out = {}
    for tag, v in values.items():
        try:
            struct.pack("<f", float(v))          # what the writer does: refuses a finite value past float32's range
        except (OverflowError, TypeError, ValueError):
            raise DataError(f"export-tb: {where}: {tag} at step {int(step)} is {v!r}, which a float32 scalar "
                            f"cannot hold (|value| <= {3.4028234663852886e38:.8g}); nothing was written") from None
        out[tag] = float(v)
    return int(step), out


def _event_bytes(events):
    """The whole event file (bytes) of [(step, {tag: float})]: the file_version record, then one event each."""
    now = time.time()
    parts = [frame(event(now, 0, file_version=FILE_VERSION))]
    parts += [frame(event(now, step, values)) for step, values in events if values]
    return b"".join(parts)


def _write_events(folder, data):
    """Replace folder/EVENT_FILE by `data` atomically (scoreprobe.atomic), then remove the event files of earlier
    scoreprobe versions there (`events.out.tfevents.<time>.<host>.scoreprobe`, which TensorBoard would show
    beside it). Returns the Path."""
    from scoreprobe.atomic import atomic_write_bytes
    folder.mkdir(parents=True, exist_ok=True)
    path = atomic_write_bytes(folder / EVENT_FILE, data)
    for old in folder.glob("events.out.tfevents.*.scoreprobe"):
        if old.name != EVENT_FILE and old.is_file():
            old.unlink(missing_ok=True)
    return path


def _log_scalars(rec):
    out = {"train/loss": rec["loss"]}
    for k, v in (rec.get("loss_by_sigma") or {}).items():
        out[f"train/loss_by_sigma/{bucket_tag(k)}"] = v
    held = rec.get("heldout") or {}
    if held:
        out["heldout/loss"] = held["loss"]
        for k, v in (held.get("loss_by_sigma") or {}).items():
            out[f"heldout/loss_by_sigma/{bucket_tag(k)}"] = v
    return {k: (math.nan if v is None else v) for k, v in out.items()}


CLOCK_CURVES = ("rule_acc", "novel_valid", "mem_ratio", "heldout_hit", "violating_ratio", "invalid_ratio",
                "group_acc", "group_mem", "off_vertex")
TAU_KEYS = ("tau_rule", "tau_novel", "tau_mem", "window_log10_width")


def _clocks_events(ds, where):
    """[(step, {tag: float})] of a clocks Dataset: its curves at each step, then the τ at the last step."""
    if "step" not in ds.dims or ds.sizes["step"] == 0:
        raise DataError(f"export-tb: {where} holds no checkpoint steps; nothing was written")
    steps = [int(s) for s in ds["step"].values]
    curves = [c for c in CLOCK_CURVES if c in ds]
    bad = [c for c in curves if ds[c].dims != ("step",)]
    if bad:
        raise DataError(f"export-tb: {where}: curve(s) {bad} are not one number per step; nothing was written")
    values = {c: ds[c].values for c in curves}
    out = [_checked(where, step, {f"clocks/{c}": values[c][i] for c in curves}) for i, step in enumerate(steps)]
    taus = {f"tau/{k}": math.nan if ds.attrs.get(k) is None else ds.attrs[k] for k in TAU_KEYS if k in ds.attrs}
    return out + [_checked(where, steps[-1], taus)]


def _kind(path):
    path = Path(path)
    if path.is_dir() and (path / "run.json").is_file():
        return "run"
    if path.is_dir() and (path / "zarr.json").is_file():
        return "store"
    raise ConfigError(f"export-tb: {path} is neither a run directory nor a clocks store")


def _check_targets(names, logdir):
    """ConfigError, before anything is read, for a logdir or run folder that cannot take the event files."""
    from scoreprobe.atomic import check_out_path, check_path_text
    logdir = check_path_text(logdir, "export-tb: logdir")
    if logdir.exists() and not logdir.is_dir():
        raise ConfigError(f"export-tb: logdir {logdir} is a file, not a folder")
    check_out_path(logdir / EVENT_FILE, "export-tb: logdir")     # a file above it
    for name in names:
        if (logdir / name).exists() and not (logdir / name).is_dir():
            raise ConfigError(f"export-tb: {logdir / name} is a file; the run {name!r} needs a folder there")
        check_out_path(logdir / name / EVENT_FILE, f"export-tb: the event file of {name!r}")
    return logdir


def _read_item(run_dir, store):
    """[(step, {tag: float})] of one TensorBoard run: a run's log, then the clocks of `store`, all checked."""
    from scoreprobe.store import open_store
    from scoreprobe.training.trainlog import LOG_NAME, read_log
    events = [_checked(f"{run_dir}, {LOG_NAME}", rec["step"], _log_scalars(rec)) for rec in read_log(run_dir)] \
        if run_dir is not None else []
    if store is not None:
        ds = open_store(store).load()
        try:
            config = json.loads(ds.attrs.get("scoreprobe_config") or "{}")
        except (TypeError, ValueError):
            config = None
        if not isinstance(config, dict) or config.get("probe") != "clocks":
            raise ConfigError(f"export-tb: {store} is not a clocks store")
        events += _clocks_events(ds, store)
    return events


def export_plan(items, folder="."):
    """[(name, run directory or None, clocks store or None)], one per TensorBoard run, and notes (text): a
    run directory goes with its clocks store -- one given among the items that measured it, else the one
    `clocks RUN` wrote (`scoreprobe.sweep.outputs.run_store`: folder/<run>.clocks.zarr, or RUN/clocks.zarr) --
    under the run's name; a store of no listed run is a run of its own, named after the run it measured."""
    from scoreprobe.sweep.outputs import measured_run, run_store, store_label
    kinds = [_kind(p) for p in items]
    runs = [p for p, k in zip(items, kinds) if k == "run"]
    plan, notes, claimed = [], [], set()
    for run in runs:
        given = [p for p, k in zip(items, kinds) if k == "store" and p not in claimed and not measured_run(p, run)]
        store, why = (given[0], []) if given else run_store(run, "clocks.zarr", folder)
        claimed.update(given[:1])
        notes += why
        plan.append((Path(run).resolve().name, run, store))
    plan += [(store_label(p), None, p) for p, k in zip(items, kinds) if k == "store" and p not in claimed]
    return plan, notes


def export_tb(items, logdir, folder="."):
    """Write TensorBoard scalars of run directories and clocks stores (see the module docstring) into
    logdir/<run name>/events.out.tfevents.scoreprobe, one file per run (`export_plan`: a run directory
    with its clocks store, found in `folder` by the rule of scoreprobe.sweep.outputs), replaced whole
    (atomically) by a re-export. Every
    item is read and every value checked (a step an int64, a value float32 can hold: DataError naming
    the item, tag and step) before the first byte is written. Returns the event files written."""
    items = [items] if isinstance(items, (str, os.PathLike)) else list(items)
    if not items:
        raise ConfigError("export-tb: no items to export")
    plan, notes = export_plan(items, folder)
    for note in notes:
        warnings.warn(f"export-tb: {note}", ScoreprobeWarning, stacklevel=2)
    names = [name for name, _, _ in plan]
    if len(set(names)) != len(names):
        raise ConfigError(f"export-tb: two items share a name ({names}); their runs would mix in {logdir}")
    logdir = _check_targets(names, logdir)
    files = [_event_bytes(_read_item(run, store)) for _, run, store in plan]
    return [_write_events(logdir / name, data) for name, data in zip(names, files)]
