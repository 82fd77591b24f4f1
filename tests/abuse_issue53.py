"""Issue 53's attack corpus (part of tests/abuse_corpus.py's family): the newest surfaces, where an undefined
value must never become an answer and a bad file or option must be refused before any work.

Each attack is an `Attack`; the attacks live beside their tests in tests/abuse53_*.py (one module per part of
the issue) as a list `ATTACKS`. `run(attack, work)` classifies one attempt in an empty work folder:

    "clean"         refused with the typed error for the stated reason within `slow_s` of CPU time (this
                    process's: a loaded machine stretches wall time, not the work a refusal did)
                    (the CLI: exit 2 with one `error:` line, no traceback)
    "right"         an attempt where answering is right (`answer` given): it ran and its check passed
    "silent wrong"  no refusal where one was due, or an answer whose check failed (a wrong number or label)
    "wrong reason"  the typed error, but its message does not match
    "traceback"     anything else raised (an untyped error, a raw ValueError, ...)
    "hang"          still running after `timeout_s` (interrupted by SIGALRM)
    "slow"          refused cleanly but after more than `slow_s`

`python tests/abuse_issue53.py` prints the counts per item and in all (the closing note's numbers).
"""
import atexit
import contextlib
import functools
import io
import re
import shutil
import signal
import sys
import tempfile
import time
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ITEMS = {1: "undefined is never an answer", 2: "the export reader checks the file", 3: "one dead worker",
         4: "export-tb", 5: "bounds before allocation", 6: "figures and pages written atomically",
         7: "remaining tracebacks and silent acceptances"}
OUTCOMES = ("clean", "right", "silent wrong", "wrong reason", "traceback", "hang", "slow")
MODULES = ("abuse53_undefined", "abuse53_exports", "abuse53_queue", "abuse53_writes", "abuse53_atomic",
           "abuse53_bounds")


@dataclass
class Attack:
    """One attempt: `api(work)` and/or `argv(work)` (CLI arguments, without `-q`) built in the work folder.

    Without `answer` the attempt must be refused: the API raises `error` (message matching `match`), the CLI
    exits 2 with one `error:` line. With `answer` the attempt must run: `answer(work, result)` receives what
    `api(work)` returned (or the CLI's (exit code, stdout, stderr)) and raises AssertionError if it is wrong.
    """
    name: str
    item: int
    api: Callable[[Path], Any] | None = None
    argv: Callable[[Path], list] | None = None
    error: type | tuple = Exception
    match: str | None = None
    answer: Callable[[Path, Any], None] | None = None
    timeout_s: float = 60.0
    slow_s: float = 5.0


@functools.lru_cache(maxsize=None)
def scratch(prefix):
    """A folder for the inputs the attacks of one module build once per process, removed at exit."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, True)
    return path


class _Hang(BaseException):
    """Raised by SIGALRM inside an attempt that ran past its timeout (BaseException: not caught as an error)."""


@contextlib.contextmanager
def _deadline(seconds):
    def fire(signum, frame):
        raise _Hang()
    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def cli(argv):
    """(exit code, stdout, stderr) of `scoreprobe -q ARGV` run in-process; an escaping exception propagates."""
    from scoreprobe.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            main(["-q", *map(str, argv)])
            code = 0
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


def _one_error_line(code, err):
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("warning:")]
    return code == 2 and "Traceback" not in err and len(lines) in (1, 2) and lines[0].startswith("error:") \
        and (len(lines) == 1 or lines[1].startswith("try 'scoreprobe"))


def _refused(attack, call):
    """(outcome, detail) of an attempt that must be refused."""
    t0 = time.process_time()
    try:
        result = call()
    except attack.error as e:
        if attack.match is not None and not re.search(attack.match, str(e)):
            return "wrong reason", f"{type(e).__name__}: {e}"
        return ("slow" if time.process_time() - t0 > attack.slow_s else "clean"), f"{type(e).__name__}: {e}"
    except Exception as e:   # noqa: BLE001  (untyped, or the wrong typed error)
        return "traceback", f"{type(e).__name__}: {e}"
    return "silent wrong", f"no error (returned {type(result).__name__})"


def _cli_refused(attack, argv):
    t0 = time.process_time()
    try:
        code, _, err = cli(argv)
    except Exception as e:   # noqa: BLE001
        return "traceback", f"{type(e).__name__}: {e}"
    if code in (0, None):
        return "silent wrong", f"exit {code}: {err}"
    if not _one_error_line(code, err):
        return "traceback", f"exit {code}: {err}"
    if attack.match is not None and not re.search(attack.match, err):
        return "wrong reason", err
    return ("slow" if time.process_time() - t0 > attack.slow_s else "clean"), err


def _answered(attack, call):
    try:
        result = call()
    except Exception as e:   # noqa: BLE001
        return "traceback", f"{type(e).__name__}: {e}"
    try:
        attack.answer(attack.work, result)
    except AssertionError as e:
        return "silent wrong", f"AssertionError: {e}"
    return "right", ""


def run(attack, work):
    """(outcome, detail) of `attack` in the (empty) folder `work`; the worst of its API and CLI outcomes."""
    work = Path(work)
    attack.work = work
    outcomes = []
    try:
        with _deadline(attack.timeout_s), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if attack.api is not None:
                fn = lambda: attack.api(work)   # noqa: E731
                outcomes.append(_answered(attack, fn) if attack.answer else _refused(attack, fn))
            if attack.argv is not None:
                argv = attack.argv(work)
                if attack.answer:
                    outcomes.append(_answered(attack, lambda: cli(argv)))
                else:
                    outcomes.append(_cli_refused(attack, argv))
    except _Hang:
        return "hang", f"still running after {attack.timeout_s} s"
    bad = [o for o in outcomes if o[0] not in ("clean", "right")]
    return bad[0] if bad else outcomes[0]


def attacks():
    """Every attack of the issue's modules, in item order."""
    import importlib
    found = []
    for name in MODULES:
        found += importlib.import_module(name).ATTACKS
    return sorted(found, key=lambda a: a.item)


def main():
    """Run every attack in a fresh folder and print the counts per item and in all."""
    import tempfile
    import torch
    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp(prefix="abuse53-"))
    counts, per_item = Counter(), Counter()
    for a in attacks():
        work = tmp / a.name
        work.mkdir()
        t0 = time.perf_counter()
        outcome, detail = run(a, work)
        counts[outcome] += 1
        per_item[a.item, outcome] += 1
        if outcome not in ("clean", "right") or "-v" in sys.argv:
            print(f"{time.perf_counter() - t0:6.2f} s  item {a.item} {a.name}: {outcome}  {detail.strip()[:300]}")
    for item, what in ITEMS.items():
        row = ", ".join(f"{per_item[item, o]} {o}" for o in OUTCOMES if per_item[item, o])
        print(f"item {item} ({what}): {sum(per_item[item, o] for o in OUTCOMES)} attempts: {row}")
    print(f"all: {sum(counts.values())} attempts: " + ", ".join(f"{counts[o]} {o}" for o in OUTCOMES))


if __name__ == "__main__":
    sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).resolve().parents[1])]   # tests/, analyses/
    main()
