"""Issue 76 item 3: the property-based harness (tests/properties.py) over the public API, as invariants.

For every target (the data and rules, the oracles, the ODE and planes, the statistics, the studies' Grid, Monitor and
pool, the intervention API's x and site arguments) and every hostile value Hypothesis draws for one of its arguments
(NaN, ±inf, ±0, huge and tiny floats, ints and bools where floats belong, strings, None, empty and mismatched shapes,
wrong dtypes, numpy where torch belongs and back), the call ends in one of:

- a clean error: a ScoreprobeError, or a ValueError / TypeError raised by scoreprobe's own code, one line;
- undefined kept: a value holding NaN gives a result in which it stays undefined (NaN rows where x or σ is NaN, no
  estimate from a NaN threshold or interval), never a finite number read from it;
- a result, from a defined value;

never an internal traceback, never a call past 20 s, never an allocation of more than 3 GiB beyond what the process
holds (past every limit of scoreprobe/limits.py: a MemoryError under an RLIMIT_AS ceiling). Fixed seed
(derandomize), a small budget here (~25 s); the long profile is the slow test."""
import pytest

from tests.properties import GOOD, Target, explore
from tests.property_targets import targets

TARGETS = targets()
QUICK = 4       # draws per target in the default suite (derandomized: the same draws every run)
LONG = 150      # per target under -m slow


def _check(target: Target, n):
    bad = []
    explore(target, n, lambda slot, value, cls, detail: bad.append((slot, repr(value)[:80], cls, detail))
            if cls not in GOOD else None)
    assert not bad, f"{target.name}: " + "; ".join(" | ".join(b) for b in bad[:5])


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_hostile_values_get_a_clean_error_or_stay_undefined(target):
    _check(target, QUICK)


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_hostile_values_long_profile(target):
    _check(target, LONG)
