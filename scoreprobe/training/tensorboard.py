"""TensorBoard scalars of runs and clocks stores, written without TensorBoard or TensorFlow installed.

    export_tb(["runs/g2-n120", "clocks.zarr"], "tb/")    # then: tensorboard --logdir tb/

An event file (`events.out.tfevents.<time>.<host>.scoreprobe`) is a sequence of TFRecords, each
`uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)` (little-endian;
the mask of a CRC-32C c is ((c >> 15) | (c << 17)) + 0xa282ead8 mod 2³²), whose data is a serialized
`tensorflow.Event` protocol buffer: wall_time (field 1, double), step (2, int64), file_version (3,
string, "brain.Event:2" in the first record) or summary (5: a `Summary` of `Value`s, each a tag (1,
string) and a simple_value (2, float)). These are the published formats (TFRecord, protobuf wire
format, tensorflow/core/util/event.proto and summary.proto); the code here is written from them
and checked by reading the files back (`read_events`) and against the CRC-32C check values of
RFC 3720.

What is written, one subfolder of `logdir` per item (TensorBoard shows each as a run):
- a run directory: its training log: `train/loss`, `train/loss_by_sigma/<bucket>`, `heldout/loss`,
  `heldout/loss_by_sigma/<bucket>` at each logged step;
- a clocks store (or a run directory's `clocks.zarr`, if present): `clocks/<curve>` (rule_acc,
  novel_valid, mem_ratio, ...) at each checkpoint, and `tau/tau_rule`, `tau/tau_novel`, `tau/tau_mem`,
  `tau/window_log10_width` (the τ in steps as the value, NaN when not reached) at the last checkpoint.
"""
import json
import math
import socket
import struct
import time
from pathlib import Path

from scoreprobe.errors import ConfigError, DataError

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

class EventWriter:
    """Appends scalar events to a new event file in `folder`."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        now = time.time()
        self.path = self.folder / f"events.out.tfevents.{int(now)}.{socket.gethostname()}.scoreprobe"
        self._f = open(self.path, "wb")
        self._f.write(frame(event(now, 0, file_version=FILE_VERSION)))

    def scalars(self, step, values):
        """One event at `step` with {tag: float} (non-finite values are written as they are)."""
        if values:
            self._f.write(frame(event(time.time(), step, {k: float(v) for k, v in values.items()})))

    def close(self):
        self._f.close()


def _log_scalars(rec):
    out = {"train/loss": rec["loss"]}
    for k, v in (rec.get("loss_by_sigma") or {}).items():
        out[f"train/loss_by_sigma/{k}"] = v
    held = rec.get("heldout") or {}
    if held:
        out["heldout/loss"] = held["loss"]
        for k, v in (held.get("loss_by_sigma") or {}).items():
            out[f"heldout/loss_by_sigma/{k}"] = v
    return {k: (math.nan if v is None else v) for k, v in out.items()}


CLOCK_CURVES = ("rule_acc", "novel_valid", "mem_ratio", "heldout_hit", "violating_ratio", "invalid_ratio",
                "group_acc", "group_mem", "off_vertex")
TAU_KEYS = ("tau_rule", "tau_novel", "tau_mem", "window_log10_width")


def _clocks_events(writer, ds):
    steps = [int(s) for s in ds["step"].values]
    for i, step in enumerate(steps):
        writer.scalars(step, {f"clocks/{c}": float(ds[c].values[i]) for c in CLOCK_CURVES if c in ds})
    taus = {f"tau/{k}": math.nan if ds.attrs.get(k) is None else float(ds.attrs[k]) for k in TAU_KEYS
            if k in ds.attrs}
    writer.scalars(steps[-1], taus)


def _kind(path):
    path = Path(path)
    if path.is_dir() and (path / "run.json").is_file():
        return "run"
    if path.is_dir() and (path / "zarr.json").is_file():
        return "store"
    raise ConfigError(f"export-tb: {path} is neither a run directory nor a clocks store")


def export_tb(items, logdir):
    """Write TensorBoard scalars of run directories and clocks stores (see the module docstring) into
    logdir/<item name>/; returns the event files written. Items are checked before anything is written."""
    from scoreprobe.store import open_store
    from scoreprobe.training.trainlog import read_log
    kinds = [_kind(p) for p in items]
    names = [Path(p).resolve().name for p in items]
    if len(set(names)) != len(names):
        raise ConfigError(f"export-tb: two items share a name ({names}); their runs would mix in {logdir}")
    sources = []
    for path, kind in zip(items, kinds):       # everything read before anything is written
        log = read_log(path) if kind == "run" else None
        store = Path(path) if kind == "store" else (Path(path) / "clocks.zarr")
        ds = open_store(store).load() if store.is_dir() else None
        if ds is not None and json.loads(ds.attrs.get("scoreprobe_config") or "{}").get("probe") != "clocks":
            raise ConfigError(f"export-tb: {store} is not a clocks store")
        sources.append((log, ds))
    written = []
    for name, (log, ds) in zip(names, sources):
        writer = EventWriter(Path(logdir) / name)
        try:
            for rec in log or ():
                writer.scalars(rec["step"], _log_scalars(rec))
            if ds is not None:
                _clocks_events(writer, ds)
        finally:
            writer.close()
        written.append(writer.path)
    return written
