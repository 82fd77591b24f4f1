"""The CLI under abuse (issue #12): bad option values are one line (plus at most one hint line)
and exit 2, --overwrite never deletes a store before every option is checked, and Ctrl-C at any
moment after main() starts is one line and exit 130."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from abuse_stores import SPECIAL_OUTS
import scoreprobe
from scoreprobe.cli import INTERRUPTED, main

SMALL_RULE = {"name": "parity", "G": 2, "shape": [3, 4], "layout": "contiguous", "seed": 0}
COMMANDS = ("train", "info", "clocks", "dsm", "basins", "field", "animate")


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    """A tiny DiT series (3 checkpoints), as in tests/test_clocks.py."""
    from scoreprobe.loading.series import load_series
    from scoreprobe.training.train import TrainConfig, train_run
    cfg = TrainConfig(rule=SMALL_RULE, n_train=8, n_heldout=8, hidden_size=32, depth=1, num_heads=2, model="dit",
                      patch_size=1, total_steps=3, n_checkpoints=3, batch_size=8)
    run = tmp_path_factory.mktemp("cli-errors") / "run"
    train_run(cfg, run, progress=False)
    return load_series(run)


def _fails_cleanly(argv, capsys):
    """Run main(argv); assert exit 2 with `error: ...` and at most one `try '... --help'` line."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert e.value.code == 2, (argv, err)
    assert 1 <= len(lines) <= 2 and lines[0].startswith("error: "), (argv, err)
    assert len(lines) == 1 or lines[1].startswith("try 'scoreprobe"), (argv, err)
    assert "Traceback" not in err
    return lines[0]


BAD_VALUES = [
    ("basins", ["--res", "0"]), ("basins", ["--res", "abc"]), ("basins", ["--n-steps", "0"]),
    ("basins", ["--sigma-start", "abc"]), ("basins", ["--sigma-start", "-1"]), ("basins", ["--sigma-start", "nan"]),
    ("basins", ["--steps", "12345"]), ("basins", ["--steps", "x,y"]), ("basins", ["--seed", "-1"]),
    ("basins", ["--device", "nonsense"]), ("basins", ["--device", ""]), ("basins", ["--animate", "a.txt"]),
    ("basins", ["--plane", "nonsense"]), ("basins", ["--nosuch"]),
    ("field", ["--res", "0"]), ("field", ["--sigma", "-1"]), ("field", ["--sigma", "abc"]),
    ("field", ["--steps", "12345"]), ("field", ["--seed", "-1"]), ("field", ["--device", "nonsense"]),
    ("field", ["--plot", "f.xyz"]),
    ("clocks", ["--n-samples", "0"]), ("clocks", ["--n-steps", "0"]), ("clocks", ["--n-steps", "abc"]),
    ("clocks", ["--seed", "-1"]), ("clocks", ["--steps", "12345"]), ("clocks", ["--steps", "a"]),
    ("clocks", ["--device", "nonsense"]), ("clocks", ["--device", ""]), ("clocks", ["--chunk-size", "0"]),
    ("clocks", ["--plot", "c.xyz"]),
    ("dsm", ["--sigmas", "0"]), ("dsm", ["--n-noise", "0"]), ("dsm", ["--n-train", "-1"]), ("dsm", ["--seed", "-1"]),
    ("dsm", ["--steps", "12345"]), ("dsm", ["--device", "nonsense"]),
    # issue 21: every number within its documented limit (scoreprobe.limits), --set checked when parsed
    ("clocks", ["--n-samples", str(10**12)]), ("clocks", ["--n-steps", str(10**9)]), ("clocks", ["--seed", str(2**64)]),
    ("basins", ["--n-steps", str(10**9)]), ("basins", ["--sigma-start", "1e308"]), ("basins", ["--seed", str(2**76)]),
    ("field", ["--sigma", "1e308"]), ("dsm", ["--sigmas", str(10**9)]), ("dsm", ["--n-train", str(10**9)]),
    ("clocks", ["--set", "num_heads=4,8"]), ("clocks", ["--set", "num_heads=4", "--set", "num_heads=6"]),
    ("clocks", ["--set", "trust=1"]), ("clocks", ["--set", "data_seed=3"]), ("clocks", ["--set", "num_heads=nan"]),
    ("clocks", ["--set", "sigma_data=1e999"]), ("clocks", ["--set", "image_shape=1,6,6.9"]),
    ("clocks", ["--set", "num_heads=\u00b2"]), ("clocks", ["--data-seed", str(2**64)]),
]


@pytest.mark.parametrize("command,bad", BAD_VALUES, ids=[" ".join([c, *b]) for c, b in BAD_VALUES])
def test_bad_option_values_are_one_line(series, command, bad, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _fails_cleanly([command, str(series.path), *bad], capsys)
    assert os.listdir(tmp_path) == []          # nothing written, nothing computed


@pytest.mark.parametrize("argv", [
    ["basins", "/no/such/series"], ["clocks", "/no/such/series"], ["animate", "/no/such/store"],
    ["animate", ".", "--fps", "0"], ["animate", ".", "--fps", "abc"], ["train", "r", "--device", "nonsense"],
    ["train", "r", "--seed", "-1"], ["train", "r", "--data-seed", "-1"], ["train", "r", "--rule-seed", "-1"],
    ["train", "r", "--shape", "6by6"], ["train", "r", "--rule", "nonsense"], ["info", "p", "--set", "nonsense"],
    ["nosuchcommand"], ["--nosuch"],
    ["animate", ".", "--fps", "1e-300"], ["animate", ".", "--fps", "1e308"], ["train", "r", "--seed", str(2**64)],
    ["train", "r", "--seed", str(2**76)], ["train", "r", "--batch-size", str(10**9)],
    ["train", "r", "--hidden-size", "8192", "--depth", "256"], ["train", "r", "--ensemble", f"seed=0,{10**23}"],
    ["train", "r", "--ensemble", "seed=" + ",".join(map(str, range(300)))], ["train", "r", "--ensemble", "k=3,4"],
    ["train", "r", "--layout", "contiguous", "--ensemble", "rule_seed=0,1"], ["info", "p", "--set", "num_heads=4,8"],
    ["clocks", "--steps-file", "/dev/zero"],
    ["clocks", "x" * 300], ["clocks", "--steps-file", "s" * 300],
], ids=lambda a: " ".join(a)[:80])
def test_bad_arguments_without_a_series_are_one_line(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _fails_cleanly(argv, capsys)
    assert os.listdir(tmp_path) == []


def test_an_unwritable_output_is_refused_before_computing(series, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for argv in (["clocks", str(series.path), "--out", str(blocker / "c.zarr")],
                 ["basins", str(series.path), "--no-animate", "--out", str(blocker / "b.zarr")],
                 ["field", str(series.path), "--plot", str(blocker / "f.png"), "--out", str(tmp_path / "f.zarr")],
                 ["train", str(blocker / "run")]):
        assert "cannot write" in _fails_cleanly(argv, capsys)
    assert sorted(os.listdir(tmp_path)) == ["a-file"]


@pytest.mark.parametrize("out", SPECIAL_OUTS)
def test_special_outputs_are_one_line(series, out, tmp_path, monkeypatch, capsys):
    """Paths the system will not create, for root too (/proc, /sys), and files (/dev/null): every
    output option of every command is refused before any work (issue 23: was a 42-line traceback)."""
    monkeypatch.chdir(tmp_path)
    stores = [["clocks", str(series.path), "--out", out], ["dsm", str(series.path), "--out", out],
              ["basins", str(series.path), "--no-animate", "--out", out],
              ["field", str(series.path), "--out", out, "--plot", ""]]
    png, gif = out.replace(".zarr", ".png"), out.replace(".zarr", ".gif")
    files = [["field", str(series.path), "--plot", png], ["basins", str(series.path), "--animate", gif],
             ["clocks", str(series.path), "--plot", png], ["train", out.replace(".zarr", "-run")],
             ["animate", str(tmp_path), "--out", gif]]
    for argv in stores + (files if out.endswith(".zarr") else []):   # a figure may go to /dev/null
        line = _fails_cleanly(argv, capsys)
        assert "cannot write" in line, line
    assert os.listdir(tmp_path) == []


def test_a_figure_on_a_full_disk_is_one_line_and_the_store_is_kept(series, tmp_path, monkeypatch, capsys):
    import errno
    from matplotlib.figure import Figure

    def full(self, path, **kw):   # (matplotlib ignores the ENOSPC of /dev/full itself)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(Figure, "savefig", full)
    line = _fails_cleanly(["-q", "field", str(series.path), "--res", "2", "--no-oracles", "--plot", "f.png"], capsys)
    assert line == "error: cannot write f.png: No space left on device"
    from scoreprobe.store import written_steps
    assert written_steps(tmp_path / f"{series.path.name}.field.zarr") == list(series.steps)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write anywhere")
def test_a_read_only_folder_is_refused(series, tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        line = _fails_cleanly(["clocks", str(series.path), "--out", str(ro / "c.zarr")], capsys)
    finally:
        ro.chmod(0o700)
    assert "permission denied" in line


def _snapshot(path):
    """{relative path: bytes} of every file under `path`."""
    return {os.path.relpath(os.path.join(d, f), path): open(os.path.join(d, f), "rb").read()
            for d, _, files in os.walk(path) for f in files}


OVERWRITE_CASES = {
    "basins": (["--res", "2", "--n-steps", "1", "--no-animate"],
               [["--sigma-start", "-1"], ["--steps", "12345"], ["--res", "0"], ["--seed", "-1"],
                ["--device", "nonsense"], ["--n-steps", "0"], ["--plane", "nonsense"]]),
    "field": (["--res", "2", "--no-oracles", "--plot", ""],
              [["--sigma", "-1"], ["--steps", "12345"], ["--plot", "f.xyz"], ["--device", ""]]),
    "clocks": (["--n-samples", "4", "--n-steps", "1"],
               [["--steps", "12345"], ["--n-samples", "0"], ["--device", "nonsense"], ["--plot", "c.xyz"]]),
    "dsm": (["--sigmas", "8", "--n-noise", "1"], [["--steps", "12345"], ["--sigmas", "0"], ["--seed", "-1"]]),
}


@pytest.mark.parametrize("command", sorted(OVERWRITE_CASES))
def test_overwrite_with_a_bad_option_keeps_the_store(series, command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    good, bads = OVERWRITE_CASES[command]
    step = str(series.steps[-1])
    main([command, str(series.path), *good, "--steps", step, "--out", "s.zarr"])
    before = _snapshot(tmp_path / "s.zarr")
    assert before
    for bad in bads:
        _fails_cleanly([command, str(series.path), *good, "--steps", step, "--out", "s.zarr", "--overwrite", *bad],
                       capsys)
        assert _snapshot(tmp_path / "s.zarr") == before, bad
    main([command, str(series.path), *good, "--steps", step, "--out", "s.zarr", "--overwrite"])   # still works
    assert "wrote s.zarr" in capsys.readouterr().out


def test_help_works_for_every_command(capsys):
    assert main(["--help"]) == 0
    for command in COMMANDS:
        assert main([command, "--help"]) == 0
        assert f"Usage: scoreprobe {command}" in capsys.readouterr().out


@pytest.mark.parametrize("raised", ["KeyboardInterrupt", "Abort"])
def test_interrupt_in_process_is_one_line(raised, monkeypatch, capsys):
    """Embedded (argv given): the same line, as SystemExit(130); click's Abort is treated alike."""
    import click
    import scoreprobe.loading.series

    def boom(*a, **k):
        raise KeyboardInterrupt if raised == "KeyboardInterrupt" else click.exceptions.Abort()
    monkeypatch.setattr(scoreprobe.loading.series, "load_series", boom)
    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(SystemExit) as e:
        main(["clocks"])
    assert e.value.code == 130
    assert capsys.readouterr().err == INTERRUPTED + "\n"
    assert signal.getsignal(signal.SIGINT) is handler   # restored


@pytest.fixture
def sigint_default():
    """SIGINT handled as in a terminal, also when pytest itself runs as a background job (`cmd &` in a
    non-interactive shell starts it with SIGINT ignored, and main() rightly leaves an ignored SIGINT alone)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def _foreground():
    """preexec_fn of the console subprocesses: SIGINT as in a terminal (see sigint_default)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_an_interrupt_swallowed_by_a_finalizer_is_delivered_again(monkeypatch, capsys, sigint_default):
    """A SIGINT that lands while a finalizer runs raises there, where Python can only print 'Exception
    ignored' and go on (the run then finished and exited 0, seen under load): it must still stop the
    command with the one line and 130."""
    import scoreprobe.loading.series

    class Finalized:
        def __del__(self):
            signal.raise_signal(signal.SIGINT)   # the handler runs here, inside __del__

    def slow(*a, **k):
        x = Finalized()
        del x
        time.sleep(5)                            # the work that must not go on
        raise AssertionError("the interrupt was lost")
    monkeypatch.setattr(scoreprobe.loading.series, "load_series", slow)
    hook = sys.unraisablehook
    t0 = time.perf_counter()
    with pytest.raises(SystemExit) as e:
        main(["clocks"])
    assert e.value.code == 130 and time.perf_counter() - t0 < 4
    assert capsys.readouterr().err == INTERRUPTED + "\n"
    assert sys.unraisablehook is hook           # restored


SCRIPT = ("import sys\nfrom scoreprobe.cli import main\nsys.argv = ['scoreprobe', *sys.argv[1:]]\n"
          "print('ready', flush=True)\nmain()\n")


def _env():
    """One thread, and the package under test first on the path (not whatever `pip install -e` last pointed at:
    the subprocess runs in tmp_path, where only the installed copy would be found)."""
    root = str(Path(scoreprobe.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore::DeprecationWarning", "PYTHONPATH": path}


def _interrupt(args, wait_for, delay, tmp_path):
    """Run the console entry point in a subprocess, send SIGINT `delay` s after a stdout line
    starting with `wait_for`; return (exit code, stdout, stderr)."""
    p = subprocess.Popen([sys.executable, "-c", SCRIPT, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=tmp_path, env=_env(), preexec_fn=_foreground)
    seen = []
    for line in p.stdout:
        seen.append(line)
        if line.startswith(wait_for):
            break
    time.sleep(delay)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    return p.returncode, "".join(seen) + out, err


@pytest.mark.parametrize("wait_for,delay", [("ready", 0.05), ("ready", 0.5), ("clocks of", 0.0),
                                            ("clocks of", 1.0), ("sampler", 2.5)],
                         ids=["start-up", "loading", "run-start", "mid-run", "later"])
@pytest.mark.slow   # real SIGINTs to a CLI subprocess measuring 2000 samples (it must still be running when the signal comes)
def test_ctrl_c_is_one_line_and_exit_130(series, wait_for, delay, tmp_path):
    args = ["-q", "clocks", str(series.path), "--n-samples", "2000", "--n-steps", "50", "--device", "cpu",
            "--out", "c.zarr"]
    code, out, err = _interrupt(args, wait_for, delay, tmp_path)
    assert (code, err) == (130, INTERRUPTED + "\n"), (out, err)
    if (tmp_path / "c.zarr").exists():             # whatever was committed is readable
        from scoreprobe.store import written_steps
        assert set(written_steps(tmp_path / "c.zarr")) <= set(series.steps)


@pytest.mark.slow   # a real SIGINT once a CLI subprocess has committed its first step of 2000 samples
def test_ctrl_c_while_the_store_is_written(series, tmp_path):
    """SIGINT as soon as the store appears (first step being written or just committed): one line,
    exit 130, and the store is still readable with only whole steps in it."""
    from scoreprobe.store import written_steps
    args = ["-q", "clocks", str(series.path), "--n-samples", "2000", "--n-steps", "50", "--device", "cpu",
            "--out", "c.zarr"]
    p = subprocess.Popen([sys.executable, "-c", SCRIPT, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True, cwd=tmp_path, env=_env(), preexec_fn=_foreground)
    deadline = time.monotonic() + 120
    while not (tmp_path / "c.zarr").exists() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    p.send_signal(signal.SIGINT)
    err = p.communicate(timeout=120)[1]
    assert (p.returncode, err) == (130, INTERRUPTED + "\n")
    assert set(written_steps(tmp_path / "c.zarr")) < set(series.steps)
