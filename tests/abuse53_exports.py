"""Issue 53 item 2's attacks (tests/abuse_issue53.py): compact exports (.npz) that lie, read by `sp.compare`,
`scoreprobe compare` and the analyses' readers. Each starts from a shipped export and spoils one field; the
reader must refuse it with one DataError naming the file and the field, before allocating what it claims."""
import io
import json
import zipfile
from pathlib import Path

import numpy as np
from numpy.lib import format as npformat

from abuse_issue53 import Attack
from scoreprobe.errors import DataError

ROOT = Path(__file__).resolve().parents[1]
GOOD = ROOT / "analyses" / "results" / "scaling_cpu" / "g2-n120.npz"


def _arrays():
    with np.load(GOOD, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _spoiled(edit):
    """A builder writing work/bad.npz: the good export's arrays after `edit(arrays)` (returns them)."""
    def build(work):
        path = work / "bad.npz"
        np.savez(path, **edit(_arrays()))
        return path
    return build


def _raw(write):
    def build(work):
        path = work / "bad.npz"
        write(path)
        return path
    return build


def _unsorted(a):
    order = np.r_[1, 0, 2:a["step"].size]
    return {**a, "step": a["step"][order], "state": a["state"][order]}


def _duplicate(a):
    step = a["step"].copy()
    step[3] = step[2]
    return {**a, "step": step}


def _giant(path):
    """A ~1 KB export whose state header claims (10**6, 10**6) float64s: 7.3 TiB (931 GiB and more)."""
    with zipfile.ZipFile(path, "w") as zf:
        for k, v in _arrays().items():
            if k != "state":
                buf = io.BytesIO()
                np.save(buf, v)
                zf.writestr(k + ".npy", buf.getvalue())
        buf = io.BytesIO()
        npformat.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": (10**6, 10**6)})
        zf.writestr("state.npy", buf.getvalue() + b"\0" * 64)


def _objects(a):
    return {**a, "state": np.array([{"a": 1}], dtype=object)}


def _truncated(path):
    data = GOOD.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def _crc(path):
    """The good export with one byte of the state member's compressed data flipped: the first byte (from the
    middle of the member on) whose flip zipfile's own CRC check notices (some flips decode to the same data)."""
    data = GOOD.read_bytes()
    info = zipfile.ZipFile(GOOD).getinfo("state.npy")
    for i in range(info.header_offset + info.compress_size // 2, info.header_offset + info.compress_size):
        spoiled = data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:]
        path.write_bytes(spoiled)
        try:
            if zipfile.ZipFile(path).testzip() is not None:
                return
        except Exception:   # noqa: BLE001  (a stream zlib cannot decode: damaged too)
            return
    raise AssertionError("no flip damaged the member")


CASES = [   # (name, builder, what the error must name)
    ("unsorted_steps", _spoiled(_unsorted), "'step' is not strictly increasing"),
    ("duplicate_steps", _spoiled(_duplicate), "'step' is not strictly increasing"),
    ("unknown_state_code", _spoiled(lambda a: {**a, "state": np.where(a["state"] == 1, 99, a["state"]).astype(np.int8)}),
     "unknown state codes \\[99\\]"),
    ("float_state_codes", _spoiled(lambda a: {**a, "state": a["state"].astype(np.float32)}), "'state' must be int"),
    ("float_steps", _spoiled(lambda a: {**a, "step": a["step"] + 0.5}), "'step' must be int"),
    ("bool_steps", _spoiled(lambda a: {**a, "step": np.ones(a["step"].size, bool)}), "'step' must be int"),
    ("steps_2d", _spoiled(lambda a: {**a, "step": a["step"][:, None]}), "'step' must have 1 dimension"),
    ("negative_step", _spoiled(lambda a: {**a, "step": a["step"] - 5}), "none negative"),
    ("shapes_disagree", _spoiled(lambda a: {**a, "state": a["state"][:-1]}), "'state' has shape \\(19, 1000\\)"),
    ("no_samples", _spoiled(lambda a: {**a, "state": a["state"][:, :0]}), "'state' has shape"),
    ("nan_novel_oracle", _spoiled(lambda a: {**a, "novel_oracle": np.float64("nan")}), "'novel_oracle' must be a finite"),
    ("inf_novel_oracle", _spoiled(lambda a: {**a, "novel_oracle": np.float64("inf")}), "'novel_oracle' must be a finite"),
    ("text_novel_oracle", _spoiled(lambda a: {**a, "novel_oracle": np.str_("0.5")}), "'novel_oracle' must be real"),
    ("missing_state", _spoiled(lambda a: {k: v for k, v in a.items() if k != "state"}), "'state' is missing"),
    ("missing_config", _spoiled(lambda a: {k: v for k, v in a.items() if k != "clocks_config"}),
     "'clocks_config' is missing"),
    ("header_claims_7_tib", _raw(_giant), "'state' declares shape \\(1000000, 1000000\\)"),
    ("object_array", _spoiled(_objects), "'state' holds Python objects"),
    ("not_a_zip", _raw(lambda p: p.write_text("step,state\n1,2\n")), "is not an .npz file"),
    ("truncated", _raw(_truncated), "not an .npz file|truncated or damaged|not a readable"),
    ("bad_crc", _raw(_crc), "truncated or damaged|not a readable|is damaged"),
]


def _compare_api(build):
    def api(work):
        import scoreprobe as sp
        return sp.compare([build(work)], n_boot=10)
    return api


def _compare_cli(build):
    return lambda work: ["compare", build(work), "--n-boot", 10]


def _scaling_reader(build):
    def api(work):
        from scoreprobe.studies.export import read_export
        return read_export(build(work))
    return api


def _mechanism_missing_basin(work):
    """A mechanism-seeds export whose manifest names a basin array the file lacks."""
    from scoreprobe.studies.battery_export import FORMAT, read_export
    a = _arrays()
    arrays = {"format": FORMAT, "config": "{}", "steps": a["step"], "clock_step": a["step"], "clock_state": a["state"],
              "clock_novel_oracle": a["novel_oracle"],
              "meta": json.dumps({"manifest": {"basins": [{"set": "p0", "n_pixels": 4}], "retention": [], "dsm": None}})}
    np.savez(work / "m.npz", **arrays)
    return read_export(work / "m.npz")


ATTACKS = [Attack(f"export_{name}", 2, api=_compare_api(build), argv=_compare_cli(build), error=DataError, match=match)
           for name, build, match in CASES]
ATTACKS += [Attack(f"scaling_reader_{name}", 2, api=_scaling_reader(build), error=DataError, match=match)
            for name, build, match in CASES if name in ("unsorted_steps", "header_claims_7_tib", "object_array",
                                                         "nan_novel_oracle", "shapes_disagree")]
ATTACKS += [Attack("mechanism_reader_missing_basin", 2, api=_mechanism_missing_basin, error=DataError,
                   match="field 'b0' is missing")]
