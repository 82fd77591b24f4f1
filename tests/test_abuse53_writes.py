"""Issue 53, items 4 and 6 and item 7's NUL in compare_report(out=...) (tests/abuse53_writes.py): each attempt
is clean or right; and the atomic writer (scoreprobe.atomic) itself: temporary names that never collide, a
failed writer that leaves the old file, a training extension on a disk that fills part way through."""
import errno
import json
import os
import stat

import pytest
import torch

import abuse_issue53
from abuse53_writes import ATTACKS, CFG, copy
from full_disk import LOCK, full_disk, snapshot
from scoreprobe.atomic import atomic_path, atomic_write, atomic_write_text


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack(attack, tmp_path):
    outcome, detail = abuse_issue53.run(attack, tmp_path)
    assert outcome in ("clean", "right"), detail


def test_every_item_of_this_part_is_attacked_through_the_api_and_the_cli():
    items = {a.item for a in ATTACKS}
    assert items == {4, 6, 7}
    for item in items:
        mine = [a for a in ATTACKS if a.item == item]
        assert any(a.argv or "cli" in a.name for a in mine) and any(a.api and "cli" not in a.name for a in mine)


def test_temporary_names_never_collide_and_each_writer_replaces_whole(tmp_path):
    target = tmp_path / "page.html"
    with atomic_path(target) as a, atomic_path(target) as b:   # two writers of one file at once
        assert a != b and a.parent == b.parent == tmp_path and a.name.startswith(".page.html.")
        a.write_text("first")
        b.write_text("second")
        assert not target.exists()                               # nothing visible before the rename
    assert target.read_text() == "first" and os.listdir(tmp_path) == ["page.html"]   # the last to finish: a


def test_a_failing_writer_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "run.json"
    atomic_write_text(target, "old")

    def half(f):
        f.write(b"half of the new")
        raise ValueError("the writer broke")
    with pytest.raises(ValueError, match="broke"):
        atomic_write(target, half)
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["run.json"]


def test_a_new_file_has_the_umask_permissions_not_mkstemps_0600(tmp_path):
    umask = os.umask(0o022)
    os.umask(umask)
    atomic_write_text(tmp_path / "f.txt", "x")
    assert stat.S_IMODE((tmp_path / "f.txt").stat().st_mode) == 0o666 & ~umask


def test_mp4_goes_through_a_temporary_file_with_its_suffix(tmp_path, monkeypatch):
    """ffmpeg takes the container from the name: it writes `.x.mp4.<random>.tmp.mp4` beside x.mp4, renamed
    only when complete (a fake FFMpegWriter records the name it was given; no ffmpeg needed)."""
    import contextlib
    import numpy as np
    from matplotlib import animation
    from scoreprobe.viz.animation import _write_mp4
    given = []

    class Fake:
        def __init__(self, fps):
            pass

        @contextlib.contextmanager
        def saving(self, fig, path, dpi):
            given.append(path)
            yield
            open(path, "wb").write(b"mp4 bytes")

        def grab_frame(self):
            pass
    monkeypatch.setattr(animation, "FFMpegWriter", Fake)
    (tmp_path / "x.mp4").write_bytes(b"old")
    _write_mp4([np.zeros((4, 4, 3), np.uint8)] * 2, tmp_path / "x.mp4", 2)
    assert given[0].endswith(".tmp.mp4") and os.path.dirname(given[0]) == str(tmp_path)
    assert (tmp_path / "x.mp4").read_bytes() == b"mp4 bytes" and os.listdir(tmp_path) == ["x.mp4"]


def test_reexport_removes_the_event_files_of_earlier_versions(tmp_path):
    """Files named as before (`events.out.tfevents.<time>.<host>.scoreprobe`) would show every point twice."""
    from scoreprobe.training.tensorboard import EVENT_FILE, export_tb
    run = copy("run", tmp_path)
    (tmp_path / "tb" / "run").mkdir(parents=True)
    (tmp_path / "tb" / "run" / "events.out.tfevents.1700000000.host.scoreprobe").write_bytes(b"old")
    (tmp_path / "tb" / "run" / "events.out.tfevents.1700000000.host").write_bytes(b"not ours")
    export_tb([run], tmp_path / "tb")
    assert sorted(os.listdir(tmp_path / "tb" / "run")) == ["events.out.tfevents.1700000000.host", EVENT_FILE]


@pytest.mark.parametrize("extra", [200, 5000, 250000])   # the log, resume.pt, a checkpoint
def test_an_extension_on_a_disk_that_fills_part_way_keeps_the_run_and_resumes(tmp_path, extra):
    """The disk fills `extra` bytes after run.json's rewrite: every earlier checkpoint stays as it was, no
    temporary, truncated or 0-byte file stays, every checkpoint loads; freed, the same command finishes the
    extension with the very weights of an extension that never failed."""
    from scoreprobe.training.train import TrainConfig, train_run
    cfg = TrainConfig(**{**CFG, "total_steps": 2 * CFG["total_steps"]})
    run, clean = copy("run", tmp_path, as_="run"), copy("run", tmp_path, as_="clean")
    before = snapshot(run)
    with full_disk(run, len((run / "run.json").read_bytes()) + extra), pytest.raises(OSError) as e:
        train_run(cfg, run, progress=False)
    assert e.value.errno == errno.ENOSPC and e.value.filename.startswith(str(run))
    after = snapshot(run)
    assert all(after[k] == v for k, v in before.items() if k.startswith("ckpt/"))
    assert after["train_log.jsonl"].startswith(before["train_log.jsonl"])
    assert not [k for k, v in after.items() if k.endswith(".tmp") or not v or os.path.basename(k).startswith(".")]
    json.loads(after["run.json"])
    for k in after:
        if k.endswith(".pt"):
            torch.load(run / k, map_location="cpu", weights_only=False)
    assert not (run / LOCK).exists()
    train_run(cfg, run, progress=False)
    train_run(cfg, clean, progress=False)
    last = f"ckpt/step_{cfg.total_steps:07d}.pt"
    a, b = (torch.load(d / last, map_location="cpu", weights_only=False)["ema"] for d in (run, clean))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_figures_keep_their_format_through_the_temporary_name(tmp_path):
    """The temporary name ends in .tmp: the format comes from the target's suffix (any case), and a target
    without one gets matplotlib's savefig.format and its suffix, as savefig itself does."""
    from scoreprobe.viz.common import new_figure, save_figure
    fig = new_figure((2, 2))
    fig.add_subplot().plot([0, 1])
    assert save_figure(fig, tmp_path / "a", 40) == tmp_path / "a.png"
    save_figure(fig, tmp_path / "b.SVG", 40)
    save_figure(fig, tmp_path / "c.pdf", 40)
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG" and (tmp_path / "c.pdf").read_bytes()[:4] == b"%PDF"
    assert b"<svg" in (tmp_path / "b.SVG").read_bytes()[:400]
    assert sorted(os.listdir(tmp_path)) == ["a.png", "b.SVG", "c.pdf"]
