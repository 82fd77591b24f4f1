"""Issue 53, item 6, finished: every whole file scoreprobe and analyses/ write goes through scoreprobe.atomic.

The attacks of tests/abuse53_atomic.py (a full disk while a dataset, a store's text file, an analyses table or
figure or a scaling export is written: the old file byte-identical, no temporary file); a real kill in the middle
of Dataset.save; the clean-ups that match both the old (`.<name>.<pid>.tmp`) and the new temporary names; and a
static scan of scoreprobe/ and analyses/ so nobody adds an in-place writer again.
"""
import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import abuse_issue53
from abuse53_atomic import ATTACKS
from scoreprobe.atomic import _temp_file

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack(attack, tmp_path):
    outcome, detail = abuse_issue53.run(attack, tmp_path)
    assert outcome in ("clean", "right"), detail


def test_the_attacks_are_item_6_through_the_api_and_the_cli():
    assert {a.item for a in ATTACKS} == {6}
    assert any("cli" in a.name for a in ATTACKS) and any("cli" not in a.name for a in ATTACKS)


# ---------------------------------------------------------------------------------------------
# A real kill in the middle of Dataset.save
# ---------------------------------------------------------------------------------------------

_CHILD = """
import sys, time
from pathlib import Path
import numpy as np
import scoreprobe as sp
from scoreprobe.data import datasets

def half(f, **arrays):          # the first bytes land, then the writer stops: the parent kills it here
    f.write(b"PK" + b"x" * 100)
    f.flush()
    Path(sys.argv[2]).write_text("writing")
    time.sleep(120)
datasets.np.savez = half
rule = sp.Parity(2, shape=(2, 4), layout="random", seed=0)
sp.make_dataset(rule, 6, 4, seed=1).save(sys.argv[1])
"""


def test_a_kill_inside_dataset_save_leaves_the_old_file_and_a_temporary_the_trainer_removes(tmp_path):
    import scoreprobe as sp
    from scoreprobe.training.guard import remove_stale_temps
    target, marker = tmp_path / "dataset.npz", tmp_path.parent / f"{tmp_path.name}.marker"
    sp.make_dataset(sp.Parity(2, shape=(2, 4), layout="random", seed=0), 6, 4, seed=0).save(target)
    before = target.read_bytes()
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(target), str(marker)])
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), f"the child never reached its write (exit {child.poll()})"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
    assert target.read_bytes() == before                         # the old file, whole
    temps = [p for p in tmp_path.iterdir() if p.name != "dataset.npz"]
    assert len(temps) == 1 and temps[0].name.startswith(".dataset.npz.") and temps[0].name.endswith(".tmp")
    remove_stale_temps(tmp_path)                                   # what the next trainer (holding the lock) does
    assert [p.name for p in tmp_path.iterdir()] == ["dataset.npz"]
    assert sp.load_dataset(target).train.shape == (6, 8)


# ---------------------------------------------------------------------------------------------
# The store's text files: scoreprobe.atomic's names, and the clean-up matching old and new names
# ---------------------------------------------------------------------------------------------

def test_store_text_writer_never_takes_another_writers_temporary_file(tmp_path):
    """The old writer named its temporary `.<name>.<pid>.tmp`: a second writer in one process (a thread) took
    the first one's file and renamed it into place. Now each write has a fresh name."""
    from scoreprobe.store.commit import write_text_atomic
    target = tmp_path / "zarr.json"
    other = tmp_path / f".zarr.json.{os.getpid()}.tmp"     # another writer's temporary, in progress
    other.write_text("another writer's half")
    write_text_atomic(target, '{"n": 1}')
    assert target.read_text() == '{"n": 1}' and other.read_text() == "another writer's half"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([target.name, other.name])


def test_store_clean_up_removes_the_temporaries_of_old_and_new_writers(tmp_path):
    from scoreprobe.store.commit import restore_arrays, write_text_atomic
    store = tmp_path / "s.zarr"
    store.mkdir()
    write_text_atomic(store / "zarr.json", '{"zarr_format": 3, "node_type": "group"}')
    old_name = store / ".zarr.json.4242.tmp"                    # a killed writer of an earlier version
    old_name.write_text("half")
    fd, _ = _temp_file(store / "zarr.json", keep_suffix=False)   # a killed writer of this version
    os.write(fd, b"half")
    os.close(fd)
    restore_arrays(store, {})
    assert [p.name for p in store.iterdir()] == ["zarr.json"]


def test_a_run_directory_clean_up_removes_every_atomic_temporary(tmp_path):
    from scoreprobe.training.guard import remove_stale_temps
    (tmp_path / "ckpt").mkdir()
    for target in ("run.json", "dataset.npz", "train_log.jsonl", "ckpt/step_0000008.pt"):
        os.close(_temp_file(tmp_path / target, keep_suffix=False)[0])
    remove_stale_temps(tmp_path)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == ["ckpt"]


# ---------------------------------------------------------------------------------------------
# Nobody adds an in-place writer again
# ---------------------------------------------------------------------------------------------

# Calls that write a whole file: `x.savefig(..)`, `np.savez(..)`, `np.savez_compressed(..)`, `np.save(..)`,
# `x.write_text(..)`, `x.write_bytes(..)`, `torch.save(..)`, `x.to_netcdf(..)`, `x.save(..)` (PIL, Dataset) and
# `open(.., "w"/"a"/"x"/"+")`. Each allowed one, by (file, call, source of its first argument): why it is right.
WRITERS = {"savefig", "savez", "savez_compressed", "save", "write_text", "write_bytes", "to_netcdf", "tofile"}
ALLOWED = {
    ("scoreprobe/viz/common.py", "savefig", "tmp"): "save_figure: the temporary file of atomic_path",
    ("scoreprobe/viz/common.py", "save", "tmp"): "save_gif (Pillow): the temporary file of atomic_path",
    ("scoreprobe/reports/payload.py", "savefig", "buf"): "a PNG into memory, embedded in a page written atomically",
    ("scoreprobe/training/run_dir.py", "save", "obj"): "torch.save into memory, then config.atomic_write",
    ("scoreprobe/training/guard.py", "save", "ck"): "save_checkpoint's `save`: train.py passes run_dir.atomic_save",
    ("scoreprobe/training/run_dir.py", "save", 'run_dir / "dataset.npz"'): "Dataset.save: atomic itself",
    ("scoreprobe/data/datasets.py", "savez", "f"): "inside atomic_write: f is its temporary file",
    ("scoreprobe/studies/export.py", "savez_compressed", "f"): "inside atomic_write: f is its temporary file",
    ("scoreprobe/training/train.py", "open", "run.dir / LOG_NAME"):
        "the training log, appended a line at a time (resume trims it through atomic_write_text)",
    ("scoreprobe/training/ensemble.py", "open", 'r.dir / "train_log.jsonl"'):
        "the ensemble's training logs, appended a line at a time like the trainer's",
}


def _writing_mode(call):
    """True for `open(file, mode)` / `path.open(mode)` with a constant mode that writes."""
    at = 0 if isinstance(call.func, ast.Attribute) else 1
    mode = call.args[at] if len(call.args) > at else next((k.value for k in call.keywords if k.arg == "mode"), None)
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and any(c in mode.value for c in "wax+")


def whole_file_writes(folders=("scoreprobe", "analyses")):
    """[(file, call name, source of the first argument, line)] of every call that writes a file in place."""
    found = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text()
            for node in ast.walk(ast.parse(text)):
                if not isinstance(node, ast.Call):
                    continue
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
                if name in WRITERS or (name == "open" and _writing_mode(node)):
                    first = ast.get_source_segment(text, node.args[0]) if node.args else ""
                    found.append((str(path.relative_to(ROOT)), name, first, node.lineno))
    return sorted(found, key=lambda w: (w[0], w[3]))


def test_no_whole_file_is_written_in_place_outside_the_atomic_writers():
    found = whole_file_writes()
    bad = [f"{f}:{line}: {name}({arg}, ...)" for f, name, arg, line in found if (f, name, arg) not in ALLOWED]
    assert not bad, ("write through scoreprobe.atomic (atomic_write_text, atomic_write) or "
                     "scoreprobe.viz.common.save_figure / save_gif instead:\n" + "\n".join(bad))
    stale = set(ALLOWED) - {(f, name, arg) for f, name, arg, _ in found}
    assert not stale, f"allowed writers that no longer exist (drop them): {sorted(stale)}"


def test_the_scan_sees_an_in_place_writer(tmp_path, monkeypatch):
    """The scan itself can fail: a study writing its figure or its table in place is found."""
    study = tmp_path / "analyses" / "study"
    study.mkdir(parents=True)
    (study / "run.py").write_text('fig.savefig(path, dpi=110)\nPath(p).write_text(md)\nopen(p, "w")\n'
                                  'np.savez(p, x=x)\nopen(p)\nPath(p).open("a")\n')
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert [(n, line) for _, n, _, line in whole_file_writes(("analyses",))] == \
        [("savefig", 1), ("write_text", 2), ("open", 3), ("savez", 4), ("open", 6)]


def test_export_tb_help_names_the_one_event_file():
    code, out, err = abuse_issue53.cli(["export-tb", "--help"])
    assert code == 0 and "events.out.tfevents.scoreprobe" in " ".join(out.split()), out + err
    assert "events.out.tfevents.scoreprobe" in (ROOT / "README.md").read_text()

