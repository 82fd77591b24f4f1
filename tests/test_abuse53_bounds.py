"""Issue 53 items 5 and 7: bounds before allocation and the remaining silent acceptances (tests/abuse53_bounds.py)."""
import pytest

import abuse_issue53
from abuse53_bounds import ATTACKS


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack(attack, tmp_path):
    outcome, detail = abuse_issue53.run(attack, tmp_path)
    assert outcome in ("clean", "right"), detail
