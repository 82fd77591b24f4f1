"""The abuse corpus of tests/test_abuse.py: breakers that each spoil one thing of a copy of a good run directory.

A breaker is a function of the run directory `d`; a hostile pickle it writes would create
d.parent / "MARKER" if it were ever unpickled. The case lists pair a name with a breaker.

Issue 21's attempts (trust, sizes, settings, SOURCES, numbers, silent acceptances) live in
tests/abuse_inputs.py, its stores under faults in tests/abuse_stores.py; `run_attempt` (tests/abuse_attempt.py) classifies each: "clean" (the typed error for the stated
reason within 2 s; the CLI prints one `error:` line, exit 2), "code execution" (a pickle's
__reduce__ created d.parent / "MARKER"), "allocation" (peak RSS grew by more than ALLOC_LIMIT),
"silent" (no error at all), "wrong reason", "slow" or "traceback" (anything else). Issue 33's report
page and plot-log attempts (tests/abuse_report.py) add "injection ran" and "late refusal".
`PYTHONPATH=$PWD python tests/abuse_corpus.py` prints the counts per item / surface and in all.
"""
import io
import json
import pickle
import shutil
import sys
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from scoreprobe.limits import MAX_ITEMS

STEP = 12
CKPT = f"ckpt/step_{STEP:07d}.pt"
CFG = dict(rule={"name": "parity", "G": 2, "shape": [4, 4], "layout": "random", "seed": 1}, n_train=16,
           n_heldout=16, hidden_size=16, depth=1, num_heads=2, batch_size=16, total_steps=STEP, n_checkpoints=3,
           save_model=True, log_every=4)


class CreatesFile:
    """Unpickling this object would create `path` (a marker that must never appear)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


# ---------------------------------------------------------------------------------------------
# Helpers that break things
# ---------------------------------------------------------------------------------------------

def _edit_json(key_path, value):
    """A breaker setting run.json[key_path...] = value."""
    def fix(d):
        meta = json.loads((d / "run.json").read_text())
        node = meta
        for k in key_path[:-1]:
            node = node[k]
        node[key_path[-1]] = value
        (d / "run.json").write_text(json.dumps(meta))
    return fix


def _write(name, data):
    def fix(d):
        (d / name).write_bytes(data(d) if callable(data) else data)
    return fix


def _npz(**arrays):
    """A breaker replacing dataset.npz by these arrays (callables get the old arrays), allow_pickle on."""
    def fix(d):
        with np.load(d / "dataset.npz") as z:
            old = {k: z[k] for k in z.files}
        new = {**old, **{k: (v(old) if callable(v) else v) for k, v in arrays.items()}}
        new = {k: v for k, v in new.items() if v is not None}
        with open(d / "dataset.npz", "wb") as f:
            np.savez(f, **new)
    return fix


def _huge_npz(d):
    """A small compressed dataset.npz whose train header declares more than MAX_ITEMS rows (real zeros)."""
    rows = MAX_ITEMS + 1
    with zipfile.ZipFile(d / "dataset.npz", "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        with zf.open("train.npy", "w", force_zip64=True) as f:
            f.write(_magic_header(rows, 16))
            chunk = bytes(1 << 22)
            for _ in range(rows * 16 // len(chunk) + 1):
                f.write(chunk)
        zf.writestr("heldout.npy", _npy(np.zeros((1, 16), np.uint8)))


def _magic_header(rows, cols):
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "|u1", "fortran_order": False, "shape": (rows, cols)})
    return buf.getvalue()   # write_array_header_1_0 writes the magic string too


def _npy(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def _flip_zip_data(path, member_suffix):
    """Flip a byte inside the stored data of the zip member ending with member_suffix (CRC now wrong)."""
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = next(i for i in zf.infolist() if i.filename.endswith(member_suffix))
    name_len, extra_len = int.from_bytes(raw[info.header_offset + 26:info.header_offset + 28], "little"), \
        int.from_bytes(raw[info.header_offset + 28:info.header_offset + 30], "little")
    start = info.header_offset + 30 + name_len + extra_len
    raw[start + info.compress_size // 2] ^= 0xFF
    path.write_bytes(bytes(raw))


def _ckpt(edit):
    """A breaker rewriting the step-12 checkpoint dict with edit(ck) (returns the new object)."""
    def fix(d):
        ck = torch.load(d / CKPT, weights_only=True)
        torch.save(edit(ck), d / CKPT)
    return fix


def _weights(fn):
    """A breaker applying fn to every tensor of the step-12 checkpoint's weights."""
    return _ckpt(lambda ck: {**ck, "ema": {k: fn(v) for k, v in ck["ema"].items()},
                             "model": {k: fn(v) for k, v in ck["model"].items()}})


def _arch(**net):
    return _ckpt(lambda ck: {**ck, "arch": {**ck["arch"], "net": {**ck["arch"]["net"], **net}}})


def _nested(depth):
    return _write("run.json", lambda d: json.dumps({**json.loads((d / "run.json").read_text()), "config": None})
                  .replace('"config": null', '"config": {"rule": ' + "[" * depth + "]" * depth + "}").encode())


def _step_file(name):
    def fix(d):
        shutil.copy(d / CKPT, d / "ckpt" / name)
    return fix


def _resume(obj):
    """A breaker writing resume.pt: bytes as they are, a callable of the step-12 checkpoint dict via torch.save."""
    def fix(d):
        if isinstance(obj, bytes):
            (d / "resume.pt").write_bytes(obj)
            return
        ck = torch.load(d / CKPT, weights_only=True)
        torch.save(obj(ck, d), d / "resume.pt")
    return fix


def _hostile_pickle(name):
    def fix(d):
        (d / name).write_bytes(pickle.dumps({"ema": CreatesFile(d.parent / "MARKER")}))
    return fix


def _hostile_zip(name):
    def fix(d):
        torch.save({"format": "scoreprobe-ckpt/1", "evil": CreatesFile(d.parent / "MARKER")}, d / name)
    return fix


def _rm(name):
    def fix(d):
        target = d / name
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    return fix


def _dir_instead(name):
    def fix(d):
        (d / name).unlink()
        (d / name).mkdir()
        (d / name / "train.npy").write_bytes(b"x")
    return fix


def _crc(name, member):
    def fix(d):
        _flip_zip_data(d / name, member)
    return fix


def _truncate(name):
    return _write(name, lambda d: (d / name).read_bytes()[: (d / name).stat().st_size // 2])


def _forged_header(d):
    with zipfile.ZipFile(d / "dataset.npz", "w") as zf:
        zf.writestr("train.npy", _magic_header(10**6, 16) + bytes(64))
        zf.writestr("heldout.npy", _npy(np.zeros((1, 16), np.uint8)))


def _flip(key, row, col=0):
    def edit(old):
        a = old[key].copy()
        a[row, col] ^= 1
        return a
    return edit


NOISE = bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8))
DUP_TRAIN = lambda o: np.concatenate([o["train"][:-1], o["train"][:1]])          # noqa: E731
DUP_HELD = lambda o: np.concatenate([o["heldout"][:-1], o["heldout"][:1]])       # noqa: E731
OVERLAP = lambda o: np.concatenate([o["heldout"][:-1], o["train"][:1]])          # noqa: E731


# ---------------------------------------------------------------------------------------------
# The corpus: (name, breaker, expected error, mode)
# ---------------------------------------------------------------------------------------------

DATA_CASES = [
    ("npz_random_bytes", _write("dataset.npz", NOISE)), ("npz_empty", _write("dataset.npz", b"")),
    ("npz_is_directory", _dir_instead("dataset.npz")), ("npz_truncated", _truncate("dataset.npz")),
    ("npz_crc_corrupt", _crc("dataset.npz", "train.npy")), ("npz_huge_rows", _huge_npz),
    ("npz_forged_header", _forged_header),
    ("npz_object_train", _npz(train=lambda o: o["train"].astype(object))),
    ("npz_object_rule", _npz(rule=np.array([{"name": "parity"}], dtype=object))),
    ("npz_float_train", _npz(train=lambda o: o["train"].astype(np.float32))),
    ("npz_values_2", _npz(train=lambda o: o["train"] * 2)),
    ("npz_narrow", _npz(train=lambda o: o["train"][:, :15])),
    ("npz_3d", _npz(train=lambda o: o["train"][:, None])),
    ("npz_no_heldout", _npz(heldout=lambda o: None)),
    ("npz_dup_train", _npz(train=DUP_TRAIN)), ("npz_dup_heldout", _npz(heldout=DUP_HELD)),
    ("npz_overlap", _npz(heldout=OVERLAP)), ("npz_invalid_item", _npz(train=_flip("train", 3))),
    ("npz_other_rule", _npz(rule=np.array(json.dumps({"name": "parity", "G": 4, "shape": [4, 4]})))),
    ("npz_rule_not_string", _npz(rule=np.arange(3))),
    ("npz_seed_float", _npz(seed=np.array(0.5))),
]

RUN_CASES = [
    ("json_nested_10000", _nested(10000)), ("json_nested_40", _nested(40)),
    ("json_not_json", _write("run.json", b"{not json")), ("json_list", _write("run.json", b"[1, 2]")),
    ("json_binary", _write("run.json", NOISE)),
    ("json_2mb", _edit_json(["padding"], "x" * (2 << 20))),
    ("arch_heads_0", _edit_json(["arch", "net", "num_heads"], 0)),
    ("arch_heads_3", _edit_json(["arch", "net", "num_heads"], 3)),
    ("arch_hidden_8192_depth_64", lambda d: (_edit_json(["arch", "net", "hidden_size"], 8192)(d),
                                              _edit_json(["arch", "net", "depth"], 64)(d))),
    ("arch_hidden_string", _edit_json(["arch", "net", "hidden_size"], "16")),
    ("arch_hidden_negative", _edit_json(["arch", "net", "hidden_size"], -16)),
    ("arch_depth_float", _edit_json(["arch", "net", "depth"], 1.5)),
    ("arch_patch_0", _edit_json(["arch", "net", "patch_size"], 0)),
    ("arch_patch_3", _edit_json(["arch", "net", "patch_size"], 3)),
    ("arch_mlp_ratio_huge", _edit_json(["arch", "net", "mlp_ratio"], 1e9)),
    ("arch_label_rows_0", _edit_json(["arch", "net", "num_label_rows"], 0)),
    ("arch_unknown_key", _edit_json(["arch", "net", "evil"], 1)),
    ("arch_no_net", _edit_json(["arch", "net"], None)),
    ("arch_not_object", _edit_json(["arch"], "dit")),
    ("arch_shape_mismatch", lambda d: (_edit_json(["arch", "image_shape"], [1, 6, 6])(d),
                                        _edit_json(["arch", "net", "input_size"], [6, 6])(d))),
    ("arch_sigma_data_0", _edit_json(["arch", "sigma_data"], 0)),
    ("arch_sigma_data_negative", _edit_json(["arch", "sigma_data"], -1.0)),
    ("arch_time_scale_nan", _edit_json(["arch", "time_scale"], float("nan"))),
    ("kind_unknown", _edit_json(["kind"], "vae")),
    ("rule_parity_dos", _edit_json(["config", "rule"], {"name": "parity", "G": 7, "shape": [100003, 100019]})),
    ("rule_huge_width", _edit_json(["config", "rule"], {"name": "exactk", "k": 1, "shape": [1, 10**9]})),
    ("rule_unknown", _edit_json(["config", "rule"], {"name": "chess"})),
    ("rule_layout_dict", _edit_json(["config", "rule", "layout"], {"a": 1})),
    ("rule_seed_negative", _edit_json(["config", "rule", "seed"], -1)),
    ("rule_missing", _edit_json(["config"], {})),
    ("steps_huge", _edit_json(["checkpoint_steps"], [10**30])),
    ("steps_not_list", _edit_json(["checkpoint_steps"], "all")),
    ("ckpt_name_huge_step", _step_file("step_" + "9" * 30 + ".pt")),
    ("ckpt_name_duplicate_step", _step_file(f"step_{STEP}.pt")),
    ("ckpt_none", _rm("ckpt")),
]

STEP_CASES = [
    ("w_int8", _weights(lambda v: v.to(torch.int8))), ("w_complex", _weights(lambda v: v.to(torch.complex64))),
    ("w_bool", _weights(lambda v: v > 0)), ("w_sparse", _weights(lambda v: v.to_sparse())),
    ("w_missing_key", _ckpt(lambda ck: {**ck, "ema": dict(list(ck["ema"].items())[1:])})),
    ("w_extra_key", _ckpt(lambda ck: {**ck, "ema": {**ck["ema"], "evil": torch.zeros(3)}})),
    ("w_wrong_shape", _weights(lambda v: v.reshape(-1))),
    ("w_not_tensors", _ckpt(lambda ck: {**ck, "ema": [1, 2], "model": [3]})),
    ("step_disagrees", _ckpt(lambda ck: {**ck, "step": STEP + 1})),
    ("step_negative", _ckpt(lambda ck: {**ck, "step": -5})),
    ("step_string", _ckpt(lambda ck: {**ck, "step": "twelve"})),
    ("stored_heads_0", _arch(num_heads=0)), ("stored_hidden_8192_depth_64", _arch(hidden_size=8192, depth=64)),
    ("stored_hidden_32", _arch(hidden_size=32)),
    ("stored_sigma_data_0", _ckpt(lambda ck: {**ck, "arch": {**ck["arch"], "sigma_data": 0.0}})),
    ("stored_arch_string", _ckpt(lambda ck: {**ck, "arch": "dit"})),
    ("stored_kind_gpt", _ckpt(lambda ck: {**ck, "kind": "gpt"})),
    ("ckpt_crc_corrupt", _crc(CKPT, "data/0")), ("ckpt_truncated", _truncate(CKPT)),
    ("ckpt_random_bytes", _write(CKPT, NOISE)), ("ckpt_empty", _write(CKPT, b"")),
    ("ckpt_hostile_pickle", _hostile_pickle(CKPT)), ("ckpt_hostile_zip", _hostile_zip(CKPT)),
]

RESUME_CASES = [
    ("resume_hostile_pickle", _hostile_pickle("resume.pt")), ("resume_hostile_zip", _hostile_zip("resume.pt")),
    ("resume_random_bytes", _resume(NOISE)), ("resume_truncated", lambda d: _truncate(CKPT)(d) or
                                                 shutil.move(d / CKPT, d / "resume.pt")),
    ("resume_not_a_state", _resume(lambda ck, d: ck)),
    ("resume_step_beyond", _resume(lambda ck, d: {**ck, "opt": {}, "rng": torch.zeros(3), "step": 10**6})),
    ("resume_bad_opt", _resume(lambda ck, d: {**ck, "opt": {"state": 1}, "rng": torch.zeros(3), "step": 4})),
    ("resume_int8", _resume(lambda ck, d: {**ck, "opt": {}, "rng": torch.zeros(3), "step": 4,
                                           "model": {k: v.to(torch.int8) for k, v in ck["model"].items()}})),
]


def main():
    """Build every attempt in a fresh copy of a tiny run and print the counts per item (closing note)."""
    import shutil
    import tempfile
    from abuse_attempt import _run_all, run_attempt
    from scoreprobe.training.train import TrainConfig, train_run
    import torch
    torch.set_num_threads(1)   # as the tests (conftest): the good run and every attempt on it use one thread
    tmp = Path(tempfile.mkdtemp(prefix="abuse-inputs-"))
    train_run(TrainConfig(**CFG), tmp / "good", progress=False)
    counts, per_item = Counter(), Counter()
    import warnings
    warnings.simplefilter("ignore")
    from abuse_inputs import ITEMS, cases
    _run_all(cases(), run_attempt, tmp, counts, per_item)
    from abuse_report import SURFACES
    from abuse_report import cases as report_cases
    from abuse_report import run_report_attempt
    _run_all(report_cases(), run_report_attempt, tmp, counts, per_item)   # issue 33: the report page and plot-log
    for item, what in {**ITEMS, **SURFACES}.items():
        n = {o: per_item[item, o] for o in ("clean", "code execution", "injection ran", "traceback", "late refusal")}
        print(f"surface {item} ({what}): {sum(v for (i, _), v in per_item.items() if i == item)} attempts, "
              f"{n['clean']} clean / code executions {n['code execution']} / injections that ran "
              f"{n['injection ran']} / tracebacks {n['traceback']} / late refusals {n['late refusal']}")
    total = sum(counts.values())
    print(f"attempts {total} / clean {counts['clean']} / code executions {counts['code execution']} / "
          f"allocations beyond limits {counts['allocation']} / silent acceptances {counts['silent']} / "
          f"tracebacks or untyped {counts['traceback']} / wrong reason {counts['wrong reason']} / slow {counts['slow']} / "
          f"injections that ran {counts['injection ran']} / late refusals {counts['late refusal']} / "
          f"pages refused {counts['refused']}")
    # --- issue 33, sections 2 and 5 (--denoiser, train): tests/abuse_issue33.py, counted per surface ---
    import abuse_issue33
    abuse_issue33.main(tmp / "good", tmp)
    # --- end of issue 33's block ---
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
