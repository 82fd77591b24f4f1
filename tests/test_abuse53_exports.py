"""Issue 53 item 2: the export reader checks the file before trusting it (tests/abuse53_exports.py), and a good
export still reads as before."""
import numpy as np
import pytest

import abuse_issue53
from abuse53_exports import ATTACKS, GOOD
from scoreprobe.stats.compare import read_export


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack(attack, tmp_path):
    outcome, detail = abuse_issue53.run(attack, tmp_path)
    assert outcome in ("clean", "right"), detail


def test_a_good_export_reads_as_its_arrays():
    ds = read_export(GOOD)
    with np.load(GOOD) as z:
        assert (ds["step"].values == z["step"]).all() and (ds["state"].values == z["state"]).all()
        assert ds.attrs["novel_oracle"] == float(z["novel_oracle"])
