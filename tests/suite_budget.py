"""A pytest plugin that fails a run whose wall time exceeds its budget, naming the slowest tests.

The default suite must stay fast enough for a newcomer (README: `python -m pytest`); CI runs it with
`--suite-budget SECONDS` (or SCOREPROBE_SUITE_BUDGET_S), measured on CI's own 2-core machine, so a
change that makes the suite slower fails CI with the tests that cost the time instead of landing
quietly. Without a budget the plugin only keeps the durations it is given (no output, no effect).

Under pytest-xdist the controller receives every worker's reports, so the budget and the list are
the whole run's; workers do nothing here.
"""
import os
import time

import pytest

_ENV = "SCOREPROBE_SUITE_BUDGET_S"
_SHOWN = 15   # how many of the slowest tests the failure names


def pytest_addoption(parser):
    parser.addoption("--suite-budget", type=float, default=None, metavar="SECONDS",
                     help=f"fail the run if its wall time exceeds SECONDS, naming the slowest tests "
                          f"(default: ${_ENV}, else no budget)")


def _budget(config):
    value = config.getoption("--suite-budget")
    if value is None and os.environ.get(_ENV):
        try:
            value = float(os.environ[_ENV])
        except ValueError:
            raise pytest.UsageError(f"{_ENV}={os.environ[_ENV]!r} is not a number of seconds") from None
    if value is not None and not value > 0:
        raise pytest.UsageError(f"the suite budget must be a positive number of seconds, got {value}")
    return value


def _is_worker(config):
    return hasattr(config, "workerinput")


def pytest_configure(config):
    config._suite_budget = None if _is_worker(config) else _budget(config)
    config._suite_start = time.perf_counter()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    config = session.config
    budget = config._suite_budget
    if budget is None:
        return
    wall = time.perf_counter() - config._suite_start
    config._suite_wall = wall
    if wall > budget and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    budget = config._suite_budget
    wall = getattr(config, "_suite_wall", None)
    if budget is None or wall is None:
        return
    durations = {}
    for reports in terminalreporter.stats.values():
        for r in reports:
            if getattr(r, "when", None) in ("setup", "call", "teardown") and hasattr(r, "duration"):
                durations[r.nodeid] = durations.get(r.nodeid, 0.0) + r.duration
    word = "over" if wall > budget else "within"
    terminalreporter.write_sep("=", f"suite time {wall:.0f} s: {word} its budget of {budget:g} s")
    if wall <= budget:
        return
    terminalreporter.write_line(f"the suite took {wall:.0f} s, more than its budget of {budget:g} s "
                                f"({_ENV} / --suite-budget); the {_SHOWN} slowest tests "
                                f"(make them fast, share a fixture, or mark them slow):")
    for nodeid, seconds in sorted(durations.items(), key=lambda kv: -kv[1])[:_SHOWN]:
        terminalreporter.write_line(f"  {seconds:8.1f} s  {nodeid}")
