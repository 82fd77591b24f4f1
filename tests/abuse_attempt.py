"""Running one attempt of the abuse corpora (tests/abuse_corpus.py, abuse_inputs.py, abuse_issue33.py,
abuse_report.py) and classifying its outcome: "clean" (the typed error for the stated reason within 2 s; the CLI
prints one `error:` line, exit 2), "code execution" (a pickle's __reduce__ created d.parent / "MARKER"),
"allocation" (peak RSS grew by more than ALLOC_LIMIT), "silent" (no error at all), "wrong reason", "slow" or
"traceback" (anything else)."""
import contextlib
import io
import os
import re
import resource
import shutil
import sys
import time

# ---------------------------------------------------------------------------------------------
# Running one attempt of tests/abuse_inputs.py and counting outcomes
# ---------------------------------------------------------------------------------------------

ALLOC_LIMIT = 256 << 20           # peak RSS may grow by at most this much (bytes) in one attempt

def _peak_rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024    # Linux: KiB


def _run_api(fn, error, match=None):
    """(outcome, detail) of an API call that must raise `error` within 2 s of this process's CPU time (CPU, not
    wall time: "refused before any work" is about the work done, and a loaded machine must not turn a clean
    refusal into "slow")."""
    t0 = time.process_time()
    try:
        fn()
    except error as e:
        if match is not None and not re.search(match, str(e)):
            return "wrong reason", f"{type(e).__name__}: {e}"
        slow = time.process_time() - t0 > 2.0
        return ("slow" if slow else "clean"), f"{type(e).__name__}: {e}"
    except Exception as e:     # noqa: BLE001  (an untyped error or the wrong typed one)
        return "traceback", f"{type(e).__name__}: {e}"
    return "silent", "no error"


def _run_cli(argv):
    """(outcome, stderr) of the CLI run in-process: one `error:` line (warnings aside) and exit 2 is clean."""
    from scoreprobe.cli import main
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(["-q", *map(str, argv)])
            code = 0
        except SystemExit as e:
            code = e.code
        except Exception as e:     # noqa: BLE001
            return "traceback", f"{type(e).__name__}: {e}"
    text = err.getvalue()
    lines = [ln for ln in text.strip().splitlines() if not ln.startswith("warning:")]
    if code in (0, None):
        return "silent", text
    clean = code == 2 and "Traceback" not in text and len(lines) in (1, 2) and lines[0].startswith("error:") \
        and (len(lines) == 1 or lines[1].startswith("try 'scoreprobe"))
    return ("clean" if clean else "traceback"), text


def run_attempt(build, d, cwd):
    """(outcome, detail) of one attempt built in the run copy `d`, CLI run from `cwd`."""
    rss = _peak_rss()
    attempt = build(d)
    outcomes = []
    if attempt.api is not None:
        outcomes.append(_run_api(attempt.api, attempt.error, attempt.match))
    if attempt.argv is not None:
        old = os.getcwd()
        os.chdir(cwd)
        try:
            outcomes.append(_run_cli(attempt.argv))
        finally:
            os.chdir(old)
    if (d.parent / "MARKER").exists():
        return "code execution", "a hostile pickle ran"
    if _peak_rss() - rss > ALLOC_LIMIT:
        return "allocation", f"peak RSS grew by {(_peak_rss() - rss) >> 20} MiB"
    bad = [o for o in outcomes if o[0] != "clean"]
    return bad[0] if bad else outcomes[0]


def _run_all(attempts, run, tmp, counts, per_item):
    """Run each (name, item, build) of `attempts` in a fresh copy of the good run with `run`
    (run_attempt or abuse_report.run_report_attempt), counting outcomes in `counts` and `per_item`."""
    for name, item, build in attempts:
        work = tmp / name
        shutil.copytree(tmp / "good", work / "run")
        (work / "existing.zarr").mkdir()
        t0 = time.perf_counter()
        outcome, detail = run(build, work / "run", work)
        if "-v" in sys.argv:
            print(f"{time.perf_counter() - t0:6.2f} s  {name}: {outcome}")
        counts[outcome] += 1
        per_item[item, outcome] += 1
        if outcome != "clean":
            print(f"{name}: {outcome}: {detail.strip()[:300]}")
